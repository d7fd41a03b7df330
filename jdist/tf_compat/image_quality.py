"""`tf.image`'s image quality measures: `psnr`, `ssim` and `ssim_multiscale`.

Each compares two images (or batches) on the last three axes and gives one float32 value per image. The
filtering is XLA's depthwise convolution wherever it runs, numpy back for numpy input. TF 2.21's rules
(observed): both images and `max_val` are converted to float32 in [0, 1] as `convert_image_dtype` does (uint8
with `max_val=255` is the float image with 1); `psnr` is `20 log10(max_val) - 10 log10(mse)`, inf for equal
images; `ssim` uses an 11 x 11 Gaussian window (sigma 1.5, VALID), averages luminance x contrast-structure over
the image, then over channels, and refuses images smaller than the window; `ssim_multiscale` halves the images
by 2 x 2 average pooling between scales (an odd side padded first by repeating its last row or column).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.image_ops import convert_image_dtype
from jdist.tf_compat.ops import convert_to_tensor, is_jax
from jdist.typing import Tensor, TensorLike

_MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _pair(op: str, img1: TensorLike, img2: TensorLike, max_val: TensorLike) -> tuple[Any, Any, Any, bool]:
    a, b = convert_to_tensor(img1), convert_to_tensor(img2)
    if a.ndim < 3 or b.ndim < 3:
        raise ValueError(f"tf.image.{op}: images must be at least three-dimensional, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if tuple(a.shape[-3:]) != tuple(b.shape[-3:]):
        raise InvalidArgumentError(None, None, f"Incompatible shapes: {list(a.shape)} vs. {list(b.shape)}")
    on_device = is_jax(a, b, max_val)
    module = jnp if on_device else np
    peak = convert_image_dtype(module.asarray(max_val, a.dtype), np.float32)
    return (module.asarray(convert_image_dtype(a, np.float32)), module.asarray(convert_image_dtype(b, np.float32)),
            peak, on_device)


def psnr(a: TensorLike, b: TensorLike, max_val: TensorLike, name: str | None = None) -> Tensor:
    """Peak signal-to-noise ratio in dB, one value per image."""
    x, y, peak, on_device = _pair("psnr", a, b, max_val)
    module = jnp if on_device else np
    with np.errstate(divide="ignore"):
        mse = module.mean(module.square(x - y), axis=(-3, -2, -1))
        value = (np.float32(20 / np.log(10)) * module.log(peak)
                 - np.float32(10 / np.log(10)) * module.log(mse))
    return value.astype(np.float32) if module is np else value


def _gauss(size: int, sigma: float) -> np.ndarray:
    """TF's window: the softmax of -(i^2 + j^2) / (2 sigma^2) over the size x size grid, in float32."""
    coords = np.arange(size, dtype=np.float32) - np.float32(size - 1) / np.float32(2)
    g = np.square(coords) * np.float32(-0.5 / np.float32(sigma) ** 2)
    grid = (g[None, :] + g[:, None]).reshape(-1)
    weights = np.exp(grid - grid.max())
    return (weights / weights.sum()).astype(np.float32).reshape(size, size)


def _per_channel(x: jax.Array, y: jax.Array, peak: jax.Array, size: int, sigma: float, k1: float,
                 k2: float) -> tuple[jax.Array, jax.Array]:
    """The luminance x contrast-structure map and the contrast-structure map, per channel (TF's _ssim_helper)."""
    height, width, channels = x.shape[-3:]
    if height < size or width < size:
        raise InvalidArgumentError(None, None, f"tf.image.ssim: images of {height} x {width} are smaller than the "
                                               f"filter_size {size} (TF: assert_greater_equal failed)")
    kernel = jnp.tile(jnp.asarray(_gauss(size, sigma))[:, :, None, None], (1, 1, 1, channels))

    def reducer(z: jax.Array) -> jax.Array:
        flat = z.reshape((-1, *z.shape[-3:]))
        out = jax.lax.conv_general_dilated(flat, kernel, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                           feature_group_count=channels, precision=jax.lax.Precision.HIGHEST)
        return out.reshape((*z.shape[:-3], *out.shape[1:]))

    c1, c2 = (k1 * peak) ** 2, (k2 * peak) ** 2
    mean0, mean1 = reducer(x), reducer(y)
    num0 = mean0 * mean1 * 2.0
    den0 = jnp.square(mean0) + jnp.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(x * y) * 2.0
    den1 = reducer(jnp.square(x) + jnp.square(y))
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    return luminance * cs, cs


def ssim(img1: TensorLike, img2: TensorLike, max_val: TensorLike, filter_size: int = 11,
         filter_sigma: float = 1.5, k1: float = 0.01, k2: float = 0.03, return_index_map: bool = False) -> Tensor:
    """Structural similarity, one value per image (or its map over the VALID window positions)."""
    x, y, peak, on_device = _pair("ssim", img1, img2, max_val)
    value, _ = _per_channel(jnp.asarray(x), jnp.asarray(y), jnp.asarray(peak), int(filter_size),
                            float(filter_sigma), k1, k2)
    out = jnp.mean(value if return_index_map else jnp.mean(value, axis=(-3, -2)), axis=-1)
    return out if on_device else np.asarray(out)


def _halve(images: list[jax.Array]) -> list[jax.Array]:
    """2 x 2 average pooling; an odd side first padded at its end by repeating the last row or column."""
    out = []
    for z in images:
        flat = z.reshape((-1, *z.shape[-3:]))
        pads = [(0, 0), (0, flat.shape[1] % 2), (0, flat.shape[2] % 2), (0, 0)]
        flat = jnp.pad(flat, pads, mode="symmetric")
        pooled = jax.lax.reduce_window(flat, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
        out.append(pooled.reshape((*z.shape[:-3], *pooled.shape[1:])))
    return out


def ssim_multiscale(img1: TensorLike, img2: TensorLike, max_val: TensorLike,
                    power_factors: Sequence[float] = _MSSSIM_WEIGHTS, filter_size: int = 11,
                    filter_sigma: float = 1.5, k1: float = 0.01, k2: float = 0.03) -> Tensor:
    """Multi-scale SSIM: contrast-structure at each coarser scale and SSIM at the last, weighted by
    `power_factors` in a geometric mean, then averaged over channels."""
    x, y, peak, on_device = _pair("ssim_multiscale", img1, img2, max_val)
    images = [jnp.asarray(x), jnp.asarray(y)]
    scores = []
    value = None
    for k in range(len(power_factors)):
        if k > 0:
            images = _halve(images)
        value, cs = _per_channel(images[0], images[1], jnp.asarray(peak), int(filter_size), float(filter_sigma),
                                 k1, k2)
        scores.append(jax.nn.relu(jnp.mean(cs, axis=(-3, -2))))
    assert value is not None
    scores[-1] = jax.nn.relu(jnp.mean(value, axis=(-3, -2)))
    stacked = jnp.stack(scores, axis=-1)
    out = jnp.mean(jnp.prod(stacked ** jnp.asarray(power_factors, jnp.float32), axis=-1), axis=-1)
    return out if on_device else np.asarray(out)


NAMES: dict[str, Any] = dict(psnr=psnr, ssim=ssim, ssim_multiscale=ssim_multiscale)
