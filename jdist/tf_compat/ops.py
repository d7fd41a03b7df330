"""TF's everyday ops (`tf.cast`, `tf.reduce_sum`, ...), with TF's dtype rules, on numpy or JAX.

Each op works on what it is given: inside a compiled function (`strategy.run`, `jax.jit`) its
inputs are JAX arrays or tracers and it computes with `jax.numpy`; in a `tf.data` `map`
function, or anywhere on the host, its inputs are numpy arrays or Python values and it computes
with numpy and returns numpy, so an input pipeline never dispatches to JAX.

TF's rules, observed in TF 2.21: a Python int becomes int32 and a Python float float32
(`tf.constant(1)`, `tf.range(5)`); numpy values keep their dtype (`tf.constant(np.float64(1))`
is float64); `tf.cast` of float to int truncates toward zero; `reduce_mean` of ints is an int
(TF divides and truncates); `argmax` returns int64. Inside compiled code JAX's 32-bit default
applies (int64 results become int32 unless `jax_enable_x64` is set).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.typing import DTypeLike

from jdist.errors import tf_type_name
from jdist.tf_compat import binary_operands, division, input_dtypes, kink_gradients, wide_dtypes
from jdist.tf_compat.conversion import check_python_value, constant, convert_to_tensor, is_jax, xp  # noqa: F401
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError, UnimplementedError
from jdist.tfdata import graph_dtypes, tensor_numpy, user_functions, weak_promotion
from jdist.tfdata.tensor_text import dtype_name
from jdist.typing import ArrayLike, Axis, ShapeLike, Tensor, TensorLike


def cast(x: TensorLike, dtype: DTypeLike, name: str | None = None) -> Tensor:
    """`tf.cast`: float to int truncates toward zero; to bool is `x != 0`; text to or from numbers is TF's
    UnimplementedError (observed, TF 2.21: "Cast string to int32 is not supported")."""
    target = numpy_dtype(dtype)
    x = convert_to_tensor(x)
    if target is not None and (np.dtype(x.dtype).kind in "OSU") != (target.kind in "OSU"):
        names = [dtype_name(d) for d in (x.dtype, target)]
        raise UnimplementedError(None, None, f"Cast {names[0]} to {names[1]} is not supported [Op:Cast] name: ; "
                                             "text to numbers is tf.strings.to_number, numbers to text "
                                             "tf.strings.as_string")
    if target is not None and target.kind == "b":
        return x != 0
    if wide_dtypes.needs_host(x, target):  # eager int64/float64 of a JAX value: TF's dtype, on the host
        return wide_dtypes.on_host(x, target)  # pyright: ignore[reportArgumentType]
    return x.astype(target)


def range(start: TensorLike, limit: TensorLike | None = None, delta: TensorLike = 1,  # noqa: A001
          dtype: DTypeLike | None = None, name: str = "range") -> np.ndarray:
    """`tf.range`: int32 for ints, float32 if any bound is a float (TF's inference); on the host."""
    if limit is None:
        start, limit = 0, start
    first, last, step = (np.asarray(v) for v in (start, limit, delta))
    target = numpy_dtype(dtype)
    if target is None:  # TF infers from the bounds: a float makes float32, an int64 tensor int64 (observed)
        wide = any(isinstance(v, np.ndarray) and v.dtype == np.int64 for v in (start, limit, delta))
        target = np.dtype(np.float32) if any(b.dtype.kind == "f" for b in (first, last, step)) else \
            np.dtype(np.int64 if wide else np.int32)
    # 0-d bounds keep their dtype, so numpy counts as TF does (TF 2.21: np.float32 bounds 0, 1.7, 0.1 give 17
    # values; as Python floats they would give 18). numpy's stubs take numpy scalars only; numpy takes 0-d arrays.
    return np.arange(first, last, step).astype(target)  # pyright: ignore[reportCallIssue, reportArgumentType]


def reshape(tensor: TensorLike, shape: ShapeLike, name: str | None = None) -> ArrayLike:
    tensor = convert_to_tensor(tensor)
    dims = tuple(int(s) for s in np.asarray(shape).reshape(-1))
    known = int(np.prod([d for d in dims if d != -1]))
    if not isinstance(tensor.size, (int, np.integer)):  # symbolic sizes (a saved function's free dimensions):
        # -1 becomes size // known, so the exported program checks divisibility when called, as TF checks at run
        dims = tuple(tensor.size // known if d == -1 and known else d for d in dims)
        return xp(tensor).reshape(tensor, dims)
    if -1 in dims and (known == 0 or tensor.size % known) or -1 not in dims and known != tensor.size:
        wanted = f"requires a multiple of {known}" if -1 in dims else f"has {known}"
        raise InvalidArgumentError(None, None, f"Input to reshape is a tensor with {tensor.size} values, but the "
                                               f"requested shape {wanted} [Op:Reshape]")
    return xp(tensor).reshape(tensor, dims)


def _laid_out(value: ArrayLike, layout: Any) -> ArrayLike:
    """TF's `layout=` of the creation ops: the result as a DTensor (a `dtensor.Layout` places it)."""
    return value if layout is None else layout.place(value)


def zeros(shape: ShapeLike, dtype: DTypeLike = "float32", name: str | None = None, layout: Any = None) -> ArrayLike:
    return _laid_out(np.zeros(tuple(np.asarray(shape).reshape(-1).tolist()), dtype=numpy_dtype(dtype)), layout)


def ones(shape: ShapeLike, dtype: DTypeLike = "float32", name: str | None = None, layout: Any = None) -> ArrayLike:
    return _laid_out(np.ones(tuple(np.asarray(shape).reshape(-1).tolist()), dtype=numpy_dtype(dtype)), layout)


def fill(dims: ShapeLike, value: TensorLike, name: str | None = None, layout: Any = None) -> ArrayLike:
    value = convert_to_tensor(value)
    return _laid_out(xp(value).full(tuple(np.asarray(dims).reshape(-1).tolist()), value, dtype=value.dtype), layout)


def zeros_like(input: TensorLike, dtype: DTypeLike | None = None, name: str | None = None,  # noqa: A002
               layout: Any = None) -> ArrayLike:
    x = convert_to_tensor(input)
    return _laid_out(xp(x).zeros_like(x, dtype=numpy_dtype(dtype)), layout)


def ones_like(input: TensorLike, dtype: DTypeLike | None = None, name: str | None = None,  # noqa: A002
              layout: Any = None) -> ArrayLike:
    x = convert_to_tensor(input)
    return _laid_out(xp(x).ones_like(x, dtype=numpy_dtype(dtype)), layout)


def expand_dims(input: TensorLike, axis: int, name: str | None = None) -> ArrayLike:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).expand_dims(x, axis)


def squeeze(input: TensorLike, axis: Axis = None, name: str | None = None) -> ArrayLike:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).squeeze(x, axis=tuple(axis) if isinstance(axis, list) else axis)


def concat(values: Sequence[TensorLike], axis: int, name: str = "concat") -> ArrayLike:
    """`tf.concat`: the inputs take one dtype as TF's (`jdist.tf_compat.input_dtypes`)."""
    if _graph():
        graph_dtypes.check_list("ConcatV2", values)
    arrays = input_dtypes.matching("ConcatV2", values, convert_to_tensor, name)
    tensor_numpy.check_concat([tuple(np.shape(a)) for a in arrays], axis, name)
    return xp(*arrays).concatenate(arrays, axis=axis)


def stack(values: Sequence[TensorLike], axis: int = 0, name: str = "stack") -> ArrayLike:
    """`tf.stack`: Python numbers alone are one list converted together (`stack([1, 2.0])` is float32, TF's);
    otherwise the inputs take one dtype as TF's (`jdist.tf_compat.input_dtypes`)."""
    if all(isinstance(v, (bool, int, float)) for v in values):
        numbers: Any = list(values)  # one nested list, as TF converts it
        arrays = list(convert_to_tensor(numbers))
    else:
        if _graph():
            graph_dtypes.check_list("Pack", values)
        arrays = input_dtypes.matching("Pack", values, convert_to_tensor, name)
    return xp(*arrays).stack(arrays, axis=axis)


def unstack(value: TensorLike, num: int | None = None, axis: int = 0, name: str = "unstack") -> list[ArrayLike]:
    x = convert_to_tensor(value)
    module = xp(x)
    return [module.squeeze(part, axis=axis) for part in module.split(x, x.shape[axis], axis=axis)]


def split(value: TensorLike, num_or_size_splits: int | Sequence[int], axis: int = 0, num: int | None = None,
          name: str = "split") -> list[ArrayLike]:
    x = convert_to_tensor(value)
    if isinstance(num_or_size_splits, int):
        return list(xp(x).split(x, num_or_size_splits, axis=axis))
    return list(xp(x).split(x, np.cumsum(num_or_size_splits)[:-1].tolist(), axis=axis))


def transpose(a: TensorLike, perm: Sequence[int] | None = None, conjugate: bool = False,
              name: str = "transpose") -> ArrayLike:
    x = convert_to_tensor(a)
    return xp(x).transpose(x, perm)


def _without_nan(x: ArrayLike, fill: float) -> ArrayLike:
    """`x` with NaN as `fill`: TF's argmax and argmin pass over NaN (observed, TF 2.21: argmax([1, nan, 3]) is 2,
    argmin([nan, 1, 3]) 1, and 0 when all are NaN), where numpy's and JAX's pick the first NaN."""
    if np.dtype(x.dtype).kind != "f":
        return x
    module = xp(x)
    return module.where(module.isnan(x), module.asarray(fill, x.dtype), x)


def argmax(input: TensorLike, axis: int | None = None, output_type: DTypeLike = "int64",  # noqa: A002
           name: str | None = None) -> Tensor:
    """`tf.argmax`: over axis 0 when `axis` is None (TF's default), as `output_type` (int64); NaN passed over."""
    x = _without_nan(convert_to_tensor(input), -np.inf)
    return _indices(x, xp(x).argmax(x, axis=0 if axis is None else int(axis)), output_type)


def argmin(input: TensorLike, axis: int | None = None, output_type: DTypeLike = "int64",  # noqa: A002
           name: str | None = None) -> Tensor:
    x = _without_nan(convert_to_tensor(input), np.inf)
    return _indices(x, xp(x).argmin(x, axis=0 if axis is None else int(axis)), output_type)


def _indices(x: ArrayLike, found: Any, output_type: DTypeLike) -> Tensor:
    """argmax/argmin's indices as `output_type`; an eager JAX input's int64 indices come back on the host."""
    target = numpy_dtype(output_type)
    if wide_dtypes.needs_host(found, target):
        return wide_dtypes.on_host(found, target)  # pyright: ignore[reportArgumentType]
    return found.astype(_index_dtype(x, output_type))


def _index_dtype(x: ArrayLike, output_type: DTypeLike) -> np.dtype:
    """`output_type`, as JAX can hold it inside compiled code (int64 is int32 without jax_enable_x64)."""
    target = numpy_dtype(output_type)
    return jax.dtypes.canonicalize_dtype(target) if is_jax(x) else target


def where(condition: TensorLike, x: TensorLike | None = None, y: TensorLike | None = None,
          name: str | None = None) -> ArrayLike:
    """`tf.where(c, x, y)` elementwise; `tf.where(c)`: the int64 (N, rank) coordinates of the true elements."""
    if x is None or y is None:
        if x is not None or y is not None:
            raise ValueError("tf.where: give both `x` and `y`, or neither")
        if is_jax(condition):
            raise ValueError("tf.where(condition) with one argument has a data-dependent shape, which compiled "
                             "code (strategy.run, jax.jit) cannot produce; use jnp.nonzero(condition, size=n) "
                             "with a fixed size, or tf.where(condition, x, y)")
        return np.argwhere(np.asarray(condition)).astype(np.int64)
    if _graph():  # traced: a Python `x` converted alone (TF 2.21, observed: `jdist.tfdata.graph_dtypes`)
        graph_dtypes.check_select(x, y)
    if isinstance(x, (int, float, bool, list)) != isinstance(y, (int, float, bool, list)):  # TF 2.21 (observed):
        x, y = binary_operands.matching(x, y, "SelectV2")  # a Python value takes the tensor's dtype
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    return xp(condition, x, y).where(condition, x, y)


def _graph() -> bool:
    """Whether TF would trace this op (a `tf.function`, `strategy.run`, a `tf.data` function): its graph errors."""
    from jdist.tf_compat import predicates  # noqa: PLC0415 (predicates imports this module's package)
    return not predicates.executing_eagerly() or user_functions.in_trace()


def shape(input: TensorLike, out_type: DTypeLike = "int32", name: str | None = None) -> Tensor:  # noqa: A002
    """`tf.shape`: the shape as an int32 array; static inside compiled code (shapes are known when tracing),
    except a free dimension of an exported program (a saved function's `None`), which is a traced value."""
    dims = np.shape(input)
    if all(isinstance(d, int) for d in dims):
        return np.asarray(dims, dtype=numpy_dtype(out_type))
    return jnp.stack([jnp.asarray(d, dtype=numpy_dtype(out_type)) for d in dims])


def rank(input: TensorLike, name: str | None = None) -> np.ndarray:  # noqa: A002
    return np.asarray(np.ndim(input), dtype=np.int32)


def size(input: TensorLike, out_type: DTypeLike = "int32", name: str | None = None) -> np.ndarray:  # noqa: A002
    return np.asarray(np.size(input), dtype=numpy_dtype(out_type))


def one_hot(indices: TensorLike, depth: int, on_value: TensorLike | None = None, off_value: TensorLike | None = None,
            axis: int | None = None, dtype: DTypeLike | None = None, name: str | None = None) -> ArrayLike:
    """`tf.one_hot`: float32 unless `dtype` or the on/off values say otherwise; indices out of range give zeros."""
    indices = convert_to_tensor(indices)
    if np.dtype(indices.dtype).kind not in "iu":  # TF 2.21's error (observed)
        kind = tf_type_name(np.dtype(indices.dtype).name)
        raise InvalidArgumentError(None, None, f"Value for attr 'TI' of {kind} is not in the list of allowed values: "
                                               "uint8, int8, int32, int64")
    module = xp(indices)
    target = numpy_dtype(dtype) or (convert_to_tensor(on_value).dtype if on_value is not None else np.float32)
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value
    hot = module.expand_dims(indices, -1) == module.arange(depth)
    out = module.where(hot, module.asarray(on, dtype=target), module.asarray(off, dtype=target))
    return out if axis is None or axis == -1 else module.moveaxis(out, -1, axis)


# JAX values of these ops take TF's gradient at a tie (`kink_gradients`)
_KINKED = {"maximum": kink_gradients.maximum, "minimum": kink_gradients.minimum, "abs": kink_gradients.absolute,
           "sign": kink_gradients.sign}


def _binary(name: str):
    def op(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
        x, y = binary_operands.matching(x, y, fn_name)
        if fn_name in _KINKED and is_jax(x, y):
            return _KINKED[fn_name](x, y)
        try:
            return getattr(xp(x, y), fn_name)(x, y)
        except (ValueError, TypeError) as error:  # shapes that do not broadcast: TF's `[Op:AddV2]` error
            raise tensor_numpy.op_error(fn_name, x, y, error) from None

    fn_name = name
    op.__name__ = name
    return op


equal, not_equal = _binary("equal"), _binary("not_equal")
greater, greater_equal = _binary("greater"), _binary("greater_equal")
less, less_equal = _binary("less"), _binary("less_equal")
logical_and, logical_or = _binary("logical_and"), _binary("logical_or")
add, subtract, multiply = _binary("add"), _binary("subtract"), _binary("multiply")
maximum, minimum, pow = _binary("maximum"), _binary("minimum"), _binary("power")  # noqa: A001
matmul = _binary("matmul")


def divide(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`tf.divide` / `tf.math.divide`: true division, operands as TF takes them (`jdist.tf_compat.division`)."""
    x, y = division.divide_operands(x, y, named=name is not None)
    return division.true_divide(x, y)


class FloatOnlyError(InvalidArgumentError, TypeError):
    """TF's InvalidArgumentError for an integer or bool given to a float-only kernel (also a TypeError)."""


def require_float(op: str, *values: Any, complex_ok: bool = True) -> None:
    """TF's refusal of integer and bool input to a float kernel (observed, TF 2.21: `tf.math.exp(tf.constant([1,
    4]))` is "Value for attr 'T' of int32 is not in the list of allowed values: bfloat16, half, float, double,
    complex64, complex128"), with the cast that makes it work. Every float-only op of `jdist.tf_compat` checks
    here (`math_ops`, `nn_extra`, `scans`, `math_extra`)."""
    for value in values:
        dtype = np.dtype(value.dtype)
        if dtype.kind not in "fc" and str(value.dtype) != "bfloat16":
            allowed = "bfloat16, half, float, double" + (", complex64, complex128" if complex_ok else "")
            raise FloatOnlyError(None, None, f"{op} takes floating-point input, as TF's kernel (Value for attr 'T' "
                                             f"of {dtype.name} is not in the list of allowed values: {allowed}), got "
                                             f"{dtype.name}; cast it first: tf.cast(x, tf.float32)")


# The unary ops TF runs on floats only (observed, TF 2.21): with complex, and without (floor, ceil, is_nan).
_FLOAT_ONLY = {"exp": True, "log": True, "sqrt": True, "tanh": True, "floor": False, "ceil": False,
               "isnan": False, "isfinite": False}


def _unary(name: str):
    def op(x: TensorLike, name: str | None = None) -> Tensor:
        x = convert_to_tensor(x)
        if fn_name in _FLOAT_ONLY:
            require_float(f"tf.math.{op.__name__}", x, complex_ok=_FLOAT_ONLY[fn_name])
        if fn_name == "rint" and np.dtype(x.dtype).kind in "iub":
            return x  # TF rounds integers to themselves, keeping their dtype
        if fn_name in _KINKED and is_jax(x):
            return _KINKED[fn_name](x)
        return getattr(xp(x), fn_name)(x)

    fn_name = name
    op.__name__ = {"rint": "round", "isnan": "is_nan", "isfinite": "is_finite"}.get(name, name)
    return weak_promotion.keeps_weak(op)  # a weak input's result is weak under numpy behavior "all"/"safe"


abs, exp, log, sqrt, square = (_unary(n) for n in ("abs", "exp", "log", "sqrt", "square"))  # noqa: A001
floor, ceil, sign, tanh, negative = (_unary(n) for n in ("floor", "ceil", "sign", "tanh", "negative"))
round, logical_not, is_nan = _unary("rint"), _unary("logical_not"), _unary("isnan")  # noqa: A001
is_finite = _unary("isfinite")


def clip_by_value(t: TensorLike, clip_value_min: TensorLike, clip_value_max: TensorLike,
                  name: str | None = None) -> Tensor:
    t = convert_to_tensor(t)
    if is_jax(t, clip_value_min, clip_value_max):
        return kink_gradients.clip_by_value(jnp.asarray(t), clip_value_min, clip_value_max)
    return xp(t).clip(t, clip_value_min, clip_value_max)


def gather(params: TensorLike, indices: TensorLike, axis: int = 0, batch_dims: int = 0,
           name: str | None = None) -> Tensor:
    params, indices = convert_to_tensor(params), convert_to_tensor(indices)
    if batch_dims:  # each of the leading `batch_dims` entries gathers from its own row (TF's rule)
        batch_dims = batch_dims % max(np.ndim(indices), 1) if batch_dims < 0 else batch_dims
        axis = axis % np.ndim(params)
        if axis < batch_dims:
            raise InvalidArgumentError(None, None, f"batch_dims ({batch_dims}) must be less than or equal to axis "
                                                   f"({axis})")
        parts = [gather(p, i, axis - 1, batch_dims - 1) for p, i in zip(params, indices)]
        return xp(params, indices).stack(parts)
    kind = np.dtype(getattr(indices, "dtype", None) or np.asarray(indices).dtype)
    if kind.kind not in "iu":  # TF 2.21's text (observed, `tf.gather(t, [1.0])`)
        raise InvalidArgumentError(None, None, f"Value for attr 'Tindices' of {tf_type_name(kind.name)} is not in the "
                                   "list of allowed values: int16, int32, int64\n\t; NodeDef: {{node GatherV2}}; "
                                   "indices must be integers: cast them with tf.cast(indices, tf.int32) "
                                   "[Op:GatherV2]")
    if not isinstance(indices, Tracer):  # TF checks indices it can see (a traced one it cannot)
        where = np.asarray(indices)
        size = params.shape[axis]
        bad = (where < 0) | (where >= size)
        if bad.any():  # TF's text (observed, TF 2.21): "indices[0,1] = 3 is not in [0, 2) [Op:GatherV2]"
            at = tuple(int(i) for i in np.argwhere(bad)[0]) if where.ndim else ()
            label = f"indices[{','.join(map(str, at))}]" if at else "indices"
            raise InvalidArgumentError(None, None, f"{label} = {where[at]} is not in [0, {size}) [Op:GatherV2]")
    return xp(params, indices).take(params, indices, axis=axis)


def tile(input: TensorLike, multiples: ShapeLike, name: str | None = None) -> ArrayLike:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).tile(x, tuple(np.asarray(multiples).reshape(-1).tolist()))


def identity(input: TensorLike, name: str | None = None) -> ArrayLike:  # noqa: A002
    return convert_to_tensor(input)


def stop_gradient(input: TensorLike, name: str | None = None) -> ArrayLike:  # noqa: A002
    x = convert_to_tensor(input)
    return jax.lax.stop_gradient(x) if is_jax(x) else x


def add_n(inputs: Sequence[TensorLike], name: str | None = None) -> Tensor:
    """`tf.add_n`: the element-wise sum of a non-empty list of same-shaped arrays, added in order."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("tf.add_n: `inputs` must hold at least one array (got an empty list)")
    converted = input_dtypes.separately("AddN", inputs, convert_to_tensor)  # TF's dtypes for Python values
    total = converted[0]
    for value in converted[1:]:
        if np.shape(value) != np.shape(total):
            raise ValueError(f"tf.add_n: every input must have the same shape; got {np.shape(total)} and "
                             f"{np.shape(value)}")
        total = total + value
    return total
