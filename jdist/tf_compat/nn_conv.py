"""`tf.nn`'s N-d convolutions: `convolution`, `conv3d`, the transposed ones, `atrous_*`, `separable_conv2d`,
`dilation2d` / `erosion2d`, `depth_to_space` / `space_to_depth` and the depthwise convolution's gradients
(`depthwise_conv2d_backprop_input` / `_filter`, by `jax.vjp`).

Convolution is XLA's (`jax.lax.conv_general_dilated`) wherever it runs, numpy back for numpy input, as
`nn_extra.conv2d`. A transposed convolution is TF's definition: the gradient of the forward convolution over an
input of `output_shape`, so SAME and VALID pad as the forward one does, odd sizes included. TF 2.21's rules
(observed): filters are spatial..., in, out (transposed: spatial..., out, in); `data_format` N...C (default) or
NC...; `depth_to_space` takes depth in (row, column, channel) order and refuses NCHW on the CPU;
`dilation2d` adds the filter and takes the maximum (padding counts as -inf), `erosion2d` is
`-dilation2d(-x, reversed filter)`; `atrous_conv2d_transpose` is `conv2d_transpose` with the rate as dilation.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.nn_extra import depthwise_conv2d
from jdist.tf_compat.nn_pooling import Padding, channels_last_of, spatial
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import Tensor, TensorLike

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _numbers(n: int, channels_last: bool) -> tuple[str, str, str]:
    letters = _SPATIAL[n]
    data = f"N{letters}C" if channels_last else f"NC{letters}"
    return data, f"{letters}IO", data


def _pads(padding: Padding, n: int, channels_last: bool) -> str | list[tuple[int, int]]:
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"`padding` must be 'SAME', 'VALID' or explicit [before, after] pairs; got {padding!r}")
        return padding.upper()
    pairs = [(int(a), int(b)) for a, b in padding]
    if len(pairs) != n + 2:
        raise ValueError(f"explicit `padding` needs {n + 2} [before, after] pairs, got {padding!r}")
    return pairs[1:-1] if channels_last else pairs[2:]


def _back(out: jax.Array, *inputs: Any) -> Tensor:
    return out if is_jax(*inputs) else np.asarray(out)


def _forward(x: Any, w: Any, strides: Any, padding: Padding, data_format: str | None, dilations: Any,
             op: str) -> Tensor:
    n = w.ndim - 2
    if n not in _SPATIAL or x.ndim != n + 2:
        raise ValueError(f"tf.nn.{op}: `input` (shape {tuple(x.shape)}) must have rank {n + 2} for filters of "
                         f"shape {tuple(w.shape)} (spatial..., in_channels, out_channels)")
    channels_last = channels_last_of(data_format, n)
    out = jax.lax.conv_general_dilated(
        jnp.asarray(x), jnp.asarray(w), window_strides=spatial(strides, n, "strides", channels_last),
        padding=_pads(padding, n, channels_last), rhs_dilation=spatial(dilations, n, "dilations", channels_last),
        dimension_numbers=_numbers(n, channels_last))
    return _back(out, x, w)


def convolution(input: TensorLike, filters: TensorLike, strides: int | Sequence[int] | None = None,  # noqa: A002
                padding: Padding = "VALID", data_format: str | None = None,
                dilations: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """1-, 2- or 3-d convolution (cross-correlation), the dimension from the filters' rank."""
    x, w = convert_to_tensor(input), convert_to_tensor(filters)
    return _forward(x, w, strides, padding, data_format, dilations, "convolution")


def conv3d(input: TensorLike, filters: TensorLike, strides: int | Sequence[int],  # noqa: A002
           padding: Padding, data_format: str = "NDHWC", dilations: int | Sequence[int] | None = None,
           name: str | None = None) -> Tensor:
    """3-d convolution of NDHWC (or NCDHW) `input` with DHWIO `filters`."""
    x, w = convert_to_tensor(input), convert_to_tensor(filters)
    if w.ndim != 5:
        raise ValueError(f"tf.nn.conv3d: `filters` must be 5-D (depth, height, width, in, out), got shape "
                         f"{tuple(w.shape)}")
    return _forward(x, w, strides, padding, data_format, dilations, "conv3d")


def conv_transpose(input: TensorLike, filters: TensorLike, output_shape: Sequence[int] | TensorLike,  # noqa: A002
                   strides: int | Sequence[int], padding: str = "SAME", data_format: str | None = None,
                   dilations: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """The gradient of `convolution` (filters spatial..., out, in) over an input of `output_shape`, at `input`:
    TF's transposed convolution, for 1, 2 or 3 spatial dimensions; so its padding is the forward convolution's,
    odd output sizes included."""
    return _transpose(input, filters, output_shape, strides, padding, data_format, dilations, "conv_transpose")


def _transpose(input: TensorLike, filters: TensorLike, output_shape: Sequence[int] | TensorLike,  # noqa: A002
               strides: int | Sequence[int], padding: str, data_format: str | None,
               dilations: int | Sequence[int] | None, op: str) -> Tensor:
    x, w = convert_to_tensor(input), convert_to_tensor(filters)
    n = w.ndim - 2
    if n not in _SPATIAL or x.ndim != n + 2:
        raise ValueError(f"tf.nn.{op}: `input` (shape {tuple(x.shape)}) must have rank {n + 2} for "
                         f"filters of shape {tuple(w.shape)} (spatial..., out_channels, in_channels)")
    if is_jax(output_shape) and isinstance(output_shape, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.nn.{op}: `output_shape` must be known when compiling (Python ints)")
    target = tuple(int(d) for d in np.asarray(output_shape).reshape(-1))
    channels_last = channels_last_of(data_format, n)
    if len(target) != n + 2:
        raise ValueError(f"tf.nn.{op}: output_shape {list(target)} must have {n + 2} entries")
    kernel = jnp.asarray(w)
    steps = spatial(strides, n, "strides", channels_last)
    rates = spatial(dilations, n, "dilations", channels_last)
    pads = _pads(padding, n, channels_last)
    numbers = _numbers(n, channels_last)

    def forward(inputs: jax.Array) -> jax.Array:
        return jax.lax.conv_general_dilated(inputs, kernel, window_strides=steps, padding=pads, rhs_dilation=rates,
                                            dimension_numbers=numbers)

    expected = jax.eval_shape(forward, jax.ShapeDtypeStruct(target, kernel.dtype)).shape
    if tuple(expected) != tuple(x.shape):
        raise ValueError(f"tf.nn.{op}: a convolution of output_shape {list(target)} gives "
                         f"{list(expected)}, not the input's {list(x.shape)}")
    _, pullback = jax.vjp(forward, jnp.zeros(target, kernel.dtype))
    (out,) = pullback(jnp.asarray(x, kernel.dtype))
    return _back(out, x, w)


def conv1d_transpose(input: TensorLike, filters: TensorLike, output_shape: Sequence[int] | TensorLike,  # noqa: A002
                     strides: int | Sequence[int], padding: str = "SAME", data_format: str = "NWC",
                     dilations: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """`conv_transpose` over one spatial dimension (filters W, out, in)."""
    return _transpose(input, filters, output_shape, strides, padding, data_format, dilations, "conv1d_transpose")


def conv2d_transpose(input: TensorLike, filters: TensorLike, output_shape: Sequence[int] | TensorLike,  # noqa: A002
                     strides: int | Sequence[int], padding: str = "SAME", data_format: str = "NHWC",
                     dilations: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """`conv_transpose` over two spatial dimensions (filters HW, out, in)."""
    return _transpose(input, filters, output_shape, strides, padding, data_format, dilations, "conv2d_transpose")


def conv3d_transpose(input: TensorLike, filters: TensorLike, output_shape: Sequence[int] | TensorLike,  # noqa: A002
                     strides: int | Sequence[int], padding: str = "SAME", data_format: str = "NDHWC",
                     dilations: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """`conv_transpose` over three spatial dimensions (filters DHW, out, in)."""
    return _transpose(input, filters, output_shape, strides, padding, data_format, dilations, "conv3d_transpose")


def atrous_conv2d(value: TensorLike, filters: TensorLike, rate: int, padding: str, name: str | None = None) -> Tensor:
    """`conv2d` of NHWC `value` with its filter taps `rate` apart, stride 1."""
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    x, w = convert_to_tensor(value), convert_to_tensor(filters)
    return _forward(x, w, 1, padding, "NHWC", int(rate), "atrous_conv2d")


def atrous_conv2d_transpose(value: TensorLike, filters: TensorLike, output_shape: Sequence[int] | TensorLike,
                            rate: int, padding: str, name: str | None = None) -> Tensor:
    """The transpose of `atrous_conv2d`: `conv_transpose` with dilation `rate`, stride 1."""
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    return conv_transpose(value, filters, output_shape, 1, padding, "NHWC", int(rate))


def separable_conv2d(input: TensorLike, depthwise_filter: TensorLike, pointwise_filter: TensorLike,  # noqa: A002
                     strides: Sequence[int], padding: str, data_format: str | None = None,
                     dilations: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """`depthwise_conv2d` then a 1x1 `conv2d` with `pointwise_filter` [1, 1, in * multiplier, out]."""
    form = data_format or "NHWC"
    rates = None if dilations is None else spatial(dilations, 2, "dilations", form == "NHWC")
    middle = depthwise_conv2d(input, depthwise_filter, strides, padding, form, rates)
    point = convert_to_tensor(pointwise_filter)
    if point.ndim != 4 or point.shape[:2] != (1, 1):
        raise ValueError(f"tf.nn.separable_conv2d: pointwise_filter must be [1, 1, in * multiplier, out], got shape "
                         f"{tuple(point.shape)}")
    return _forward(middle, point, 1, "VALID", form, None, "separable_conv2d")


def _blocks(op: str, x: Any, block_size: int, data_format: str) -> int:
    if data_format != "NHWC":
        raise ValueError(f"tf.nn.{op}: jdist (as TF on the CPU) takes NHWC input, got data_format={data_format!r}")
    if x.ndim != 4:
        raise ValueError(f"tf.nn.{op}: input must be 4-D NHWC, got shape {tuple(x.shape)}")
    size = int(block_size)
    if size < 2:
        raise ValueError(f"Value for attr 'block_size' of {size} must be at least 2")
    return size


def depth_to_space(input: TensorLike, block_size: int, data_format: str = "NHWC",  # noqa: A002
                   name: str | None = None) -> Tensor:
    """Moves depth into `block_size` x `block_size` spatial blocks (depth read as row, column, channel)."""
    x = convert_to_tensor(input)
    size = _blocks("depth_to_space", x, block_size, data_format)
    batch, height, width, depth = x.shape
    if depth % (size * size):
        raise InvalidArgumentError(None, None, f"Input depth dimension {depth} should be divisible by: {size * size}")
    module = xp(x)
    out = module.reshape(x, (batch, height, width, size, size, depth // (size * size)))
    out = module.transpose(out, (0, 1, 3, 2, 4, 5))
    return module.reshape(out, (batch, height * size, width * size, depth // (size * size)))


def space_to_depth(input: TensorLike, block_size: int, data_format: str = "NHWC",  # noqa: A002
                   name: str | None = None) -> Tensor:
    """Moves each `block_size` x `block_size` spatial block into depth (row, column, channel order)."""
    x = convert_to_tensor(input)
    size = _blocks("space_to_depth", x, block_size, data_format)
    batch, height, width, depth = x.shape
    if height % size or width % size:
        raise InvalidArgumentError(None, None, f"Image width {width} and height {height} should be divisible by "
                                               f"block_size: {size}")
    module = xp(x)
    out = module.reshape(x, (batch, height // size, size, width // size, size, depth))
    out = module.transpose(out, (0, 1, 3, 2, 4, 5))
    return module.reshape(out, (batch, height // size, width // size, size * size * depth))


def dilation2d(input: TensorLike, filters: TensorLike, strides: Sequence[int], padding: str,  # noqa: A002
               data_format: str, dilations: Sequence[int], name: str | None = None) -> Tensor:
    """Grayscale morphological dilation: the maximum over the window of `input + filters` (filters H, W, C);
    padding counts as -inf."""
    x, w = convert_to_tensor(input), convert_to_tensor(filters)
    if data_format != "NHWC":
        raise ValueError(f"tf.nn.dilation2d: data_format must be 'NHWC', got {data_format!r}")
    if x.ndim != 4 or w.ndim != 3 or w.shape[2] != x.shape[3]:
        raise ValueError(f"tf.nn.dilation2d: input must be NHWC and filters [height, width, channels] with the "
                         f"same channels; got shapes {tuple(x.shape)} and {tuple(w.shape)}")
    steps, rates = spatial(strides, 2, "strides", True), spatial(dilations, 2, "rates", True)
    data, kernel = jnp.asarray(x), jnp.asarray(w)
    taps = [((k - 1) * r + 1) for k, r in zip(w.shape[:2], rates)]
    mode = _pads(padding, 2, True)
    pads = mode if not isinstance(mode, str) else jax.lax.padtype_to_pads(x.shape[1:3], taps, steps, mode)
    low = -jnp.inf if data.dtype.kind == "f" else jnp.iinfo(data.dtype).min
    padded = jnp.pad(data, [(0, 0), *pads, (0, 0)], constant_values=low)
    out_h = (padded.shape[1] - taps[0]) // steps[0] + 1
    out_w = (padded.shape[2] - taps[1]) // steps[1] + 1
    best = None
    for dy in range(w.shape[0]):
        for dx in range(w.shape[1]):
            y0, x0 = dy * rates[0], dx * rates[1]
            window = padded[:, y0:y0 + (out_h - 1) * steps[0] + 1:steps[0],
                            x0:x0 + (out_w - 1) * steps[1] + 1:steps[1], :] + kernel[dy, dx]
            best = window if best is None else jnp.maximum(best, window)
    return _back(jnp.asarray(best), x, w)


def erosion2d(value: TensorLike, filters: TensorLike, strides: Sequence[int], padding: str,
              data_format: str, dilations: Sequence[int], name: str | None = None) -> Tensor:
    """Grayscale morphological erosion: `-dilation2d(-value, filters reversed in height and width)`."""
    x, w = convert_to_tensor(value), convert_to_tensor(filters)
    module = xp(x, w)
    return -cast(Any, dilation2d(-x, module.flip(w, (0, 1)), strides, padding, data_format, dilations))


def _sizes(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.nn.depthwise_conv2d_backprop_*: `{what}` must be known when compiling (Python ints)")
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def depthwise_conv2d_backprop_input(input_sizes: Sequence[int] | TensorLike, filter: TensorLike,  # noqa: A002
                                    out_backprop: TensorLike, strides: Sequence[int], padding: Padding,
                                    data_format: str = "NHWC", dilations: Sequence[int] | None = None,
                                    name: str | None = None) -> Tensor:
    """The gradient of `depthwise_conv2d` with respect to its input (of shape `input_sizes`)."""
    w, grad = convert_to_tensor(filter), convert_to_tensor(out_backprop)
    shape = _sizes(input_sizes, "input_sizes")
    _, pullback = jax.vjp(lambda x: jnp.asarray(depthwise_conv2d(x, jnp.asarray(w), strides, padding, data_format,
                                                                 dilations)), jnp.zeros(shape, w.dtype))
    return _back(pullback(jnp.asarray(grad, w.dtype))[0], w, grad)


def depthwise_conv2d_backprop_filter(input: TensorLike, filter_sizes: Sequence[int] | TensorLike,  # noqa: A002
                                     out_backprop: TensorLike, strides: Sequence[int], padding: Padding,
                                     data_format: str = "NHWC", dilations: Sequence[int] | None = None,
                                     name: str | None = None) -> Tensor:
    """The gradient of `depthwise_conv2d` with respect to its filter (of shape `filter_sizes`)."""
    x, grad = convert_to_tensor(input), convert_to_tensor(out_backprop)
    shape = _sizes(filter_sizes, "filter_sizes")
    _, pullback = jax.vjp(lambda w: jnp.asarray(depthwise_conv2d(jnp.asarray(x), w, strides, padding, data_format,
                                                                 dilations)), jnp.zeros(shape, x.dtype))
    return _back(pullback(jnp.asarray(grad, x.dtype))[0], x, grad)


NN: dict[str, Any] = dict(
    convolution=convolution, conv3d=conv3d, conv_transpose=conv_transpose, conv1d_transpose=conv1d_transpose,
    conv2d_transpose=conv2d_transpose, conv3d_transpose=conv3d_transpose, atrous_conv2d=atrous_conv2d,
    atrous_conv2d_transpose=atrous_conv2d_transpose,
    separable_conv2d=separable_conv2d, depth_to_space=depth_to_space, space_to_depth=space_to_depth,
    dilation2d=dilation2d, erosion2d=erosion2d, depthwise_conv2d_backprop_input=depthwise_conv2d_backprop_input,
    depthwise_conv2d_backprop_filter=depthwise_conv2d_backprop_filter,
)
