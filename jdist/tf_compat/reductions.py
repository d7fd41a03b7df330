"""TF's reductions (`tf.reduce_sum`, `tf.reduce_mean`, ...) with TF's dtype rules, on numpy or JAX (see `ops`).

TF's rules, observed in TF 2.21: `reduce_mean` of ints is an int (TF divides and truncates); `reduce_sum` and
`reduce_prod` of ints keep the input's int dtype. On a Keras symbolic tensor (a functional model's layer output)
a reduction is recorded as a Keras op, as TF records a TF op on one as a layer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast, overload

import jax
import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import Axis, Tensor, TensorLike

if TYPE_CHECKING:
    from keras import KerasTensor


def _symbolic(value: object) -> bool:
    """A Keras symbolic tensor: Keras 3's ops record on it (`keras.ops`), so the reductions dispatch there."""
    return type(value).__name__ == "KerasTensor" and type(value).__module__.startswith("keras.")


def _reduce(name: str, input_tensor: TensorLike, axis: Axis, keepdims: bool) -> Tensor | KerasTensor:
    if _symbolic(input_tensor):
        from keras import ops

        return getattr(ops, name)(input_tensor, axis=axis, keepdims=keepdims)
    by_rows = getattr(input_tensor, "reduce_rows", None)  # a tf.RaggedTensor reduces row by row
    if by_rows is not None:
        return by_rows(name, lambda values, along: _reduce(name, values, along, False), axis, keepdims)
    x = convert_to_tensor(input_tensor)
    module = xp(x)
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    _check_reduction(name, x, axis)
    if name in ("max", "min") and x.size == 0:  # TF gives the identity: -inf / inf, or the integer limits
        if x.dtype.kind == "f":
            identity = -np.inf if name == "max" else np.inf
        else:
            identity = np.iinfo(x.dtype).min if name == "max" else np.iinfo(x.dtype).max
        return getattr(module, name)(x, axis=axis, keepdims=keepdims, initial=identity)
    if name == "mean" and x.dtype.kind in "iub":
        count = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
        total = module.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
        if count == 0:  # TF 2.21 (observed): the mean of no ints is 0 (`reduce_mean(zeros([0, 3], int32), 0)`)
            return total
        return module.trunc(total / count).astype(x.dtype) if x.dtype.kind != "b" else total
    if name in ("sum", "prod") and x.dtype.kind in "iu":
        return getattr(module, name)(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
    return getattr(module, name)(x, axis=axis, keepdims=keepdims)


_NUMBER_TYPES = ("float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, "
                 "quint16, uint16, complex128, half, uint32, uint64")
_ORDERED_TYPES = ("float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8, "
                  "quint8, qint32, qint16, quint16")


def _check_reduction(name: str, x: Any, axis: Any) -> None:
    """TF's errors (observed, TF 2.21): a reduction dimension out of range, and sum, mean, prod, max and min of
    bools ("Value for attr 'T' of bool is not in the list of allowed values")."""
    op = name.capitalize()  # TF's op: Sum, Mean, Max, Min, Prod, Any, All
    for a in () if axis is None else np.atleast_1d(np.asarray(axis)).tolist():
        if not -x.ndim <= int(a) < max(x.ndim, 1):
            raise InvalidArgumentError(None, None, f"Invalid reduction dimension ({int(a)} for input with {x.ndim} "
                                                   f"dimension(s) [Op:{op}] name: ")
    if x.dtype.kind == "b" and name in ("sum", "mean", "prod", "max", "min"):
        allowed = _ORDERED_TYPES if name in ("max", "min") else _NUMBER_TYPES
        raise InvalidArgumentError(None, None, f"Value for attr 'T' of bool is not in the list of allowed values: "
                                               f"{allowed} [Op:{op}] name: ")


class Reduction(Protocol):
    """A TF reduction: a Keras symbolic tensor in gives one out (recorded as a Keras op), anything else a value."""

    __name__: str

    @overload
    def __call__(self, input_tensor: KerasTensor, axis: Axis = None, keepdims: bool = False,
                 name: str | None = None) -> KerasTensor: ...
    @overload
    def __call__(self, input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False,
                 name: str | None = None) -> Tensor: ...


def _reduction(op: str) -> Reduction:
    """`tf.reduce_<op>`, named so, so that it pickles by reference and prints as TF's."""

    def reduce(input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False,
               name: str | None = None) -> Tensor | KerasTensor:
        return _reduce(op, input_tensor, axis, keepdims)

    reduce.__name__ = reduce.__qualname__ = f"reduce_{op}"
    return cast(Reduction, reduce)


reduce_sum = _reduction("sum")
reduce_mean = _reduction("mean")
reduce_max = _reduction("max")
reduce_min = _reduction("min")
reduce_prod = _reduction("prod")
reduce_any = _reduction("any")
reduce_all = _reduction("all")


def reduce_logsumexp(input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False,
                     name: str | None = None) -> Tensor:
    x = convert_to_tensor(input_tensor)
    if is_jax(x):
        return jax.nn.logsumexp(x, axis=axis, keepdims=keepdims)
    peak = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axis)
