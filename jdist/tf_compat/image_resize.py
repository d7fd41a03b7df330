"""`tf.image.resize` and `tf.image.ResizeMethod`, on numpy (an input pipeline) or JAX (compiled code).

Every method is separable: the output is `W_h @ image @ W_w^T` per channel, with weight matrices built here in
numpy from the static sizes (nearest neighbour picks rows and columns instead, keeping the dtype). So the host
and compiled code give the same numbers, and a `tf.data` map function never dispatches to JAX.

TF 2.21's rules (observed): `bilinear` and `bicubic` sample at half-pixel centres (bicubic with Keys' a = -0.5
kernel, its weights tabulated at 1/1024 steps and renormalised where a tap falls outside the image); `nearest`
takes `floor((y + 0.5) * in / out)` and keeps the input dtype; `area` averages the input cells each output cell
covers; `antialias=True` (and `lanczos3`, `lanczos5`, `gaussian`, `mitchellcubic`) is TF's ScaleAndTranslate,
which widens the kernel by the downscaling factor (in float32 positions, as TF's: a tap at exactly the kernel's
radius is in or out by TF's rounding). Every method but nearest returns float32, whatever the input dtype, even
at the same size. `preserve_aspect_ratio` scales both sides by the smaller factor, rounded.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import Tensor, TensorLike


class ResizeMethod:
    """TF's names for the resize methods (strings, as in TF 2.21)."""

    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


def _lanczos(radius: float) -> Callable[[np.ndarray], np.ndarray]:
    def kernel(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = radius * np.sin(np.pi * x) * np.sin(np.pi * x / radius) / (np.pi * np.pi * x * x)
        return np.where(x > radius, 0.0, np.where(x <= 1e-3, 1.0, value))
    return kernel


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x >= 2, 0.0, np.where(x >= 1, ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0,
                                          ((1.5 * x - 2.5) * x) * x + 1.0))


def _mitchell_cubic(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x >= 2, 0.0, np.where(x >= 1, (((-7 / 18) * x + 2.0) * x - 10 / 3) * x + 16 / 9,
                                          (((7 / 6) * x - 2.0) * x) * x + 8 / 9))


# TF's ScaleAndTranslate kernels (sampling_kernels.h) and their radii
_KERNELS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {
    "bilinear": (lambda x: np.maximum(0.0, 1.0 - np.abs(x)), 1.0),
    "bicubic": (_keys_cubic, 2.0),
    "lanczos3": (_lanczos(3.0), 3.0),
    "lanczos5": (_lanczos(5.0), 5.0),
    "gaussian": (lambda x: np.where(np.abs(x) >= 1.5, 0.0, np.exp(-x * x / (2 * 0.5 * 0.5))), 1.5),  # sigma 0.5
    "mitchellcubic": (_mitchell_cubic, 2.0),
}


def _scale(in_size: int, out_size: int) -> np.float32:
    return np.float32(in_size) / np.float32(out_size)


def _scale_and_translate(in_size: int, out_size: int, method: str, antialias: bool) -> np.ndarray:
    """TF's ScaleAndTranslate weights (out_size, in_size): the kernel at each output sample's position in the
    input, widened by the downscaling factor when antialiasing, over TF's span of taps, normalised to sum 1.
    Positions are float32, as TF's: a tap exactly at the kernel's radius is in or out by TF's rounding."""
    kernel, radius = _KERNELS[method]
    f32 = np.float32
    inv_scale = f32(1.0 / np.float64(f32(out_size) / f32(in_size)))
    kernel_scale = max(inv_scale, f32(1.0)) if antialias else f32(1.0)
    sample = ((np.arange(out_size) + 0.5).astype(f32) * inv_scale).astype(f32)
    reach = f32(f32(radius) * kernel_scale)
    first = np.clip(np.ceil(sample - reach - f32(0.5)), 0, in_size - 1)
    last = np.clip(np.floor(sample + reach - f32(0.5)), 0, in_size - 1)
    source = np.arange(in_size)
    position = ((source[None, :].astype(f32) + f32(0.5)) - sample[:, None]).astype(f32) / kernel_scale
    span = (source[None, :] >= first[:, None]) & (source[None, :] <= last[:, None])
    weights = np.where(span, kernel(np.abs(position.astype(f32)).astype(np.float64)), 0.0)
    total = weights.sum(axis=1, keepdims=True)
    weights = np.where(np.abs(total) >= 1000 * np.finfo(f32).tiny, weights / np.where(total == 0, 1, total), 0)
    inside = (sample >= 0) & (sample <= in_size)
    return np.where(inside[:, None], weights, 0.0)


def _bilinear(in_size: int, out_size: int) -> np.ndarray:
    """ResizeBilinear with half-pixel centres: the two nearest rows, clamped to the image."""
    position = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * _scale(in_size, out_size) - np.float32(0.5)
    low = np.floor(position)
    lerp = (position - low).astype(np.float64)
    top = np.maximum(low, 0).astype(np.int64)
    bottom = np.minimum(np.ceil(position), in_size - 1).astype(np.int64)
    weights = np.zeros((out_size, in_size))
    rows = np.arange(out_size)
    np.add.at(weights, (rows, top), 1 - lerp)
    np.add.at(weights, (rows, bottom), lerp)
    return weights


def _keys_table() -> np.ndarray:
    x = np.arange(1025, dtype=np.float32) / np.float32(1024)
    a = np.float32(-0.5)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x = x + np.float32(1.0)
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.stack([near, far], axis=1)


_KEYS_TABLE = _keys_table()


def _bicubic(in_size: int, out_size: int) -> np.ndarray:
    """ResizeBicubic with half-pixel centres: four taps weighted from TF's 1024-step Keys table; a tap outside
    the image gets weight 0 and the rest are renormalised."""
    position = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * _scale(in_size, out_size) - np.float32(0.5)
    base = np.floor(position).astype(np.int64)
    offset = np.rint((position - base) * 1024).astype(np.int64)
    taps = np.stack([_KEYS_TABLE[offset, 1], _KEYS_TABLE[offset, 0], _KEYS_TABLE[1024 - offset, 0],
                     _KEYS_TABLE[1024 - offset, 1]], axis=1).astype(np.float64)
    index = base[:, None] + np.arange(-1, 3)[None, :]
    taps = np.where((index >= 0) & (index < in_size), taps, 0.0)
    total = taps.sum(axis=1, keepdims=True)
    taps = np.where(np.abs(total) >= 1000 * np.finfo(np.float32).tiny, taps / np.where(total == 0, 1, total), taps)
    weights = np.zeros((out_size, in_size))
    np.add.at(weights, (np.repeat(np.arange(out_size), 4), np.clip(index, 0, in_size - 1).reshape(-1)),
              taps.reshape(-1))
    return weights


def _area(in_size: int, out_size: int) -> np.ndarray:
    """ResizeArea: each output cell the mean of the input cells it covers, partial cells by their share."""
    scale = in_size / out_size
    start, end = np.arange(out_size) * scale, (np.arange(out_size) + 1) * scale
    cells = np.arange(in_size)
    overlap = np.minimum(cells[None, :] + 1, end[:, None]) - np.maximum(cells[None, :], start[:, None])
    return np.maximum(overlap, 0.0) / scale


def _nearest(in_size: int, out_size: int) -> np.ndarray:
    position = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * _scale(in_size, out_size)
    return np.minimum(np.floor(position).astype(np.int64), in_size - 1)


_METHODS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")


def _weights(method: str, antialias: bool, in_size: int, out_size: int) -> np.ndarray:
    if method not in ("bilinear", "bicubic", "area") or (antialias and method != "area"):  # area ignores it
        return _scale_and_translate(in_size, out_size, method, antialias)
    return {"bilinear": _bilinear, "bicubic": _bicubic, "area": _area}[method](in_size, out_size)


def _size(size: Any) -> tuple[int, int]:
    if is_jax(size) and isinstance(size, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError("tf.image.resize: `size` must be known when the function is compiled (Python ints or a "
                         "numpy array); a traced size would give the output a data-dependent shape")
    values = np.asarray(size)
    if values.shape != (2,):
        raise ValueError(f"'size' must be a 1-D Tensor of 2 elements: new_height, new_width; got {size!r}")
    if values.dtype.kind not in "iu":
        raise ValueError(f"'size' must be a 1-D int32 Tensor; got {size!r} ({values.dtype})")
    height, width = (int(v) for v in values)
    if height <= 0 or width <= 0:
        raise ValueError(f"tf.image.resize: output dimensions must be positive, got size [{height}, {width}]")
    return height, width


def resize(images: TensorLike, size: Sequence[int] | TensorLike, method: str = ResizeMethod.BILINEAR,
           preserve_aspect_ratio: bool = False, antialias: bool = False, name: str | None = None) -> Tensor:
    """`tf.image.resize`: images [height, width, channels] or [batch, height, width, channels] to `size`."""
    images = convert_to_tensor(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"'images' must have either 3 or 4 dimensions; got shape {tuple(images.shape)}")
    method = str(method).lower()
    if method not in _METHODS:
        raise ValueError(f"Resize method is not implemented: {method}; use one of tf.image.ResizeMethod's "
                         f"({', '.join(_METHODS)})")
    height, width = _size(size)
    in_height, in_width = int(images.shape[-3]), int(images.shape[-2])
    if preserve_aspect_ratio:  # TF's float32 arithmetic, rounded half to even
        factor = min(np.float32(height) / np.float32(in_height), np.float32(width) / np.float32(in_width))
        height = int(np.round(np.float32(factor * np.float32(in_height))))
        width = int(np.round(np.float32(factor * np.float32(in_width))))
    module = xp(images)
    if method == "nearest":
        rows = module.take(images, _nearest(in_height, height), axis=-3)
        return module.take(rows, _nearest(in_width, width), axis=-2)
    along_h = _weights(method, antialias, in_height, height).astype(np.float32)
    along_w = _weights(method, antialias, in_width, width).astype(np.float32)
    values = images.astype(np.float32)
    if module is jnp:
        highest = jax.lax.Precision.HIGHEST
        values = jnp.einsum("oh,...hwc->...owc", along_h, values, precision=highest)
        return jnp.einsum("pw,...owc->...opc", along_w, values, precision=highest)
    values = np.einsum("oh,...hwc->...owc", along_h, values)
    return np.einsum("pw,...owc->...opc", along_w, values).astype(np.float32)


__all__ = ["ResizeMethod", "resize"]
