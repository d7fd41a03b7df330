"""More of `tf.math`: inverse hyperbolics, `erfc`, the `*_no_nan` / `xdivy` family, truncating division, ordering
predicates, `polygamma`, `betainc`, Bessel functions, `approx_max_k`, and `tf.math.special`.

On numpy or JAX as `ops`: scipy's functions on the host (in the input's dtype), JAX's inside compiled code; the
Bessel functions J, Y and K (which JAX lacks, or has for J only by a slow series) run scipy's through
`jax.pure_callback` there (values, no gradient).
TF's rules, observed in TF 2.21: these kernels take floating-point input only; `truncatediv` rounds toward zero
(-7 / 2 is -3) and `truncatemod` keeps the dividend's sign (-7 mod 3 is -1); `xdivy(0, 0)` and
`reciprocal_no_nan(0)` are 0; `zero_fraction` is float32 (nan for an empty tensor); `polygamma` of a
non-integer order is nan; `approx_max_k` on the CPU is exact.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import scipy.special as sp

from jdist.tf_compat.math_ops import _check_int_divisor, _float_unary
from jdist.tf_compat.ops import convert_to_tensor, is_jax, require_float, xp
from jdist.tf_compat.segment_ops import descending_order
from jdist.typing import Tensor, TensorLike

acosh, asinh, atanh = _float_unary("acosh", "arccosh"), _float_unary("asinh", "arcsinh"), \
    _float_unary("atanh", "arctanh")


def _callback(numpy_fn: Callable[[np.ndarray], Any]) -> Callable[[Any], Any]:
    """scipy's function inside compiled code, as a host callback of the same shape and dtype."""
    def run(x: Any) -> Any:
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.pure_callback(lambda v: np.asarray(numpy_fn(np.asarray(v))).astype(v.dtype), spec, x,
                                 vmap_method="expand_dims")
    return run


def _unary(tf_path: str, numpy_fn: Callable[[Any], Any], jax_fn: Callable[[Any], Any] | None = None,
           complex_ok: bool = False, below_zero: float | None = None,
           at_zero: float | None = None) -> Callable[..., Tensor]:
    """An element-wise float op: scipy's on the host, JAX's (or scipy's through a callback) on device values;
    `below_zero` / `at_zero`: TF's value there where it differs from scipy's (observed)."""
    device_fn = jax_fn if jax_fn is not None else _callback(numpy_fn)

    def op(x: TensorLike, name: str | None = None) -> Tensor:
        x = convert_to_tensor(x)
        require_float(tf_path, x, complex_ok=complex_ok)
        if is_jax(x):
            out = device_fn(x)
        else:
            with np.errstate(all="ignore"):
                out = np.asarray(numpy_fn(x)).astype(x.dtype)
        module = xp(x)
        if below_zero is not None:
            out = module.where(x < 0, module.asarray(below_zero, out.dtype), out)
        if at_zero is not None:
            out = module.where(x == 0, module.asarray(at_zero, out.dtype), out)
        return out

    op.__name__ = op.__qualname__ = tf_path.rsplit(".", 1)[-1]
    op.__doc__ = f"`{tf_path}`, element-wise."
    return op


_SQRT_HALF = float(np.sqrt(0.5))
erfc = _unary("tf.math.erfc", sp.erfc, jsp.erfc)
erfcinv = _unary("tf.math.erfcinv", sp.erfcinv, lambda x: -jsp.ndtri(x * 0.5) * _SQRT_HALF)
bessel_i0e = _unary("tf.math.bessel_i0e", sp.i0e, jsp.i0e)
bessel_i1 = _unary("tf.math.bessel_i1", sp.i1, jsp.i1)
bessel_i1e = _unary("tf.math.bessel_i1e", sp.i1e, jsp.i1e)


def _fresnel(part: int) -> Callable[[Any], Any]:
    return lambda x: jsp.fresnel(x)[part]


_INF = float("inf")
SPECIAL = dict(  # TF's values below (and at) 0 where scipy's differ, observed in TF 2.21
    bessel_i0=_unary("tf.math.special.bessel_i0", sp.i0, jsp.i0), bessel_i0e=bessel_i0e, bessel_i1=bessel_i1,
    bessel_i1e=bessel_i1e,
    bessel_j0=_unary("tf.math.special.bessel_j0", sp.j0), bessel_j1=_unary("tf.math.special.bessel_j1", sp.j1),
    bessel_y0=_unary("tf.math.special.bessel_y0", sp.y0, below_zero=-_INF),
    bessel_y1=_unary("tf.math.special.bessel_y1", sp.y1, below_zero=-_INF, at_zero=float("nan")),
    bessel_k0=_unary("tf.math.special.bessel_k0", sp.k0, below_zero=_INF),
    bessel_k0e=_unary("tf.math.special.bessel_k0e", sp.k0e, below_zero=_INF),
    bessel_k1=_unary("tf.math.special.bessel_k1", sp.k1, below_zero=_INF),
    bessel_k1e=_unary("tf.math.special.bessel_k1e", sp.k1e, below_zero=_INF),
    dawsn=_unary("tf.math.special.dawsn", sp.dawsn, jsp.dawsn),
    expint=_unary("tf.math.special.expint", sp.expi, jsp.expi, below_zero=float("nan"), at_zero=-_INF),
    fresnel_cos=_unary("tf.math.special.fresnel_cos", lambda x: sp.fresnel(x)[1], _fresnel(1)),
    fresnel_sin=_unary("tf.math.special.fresnel_sin", lambda x: sp.fresnel(x)[0], _fresnel(0)),
    spence=_unary("tf.math.special.spence", sp.spence, jsp.spence),
)


def _float_pair(op: str, x: TensorLike, y: TensorLike) -> tuple[Any, Any, Any]:
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    require_float(op, x, y)
    return x, y, xp(x, y)


def reciprocal_no_nan(x: TensorLike, name: str | None = None) -> Tensor:
    """`1 / x`, and 0 where `x` is 0."""
    x = convert_to_tensor(x)
    require_float("tf.math.reciprocal_no_nan", x)
    module = xp(x)
    zero = x == 0
    return module.where(zero, module.zeros_like(x), 1 / module.where(zero, module.ones_like(x), x)).astype(x.dtype)


def xdivy(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x / y`, and 0 where `x` is 0 (even where `y` is 0 or nan)."""
    a, b, module = _float_pair("tf.math.xdivy", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return module.where(a == 0, module.zeros_like(a * b), a / module.where(a == 0, module.ones_like(b), b))


def xlog1py(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x * log1p(y)`, and 0 where `x` is 0 (even where `y` is -1 or nan)."""
    a, b, module = _float_pair("tf.math.xlog1py", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return module.where(a == 0, module.zeros_like(a * b), a * module.log1p(module.where(a == 0, 0, b)))


def truncatediv(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x / y` rounded toward zero (-7 / 2 is -3), as C's integer division; for floats trunc(x / y)."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    _check_int_divisor("tf.truncatediv", y)
    module = xp(x, y)
    if np.result_type(x.dtype, y.dtype).kind not in "iu":
        return module.trunc(x / y)
    if module is jnp:
        target = jnp.result_type(x, y)
        a, b = jnp.broadcast_arrays(jnp.asarray(x, target), jnp.asarray(y, target))
        return jax.lax.div(a, b)
    quotient = np.floor_divide(x, y)
    return np.where((np.mod(x, y) != 0) & ((x < 0) != (y < 0)), quotient + 1, quotient).astype(quotient.dtype)


def truncatemod(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """The remainder of `truncatediv`: it takes the dividend's sign (-7 mod 3 is -1), as C's `fmod`."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    _check_int_divisor("tf.truncatemod", y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp(x, y).fmod(x, y)


def scalar_mul(scalar: TensorLike, x: TensorLike, name: str | None = None) -> Tensor:
    """`scalar * x` in `x`'s dtype; `scalar` must be 0-D (TF's ValueError otherwise)."""
    if np.ndim(scalar) != 0:
        raise ValueError(f"The input scalar must be a 0-D value. Received shape {tuple(np.shape(scalar))}.")
    x = convert_to_tensor(x)
    return x * xp(x).asarray(scalar, x.dtype)


def zero_fraction(value: TensorLike, name: str | None = None) -> Tensor:
    """The fraction of entries equal to 0, as float32 (nan for an empty tensor, as TF's)."""
    x = convert_to_tensor(value)
    module = xp(x)
    with np.errstate(invalid="ignore"):
        return module.mean((x == 0).astype(np.float32)).astype(np.float32) if x.size else \
            module.asarray(np.nan, np.float32)


def _ordered(op: str, x: TensorLike, strict: bool) -> Tensor:
    x = convert_to_tensor(x)
    if np.dtype(x.dtype).kind not in "iufb" and str(x.dtype) != "bfloat16":
        raise TypeError(f"Expected x to be numeric, instead found: {x!r} ({op})")
    module = xp(x)
    flat = module.reshape(x, (-1,))
    return module.all(flat[1:] > flat[:-1]) if strict else module.all(flat[1:] >= flat[:-1])


def is_non_decreasing(x: TensorLike, name: str | None = None) -> Tensor:
    """Whether `x`'s entries (in row-major order) never decrease; True for fewer than two."""
    return _ordered("tf.math.is_non_decreasing", x, strict=False)


def is_strictly_increasing(x: TensorLike, name: str | None = None) -> Tensor:
    """Whether `x`'s entries (in row-major order) always increase; True for fewer than two."""
    return _ordered("tf.math.is_strictly_increasing", x, strict=True)


def polygamma(a: TensorLike, x: TensorLike, name: str | None = None) -> Tensor:
    """The `a`-th derivative of digamma at `x`; nan for a non-integer or negative order `a`."""
    order, at, module = _float_pair("tf.math.polygamma", a, x)
    valid = (order == module.floor(order)) & (order >= 0)
    if module is jnp:
        return jnp.where(valid, jsp.polygamma(jnp.where(valid, order, 0).astype(jnp.int32), at), jnp.nan)
    with np.errstate(all="ignore"):
        return np.where(valid, sp.polygamma(np.where(valid, order, 0), at), np.nan).astype(np.result_type(order, at))


def betainc(a: TensorLike, b: TensorLike, x: TensorLike, name: str | None = None) -> Tensor:
    """The regularized incomplete beta function I_x(a, b)."""
    a, b, x = (convert_to_tensor(v) for v in (a, b, x))
    require_float("tf.math.betainc", a, b, x, complex_ok=False)
    if is_jax(a, b, x):
        return jsp.betainc(a, b, x)
    return np.asarray(sp.betainc(a, b, x)).astype(np.result_type(a, b, x))


ApproxTopK = collections.namedtuple("ApproxTopK", ["values", "indices"])  # TF's result type


def _approx_k(op: str, operand: TensorLike, k: int, axis: int, largest: bool) -> ApproxTopK:
    x = convert_to_tensor(operand)
    require_float(op, x, complex_ok=False)
    axis = int(axis) % x.ndim
    if not 0 <= int(k) <= x.shape[axis]:
        raise ValueError(f"{op}: k={k} must be in [0, {x.shape[axis]}] (the size of dimension {axis})")
    order = descending_order(x if largest else -x, axis)
    indices = xp(x).take(order, xp(x).arange(int(k)), axis=axis)
    return ApproxTopK(xp(x).take_along_axis(x, indices, axis=axis), indices.astype(np.int32))


def approx_max_k(operand: TensorLike, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True,
                 name: str | None = None) -> ApproxTopK:
    """The `k` largest along `reduction_dimension` and their int32 indices: exact top-k, which TF's CPU kernel
    also gives (a valid result for any `recall_target`)."""
    return _approx_k("tf.math.approx_max_k", operand, k, reduction_dimension, largest=True)


def approx_min_k(operand: TensorLike, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True,
                 name: str | None = None) -> ApproxTopK:
    """The `k` smallest along `reduction_dimension` and their int32 indices (exact, as `approx_max_k`)."""
    return _approx_k("tf.math.approx_min_k", operand, k, reduction_dimension, largest=False)


MATH = dict(
    acosh=acosh, asinh=asinh, atanh=atanh, erfc=erfc, erfcinv=erfcinv, reciprocal_no_nan=reciprocal_no_nan,
    xdivy=xdivy, xlog1py=xlog1py, truncatediv=truncatediv, truncatemod=truncatemod, zero_fraction=zero_fraction,
    is_non_decreasing=is_non_decreasing, is_strictly_increasing=is_strictly_increasing, polygamma=polygamma,
    betainc=betainc, bessel_i0e=bessel_i0e, bessel_i1=bessel_i1, bessel_i1e=bessel_i1e, approx_max_k=approx_max_k,
    approx_min_k=approx_min_k, scalar_mul=scalar_mul,
)
TOP_LEVEL = dict(acosh=acosh, asinh=asinh, atanh=atanh, truncatediv=truncatediv, truncatemod=truncatemod,
                 scalar_mul=scalar_mul)
