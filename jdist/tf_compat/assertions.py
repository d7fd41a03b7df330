"""`tf.debugging`'s sign, type, rank and `Assert` checks, with TF 2.21's errors and messages (observed).

As in `jdist.tf_compat.debugging`: on values (eager, host) a failed value check raises
`tf.errors.InvalidArgumentError` at once; on traced values (inside `tf.function` / `strategy.run`) it runs on
the host (`debugging.host_check`) when the program runs and the call raises the same error. Checks of dtype,
rank and structure (`assert_type`, `assert_integer`, `assert_scalar`, `assert_rank_at_least`, ...) need no
values: they raise while tracing, as TF's do.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np
from jax.core import Tracer

from jdist.strategy import function_trace
from jdist.tf_compat.debugging import check_numerics, host_check
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tfdata.tensor_text import dtype_name

_TRACEBACK_FILTERING = [True]
_TRACED = 'Tensor("condition")'


def _lead(message: str | None) -> str:
    return f"{message}.  " if message else ""


def _element_text(value: Any) -> str:
    return repr(value) if isinstance(value, bytes) else str(value)


def _shown(values: np.ndarray, summarize: int | None) -> str:
    """TF's eager listing of a failed tensor: a scalar's value, else the first `summarize` (3) values as text."""
    if values.ndim == 0:
        return _element_text(values[()])
    n = 3 if summarize is None else max(int(summarize), 0)
    flat = [_element_text(v) for v in values.ravel()[:n]]
    return str(flat + ["..."] if values.size > n else flat)


def _sign(symbol: str, holds: Callable[[np.ndarray], np.ndarray], newline: str = "\n") -> Callable[..., None]:
    def check_values(values: np.ndarray, message: str | None, summarize: int | None) -> None:
        if np.all(holds(values)):
            return
        raise InvalidArgumentError(message=(
            f"{_lead(message)}\nCondition x {symbol} 0 did not hold element-wise:{newline}x (shape={values.shape} "
            f"dtype={values.dtype.name}) = \n{_shown(values, summarize)}"))

    def assertion(x: Any, data: Any = None, summarize: int | None = None, message: str | None = None,
                  name: str | None = None) -> None:
        x = convert_to_tensor(x)
        if np.dtype(x.dtype).kind in "bOSU":  # TF compares with a zero of x's dtype (observed)
            raise TypeError(f"Cannot convert 0 to EagerTensor of dtype {dtype_name(x.dtype)}")
        if isinstance(x, Tracer):
            host_check(lambda a: check_values(np.asarray(a), message, summarize), None, x)
            return None
        check_values(np.asarray(x), message, summarize)
        return None

    assertion.__doc__ = f"`tf.debugging.assert_...`: InvalidArgumentError unless x {symbol} 0 everywhere."
    return assertion


assert_negative = _sign("<", lambda v: v < 0)
assert_positive = _sign(">", lambda v: v > 0)
assert_non_negative = _sign(">=", lambda v: v >= 0)
assert_non_positive = _sign("<=", lambda v: v <= 0, newline="")  # TF 2.21's message has no line break here


def _data_text(item: Any, summarize: int | None) -> str:
    values = np.asarray(convert_to_tensor(item))
    n = 3 if summarize is None else max(int(summarize), 0)
    shown = [_element_text(v) for v in values.ravel()[:n]]
    return ", ".join(shown + ["..."] if values.size > n else shown)


def _graph_element(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (np.bool_, bool)):
        return str(int(value))
    return f"{float(value):g}" if isinstance(value, (np.floating, float)) else str(value)


def _graph_summary(item: Any, summarize: int | None) -> str:
    """TF's graph-mode text of one `tf.Assert` data item (its kernel's `SummarizeValue`): the first `summarize`
    (3) values, rows in brackets, "..." where it stops (observed, TF 2.21: `1 2 3...`, `[1 2][3...]...`)."""
    if isinstance(item, str):
        return item
    values = np.asarray(convert_to_tensor(item))
    limit = 3 if summarize is None else max(int(summarize), 0)
    flat, shape, parts, taken = values.ravel(), values.shape, [], [0]

    def one_dim(dim: int) -> None:
        for i in range(shape[dim]):
            if taken[0] >= limit:
                parts.append("...")
                return
            if dim == len(shape) - 1:
                parts.append((" " if i else "") + _graph_element(flat[taken[0]]))
                taken[0] += 1
            else:
                parts.append("[")
                one_dim(dim + 1)
                parts.append("]")

    if not shape:
        return _graph_element(flat[0])
    one_dim(0)
    text = "".join(parts)
    return text + "..." if len(shape) > 1 and values.size > limit else text


def Assert(condition: Any, data: Sequence[Any], summarize: int | None = None, name: str | None = None) -> None:
    """`tf.debugging.Assert`: InvalidArgumentError "Expected '<condition>' to be true. Summarized data: ..."
    (each item's first `summarize` values, 3 by default) unless `condition` holds; traced in a `tf.function`,
    TF's graph text "assertion failed: [1 2 3...]" (observed, TF 2.21)."""
    items = list(data)
    graph = function_trace.active()  # a tf.function's trace (TF's eager strategy.run gives the eager text)
    traced = [i for i, item in enumerate(items) if isinstance(item, Tracer)]

    def check_values(value: Any, shown: str, *traced_values: Any) -> None:
        if bool(np.asarray(value)):
            return
        values = list(items)
        for i, v in zip(traced, traced_values):
            values[i] = np.asarray(v)
        if graph and shown == _TRACED:
            text = " ".join(f"[{_graph_summary(item, summarize)}]" for item in values)
            raise InvalidArgumentError(message=f"assertion failed: {text}")
        text = "\n".join(_data_text(item, summarize) for item in values)
        raise InvalidArgumentError(message=f"Expected '{shown}' to be true. Summarized data: {text}")

    if isinstance(condition, Tracer) or traced:
        if isinstance(condition, Tracer) and np.size(condition) != 1:
            raise ValueError(f"tf.debugging.Assert: the condition must be a scalar, got shape {condition.shape}.")
        host_check(lambda c, *v: check_values(c, _TRACED, *v), None, condition,
                   *[items[i] for i in traced])
        return None
    check_values(condition, str(condition))  # a tensor's text is TF's: tf.Tensor(False, ...)
    return None


def assert_all_finite(t: Any, msg: str, name: str | None = None, x: Any = None, message: str | None = None) -> Any:
    """`tf.debugging.assert_all_finite(t, msg)`: `t`, or InvalidArgumentError "<msg> : Tensor had NaN values"
    (`tf.debugging.check_numerics`)."""
    return check_numerics(t if x is None else x, msg if message is None else message)


def _dtype_of(x: Any) -> DType:
    dtype = getattr(x, "dtype", None)
    return as_dtype(convert_to_tensor(x).dtype if dtype is None else dtype)


def assert_integer(x: Any, message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_integer`: TypeError unless x has an integer dtype (bool is not one)."""
    dtype = _dtype_of(x)
    if not dtype.is_integer:
        raise TypeError(f'{_lead(message)}Expected "x" to be integer type.  Found: tensor of dtype {dtype}')
    return None


def assert_type(tensor: Any, tf_type: Any, message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_type`: TypeError "tensor must be of type tf.int32; got tf.float32"."""
    dtype, want = _dtype_of(tensor), as_dtype(tf_type)
    if dtype != want:
        raise TypeError(f"{_lead(message)}tensor must be of type {want!r}; got {dtype!r}")
    return None


def assert_scalar(tensor: Any, message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_scalar`: ValueError "Expected scalar shape, saw shape: (3,)." (static shape)."""
    shape = tuple(np.shape(tensor))
    if shape:
        raise ValueError(f"{_lead(message)}Expected scalar shape, saw shape: {shape}.")
    return None


def assert_rank_at_least(x: Any, rank: int, message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_rank_at_least`: ValueError with TF's message when x's (static) rank is lower."""
    shape = tuple(np.shape(x))
    if len(shape) < int(rank):
        raise ValueError(f"{_lead(message)}Tensor  must have rank at least {int(rank)}.  Received rank "
                         f"{len(shape)}, shape {shape}")
    return None


def assert_rank_in(x: Any, ranks: Iterable[int], message: str | None = None, name: str | None = None) -> None:
    """`tf.debugging.assert_rank_in`: ValueError with TF's message when x's (static) rank is none of `ranks`."""
    shape, allowed = tuple(np.shape(x)), tuple(int(r) for r in ranks)
    if len(shape) not in allowed:
        raise ValueError(f"{_lead(message)}Tensor  must have rank in {allowed}.  Received rank {len(shape)}, "
                         f"shape {shape}")
    return None


def assert_same_float_dtype(tensors: Sequence[Any] | None = None, dtype: Any = None) -> DType:
    """`tf.debugging.assert_same_float_dtype`: the one floating dtype of `tensors` (and `dtype`), float32 when
    there is none; ValueError for a mixed or non-floating one."""
    first: Any = None
    want = None if dtype is None else as_dtype(dtype)
    for tensor in tensors or ():
        got = _dtype_of(tensor)
        if want is None:
            want, first = got, tensor
        elif got != want:
            against = f" as {first}" if first is not None else ""
            raise ValueError(f"{tensor}, type={got}, must be of the same type ({want}){against}.")
    if want is None:
        return as_dtype("float32")
    if not want.is_floating:
        raise ValueError(f"Expected floating point type, got {want}.")
    return want


def assert_proper_iterable(values: Any) -> None:
    """`tf.debugging.assert_proper_iterable`: TypeError for a tensor, an array, text or bytes, or a
    non-iterable."""
    if isinstance(values, (np.ndarray, np.generic, jax.Array, str, bytes)):
        raise TypeError(f'Expected argument "values" to be a "proper" iterable.  Found: {type(values)}')
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')
    return None


def is_numeric_tensor(tensor: Any) -> bool:
    """`tf.debugging.is_numeric_tensor`: a tensor (`tf.Tensor`: numpy and JAX arrays in jdist; TF 2.21 says False
    for numpy arrays) of a number dtype, not bool or string; False for Python numbers, as TF's."""
    if not isinstance(tensor, (jax.Array, np.ndarray, np.generic)):
        return False
    kind = np.dtype(tensor.dtype).kind
    return kind in "iufc" or str(tensor.dtype) == "bfloat16"


def enable_traceback_filtering() -> None:
    """`tf.debugging.enable_traceback_filtering`: kept (JAX filters its own frames: `JAX_TRACEBACK_FILTERING`)."""
    _TRACEBACK_FILTERING[0] = True


def disable_traceback_filtering() -> None:
    """`tf.debugging.disable_traceback_filtering`: kept; see `enable_traceback_filtering`."""
    _TRACEBACK_FILTERING[0] = False


def is_traceback_filtering_enabled() -> bool:
    """`tf.debugging.is_traceback_filtering_enabled`: True until `disable_traceback_filtering()`, as TF's."""
    return _TRACEBACK_FILTERING[0]


DEBUGGING = dict(
    Assert=Assert, assert_all_finite=assert_all_finite, assert_integer=assert_integer,
    assert_negative=assert_negative, assert_non_negative=assert_non_negative,
    assert_non_positive=assert_non_positive, assert_positive=assert_positive,
    assert_proper_iterable=assert_proper_iterable, assert_rank_at_least=assert_rank_at_least,
    assert_rank_in=assert_rank_in, assert_same_float_dtype=assert_same_float_dtype, assert_scalar=assert_scalar,
    assert_type=assert_type, disable_traceback_filtering=disable_traceback_filtering,
    enable_traceback_filtering=enable_traceback_filtering,
    is_traceback_filtering_enabled=is_traceback_filtering_enabled, is_numeric_tensor=is_numeric_tensor,
)
