"""`tf.image`'s neighbourhood ops: `sobel_edges`, `image_gradients`, `total_variation`, `extract_patches` and
`transpose`.

Computed with numpy on the host and `jax.numpy` on JAX values (shifted slices, no convolution), as `image_ops`.
TF 2.21's rules (observed): `sobel_edges` takes a float 4-D batch, pads by reflection and stacks the vertical
then the horizontal response on a new last axis; `image_gradients` takes a 4-D batch, keeps the dtype and puts
0 in the last row (dy) and column (dx); `total_variation` sums absolute neighbour differences per image (a
scalar for one image); `extract_patches` lays each patch out as (row, column, channel) in depth, SAME padding
with zeros; `transpose` swaps height and width.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.image_ops import at_least_3d
from jdist.tf_compat.ops import convert_to_tensor, require_float, xp
from jdist.typing import Tensor, TensorLike

_SOBEL_Y = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float32)


def _batch(op: str, image: TensorLike) -> Any:
    image = convert_to_tensor(image)
    if image.ndim != 4:
        raise ValueError(f"{op} expects a 4D tensor [batch_size, h, w, d], not {tuple(image.shape)}.")
    return image


def sobel_edges(image: TensorLike) -> Tensor:
    """The Sobel responses [batch, height, width, channels, 2]: vertical (dy) then horizontal (dx)."""
    x: Any = _batch("sobel_edges", image)
    require_float("tf.image.sobel_edges", x, complex_ok=False)
    module = xp(x)
    height, width = x.shape[1:3]
    padded = module.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect")
    out = []
    for kernel in (_SOBEL_Y, _SOBEL_Y.T):
        total = module.zeros(x.shape, x.dtype)
        for dy in range(3):
            for dx in range(3):
                if kernel[dy, dx]:
                    total = total + padded[:, dy:dy + height, dx:dx + width, :] * np.asarray(kernel[dy, dx],
                                                                                               x.dtype)
        out.append(total)
    return module.stack(out, axis=-1)


def image_gradients(image: TensorLike) -> tuple[Tensor, Tensor]:
    """(dy, dx): `image[y + 1] - image[y]` and `image[x + 1] - image[x]`, 0 in the last row / column."""
    x: Any = _batch("image_gradients", image)
    module = xp(x)
    dy = x[:, 1:] - x[:, :-1]
    dx = x[:, :, 1:] - x[:, :, :-1]
    dy = module.concatenate([dy, module.zeros_like(x[:, :1])], axis=1)
    dx = module.concatenate([dx, module.zeros_like(x[:, :, :1])], axis=2)
    return dy.astype(x.dtype), dx.astype(x.dtype)


def total_variation(images: TensorLike, name: str | None = None) -> Tensor:
    """The sum of absolute differences between neighbouring pixels, per image (a scalar for a 3-D image)."""
    x: Any = convert_to_tensor(images)
    if x.ndim not in (3, 4):
        raise ValueError("'images' must be either 3 or 4-dimensional.")
    if np.dtype(x.dtype) == np.uint8 or np.dtype(x.dtype).kind == "u" or x.dtype == bool:
        raise InvalidArgumentError(None, None, f"Value for attr 'T' of {np.dtype(x.dtype).name} is not in the "
                                               "list of allowed values: bfloat16, half, float, double, int8, int16, "
                                               "int32, int64 [Op:Abs]")
    module = xp(x)
    axes = (-3, -2, -1)
    rows = module.abs(x[..., 1:, :, :] - x[..., :-1, :, :])
    cols = module.abs(x[..., :, 1:, :] - x[..., :, :-1, :])
    return (module.sum(rows, axis=axes) + module.sum(cols, axis=axes)).astype(x.dtype)


def transpose(image: TensorLike, name: str | None = None) -> Tensor:
    """Each image with height and width swapped."""
    image = at_least_3d("transpose", image)
    return xp(image).swapaxes(image, -3, -2)


def _four(value: Sequence[int], what: str) -> tuple[int, int]:
    values = [int(v) for v in np.asarray(value).reshape(-1)]
    if len(values) != 4:
        raise InvalidArgumentError(None, None, f"Length for attr '{what}' of {len(values)} must be at least "
                                               "minimum 4")
    if values[0] != 1 or values[3] != 1:
        raise InvalidArgumentError(None, None, f"tf.image.extract_patches: {what} {values} must be 1 in the batch "
                                               "and depth dimensions")
    return values[1], values[2]


def _same_pads(size: int, window: int, step: int) -> tuple[int, int]:
    out = -(-size // step)
    total = max((out - 1) * step + window - size, 0)
    return total // 2, total - total // 2


def extract_patches(images: TensorLike, sizes: Sequence[int], strides: Sequence[int], rates: Sequence[int],
                    padding: str, name: str | None = None) -> Tensor:
    """Patches of `sizes` every `strides`, their taps `rates` apart, each laid out in depth (row, column,
    channel): [batch, out_rows, out_cols, rows * cols * depth]."""
    x: Any = convert_to_tensor(images)
    (kh, kw), (sh, sw), (rh, rw) = _four(sizes, "ksizes"), _four(strides, "strides"), _four(rates, "rates")
    if x.ndim != 4:
        raise InvalidArgumentError(None, None, f"input must be 4-dimensional{list(x.shape)}")
    mode = str(padding).upper()
    if mode not in ("SAME", "VALID"):
        raise ValueError(f"tf.image.extract_patches: padding must be 'SAME' or 'VALID', got {padding!r}")
    module = xp(x)
    height, width = x.shape[1:3]
    span_h, span_w = (kh - 1) * rh + 1, (kw - 1) * rw + 1
    if mode == "SAME":
        pads = [(0, 0), _same_pads(height, span_h, sh), _same_pads(width, span_w, sw), (0, 0)]
        x = module.pad(x, pads)
        out_h, out_w = -(-height // sh), -(-width // sw)
    else:
        out_h, out_w = max((height - span_h) // sh + 1, 0), max((width - span_w) // sw + 1, 0)
    taps = []
    for dy in range(kh):
        for dx in range(kw):
            y0, x0 = dy * rh, dx * rw
            taps.append(x[:, y0:y0 + (out_h - 1) * sh + 1:sh, x0:x0 + (out_w - 1) * sw + 1:sw, :])
    return module.concatenate(taps, axis=-1)


NAMES: dict[str, Any] = dict(
    sobel_edges=sobel_edges, image_gradients=image_gradients, total_variation=total_variation, transpose=transpose,
    extract_patches=extract_patches,
)
