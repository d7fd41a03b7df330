"""TF's gradients at the kinks of `maximum`, `minimum`, `abs`, `relu`, `relu6`, `clip_by_value`, and of `sign`.

JAX splits a tie of `maximum` / `minimum` evenly between the operands (0.5 each) and gives `abs` slope 1 at
0. TF's registered gradients decide each kink for one side (observed, TF 2.21, `tf.GradientTape` eagerly and
in `tf.function` alike): a tie of `tf.maximum(x, y)` goes wholly to x (x >= y), of `tf.minimum(x, y)` to x
(x <= y); `abs`, `relu` and `relu6` have slope 0 at their kinks (0, and 0 and 6); `clip_by_value` is
`maximum(minimum(t, max), min)`, so t gets the whole gradient at both bounds. A loss such as
`reduce_mean(abs(y - pred))` at an exact fit, or `relu` of zero padding, therefore trains as in TF. The
operand that loses a tie gets an exact 0 (not 0 * inf = NaN when a `sqrt` follows). Only JAX floating values
come here; numpy and integer values have no gradient and keep their ops.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def _same_shape(x: Any, y: Any) -> tuple[Any, Any]:
    """Both operands at their common dtype and broadcast shape (JAX reduces the broadcast's gradient)."""
    dtype = jnp.result_type(x, y)
    a, b = jnp.broadcast_arrays(jnp.asarray(x, dtype), jnp.asarray(y, dtype))
    return a, b


def _tie_to_x(op: Any, x_wins: Any) -> Any:
    """`op(x, y)` whose gradient goes wholly to x where `x_wins(x, y)` (a tie included), else to y."""
    @jax.custom_jvp
    def tied(x: Any, y: Any) -> Any:
        return op(x, y)

    @tied.defjvp
    def tied_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        x, y = primals
        dx, dy = tangents
        return op(x, y), jnp.where(x_wins(x, y), dx, dy)

    return tied


_maximum = _tie_to_x(jnp.maximum, jnp.greater_equal)
_minimum = _tie_to_x(jnp.minimum, jnp.less_equal)


def _with_tangent(op: Any, tangent: Any) -> Any:
    """`op(x)` whose tangent is `tangent(x, dx)`: TF's registered gradient, at the kinks too."""
    @jax.custom_jvp
    def kinked(x: Any) -> Any:
        return op(x)

    @kinked.defjvp
    def kinked_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        (x,), (dx,) = primals, tangents
        return op(x), tangent(x, dx)

    return kinked


_abs = _with_tangent(jnp.abs, lambda x, dx: jnp.sign(x) * dx)
_relu = _with_tangent(lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)),
                      lambda x, dx: jnp.where(x > 0, dx, jnp.zeros_like(dx)))
_relu6 = _with_tangent(lambda x: jnp.clip(x, jnp.zeros((), x.dtype), jnp.asarray(6, x.dtype)),
                       lambda x, dx: jnp.where((x > 0) & (x < 6), dx, jnp.zeros_like(dx)))
# sign's tangent reads dx: connected (a zero gradient, as TF's), not None
_sign = _with_tangent(jnp.sign, lambda x, dx: jnp.zeros_like(dx) * dx)


def _differentiable(*values: Any) -> bool:
    return all(jnp.issubdtype(jnp.result_type(v), jnp.floating) for v in values)


def maximum(x: Any, y: Any) -> Any:
    """`tf.maximum` on JAX values: a tie's gradient goes to x."""
    return _maximum(*_same_shape(x, y)) if _differentiable(x, y) else jnp.maximum(x, y)


def minimum(x: Any, y: Any) -> Any:
    """`tf.minimum` on JAX values: a tie's gradient goes to x."""
    return _minimum(*_same_shape(x, y)) if _differentiable(x, y) else jnp.minimum(x, y)


def absolute(x: Any) -> Any:
    """`tf.abs` on JAX values: slope 0 at 0 (TF's gradient is sign(x))."""
    return _abs(x) if _differentiable(x) else jnp.abs(x)


def sign(x: Any) -> Any:
    """`tf.sign` on JAX values: a zero gradient, not None (TF registers one for Sign, not for Round or Floor)."""
    return _sign(x) if _differentiable(x) else jnp.sign(x)


def relu(x: Any) -> Any:
    """`tf.nn.relu` on JAX values: slope 0 at 0."""
    return _relu(x) if _differentiable(x) else jnp.maximum(x, 0).astype(x.dtype)


def relu6(x: Any) -> Any:
    """`tf.nn.relu6` on JAX values: slope 1 strictly between 0 and 6 only."""
    return _relu6(x) if _differentiable(x) else jnp.clip(x, 0, 6).astype(x.dtype)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any) -> Any:
    """`tf.clip_by_value` on JAX values, as TF composes it: `maximum(minimum(t, max), min)`."""
    low, high = jnp.asarray(clip_value_min, t.dtype), jnp.asarray(clip_value_max, t.dtype)
    if not _differentiable(t):
        return jnp.clip(t, low, high)
    return maximum(minimum(t, high), low)
