"""`tape.stop_recording()`: what a `GradientTape` block computes inside it is a constant to the tape.

    with tf.GradientTape() as tape:
        y = model(x)
        with tape.stop_recording():
            target = tf.reduce_max(target_model(x2), axis=1) * gamma   # not differentiated
        loss = tf.reduce_mean((y - target) ** 2)

jdist's tapes differentiate a replay of the block (`eager_tape`) or of the replica function (`gradient_tape`), so
the pause acts in the replay: variables read inside it give constants (`jax.lax.stop_gradient`), and on leaving
it, each name the paused statements bound (in the replayed namespace, or the running function's locals) is
rebound to its value with the gradient stopped. As TF's (observed, TF 2.21: `q = v * 10` inside, then `q * v`
after, has gradient 20 at v = 2): only the ops run inside the pause are unrecorded. A value the paused statements
store elsewhere than in a name (an attribute, a list's item) keeps its gradient.
"""
from __future__ import annotations

import ctypes
import sys
import types
from typing import Any, Collection

import jax

from jdist.interop import inner_scopes

_MISSING = object()


def _stopped(value: Any) -> Any:
    return jax.tree.map(lambda leaf: jax.lax.stop_gradient(leaf) if isinstance(leaf, jax.Array) else leaf, value)


def _unrecorded_scope() -> Any:
    """A Keras stateless scope over the current one whose variable reads are constants; assignments and losses
    go to the current one."""
    def constant(variable: Any, outer: Any) -> Any:
        value = None if outer is None else outer.get_current_value(variable)
        return None if value is None else jax.lax.stop_gradient(value)  # None: its own value, a constant

    return inner_scopes.inner_scope(constant)


def write_locals(frame: types.FrameType, values: dict[str, Any]) -> None:
    """Rebinds local variables of a running function (CPython: its fast locals follow `f_locals`)."""
    if sys.version_info >= (3, 13):  # f_locals is a write-through proxy (PEP 667)
        for name, value in values.items():
            frame.f_locals[name] = value
        return
    local = frame.f_locals  # a snapshot dict, written back by PyFrame_LocalsToFast
    local.update(values)
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


class Paused:
    """The context manager `stop_recording()` returns while a tape's replay runs: reads are constants inside,
    and the names bound inside are constants after. `namespace`: the replayed block's namespace (eager tapes);
    None for a function's locals (the frame that enters the pause)."""

    def __init__(self, namespace: dict[str, Any] | None):
        self._namespace = namespace
        self._frame: types.FrameType | None = None
        self._before: dict[str, Any] = {}
        self._scope: Any = None

    def _names(self) -> dict[str, Any]:
        if self._namespace is not None:
            return self._namespace
        assert self._frame is not None
        return self._frame.f_locals

    def __enter__(self) -> "Paused":
        if self._namespace is None:
            self._frame = sys._getframe(1)
        self._before = {name: id(value) for name, value in self._names().items()}
        self._scope = _unrecorded_scope()
        self._scope.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._scope.__exit__(*exc)
        changed = {name: _stopped(value) for name, value in self._names().items()
                   if self._before.get(name, _MISSING) != id(value)}
        if self._namespace is not None:
            self._namespace.update(changed)
        elif changed and self._frame is not None:
            write_locals(self._frame, changed)
        self._frame = None


def forgotten(names: dict[str, Any], keep: Collection[str] = ()) -> dict[str, Any]:
    """`tape.reset()` in a replay: each name (but `keep`) bound to JAX values, rebound to them as constants, so
    what the tape recorded before the reset is not differentiated (observed, TF 2.21: `y_sq = y * y`, then
    `reset()`, then `z = x * x + y_sq` gives dz/dy None)."""
    return {name: _stopped(value) for name, value in names.items()
            if name not in keep and any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(value))}


class Idle:
    """`stop_recording()` where nothing is differentiated (the eager run of a block, a trace that records)."""

    def __enter__(self) -> "Idle":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None
