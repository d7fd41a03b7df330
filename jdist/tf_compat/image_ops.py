"""`tf.image`'s deterministic ops: flips, crops, dtype conversion, standardisation, brightness, contrast, grayscale.

Each takes one image [height, width, channels] or a batch [batch, height, width, channels], as TF's, and
computes with numpy on the host (a `tf.data` map function) or `jax.numpy` on JAX values (compiled code).

TF 2.21's rules (observed): `convert_image_dtype` scales integers to [0, 1] floats by `1 / dtype.max`, floats to
integers by `dtype.max + 0.5` and truncates (with `saturate=True` clipped first; without it, out-of-range values
wrap as TF's cast does), integers to integers by a power of two (floor division down, multiplication up);
`adjust_brightness` / `adjust_contrast` work in float32 and convert back to the input dtype saturated;
`per_image_standardization` returns float32 for every input dtype; `rgb_to_grayscale` weighs R, G, B by
0.2989, 0.5870, 0.1140 and keeps the dtype; `central_crop` starts at `int((size - size * fraction) / 2)`;
`resize_with_crop_or_pad` crops or pads evenly, the odd pixel at the end.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import ArrayLike, Tensor, TensorLike


def at_least_3d(op: str, image: TensorLike) -> ArrayLike:
    """The image as a tensor, refused (as TF) below rank 3."""
    image = convert_to_tensor(image)
    if image.ndim < 3:
        raise ValueError(f"tf.image.{op}: 'image' (shape {tuple(image.shape)}) must be at least three-dimensional "
                         "([height, width, channels] or a batch of them)")
    return image


def flip_left_right(image: TensorLike) -> Tensor:
    image = at_least_3d("flip_left_right", image)
    return xp(image).flip(image, axis=-2)


def flip_up_down(image: TensorLike) -> Tensor:
    image = at_least_3d("flip_up_down", image)
    return xp(image).flip(image, axis=-3)


def rot90(image: TensorLike, k: int = 1, name: str | None = None) -> Tensor:
    """`k` quarter turns counter-clockwise of each image."""
    image = at_least_3d("rot90", image)
    if is_jax(k):
        raise ValueError("tf.image.rot90: `k` must be a Python int when compiling (it decides the output shape)")
    return xp(image).rot90(image, int(k) % 4, axes=(-3, -2))


def crop(image: ArrayLike, top: int, left: int, height: int, width: int) -> ArrayLike:
    return image[..., top:top + height, left:left + width, :]


def central_crop(image: TensorLike, central_fraction: float) -> Tensor:
    """The centre `central_fraction` of each side, started at `int((size - size * fraction) / 2)` as TF."""
    image = at_least_3d("central_crop", image)
    if not 0.0 < float(central_fraction) <= 1.0:
        raise ValueError(f"central_fraction must be within (0, 1], got {central_fraction}")
    if float(central_fraction) == 1.0:
        return image
    height, width = int(image.shape[-3]), int(image.shape[-2])
    top = int((height - height * float(central_fraction)) / 2)
    left = int((width - width * float(central_fraction)) / 2)
    return crop(image, top, left, height - 2 * top, width - 2 * left)


def resize_with_crop_or_pad(image: TensorLike, target_height: int, target_width: int) -> Tensor:
    """Crops the centre, or pads with zeros around it, to the target size (the odd pixel goes at the end)."""
    image = at_least_3d("resize_with_crop_or_pad", image)
    for label, value in (("target_height", target_height), ("target_width", target_width)):
        if int(value) <= 0:
            raise ValueError(f"{label} must be > 0, got {value}")
    height, width = int(image.shape[-3]), int(image.shape[-2])
    dh, dw = int(target_height) - height, int(target_width) - width
    cropped = crop(image, max(-dh // 2, 0), max(-dw // 2, 0), min(int(target_height), height),
                   min(int(target_width), width))
    pad_top, pad_left = max(dh // 2, 0), max(dw // 2, 0)
    pads = [(0, 0)] * (image.ndim - 3) + [(pad_top, int(target_height) - cropped.shape[-3] - pad_top),
                                          (pad_left, int(target_width) - cropped.shape[-2] - pad_left), (0, 0)]
    return xp(cropped).pad(cropped, pads)


def pad_to_bounding_box(image: TensorLike, offset_height: int, offset_width: int, target_height: int,
                        target_width: int) -> Tensor:
    """Zeros around `image`, which lands at (offset_height, offset_width) of a target_height x target_width one."""
    image = at_least_3d("pad_to_bounding_box", image)
    height, width = int(image.shape[-3]), int(image.shape[-2])
    if height > int(target_height) - int(offset_height):
        raise ValueError("height must be <= target - offset")  # TF 2.21's text (observed)
    if width > int(target_width) - int(offset_width):
        raise ValueError("width must be <= target - offset")
    pads = [(0, 0)] * (image.ndim - 3) + [(int(offset_height), int(target_height) - int(offset_height) - height),
                                          (int(offset_width), int(target_width) - int(offset_width) - width),
                                          (0, 0)]
    return xp(image).pad(image, pads)


def crop_to_bounding_box(image: TensorLike, offset_height: int, offset_width: int, target_height: int,
                         target_width: int) -> Tensor:
    """The target_height x target_width window of `image` whose top-left corner is (offset_height, offset_width)."""
    image = at_least_3d("crop_to_bounding_box", image)
    height, width = int(image.shape[-3]), int(image.shape[-2])
    if height < int(target_height) + int(offset_height):
        raise ValueError("height must be >= target + offset.")  # TF 2.21's text (observed)
    if width < int(target_width) + int(offset_width):
        raise ValueError("width must be >= target + offset.")
    return crop(image, int(offset_height), int(offset_width), int(target_height), int(target_width))


# ---------------------------------------------------------------------------------------------- dtypes
def _kind(dtype: np.dtype, what: str) -> str:
    if dtype.kind in "iu":
        return "int"
    if dtype.kind == "f" or dtype == jnp.bfloat16:
        return "float"
    raise AttributeError(f"tf.image.convert_image_dtype: {what} dtype must be either floating point or integer, "
                         f"got {dtype}")


def _cast_like_tf(values: ArrayLike, target: np.dtype) -> ArrayLike:
    """Floats to ints as TF's cast: truncation; out of range, 8 and 16-bit ints wrap and 32-bit ones give the
    minimum (what TF 2.21 gave on x86: 1.0 * 2147483647.5 -> -2147483648)."""
    module = xp(values)
    whole = module.trunc(values)
    info = np.iinfo(target)
    if info.bits <= 16:
        return whole.astype(np.int32).astype(target)
    outside = (whole < float(info.min)) | (whole >= float(info.max) + 1.0)  # bounds the float type holds exactly
    inside = module.where(outside, 0, whole).astype(target)
    return module.where(outside, np.asarray(info.min if info.bits == 32 else 0, target), inside)


def _saturate_float(values: ArrayLike, target: np.dtype) -> ArrayLike:
    """Clips floats into the target int range (bounds as the float type can hold them, as TF's saturate_cast)."""
    info = np.iinfo(target)
    source = np.dtype(values.dtype).type
    high, low = source(info.max), source(info.min)
    if float(high) > info.max:
        high = np.nextafter(high, source(0))
    if float(low) < info.min:
        low = np.nextafter(low, source(0))
    return xp(values).clip(values, low, high)


def convert_image_dtype(image: TensorLike, dtype: DTypeLike, saturate: bool = False, name: str | None = None) -> Tensor:
    """Converts between dtypes with rescaling: integer images span [0, dtype.max], float images [0, 1]."""
    image = convert_to_tensor(image)
    target = numpy_dtype(dtype)
    source = np.dtype(image.dtype)
    out_kind, in_kind = _kind(target, "output"), _kind(source, "image")
    if target == source:
        return image
    module = xp(image)
    if in_kind == "int" and out_kind == "int":
        max_in, max_out = int(np.iinfo(source).max), int(np.iinfo(target).max)
        if max_in > max_out:
            scaled = module.floor_divide(image, np.asarray((max_in + 1) // (max_out + 1), source))
            if saturate:
                scaled = module.clip(scaled, max(np.iinfo(target).min, np.iinfo(source).min), max_out)
            return scaled.astype(target)
        cast = module.clip(image, max(np.iinfo(target).min, np.iinfo(source).min), max_out) if saturate else image
        return cast.astype(target) * np.asarray((max_out + 1) // (max_in + 1), target)
    if in_kind == "float" and out_kind == "float":
        return image.astype(target)
    if in_kind == "int":
        return image.astype(target) * np.asarray(1.0 / np.iinfo(source).max, target)
    scaled = image * np.asarray(np.iinfo(target).max + 0.5, source)
    return _saturate_float(scaled, target).astype(target) if saturate else _cast_like_tf(scaled, target)


def _as_float32(op: str, image: TensorLike) -> tuple[Any, np.dtype]:
    image = convert_to_tensor(image)
    original = np.dtype(image.dtype)
    _kind(original, "image")
    if original in (np.dtype(np.float16), np.dtype(np.float32)):
        return image, original
    return convert_image_dtype(image, np.float32), original


def adjust_brightness(image: TensorLike, delta: TensorLike) -> Tensor:
    """Adds `delta` to every value of the image scaled to [0, 1] (ints converted and saturated back)."""
    values, original = _as_float32("adjust_brightness", image)
    return convert_image_dtype(values + xp(values, delta).asarray(delta, values.dtype), original, saturate=True)


def adjust_contrast(images: TensorLike, contrast_factor: TensorLike) -> Tensor:
    """`(x - mean) * contrast_factor + mean`, the mean per image and channel."""
    values = convert_to_tensor(images)
    if values.ndim < 3:
        raise ValueError(f"tf.image.adjust_contrast: input must be at least 3-D, got shape {tuple(values.shape)}")
    values, original = _as_float32("adjust_contrast", values)
    module = xp(values, contrast_factor)
    mean = module.mean(values.astype(np.float32), axis=(-3, -2), keepdims=True)
    factor = module.asarray(contrast_factor, np.float32)
    adjusted = ((values.astype(np.float32) - mean) * factor + mean).astype(values.dtype)
    return convert_image_dtype(adjusted, original, saturate=True)


def per_image_standardization(image: TensorLike) -> Tensor:
    """Each image to mean 0 and variance 1 (the deviation at least `1 / sqrt(pixels)`); float32 always."""
    values = at_least_3d("per_image_standardization", image).astype(np.float32)
    module = xp(values)
    axes = (-3, -2, -1)
    pixels = int(np.prod(values.shape[-3:]))
    mean = module.mean(values, axis=axes, keepdims=True)
    stddev = module.sqrt(module.mean(module.square(values - mean), axis=axes, keepdims=True))
    return ((values - mean) / module.maximum(stddev, np.float32(1 / np.sqrt(pixels)))).astype(np.float32)


_GRAY = np.array([0.2989, 0.5870, 0.1140], np.float32)


def rgb_to_grayscale(images: TensorLike, name: str | None = None) -> Tensor:
    """The weighted sum of R, G, B into one channel, in the input dtype."""
    images = convert_to_tensor(images)
    if images.ndim < 1 or images.shape[-1] != 3:
        raise ValueError(f"tf.image.rgb_to_grayscale: the last dimension must be 3 (R, G, B), got shape "
                         f"{tuple(images.shape)}")
    original = np.dtype(images.dtype)
    values = convert_image_dtype(images, np.float32)
    gray = xp(values).tensordot(values, _GRAY, axes=[[-1], [0]])[..., None]
    return convert_image_dtype(gray, original)


def grayscale_to_rgb(images: TensorLike, name: str | None = None) -> Tensor:
    """The one channel repeated three times."""
    images = convert_to_tensor(images)
    if images.ndim < 2:
        raise ValueError(f"A grayscale image (shape {tuple(images.shape)}) must be at least two-dimensional.")
    if images.shape[-1] != 1:
        raise ValueError(f"Last dimension of a grayscale image should be size 1; got shape {tuple(images.shape)}")
    return xp(images).repeat(images, 3, axis=-1)


NAMES: dict[str, Any] = dict(
    flip_left_right=flip_left_right, flip_up_down=flip_up_down, rot90=rot90, central_crop=central_crop,
    resize_with_crop_or_pad=resize_with_crop_or_pad, convert_image_dtype=convert_image_dtype,
    adjust_brightness=adjust_brightness, adjust_contrast=adjust_contrast,
    per_image_standardization=per_image_standardization, rgb_to_grayscale=rgb_to_grayscale,
    grayscale_to_rgb=grayscale_to_rgb, pad_to_bounding_box=pad_to_bounding_box,
    crop_to_bounding_box=crop_to_bounding_box,
)
