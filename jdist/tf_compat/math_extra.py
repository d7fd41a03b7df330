"""More of `tf.math` and `tf.nn`: special functions, complex parts, `divide_no_nan`, `rint`, `accumulate_n`,
`cumulative_logsumexp`, `histogram_fixed_width`, `bitcast`, `batch_normalization`, `log_poisson_loss`,
`weighted_cross_entropy_with_logits`, ..., each checked against TF 2.21's value and dtype
(tests/test_tf_compat_operands.py). Host values are computed with numpy, device values with jax.numpy.
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
from jdist.tf_compat.ops import add_n, convert_to_tensor, is_jax, require_float, xp
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


def accumulate_n(inputs: Sequence[TensorLike], shape: Sequence[int] | None = None,
                 tensor_dtype: DTypeLike | None = None, name: str | None = None) -> Tensor:
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


def _special2(numpy_fn, jax_fn, tf_name: str, doc: str):
    """An element-wise special function of two arguments: scipy's on the host (in the inputs' dtype), JAX's on
    device values."""
    def op(a: TensorLike, b: TensorLike, name: str | None = None) -> Tensor:
        a, b = convert_to_tensor(a), convert_to_tensor(b)
        return jax_fn(a, b) if is_jax(a, b) else numpy_fn(a, b).astype(np.result_type(a, b))

    op.__name__ = op.__qualname__ = tf_name
    op.__doc__ = doc
    return op


zeta = _special2(sp.zeta, jsp.zeta, "zeta", "The Hurwitz zeta function of (x, q): sum over n >= 0 of (n + q) ** -x.")
igamma = _special2(sp.gammainc, jsp.gammainc, "igamma", "The regularized lower incomplete gamma function P(a, x).")
igammac = _special2(sp.gammaincc, jsp.gammaincc, "igammac",
                    "The regularized upper incomplete gamma function Q(a, x).")


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


def _special(numpy_fn, jax_fn, tf_name: str):
    """An element-wise special function of floats: scipy's on the host, JAX's on device values."""
    def op(x: TensorLike, name: str | None = None) -> Tensor:
        x = convert_to_tensor(x)
        require_float(f"tf.math.{tf_name}", x, complex_ok=False)
        return jax_fn(x) if is_jax(x) else np.asarray(numpy_fn(x)).astype(x.dtype)

    op.__name__ = op.__qualname__ = tf_name
    return op


softsign = _special(lambda x: x / (1 + np.abs(x)), lambda x: x / (1 + jnp.abs(x)), "softsign")
digamma = _special(sp.digamma, jsp.digamma, "digamma")
erfinv = _special(sp.erfinv, jsp.erfinv, "erfinv")
ndtri = _special(sp.ndtri, jsp.ndtri, "ndtri")


def nextafter(x1: TensorLike, x2: TensorLike, name: str | None = None) -> Tensor:
    x1, x2 = convert_to_tensor(x1), convert_to_tensor(x2)
    return xp(x1, x2).nextafter(x1, x2)


def real(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).real(x)


def imag(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).imag(x)


def conj(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    return xp(x).conj(x)


def angle(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).angle(x)


def complex(real: TensorLike, imag: TensorLike, name: str | None = None) -> Tensor:  # noqa: A001
    """`real + 1j * imag`: complex64 from float32 parts, complex128 from float64 ones."""
    re, im = convert_to_tensor(real), convert_to_tensor(imag)
    module = xp(re, im)
    target = np.complex128 if np.dtype(re.dtype) == np.float64 else np.complex64
    return (module.asarray(re) + 1j * module.asarray(im)).astype(target)


def cumulative_logsumexp(x: TensorLike, axis: int = 0, exclusive: bool = False, reverse: bool = False,
                         name: str | None = None) -> Tensor:
    """log(cumsum(exp(x))) along `axis`, computed stably."""
    x = convert_to_tensor(x)
    module = xp(x)
    if reverse:
        x = module.flip(x, axis)
    out = np.logaddexp.accumulate(x, axis=axis) if module is np else jax.lax.cumlogsumexp(jnp.asarray(x), axis=axis)
    if exclusive:
        pad = module.full_like(module.take(out, module.arange(1), axis=axis), -module.inf)
        out = module.concatenate([pad, module.take(out, module.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
    return module.flip(out, axis) if reverse else out


def unsorted_segment_prod(data: TensorLike, segment_ids: TensorLike, num_segments: int,
                          name: str | None = None) -> Tensor:
    """The product of the rows of each segment (1 for an empty one)."""
    data, ids = np.asarray(convert_to_tensor(data)), np.asarray(convert_to_tensor(segment_ids))
    out = np.ones((int(num_segments),) + data.shape[ids.ndim:], data.dtype)
    np.multiply.at(out, ids, data)
    return out


def invert_permutation(x: TensorLike, name: str | None = None) -> Tensor:
    x = np.asarray(convert_to_tensor(x))
    out = np.empty_like(x)
    out[x] = np.arange(x.size, dtype=x.dtype)
    return out


def scalar_mul(scalar: TensorLike, x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    return x * xp(x).asarray(scalar, x.dtype)


MATH = dict(divide_no_nan=divide_no_nan, rint=rint, accumulate_n=accumulate_n, lbeta=lbeta, bessel_i0=bessel_i0,
            zeta=zeta, softsign=softsign, digamma=digamma, erfinv=erfinv, ndtri=ndtri, igamma=igamma,
            igammac=igammac, nextafter=nextafter, real=real, imag=imag, conj=conj, angle=angle,
            cumulative_logsumexp=cumulative_logsumexp, unsorted_segment_prod=unsorted_segment_prod,
            invert_permutation=invert_permutation, scalar_mul=scalar_mul)


def log_poisson_loss(targets: TensorLike, log_input: TensorLike, compute_full_loss: bool = False,
                     name: str | None = None) -> Tensor:
    """exp(log_input) - targets * log_input (+ Stirling's term for targets > 1 with `compute_full_loss`)."""
    t, c = convert_to_tensor(targets), convert_to_tensor(log_input)
    module = xp(t, c)
    loss = module.exp(c) - c * t
    if compute_full_loss:
        stirling = t * module.log(module.where(t > 0, t, 1)) - t + 0.5 * module.log(2 * np.pi * module.where(
            t > 0, t, 1))
        loss = loss + module.where(t > 1, stirling, module.zeros_like(t))
    return loss


def weighted_cross_entropy_with_logits(labels: TensorLike, logits: TensorLike, pos_weight: TensorLike,
                                       name: str | None = None) -> Tensor:
    """Sigmoid cross entropy with the positive term weighted by `pos_weight`, computed stably (TF's formula)."""
    z, x = convert_to_tensor(labels), convert_to_tensor(logits)
    module = xp(z, x)
    log_weight = 1 + (convert_to_tensor(pos_weight) - 1) * z
    return (1 - z) * x + log_weight * (module.log1p(module.exp(-module.abs(x))) + module.maximum(-x, 0))


def normalize_moments(counts: TensorLike, mean_ss: TensorLike, variance_ss: TensorLike, shift: TensorLike | None,
                      name: str | None = None) -> tuple[Tensor, Tensor]:
    """(mean, variance) from the count and the (shifted) sums of values and squares."""
    divisor = 1.0 / np.asarray(counts, np.float64)
    mean_ss, variance_ss = convert_to_tensor(mean_ss), convert_to_tensor(variance_ss)
    shifted_mean = mean_ss * np.asarray(divisor, np.dtype(mean_ss.dtype))
    mean = shifted_mean if shift is None else shifted_mean + convert_to_tensor(shift)
    variance = variance_ss * np.asarray(divisor, np.dtype(variance_ss.dtype)) - shifted_mean * shifted_mean
    return mean, variance


NN = dict(batch_normalization=batch_normalization, log_poisson_loss=log_poisson_loss,
          weighted_cross_entropy_with_logits=weighted_cross_entropy_with_logits,
          normalize_moments=normalize_moments)
