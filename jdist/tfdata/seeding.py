"""The seed of a random transformation made without one (`shuffle(b)`, `sample_from_datasets`, `random()`).

TF 2.21 (observed): after `tf.random.set_seed(s)` (which `keras.utils.set_random_seed` calls) each such
transformation gets its own seed, the same in every run of the script; without a global seed, a new one each
run. Here the global seed is the one `tf.random.set_seed` gives (`set_global_seed`); without it, numpy's global
state stands for it, read without drawing from it (so a script that seeds numpy, as Keras's `set_random_seed`
does, shuffles the same in every run, and its own `np.random` numbers stay as they were).
"""
from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from jdist.thread_locals import setting

_GLOBAL: list[int | None] = [None]
_COUNT = [0]


def set_global_seed(seed: int | None) -> None:
    """`tf.random.set_seed`'s part here: later seedless transformations draw from `seed`, counted afresh."""
    _GLOBAL[0] = None if seed is None else int(seed)
    _COUNT[0] = 0


def op_seed(seed: int | None) -> int:
    """`seed` itself, or for None the next seed drawn from the global one (a 62-bit int)."""
    if seed is not None:
        return int(seed)
    _COUNT[0] += 1
    if _GLOBAL[0] is not None:
        entropy = [_GLOBAL[0], _COUNT[0]]
    else:
        _, keys, position, *_ = np.random.get_state()
        entropy = [*(int(k) for k in keys[:8]), int(position), _COUNT[0]]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> np.uint64(2))


# ------------------------------------------------------------------ a tf.data function's random ops, per pass
# TF 2.21 (observed): `range(4).map(lambda x: tf.random.uniform([], seed=1))` gives four different numbers, the
# same four in every pass and in a new dataset with the same seeds (the op's state is made with each iterator
# and moves on per element, also across a `repeat` inside the pass); unseeded, without a global seed, new
# numbers each pass; after `tf.random.set_seed`, the same in every pass. (The numbers are numpy's, not TF's.)
_DEFAULT_GRAPH_SEED = 87654321  # TF's global seed where only an op seed is given
_LOCAL = threading.local()


class PassRandom:
    """The op-seeded generators of one pass of a `tf.data` function (`tf.random.uniform(..., seed=s)`)."""

    def __init__(self) -> None:
        self._generators: dict[Any, np.random.Generator] = {}
        self._lock = threading.Lock()
        self.drawn = False  # whether any draw was made (a trace then cannot be compiled: its draw is frozen)

    def generator(self, seed: int | None) -> np.random.Generator:
        with self._lock:
            self.drawn = True
            found = self._generators.get(seed)
            if found is None:
                if seed is None and _GLOBAL[0] is None:
                    found = np.random.default_rng()  # fresh entropy: new numbers each pass, as TF's
                else:
                    base = _DEFAULT_GRAPH_SEED if _GLOBAL[0] is None else _GLOBAL[0]
                    found = np.random.default_rng([base, 0 if seed is None else 1, 0 if seed is None else seed])
                self._generators[seed] = found
            return found


def drawing(table: PassRandom) -> AbstractContextManager[PassRandom]:
    """While the block runs, this thread's `tf.random` op draws come from `table` (`op_generator`)."""
    return setting(_LOCAL, "table", table)


def op_generator(seed: int | None) -> np.random.Generator | None:
    """The generator for a `tf.random` op of `seed` inside a `tf.data` function's call (`drawing`), else None;
    while the function is traced once, one whose draws are made per element (`jdist.tfdata.traced_draws`)."""
    traced = getattr(_LOCAL, "traced", None)
    if traced is not None:
        return traced(None if seed is None else int(seed))
    table = getattr(_LOCAL, "table", None)
    return None if table is None else table.generator(None if seed is None else int(seed))


class PerPass:
    """One `PassRandom` per pass of a dataset (its first key), the latest kept: the inner passes a `repeat`
    makes continue its sequence."""

    def __init__(self) -> None:
        self._latest: tuple[Any, PassRandom] | None = None
        self._lock = threading.Lock()

    def of(self, key: tuple) -> PassRandom:
        with self._lock:
            if self._latest is None or self._latest[0] != key[:1]:
                self._latest = (key[:1], PassRandom())
            return self._latest[1]
