"""More of `tf.math` and `tf.nn`: `divide_no_nan`, `rint`, `accumulate_n`, `lbeta`, `bessel_i0`, `zeta`,
`histogram_fixed_width`, `bitcast` and `tf.nn.batch_normalization`, each checked against TF 2.21's value and
dtype (tests/test_tf_compat_math_ops.py). Host values are computed with numpy, device values with jax.numpy.
"""
from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import scipy.special as sp
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.ops import add_n, convert_to_tensor, is_jax, xp
from jdist.typing import Tensor, TensorLike


def divide_no_nan(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x / y`, and 0 where `y` is 0 (also where `x` is NaN or infinite), in the operands' dtype."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    module = xp(x, y)
    zero = y == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = module.true_divide(x, module.where(zero, module.ones_like(y), y))
    return module.where(zero, module.zeros_like(out), out)


def rint(x: TensorLike, name: str | None = None) -> Tensor:
    """The nearest integer, halves to even (TF 2.21: rint([0.5, 1.5]) is [0., 2.])."""
    x = convert_to_tensor(x)
    return xp(x).rint(x)


def accumulate_n(inputs: Sequence[TensorLike], shape: Sequence[int] | None = None, tensor_dtype: DTypeLike = None,
                 name: str | None = None) -> Tensor:
    """`tf.math.accumulate_n`: the element-wise sum of the inputs (TF's `add_n` without waiting for all)."""
    return add_n(inputs)


def lbeta(x: TensorLike, name: str | None = None) -> Tensor:
    """log(|Beta(x)|) over the last axis: sum(lgamma(x)) - lgamma(sum(x))."""
    x = convert_to_tensor(x)
    if is_jax(x):
        return jnp.sum(jsp.gammaln(x), axis=-1) - jsp.gammaln(jnp.sum(x, axis=-1))
    return (np.sum(sp.gammaln(x), axis=-1) - sp.gammaln(np.sum(x, axis=-1))).astype(x.dtype)


def bessel_i0(x: TensorLike, name: str | None = None) -> Tensor:
    """The modified Bessel function of the first kind of order 0."""
    x = convert_to_tensor(x)
    return jsp.i0(x) if is_jax(x) else sp.i0(x).astype(x.dtype)


def zeta(x: TensorLike, q: TensorLike, name: str | None = None) -> Tensor:
    """The Hurwitz zeta function: sum over n >= 0 of (n + q) ** -x."""
    x, q = convert_to_tensor(x), convert_to_tensor(q)
    return jsp.zeta(x, q) if is_jax(x, q) else sp.zeta(x, q).astype(np.result_type(x, q))


def histogram_fixed_width(values: TensorLike, value_range: TensorLike, nbins: int = 100, dtype: DTypeLike = "int32",
                          name: str | None = None) -> Tensor:
    """Counts in `nbins` equal bins over `value_range`; values outside go to the first or last bin, as TF's."""
    values, bounds = np.asarray(convert_to_tensor(values), np.float64), np.asarray(value_range, np.float64)
    low, high = float(bounds[0]), float(bounds[1])
    index = np.clip(np.floor((values - low) / (high - low) * nbins), 0, nbins - 1).astype(np.int64)
    return np.bincount(index.reshape(-1), minlength=nbins).astype(numpy_dtype(dtype))


def bitcast(input: TensorLike, type: DTypeLike, name: str | None = None) -> Tensor:  # noqa: A002
    """The same bytes read as `type` (a wider type takes the last axis' items together, as TF's)."""
    x = convert_to_tensor(input)
    target = numpy_dtype(type)
    if is_jax(x):
        return jax.lax.bitcast_convert_type(x, target)
    out = np.ascontiguousarray(x).view(target)
    ratio = np.dtype(x.dtype).itemsize / np.dtype(target).itemsize
    if ratio > 1:  # each item becomes `ratio` narrower ones along a new last axis
        return out.reshape(x.shape + (int(ratio),))
    if ratio < 1:  # the last axis' items join into one
        return out.reshape(x.shape[:-1])
    return out


def batch_normalization(x: TensorLike, mean: TensorLike, variance: TensorLike, offset: TensorLike | None,
                        scale: TensorLike | None, variance_epsilon: float, name: str | None = None) -> Tensor:
    """`(x - mean) / sqrt(variance + epsilon) * scale + offset`, in `x`'s dtype."""
    x = convert_to_tensor(x)
    module = xp(x)
    dtype = x.dtype
    inverse = module.asarray(1.0 / module.sqrt(module.asarray(variance, dtype) + variance_epsilon), dtype)
    if scale is not None:
        inverse = inverse * module.asarray(scale, dtype)
    shift = module.asarray(offset, dtype) if offset is not None else module.zeros((), dtype)
    return (x * inverse + (shift - module.asarray(mean, dtype) * inverse)).astype(dtype)


MATH = dict(divide_no_nan=divide_no_nan, rint=rint, accumulate_n=accumulate_n, lbeta=lbeta, bessel_i0=bessel_i0,
            zeta=zeta)
