"""More of `tf.nn`: activations (`gelu`, `silu`, `leaky_relu`, `elu`, `selu`), `dropout`, `conv2d`, pooling.

Activations run on numpy or JAX as `ops`; convolution and pooling are XLA's (`jax.lax`) wherever they run, and
give numpy back for numpy input. TF's rules, observed in TF 2.21: `leaky_relu`'s alpha is 0.2 and it casts ints to
float32; `gelu`, `elu`, `selu` and `dropout` refuse ints; `dropout` keeps each entry with probability
`1 - rate` and scales kept entries by `1 / (1 - rate)`, with `rate` in [0, 1); `avg_pool2d` with SAME padding
averages the entries inside the input only.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

from jdist.strategy import context
from jdist.tf_compat import traced_random
from jdist.tf_compat.math_ops import erf, require_float, softplus
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.tf_compat.scans import l2_normalize
from jdist.typing import ArrayLike, ShapeLike, Tensor, TensorLike

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def gelu(features: TensorLike, approximate: bool = False, name: str | None = None) -> Tensor:
    """`x * Phi(x)` (the normal CDF, through erf), or its tanh approximation when `approximate`."""
    x = convert_to_tensor(features)
    if np.dtype(x.dtype).kind != "f" and x.dtype != jnp.bfloat16:
        raise ValueError(f"`features.dtype` must be a floating point tensor.Received:features.dtype={x.dtype}")
    module = xp(x)
    if approximate:
        inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + module.tanh(inner))).astype(x.dtype)
    cdf = cast(ArrayLike, erf(x / np.sqrt(2).astype(x.dtype)))
    return (0.5 * x * (1 + cdf)).astype(x.dtype)


def silu(features: TensorLike, beta: float = 1.0) -> Tensor:
    """`x * sigmoid(beta * x)` (`tf.nn.swish` is the same op)."""
    x = convert_to_tensor(features)
    require_float("tf.nn.silu", x)
    return (x / (1 + xp(x).exp(-beta * x))).astype(x.dtype)


swish = silu


def leaky_relu(features: TensorLike, alpha: float = 0.2, name: str | None = None) -> Tensor:
    x = convert_to_tensor(features)
    if np.dtype(x.dtype).kind in "iu":
        x = x.astype(np.float32)
    return xp(x).where(x > 0, x, alpha * x).astype(x.dtype)


def elu(features: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(features)
    require_float("tf.nn.elu", x)
    module = xp(x)
    # the negative side reads x only where x <= 0 (not `minimum(x, 0)`, whose tie at 0 JAX halves): TF's slope 1 at 0
    return module.where(x > 0, x, module.expm1(module.where(x > 0, 0, x))).astype(x.dtype)


def selu(features: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(features)
    require_float("tf.nn.selu", x)
    module = xp(x)
    negative = _SELU_ALPHA * module.expm1(module.where(x < 0, x, 0))
    # x = 0 takes the positive side (observed, TF 2.21: the gradient at 0 is the scale, 1.050701)
    return (_SELU_SCALE * module.where(x < 0, negative, x)).astype(x.dtype)


def dropout(x: TensorLike, rate: float, noise_shape: ShapeLike | None = None, seed: Any = None,
            name: str | None = None) -> Tensor:
    """Zero each entry with probability `rate` and scale the rest by `1 / (1 - rate)`.

    `seed` on the host: an int makes the sequence of masks repeat from run to run (successive calls with one seed
    give different masks, as TF's: observed in TF 2.21), None draws fresh ones. On JAX values `seed` is a
    `jax.random` key (or an int, eagerly), and the mask is a function of it; inside `strategy.run` each replica
    folds in its replica id, so replicas draw different masks as TF's do. Inside compiled code with an int or no
    seed, the mask is drawn on the host on every run (jdist.tf_compat.traced_random): a new one each step.
    """
    x = convert_to_tensor(x)
    if np.dtype(x.dtype).kind != "f" and x.dtype != jnp.bfloat16:
        raise ValueError(f"`x.dtype` must be a floating point tensor as `x` will be scaled. Received: "
                         f"x_dtype={x.dtype}")
    if is_jax(rate) or not 0 <= float(rate) < 1:
        raise ValueError(f"`rate` must be a scalar tensor or a float in the range [0, 1). Received: rate={rate}")
    shape = tuple(x.shape) if noise_shape is None else tuple(int(s) for s in np.asarray(noise_shape).reshape(-1))
    if rate == 0:
        return x
    if is_jax(x) or is_jax(seed):
        if isinstance(x, jax.core.Tracer) and not is_jax(seed):  # TF draws a new mask at every step: a host
            keep = _host_keep(shape, float(rate), seed)  # callback per run (traced_random), per replica
            module = xp(x, keep)
            return module.where(keep, x * np.asarray(1 / (1 - float(rate)), dtype=x.dtype), module.zeros_like(x))
        key = _key(seed)
        replica = context.get_replica_context() if context.in_replica_context() else None
        if replica is not None:  # each replica its own mask, as TF's replicas draw their own
            key = jax.random.fold_in(key, replica.replica_id_in_sync_group)
        keep = jax.random.bernoulli(key, 1 - float(rate), shape)
    else:
        rng = np.random.default_rng(None if seed is None else [int(seed), _next_call(int(seed))])
        keep = rng.random(shape) >= rate
    module = xp(x, keep)
    scale = np.asarray(1 / (1 - float(rate)), dtype=x.dtype)
    return module.where(keep, x * scale, module.zeros_like(x))


@traced_random.per_call
def _host_keep(shape: tuple, rate: float, seed: Any) -> np.ndarray:
    """Dropout's keep mask drawn on the host inside compiled code (traced_random's generator for `seed`)."""
    rng = traced_random.generator(None if seed is None else int(seed)) or np.random.default_rng()
    return rng.random(shape) >= rate


_CALLS: dict[int, int] = {}


def _next_call(seed: int) -> int:
    """How many host dropouts used `seed` before: with the seed, it picks this call's mask."""
    _CALLS[seed] = _CALLS.get(seed, -1) + 1
    return _CALLS[seed]


def _key(seed: Any) -> jax.Array:
    if seed is None:
        return jax.random.key(int(np.random.default_rng().integers(2**31)))
    if isinstance(seed, (int, np.integer)):
        return jax.random.key(int(seed))
    return seed


def _four(value: int | Sequence[int], what: str) -> tuple[int, int]:
    """TF's 1-, 2- or 4-long strides / ksize / dilations, as the two spatial values."""
    values = [int(v) for v in np.asarray(value).reshape(-1)]
    if len(values) == 1:
        return values[0], values[0]
    if len(values) == 2:
        return values[0], values[1]
    if len(values) == 4 and values[0] == values[3] == 1:
        return values[1], values[2]
    raise ValueError(f"`{what}` must be an int or a list of 1, 2 or 4 ints (batch and channel entries 1); "
                     f"got {value!r}")


def _padding(padding: str | Sequence[Sequence[int]], channels_last: bool) -> str | list[tuple[int, int]]:
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"`padding` must be 'SAME', 'VALID' or explicit [[0, 0], [top, bottom], [left, "
                             f"right], [0, 0]] pairs; got {padding!r}")
        return padding.upper()
    pairs = [tuple(int(v) for v in pair) for pair in padding]
    spatial = pairs[1:3] if channels_last else pairs[2:4]
    return [(a, b) for a, b in spatial]


def _layout(data_format: str) -> bool:
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"`data_format` must be 'NHWC' or 'NCHW', got {data_format!r}")
    return data_format == "NHWC"


def _as_input(*values: Tensor) -> bool:
    return not is_jax(*values)


def conv2d(input: TensorLike, filters: TensorLike, strides: int | Sequence[int],  # noqa: A002
           padding: str | Sequence[Sequence[int]], data_format: str = "NHWC",
           dilations: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """2-D convolution (cross-correlation, as TF's) of NHWC (or NCHW) `input` with HWIO `filters`."""
    x, w = convert_to_tensor(input), convert_to_tensor(filters)
    channels_last = _layout(data_format)
    on_host = _as_input(x, w)
    layout = ("NHWC", "HWIO", "NHWC") if channels_last else ("NCHW", "HWIO", "NCHW")
    out = jax.lax.conv_general_dilated(
        jnp.asarray(x), jnp.asarray(w), window_strides=_four(strides, "strides"),
        padding=_padding(padding, channels_last), rhs_dilation=_four(1 if dilations is None else dilations,
                                                                     "dilations"),
        dimension_numbers=layout)
    return np.asarray(out) if on_host else out


def conv1d(input: TensorLike, filters: TensorLike, stride: int | Sequence[int],  # noqa: A002
           padding: str | Sequence[Sequence[int]], data_format: str = "NWC", dilations: int | None = None,
           name: str | None = None) -> Tensor:
    """1-D convolution of NWC `input` with WIO `filters`: `conv2d` over a height of 1, as TF computes it."""
    if data_format not in ("NWC", "NCW"):
        raise ValueError(f"tf.nn.conv1d: data_format must be 'NWC' or 'NCW', got {data_format!r}")
    x, w = convert_to_tensor(input), convert_to_tensor(filters)
    module = xp(x, w)
    steps = [int(v) for v in np.asarray(stride).reshape(-1)]  # an int, [s] or TF's [1, s, 1]
    step = steps[1] if len(steps) == 3 else steps[0]
    channels_last = data_format == "NWC"
    lifted = module.expand_dims(x, 1 if channels_last else 2)
    out = conv2d(lifted, module.expand_dims(w, 0), (1, step), padding, "NHWC" if channels_last else "NCHW",
                 None if dilations is None else (1, int(dilations)))
    return xp(out).squeeze(out, 1 if channels_last else 2)


def depthwise_conv2d(input: TensorLike, filter: TensorLike, strides: Sequence[int],  # noqa: A002
                     padding: str | Sequence[Sequence[int]], data_format: str = "NHWC",
                     dilations: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """Each input channel convolved with its own `channel_multiplier` filters (HW, C, M): C * M outputs."""
    x, w = convert_to_tensor(input), convert_to_tensor(filter)
    channels_last = _layout(data_format)
    on_host = _as_input(x, w)
    height, width, channels, multiplier = w.shape
    kernel = jnp.reshape(jnp.asarray(w), (height, width, 1, channels * multiplier))
    layout = ("NHWC", "HWIO", "NHWC") if channels_last else ("NCHW", "HWIO", "NCHW")
    out = jax.lax.conv_general_dilated(
        jnp.asarray(x), kernel, window_strides=_four(strides, "strides"), padding=_padding(padding, channels_last),
        rhs_dilation=_four(1 if dilations is None else dilations, "dilations"), dimension_numbers=layout,
        feature_group_count=channels)
    return np.asarray(out) if on_host else out


def _pool(kind: str, x: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int], padding: str,
          data_format: str) -> Tensor:
    value = convert_to_tensor(x)
    channels_last = _layout(data_format)
    on_host = _as_input(value)
    if kind == "avg":
        require_float("tf.nn.avg_pool2d", value)
    window, step = _four(ksize, "ksize"), _four(strides, "strides")
    dims = (1, *window, 1) if channels_last else (1, 1, *window)
    steps = (1, *step, 1) if channels_last else (1, 1, *step)
    pads = _padding(padding, channels_last)
    if not isinstance(pads, str):
        pads = [(0, 0), *pads, (0, 0)] if channels_last else [(0, 0), (0, 0), *pads]
    data = jnp.asarray(value)
    if kind == "max":
        low = -jnp.inf if data.dtype.kind == "f" else jnp.iinfo(data.dtype).min
        out = jax.lax.reduce_window(data, jnp.asarray(low, data.dtype), jax.lax.max, dims, steps, pads)
    else:
        total = jax.lax.reduce_window(data, jnp.zeros((), data.dtype), jax.lax.add, dims, steps, pads)
        ones = jnp.ones(data.shape, data.dtype)
        count = jax.lax.reduce_window(ones, jnp.zeros((), data.dtype), jax.lax.add, dims, steps, pads)
        out = total / count
    return np.asarray(out) if on_host else out


def max_pool2d(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
               padding: str, data_format: str = "NHWC", name: str | None = None) -> Tensor:
    return _pool("max", input, ksize, strides, padding, data_format)


def avg_pool2d(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
               padding: str, data_format: str = "NHWC", name: str | None = None) -> Tensor:
    """The mean of each window; with SAME padding over the entries inside the input only, as TF's."""
    return _pool("avg", input, ksize, strides, padding, data_format)


NN_EXTRA = dict(
    gelu=gelu, silu=silu, swish=swish, leaky_relu=leaky_relu, elu=elu, selu=selu, softplus=softplus,
    dropout=dropout, conv2d=conv2d, max_pool2d=max_pool2d, avg_pool2d=avg_pool2d, l2_normalize=l2_normalize,
    conv1d=conv1d, depthwise_conv2d=depthwise_conv2d,
)
