"""TF's reductions (`tf.reduce_sum`, `tf.reduce_mean`, ...) with TF's dtype rules, on numpy or JAX (see `ops`).

TF's rules, observed in TF 2.21: `reduce_mean` of ints is an int (TF divides and truncates); `reduce_sum` and
`reduce_prod` of ints keep the input's int dtype. On a Keras symbolic tensor (a functional model's layer output)
a reduction is recorded as a Keras op, as TF records a TF op on one as a layer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast, overload

import jax
import numpy as np

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
    if name == "mean" and x.dtype.kind in "iub":
        count = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
        total = module.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
        return module.trunc(total / count).astype(x.dtype) if x.dtype.kind != "b" else total
    if name in ("sum", "prod") and x.dtype.kind in "iu":
        return getattr(module, name)(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
    return getattr(module, name)(x, axis=axis, keepdims=keepdims)


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
