"""TF's elementwise `tf.math` ops (trigonometry, `rsqrt`, `floormod`, `xlogy`, ...) on numpy or JAX (see `ops`).

TF's rules, observed in TF 2.21: the transcendental ops take floating-point (or complex) input only (`tf.math.sin`
of int32 is an error, not a float64 result), so jdist raises a TypeError naming the cast; `truediv` of int32 or
int64 is float64 and of 8/16-bit ints float32; `floordiv` and `floormod` round toward minus infinity (the
remainder takes the divisor's sign, as Python's `%`); float division by zero gives inf/nan, integer division by
zero is an error (on the host; inside compiled code XLA gives an undefined value).
"""
from __future__ import annotations

from collections.abc import Sequence

import jax.scipy.special as jsp
import numpy as np
import scipy.special as sp

from jdist.tf_compat import binary_operands, division
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, is_jax, require_float, xp
from jdist.typing import ArrayLike, Tensor, TensorLike


def _float_unary(tf_name: str, numpy_name: str):
    def op(x: TensorLike, name: str | None = None) -> Tensor:
        x = convert_to_tensor(x)
        require_float(f"tf.math.{tf_name}", x)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # nan / inf as TF's, no warning
            return getattr(xp(x), numpy_name)(x)

    op.__name__ = op.__qualname__ = tf_name
    return op


sin, cos, tan = _float_unary("sin", "sin"), _float_unary("cos", "cos"), _float_unary("tan", "tan")
asin, acos, atan = _float_unary("asin", "arcsin"), _float_unary("acos", "arccos"), _float_unary("atan", "arctan")
sinh, cosh = _float_unary("sinh", "sinh"), _float_unary("cosh", "cosh")
log1p, expm1 = _float_unary("log1p", "log1p"), _float_unary("expm1", "expm1")


def floor(x: TensorLike, name: str | None = None) -> Tensor:
    """`tf.floor` / `tf.math.floor`: float input only, as TF's."""
    x = convert_to_tensor(x)
    require_float("tf.math.floor", x)
    return xp(x).floor(x)


def ceil(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    require_float("tf.math.ceil", x)
    return xp(x).ceil(x)


def atan2(y: TensorLike, x: TensorLike, name: str | None = None) -> Tensor:
    """`tf.math.atan2(y, x)`: the angle of the point (x, y); `y` first, as TF's."""
    y, x = binary_operands.matching(y, x, "Atan2")
    require_float("tf.math.atan2", y, x)
    return xp(y, x).arctan2(y, x)


def rsqrt(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    require_float("tf.math.rsqrt", x)
    module = xp(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1 / module.sqrt(x)).astype(x.dtype)


def reciprocal(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    require_float("tf.math.reciprocal", x)
    with np.errstate(divide="ignore"):
        return (1 / x).astype(x.dtype)


def erf(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    require_float("tf.math.erf", x)
    return jsp.erf(x) if is_jax(x) else sp.erf(x).astype(x.dtype)


def lgamma(x: TensorLike, name: str | None = None) -> Tensor:
    """`log|Gamma(x)|` (TF's: inf at the poles 0, -1, ...)."""
    x = convert_to_tensor(x)
    require_float("tf.math.lgamma", x)
    return jsp.gammaln(x) if is_jax(x) else sp.gammaln(x).astype(x.dtype)


def softplus(features: TensorLike, name: str | None = None) -> Tensor:
    """`log(1 + exp(x))`, stable for large |x| (softplus(100) is 100, softplus(-100) is 0)."""
    x = convert_to_tensor(features)
    require_float("tf.math.softplus", x)
    return xp(x).logaddexp(x, 0).astype(x.dtype)


def log_sigmoid(x: TensorLike, name: str | None = None) -> Tensor:
    """`log(sigmoid(x))` as `-softplus(-x)`: no underflow to log(0) for very negative x."""
    x = convert_to_tensor(x)
    require_float("tf.math.log_sigmoid", x)
    return -xp(x).logaddexp(-x, 0).astype(x.dtype)


def xlogy(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x * log(y)`, 0 where x is 0 (even where y is 0 or negative)."""
    x, y = binary_operands.matching(x, y, "Xlogy")
    require_float("tf.math.xlogy", x, y)
    module = xp(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return module.where(x == 0, module.zeros_like(x * y), x * module.log(module.where(x == 0, 1, y)))


def squared_difference(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    x, y = binary_operands.matching(x, y, "SquaredDifference")
    difference = x - y
    return difference * difference


def truediv(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`tf.math.truediv`: `y` converted towards `x`'s dtype, one dtype required (`jdist.tf_compat.division`)."""
    return division.true_divide(*division.truediv_operands(x, y))


def realdiv(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`tf.realdiv`: division of floats (TF has no int kernel on the CPU; use `tf.math.truediv` for ints)."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    require_float("tf.realdiv", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp(x, y).true_divide(x, y)


class IntegerDivisionByZero(InvalidArgumentError, ZeroDivisionError):
    """TF's InvalidArgumentError for an integer divided by zero, also Python's ZeroDivisionError."""


def _check_int_divisor(op: str, y: ArrayLike) -> None:
    if np.dtype(y.dtype).kind in "iu" and not is_jax(y) and np.any(np.asarray(y) == 0):
        raise IntegerDivisionByZero(None, None, f"{op}: Integer division by zero (TF 2.21's InvalidArgumentError); "
                                                "mask the zero divisors or divide floats")


def floordiv(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x // y`, rounding toward minus infinity (-7 // 2 is -4)."""
    x, y = binary_operands.matching(x, y, "FloorDiv")
    _check_int_divisor("tf.math.floordiv", y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp(x, y).floor_divide(x, y)


def floormod(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x % y` with the divisor's sign (-7 mod 3 is 2, 7 mod -3 is -2), as Python's `%`."""
    x, y = binary_operands.matching(x, y, "FloorMod")
    _check_int_divisor("tf.math.floormod", y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp(x, y).mod(x, y)


mod = floormod


def multiply_no_nan(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x * y`, 0 where y is 0 even if x is inf or nan."""
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    require_float("tf.math.multiply_no_nan", x, y)
    module = xp(x, y)
    with np.errstate(invalid="ignore"):
        return module.where(y == 0, module.zeros_like(x * y), x * y)


def logical_xor(x: TensorLike, y: TensorLike, name: str = "LogicalXor") -> Tensor:
    x, y = convert_to_tensor(x), convert_to_tensor(y)
    return xp(x, y).logical_xor(x, y)


def is_inf(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    require_float("tf.math.is_inf", x)
    return xp(x).isinf(x)


def polyval(coeffs: Sequence[TensorLike], x: TensorLike, name: str | None = None) -> Tensor:
    """`coeffs[0] * x**(n-1) + ... + coeffs[n-1]` by Horner's rule; 0 for no coefficients, as TF's."""
    x = convert_to_tensor(x)
    if len(coeffs) == 0:
        return xp(x).zeros_like(x)
    total = convert_to_tensor(coeffs[0]) + xp(x).zeros_like(x)
    for c in coeffs[1:]:
        total = total * x + convert_to_tensor(c)
    return total


ELEMENTWISE = dict(
    sin=sin, cos=cos, tan=tan, asin=asin, acos=acos, atan=atan, atan2=atan2, sinh=sinh, cosh=cosh, floor=floor,
    ceil=ceil, rsqrt=rsqrt, reciprocal=reciprocal, log1p=log1p, expm1=expm1, erf=erf, lgamma=lgamma,
    softplus=softplus, log_sigmoid=log_sigmoid, xlogy=xlogy, squared_difference=squared_difference, truediv=truediv,
    floordiv=floordiv, floormod=floormod, mod=mod, multiply_no_nan=multiply_no_nan, logical_xor=logical_xor,
    is_inf=is_inf, polyval=polyval,
)
