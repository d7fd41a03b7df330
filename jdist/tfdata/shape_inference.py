"""A `map` function's output spec as TF derives it: by tracing the function on the input's spec, not on data.

TF 2.21 (observed): `range(4).map(lambda x: tf.fill([x], x))` has spec `(None,)` (the size depends on a value),
a map of `(None, 3)` elements summing axis 0 has `(3,)`, `tf.shape(b)` of a `(None,)` batch `(1,)`, and a
`tf.py_function` output an unknown shape. The function is traced by JAX on abstract inputs whose unknown
dimensions are symbolic: a dimension that stays symbolic, or one that JAX cannot compute without the values, is
None. Text inputs and host-only ops cannot be traced; the spec is then read off the first elements: a dimension
that differs between the first two is None.
"""
from __future__ import annotations

import contextlib
import io
import itertools
import warnings
from typing import Any, Callable, Iterator

import jax
import numpy as np

from jdist.tfdata import structure

_HOST_CALLS = "jdist.tf_compat.host_calls"  # where tf.py_function and tf.numpy_function are
_ENSURED: list[dict[int, tuple]] = []  # while a map function is traced: id of a `tf.ensure_shape` output -> (it,
# the shape asked for)


def ensured(value: Any, shape: Any) -> Any:
    """`value`, noted as `tf.ensure_shape`'s output of `shape` (None dimensions unknown) while a map's spec is
    traced: TF's spec then has that shape, even for a `tf.py_function`'s output (observed, TF 2.21:
    `ensure_shape(py_function(...), [None])` is `(None,)`)."""
    if _ENSURED:
        _ENSURED[-1][id(value)] = (value, tuple(shape))
    return value


def mapped_spec(apply: Callable[[Any], Any], map_func: Callable[..., Any] | None, input_spec: Any,
                elements: Iterator) -> Any:
    """The spec of `map(map_func)` (`apply`: its function on one element) over `elements` of `input_spec`: traced
    where it can be, else read off the first two outputs (their prints hidden: TF runs the function once, when
    it traces it)."""
    with contextlib.redirect_stdout(io.StringIO()):
        rows = list(itertools.islice(elements, 2))
        if not rows:  # an empty dataset (a filter kept nothing): the function on zeros of the input's spec
            try:
                rows = [structure.placeholder(input_spec)]
            except ValueError:
                raise ValueError("element_spec: the dataset is empty, so its mapped elements cannot be inspected"
                                 ) from None
        outs = [structure.spec_of(apply(rows[0]))]
        traced = None if map_func is None else traced_spec(map_func, input_spec, outs[0])
        if traced is not None:
            return traced
        outs += [structure.spec_of(apply(row)) for row in rows[1:]]
    out = merged_spec(outs)
    if structure.leading_unknown(input_spec):  # a batch's size: unknown in the output too
        out = structure.map_leaves(lambda s: structure.TensorSpec((None, *s.shape[1:]), s.dtype) if s.shape else s,
                                   out)
    return out


def traced_spec(map_func: Callable[..., Any], input_spec: Any, concrete: Any) -> Any:
    """The spec of `map_func`'s output on elements of `input_spec` (`concrete`: the spec of its output on the
    first element, for the dtypes and as a check), or None where the function cannot be traced."""
    specs = structure.leaves(input_spec)
    if any(not isinstance(s, structure.TensorSpec) or s.shape is None or np.dtype(s.dtype).kind in "OSU"
           for s in specs):
        return None
    unknown = sum(d is None for s in specs for d in s.shape)
    symbols = iter(jax.export.symbolic_shape(",".join(f"d{i}" for i in range(unknown))) if unknown else ())
    flat = [jax.ShapeDtypeStruct(tuple(next(symbols) if d is None else int(d) for d in s.shape),
                                 jax.dtypes.canonicalize_dtype(np.dtype(s.dtype))) for s in specs]

    asked: list = []  # per output: the shape `tf.ensure_shape` gave it, or None

    def traced(*values: Any) -> list:
        it = iter(values)
        element = structure.map_leaves(lambda _: next(it), input_spec)
        spread = isinstance(element, tuple) and not hasattr(element, "_fields")
        out = map_func(*element) if spread else map_func(element)
        leaves = [jax.numpy.asarray(leaf) for leaf in structure.leaves(tuple(out) if type(out) is list else out)]
        asked[:] = [_ENSURED[-1].get(id(leaf), (None, None))[1] for leaf in leaves]
        return leaves

    _ENSURED.append({})
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            closed, shapes = jax.make_jaxpr(traced, return_shape=True)(*flat)
    except Exception:  # noqa: BLE001 (text, host-only ops, shapes that need the values: read off elements)
        return None
    finally:
        _ENSURED.pop()
    wanted = structure.leaves(concrete)
    if len(shapes) != len(wanted) or any(w.shape is None or len(o.shape) != len(w.shape)
                                         for o, w in zip(shapes, wanted)):
        return None
    called = {id(v) for eqn in closed.jaxpr.eqns if _python_call(eqn) for v in eqn.outvars}
    out = [structure.TensorSpec(a, w.dtype) if a is not None else
           structure.TensorSpec(None, w.dtype) if id(var) in called else
           structure.TensorSpec(tuple(d if isinstance(d, int) else None for d in o.shape), w.dtype)
           for o, w, var, a in zip(shapes, wanted, closed.jaxpr.outvars, asked)]
    it = iter(out)
    return structure.map_leaves(lambda _: next(it), concrete)


def _python_call(eqn: Any) -> bool:
    """Whether `eqn` calls `tf.py_function` / `tf.numpy_function`'s Python function: its outputs' shapes are
    unknown to TF (TF 2.21, observed: `TensorSpec(shape=<unknown>, ...)`)."""
    function = getattr(eqn.params.get("callback"), "callback_func", None)
    return eqn.primitive.name == "pure_callback" and getattr(function, "__module__", "") == _HOST_CALLS


def merged_spec(specs: list) -> Any:
    """The spec that all of `specs` (of one structure) fit: a dimension that differs is None, and a component
    whose rank differs has an unknown shape."""
    columns = zip(*(structure.leaves(s) for s in specs))

    def merged(column: tuple) -> Any:
        first = column[0]
        if any(c.shape is None or len(c.shape) != len(first.shape) for c in column):
            return structure.TensorSpec(None, first.dtype)
        return structure.TensorSpec(tuple(d[0] if len(set(d)) == 1 else None for d in zip(*(c.shape for c in column))),
                                    first.dtype)
    out = iter([merged(c) for c in columns])
    return structure.map_leaves(lambda _: next(out), specs[0])
