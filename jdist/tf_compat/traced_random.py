"""`tf.random`'s stateful ops inside compiled code (a `tf.function`, `strategy.run`): new numbers on every call.

TF 2.21 (observed, tests/test_tf_parity_random_in_function.py): a `tf.function` returning `tf.random.normal([2])`
is traced once and gives new numbers on each call, with an op `seed` too; after `tf.random.set_seed(1)` a function
traced under that seed repeats its sequence on every `set_seed(1)`; its numbers are not the eager ops' after the
same `set_seed`; under `MirroredStrategy.run` each replica draws its own numbers. jdist's ops draw on the host
(numpy), so inside compiled code each draw is a host callback in the program (`jax.experimental.io_callback`,
ordered): each run of the program calls the op again on the host, from a generator of its own per (op seed,
replica), made from the global seed and dropped by `set_seed` (`reset`). The program is traced once; functions
without random ops are untouched. The numbers are numpy's, not TF's Philox numbers.
"""
from __future__ import annotations

import functools
import threading
from contextlib import AbstractContextManager
from typing import Any, Callable

import jax
import jax.core
import numpy as np
from jax.experimental import io_callback

from jdist.interop.trace_state import under_any_trace
from jdist.strategy import context, function_trace
from jdist.tfdata import seeding
from jdist.thread_locals import setting

_LOCAL = threading.local()  # `.replica`: set while a callback runs an op on the host (or "probe" for its spec)
_GENERATORS: dict[tuple, np.random.Generator] = {}
_GLOBAL_SEED: list[int | None] = [None]
_LOCK = threading.Lock()
_NAMES = {"_host_keep": "nn.dropout"}  # an op's TF name where its function's differs
_COMPILED = 1  # mixed into the entropy: compiled code's sequence is not the eager ops' (observed, as TF's)


def reset(global_seed: int | None) -> None:
    """`tf.random.set_seed`: every compiled draw's sequence restarts from the new global seed."""
    with _LOCK:
        _GENERATORS.clear()
        _GLOBAL_SEED[0] = global_seed


def exporting() -> AbstractContextManager[Any]:
    """While a saved program is traced (`tf.saved_model.save`): a stateful draw is refused, as a saved program
    cannot call back to the host (TF 2.21's loaded function draws new numbers per call, observed)."""
    return setting(_LOCAL, "exporting", True, default=False)


def on_host() -> bool:
    """True while an op runs on the host for a compiled draw (its checks for compiled code are skipped)."""
    return getattr(_LOCAL, "replica", None) is not None


def generator(seed: int | None) -> np.random.Generator | None:
    """The generator of a compiled draw of op seed `seed` for the running callback's replica; None outside one."""
    replica = getattr(_LOCAL, "replica", None)
    if replica is None:
        return None
    if replica == "probe":
        return np.random.default_rng(0)
    key = (None if seed is None else int(seed), int(replica))
    with _LOCK:
        found = _GENERATORS.get(key)
        if found is None:
            op = -1 if seed is None else int(seed)
            if _GLOBAL_SEED[0] is None and seed is None:
                entropy: Any = None  # neither seed: new numbers in every run, as TF's
            elif _GLOBAL_SEED[0] is None:
                entropy = [op, int(replica), _COMPILED]
            else:
                entropy = [int(_GLOBAL_SEED[0]), op + 1, int(replica), _COMPILED]
            found = _GENERATORS[key] = np.random.default_rng(entropy)
        return found


def _name(op: Callable) -> str:
    return "tf." + _NAMES.get(op.__name__, "random." + op.__name__)


def _compiled(leaves: list) -> bool:
    if on_host() or getattr(seeding._LOCAL, "traced", None) is not None or \
            getattr(seeding._LOCAL, "table", None) is not None:  # a tf.data function draws per element itself
        return False
    return (function_trace.active() or context.in_replica_context() or under_any_trace()
            or any(isinstance(leaf, jax.core.Tracer) for leaf in leaves))


def _replica_id() -> Any:
    if not context.in_replica_context():
        return np.int32(0)
    replica = context.get_replica_context()
    return getattr(replica, "replica_id_in_sync_group", 0)


def _run(op: Callable, treedef: Any, leaves: list, slots: list[int], values: tuple, replica: Any) -> Any:
    filled = list(leaves)
    for slot, value in zip(slots, values):
        filled[slot] = np.asarray(value)
    args, kwargs = jax.tree.unflatten(treedef, filled)
    outer = getattr(_LOCAL, "replica", None)
    _LOCAL.replica = replica
    try:
        return np.asarray(op(*args, **kwargs))
    finally:
        _LOCAL.replica = outer


def _spec(op: Callable, treedef: Any, leaves: list, slots: list[int]) -> jax.ShapeDtypeStruct:
    """The op's result shape and dtype, from host runs on placeholder values with a throwaway generator; a shape
    that depends on a compiled value's value is refused (XLA needs it at trace time)."""
    outs, error = [], None
    for fill in (0, 2):
        values = tuple(np.full(np.shape(leaves[s]), fill + i, np.dtype(leaves[s].dtype)) for i, s in enumerate(slots))
        try:
            outs.append(_run(op, treedef, leaves, slots, values, "probe"))
        except (ValueError, TypeError) as failed:
            error = failed
    if not outs:
        raise error  # type: ignore[misc]
    if any(out.shape != outs[0].shape for out in outs):
        raise ValueError(f"{_name(op)} inside compiled code needs its shape known"
                         " at trace time; it depends on a value computed in the program. Pass the shape "
                         "as Python ints (or x.shape)")
    return jax.ShapeDtypeStruct(outs[0].shape, jax.dtypes.canonicalize_dtype(outs[0].dtype))


def per_call(op: Callable) -> Callable:
    """`op` (a stateful `tf.random` op drawing on the host) as it runs: as itself on the host, and inside compiled
    code as a callback drawing new numbers on every run of the program (see the module docstring)."""
    @functools.wraps(op)
    def draw(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree.flatten((args, kwargs))
        if not _compiled(leaves):
            return op(*args, **kwargs)
        if getattr(_LOCAL, "exporting", False):
            raise ValueError(f"tf.saved_model.save: {_name(op)} draws new numbers on every call, "
                             "which a saved jdist program cannot do (it cannot call back to the host). Draw "
                             "the numbers outside the saved function and pass them in, or use "
                             "tf.random.stateless_normal / stateless_uniform with a seed argument")
        slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.Array)]
        spec = _spec(op, treedef, leaves, slots)

        def callback(replica: Any, *values: Any) -> np.ndarray:
            return _run(op, treedef, leaves, slots, values, int(np.asarray(replica))).astype(spec.dtype)
        return io_callback(callback, spec, _replica_id(), *[leaves[s] for s in slots],
                                            ordered=True)
    return draw
