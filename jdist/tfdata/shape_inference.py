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
import itertools
import warnings
from typing import Any, Callable, Iterator

import jax
import numpy as np

from jdist.tfdata import composite_batch, seeding, structure, tensor_text

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


def mapped_spec(apply: Callable[[Any], Any], trace: Trace | None, input_spec: Any, elements: Iterator,
                placeholder_output: Callable[[], Any] | None = None) -> Any:
    """The spec of `map(map_func)` (`apply`: its function on one element; `trace`: the function's `trace`, made
    when the dataset was, or None where it could not be traced) over `elements` of `input_spec`: the traced spec
    where there is one (its dtypes those of `placeholder_output()`, the output on placeholder values, where it
    gives one: no element is then read), else read off the first two outputs."""
    if trace is not None and placeholder_output is not None:
        output = placeholder_output()
        traced = None if output is None else spec_from_trace(trace, structure.spec_of(output))
        if traced is not None:
            return traced
    rows = list(itertools.islice(elements, 2))
    if not rows:  # an empty dataset (a filter kept nothing): the function on zeros of the input's spec
        try:
            rows = [structure.placeholder(input_spec)]
        except ValueError:
            raise ValueError("element_spec: the dataset is empty, so its mapped elements cannot be inspected"
                             ) from None
    outs = [structure.spec_of(apply(rows[0]))]
    traced = None if trace is None else spec_from_trace(trace, outs[0])
    if traced is not None:
        return traced
    outs += [structure.spec_of(apply(row)) for row in rows[1:]]
    out = merged_spec(outs)
    if structure.leading_unknown(input_spec):  # a batch's size: unknown in the output too
        out = composite_batch.leading_unknown(out)
    return out


class Trace:
    """A map function traced by JAX on abstract inputs: its jaxpr, output shapes, and the shapes
    `tf.ensure_shape` asked for (None where it was not called on an output)."""

    def __init__(self, closed: Any, shapes: list, asked: list, host_random: bool = False):
        self.closed, self.shapes, self.asked = closed, shapes, asked
        self.host_random = host_random  # a `tf.random` op drew on the host: its number is frozen in `closed`
        self.host_calls = False  # it called a `tf.py_function` (set by `user_functions`)
        self.output: Any = None  # the function's output, each traced value as zeros of its dtype (`_as_zeros`)
        self.leaf_ids: list[int] = []  # the ids of the function's output values, in order
        self.host: list[bool] = []  # per output: whether a `tf.py_function` gave it (`user_functions`)


def trace(map_func: Callable[..., Any], input_spec: Any, strict: bool = False) -> Trace:
    """`map_func` traced on elements of `input_spec` (unknown dimensions symbolic); raises where it cannot be
    (text, host-only ops, shapes that need the values). Its prints go out: the caller decides (`user_functions`).
    `strict`: JAX's strict dtype promotion, so that an op on two dtypes (TF's TypeError at the trace, where JAX
    would promote) raises `jax.numpy_dtype_promotion`'s error (the caller then calls the function on host
    placeholders, where TF's rule applies)."""
    specs = structure.leaves(input_spec)
    if any(not isinstance(s, structure.TensorSpec) or s.shape is None or np.dtype(s.dtype).kind in "OSU"
           for s in specs):
        raise TypeError("trace: text, or a component of unknown rank, cannot be traced")
    unknown = sum(d is None for s in specs for d in s.shape)
    symbols = iter(jax.export.symbolic_shape(",".join(f"d{i}" for i in range(unknown))) if unknown else ())
    with jax.enable_x64(True):
        flat = [jax.ShapeDtypeStruct(tuple(next(symbols) if d is None else int(d) for d in s.shape),
                                     jax.dtypes.canonicalize_dtype(np.dtype(s.dtype))) for s in specs]

    asked: list = []  # per output: the shape `tf.ensure_shape` gave it, or None

    def traced(*values: Any) -> list:
        for i, (value, s) in enumerate(zip(values, specs)):  # what `print` shows of the inputs (`_symbolic`)
            names[id(value)] = (f"args_{i}", s)
        it = iter(values)
        element = structure.map_leaves(lambda _: next(it), input_spec)
        spread = isinstance(element, tuple) and not hasattr(element, "_fields")
        out = map_func(*element) if spread else map_func(element)
        given = structure.leaves(tuple(out) if type(out) is list else out)
        leaves = [jax.numpy.asarray(leaf) for leaf in given]
        asked[:] = [_ENSURED[-1].get(id(leaf), (None, None))[1] for leaf in leaves]
        made[:] = [out, [id(leaf) for leaf in given]]
        return leaves

    names: dict[int, tuple] = {}
    made: list = []  # the function's output and its leaves' ids
    _ENSURED.append({})
    # 64-bit on: the trace computes in the input's dtypes (int64 and float64 stay so), as the compiled
    # per-element call does (jdist.tfdata.compiled)
    try:
        with warnings.catch_warnings(), _symbolic(names), jax.enable_x64(True), \
                jax.numpy_dtype_promotion("strict" if strict else "standard"), \
                seeding.drawing(seeding.PassRandom()) as draws:
            warnings.simplefilter("ignore")
            closed, shapes = jax.make_jaxpr(traced, return_shape=True)(*flat)
    finally:
        _ENSURED.pop()
    out = Trace(closed, list(shapes), list(asked), draws.drawn)
    out.output = _as_zeros(made[0]) if made else None
    out.leaf_ids = made[1] if made else []
    return out


def _as_zeros(out: Any) -> Any:
    """The function's output as its call on host placeholders gives it: each traced value (a tracer, or a
    tensor holding one) zeros of its dtype and shape (a symbolic dimension 1, as `structure.placeholder`'s);
    a constant (a Python number, a numpy value) as it is, so that it takes TF's dtype when normalized."""
    def one(leaf: Any) -> Any:
        if isinstance(leaf, (int, float, complex, bool, str, bytes, np.ndarray, np.generic)) or leaf is None:
            return leaf
        array = jax.numpy.asarray(leaf)
        try:
            return np.asarray(array)  # a concrete value (a variable's)
        except jax.errors.TracerArrayConversionError:
            pass
        shape = tuple(d if isinstance(d, int) else 1 for d in array.shape)
        return np.zeros(shape, np.dtype(array.dtype)).view(structure.HostTensor)
    return structure.map_leaves(one, tuple(out) if type(out) is list else out)


@contextlib.contextmanager
def _symbolic(names: dict[int, tuple]) -> Iterator[None]:
    """While a function traces: its inputs print as TF's symbolic tensors (TF 2.21, observed, in a map function:
    `Tensor("args_0:0", shape=(None,), dtype=int64)`, a dict's `<tf.Tensor 'args_1:0' shape=(1,) dtype=float32>`),
    with the input's dtype (JAX traces int64 as int32). Other values (and an unknown `x.shape`) print as JAX's."""
    try:
        from jax._src.interpreters import partial_eval
    except ImportError:  # a JAX that moved its tracer: inputs print as JAX's
        yield
        return
    tracer_type = partial_eval.DynamicJaxprTracer
    plain_str, plain_repr = tracer_type.__str__, tracer_type.__repr__
    own = {name: tracer_type.__dict__[name] for name in ("__str__", "__repr__") if name in tracer_type.__dict__}

    def shown(tracer: Any, text: Callable[[str, str, str], str], plain: Callable[[Any], str]) -> str:
        if id(tracer) not in names:
            return plain(tracer)
        name, spec = names[id(tracer)]
        dims = tuple(spec.shape)
        shape = "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"
        return text(name, shape, tensor_text.dtype_name(np.dtype(spec.dtype)))

    def as_str(self: Any) -> str:
        return shown(self, lambda n, s, d: f'Tensor("{n}:0", shape={s}, dtype={d})', plain_str)

    def as_repr(self: Any) -> str:
        return shown(self, lambda n, s, d: f"<tf.Tensor '{n}:0' shape={s} dtype={d}>", plain_repr)

    tracer_type.__str__, tracer_type.__repr__ = as_str, as_repr  # type: ignore[method-assign]
    try:
        yield
    finally:
        for name in ("__str__", "__repr__"):  # the class's own methods back, or its inherited ones again
            if name in own:
                setattr(tracer_type, name, own[name])
            else:
                delattr(tracer_type, name)


def spec_from_trace(trace: Trace, concrete: Any) -> Any:
    """The spec of the traced function's output (`concrete`: the spec of its output on the first element, for the
    dtypes and as a check), or None where the trace does not fit it."""
    shapes, closed = trace.shapes, trace.closed
    wanted = structure.leaves(concrete)
    if len(shapes) != len(wanted) or any(w.shape is None or len(o.shape) != len(w.shape)
                                         for o, w in zip(shapes, wanted)):
        return None
    called = {id(v) for eqn in closed.jaxpr.eqns if _python_call(eqn) for v in eqn.outvars}
    out = [structure.TensorSpec(a, w.dtype) if a is not None else
           structure.TensorSpec(None, w.dtype) if id(var) in called else
           structure.TensorSpec(tuple(d if isinstance(d, int) else None for d in o.shape), w.dtype)
           for o, w, var, a in zip(shapes, wanted, closed.jaxpr.outvars, trace.asked)]
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
        if composite_batch.has_composite_spec(first):  # ragged, sparse: merged by their own spec
            return composite_batch.merged(column)
        if any(c.shape is None or len(c.shape) != len(first.shape) for c in column):
            return structure.TensorSpec(None, first.dtype)
        return structure.TensorSpec(tuple(d[0] if len(set(d)) == 1 else None for d in zip(*(c.shape for c in column))),
                                    first.dtype)
    out = iter([merged(c) for c in columns])
    return structure.map_leaves(lambda _: next(out), specs[0])


def scan_parts(trace: Trace | None, state: Any, input_spec: Any) -> tuple[Any, Any] | None:
    """`(output, state_spec)` of a scan function's trace whose output is `(new_state, value)` with the new state
    of the state's dtypes and shapes (what one compiled scan step needs), else None."""
    if trace is None or input_spec is None or not isinstance(trace.output, tuple) or len(trace.output) != 2:
        return None
    try:
        output = structure.normalize(trace.output)
    except (TypeError, ValueError):
        return None
    state_spec = structure.spec_of(state)
    have, want = structure.leaves(structure.spec_of(output[0])), structure.leaves(state_spec)
    if len(have) != len(want) or any(np.dtype(h.dtype) != np.dtype(w.dtype) or h.shape != w.shape
                                     for h, w in zip(have, want)):
        return None
    return output, state_spec
