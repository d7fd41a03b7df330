"""The seed of a random transformation made without one (`shuffle(b)`, `sample_from_datasets`, `random()`).

TF 2.21 (observed): after `tf.random.set_seed(s)` (which `keras.utils.set_random_seed` calls) each such
transformation gets its own seed, the same in every run of the script; without a global seed, a new one each
run. Here the global seed is the one `tf.random.set_seed` gives (`set_global_seed`); without it, numpy's global
state stands for it, read without drawing from it (so a script that seeds numpy, as Keras's `set_random_seed`
does, shuffles the same in every run, and its own `np.random` numbers stay as they were).
"""
from __future__ import annotations

import numpy as np

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
