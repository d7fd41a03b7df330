"""A traced tensor's `.shape` as TF's `TensorShape`, as a TF script reads it inside a `tf.function` or a replica
function (`x.shape.as_list()`, `x.shape.rank`).

Eager tensors already answer with a `TensorShape`; inside a trace a JAX tracer answered with a plain tuple, so
such a line stopped the trace and the function ran as Python on every call (or `strategy.run` failed).
`TensorShape` is a tuple: JAX's own code reading the shape sees the same dimensions. A shape with symbolic
dimensions (an export's) stays JAX's. While a `tf.function` traces, its inputs' shapes print as TF's trace
shows them, with None where the input_signature or `reduce_retracing` leaves a dimension unknown
(`print(x.shape)`: `(None, 3)`); their dimensions stay the traced ones, which the compiled program has.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from jdist.input.tensor_spec import TensorShape


class _Shown(threading.local):
    def __init__(self):
        self.stack: list[dict[int, Any]] = []  # per running trace: id of a traced input -> the dimensions TF shows


_SHOWN = _Shown()  # per thread: the parameter-server coordinator traces scheduled functions in threads


# What a traced input shows where TF's trace knows not even its rank (`reduce_retracing` after calls of two
# ranks, or `TensorSpec(None)`): TF prints `<unknown>` (observed, TF 2.21)
UNKNOWN_RANK: Any = "<unknown>"


class _ShownShape(TensorShape):
    """A traced input's shape: its traced dimensions, printed as TF's trace shows them."""

    shown: Any = ()

    def __str__(self) -> str:
        return UNKNOWN_RANK if self.shown is UNKNOWN_RANK else tuple.__repr__(self.shown)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self.shown is UNKNOWN_RANK else f"TensorShape({list(self.shown)})"


_ShownShape.__name__ = _ShownShape.__qualname__ = "TensorShape"  # `type(x.shape).__name__`, as TF's


@contextlib.contextmanager
def shown_as(shapes: dict[int, Any]) -> Iterator[None]:
    """While the block traces: inputs whose id is in `shapes` print their shape as given there."""
    _SHOWN.stack.append(shapes)
    try:
        yield
    finally:
        _SHOWN.stack.pop()


def _shape_of(tracer: Any, dims: tuple) -> TensorShape:
    shown = _SHOWN.stack[-1].get(id(tracer)) if _SHOWN.stack else None
    if shown is None or (shown is not UNKNOWN_RANK and tuple(shown) == tuple(dims)):
        return TensorShape(dims)
    shape = _ShownShape(dims)
    shape.shown = shown if shown is UNKNOWN_RANK else tuple(shown)  # pyright: ignore[reportAttributeAccessIssue]
    return shape


def give_tracers_tensor_shape() -> None:
    """Once `jdist.tf_compat` is imported (a TF port opted in): JAX tracers' `shape` is a `TensorShape`, and their
    `numpy` is TF's AttributeError for a symbolic tensor."""
    from jax._src import core as jax_core

    original = jax_core.Tracer.__dict__["shape"]
    if getattr(original.fget, "_jdist_tensor_shape", False):
        return

    def shape(self: Any) -> Any:
        dims = original.fget(self)
        return _shape_of(self, dims) if all(type(d) is int for d in dims) else dims

    shape._jdist_tensor_shape = True  # pyright: ignore[reportFunctionMemberAccess]
    jax_core.Tracer.shape = property(shape)  # type: ignore[method-assign, assignment]
    original_getattr = jax_core.Tracer.__getattr__

    def attribute(self: Any, name: str) -> Any:
        if name == "numpy":  # a traced (or leaked) tensor has no value: TF's text (observed, TF 2.21)
            raise AttributeError(SYMBOLIC_NUMPY)
        return original_getattr(self, name)

    jax_core.Tracer.__getattr__ = attribute  # type: ignore[method-assign]


# `x.numpy()` of a tensor of a trace, inside it or leaked out of it (TF's function guide: a global set in the body)
SYMBOLIC_NUMPY = "'SymbolicTensor' object has no attribute 'numpy'"
