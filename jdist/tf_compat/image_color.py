"""`tf.image`'s colour spaces and colour adjustments: HSV, YIQ, YUV, `adjust_saturation` / `hue` / `gamma` and
their `random_*` / `stateless_random_*` forms.

Computed with numpy on the host and `jax.numpy` on JAX values, as `image_ops`; the random forms draw their
factor as `image_random`'s do (the host's generators, or `stateless_uniform` from a seed of shape [2], TF's own
numbers). TF 2.21's rules (observed): `rgb_to_hsv` / `hsv_to_rgb` turn input that is not float16 / float32 into
float32 without rescaling (uint8 gives V up to 255); hue is in [0, 1), 0 for grays; YIQ and YUV are TF's 3 x 3
matrices in the input's float dtype, integers refused; `adjust_saturation` and `adjust_hue` work in float32 on
the image scaled to [0, 1] and convert back to the input dtype; `adjust_gamma` is `gain * x ** gamma`,
saturated back to integer dtypes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.tf_compat.error_types import FailedPreconditionError, InvalidArgumentError
from jdist.tf_compat.image_adjust_kernels import hue_kernel, saturation_kernel
from jdist.tf_compat.image_ops import convert_image_dtype
from jdist.tf_compat.image_random import _check_range, _host_draw
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.tf_compat.random_ops import stateless_uniform
from jdist.typing import ArrayLike, Tensor, TensorLike

_FLOAT_16_32 = (np.dtype(np.float16), np.dtype(np.float32))


def _rgb_float(op: str, images: TensorLike) -> ArrayLike:
    images = convert_to_tensor(images)
    if images.ndim < 1 or images.shape[-1] != 3:
        raise FailedPreconditionError(None, None, f"input must have 3 channels but input only has "
                                                  f"{images.shape[-1] if images.ndim else 0} channels. [Op:{op}]")
    return images if np.dtype(images.dtype) in _FLOAT_16_32 else images.astype(np.float32)


def _to_hsv(rgb: Any) -> Any:
    module = xp(rgb)
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    value = module.max(rgb, axis=-1)
    spread = value - module.min(rgb, axis=-1)
    positive = value > 0
    saturation = module.where(positive, spread / module.where(positive, value, 1), 0)
    has_hue = spread > 0
    norm = (1 / module.where(has_hue, spread, 1)) * (rgb.dtype.type(1) / rgb.dtype.type(6))  # TF's RGBToHSV order
    hue = module.where(red == value, norm * (green - blue),
                       module.where(green == value, norm * (blue - red) + 2 / 6, norm * (red - green) + 4 / 6))
    hue = module.where(has_hue, hue, 0)
    hue = module.where(hue < 0, hue + 1, hue)
    return module.stack([hue, saturation, value], axis=-1).astype(rgb.dtype)


def _to_rgb(hsv: Any) -> Any:
    module = xp(hsv)
    hue, saturation, value = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    sixths = hue * 6
    red = module.clip(module.abs(sixths - 3) - 1, 0, 1)
    green = module.clip(2 - module.abs(sixths - 2), 0, 1)
    blue = module.clip(2 - module.abs(sixths - 4), 0, 1)
    grey = 1 - saturation
    return module.stack([(grey + saturation * c) * value for c in (red, green, blue)], axis=-1).astype(hsv.dtype)


def rgb_to_hsv(images: TensorLike, name: str | None = None) -> Tensor:
    """RGB to hue, saturation, value, each in [0, 1] for an RGB image in [0, 1]."""
    return _to_hsv(_rgb_float("RGBToHSV", images))


def hsv_to_rgb(images: TensorLike, name: str | None = None) -> Tensor:
    """Hue, saturation, value to RGB."""
    return _to_rgb(_rgb_float("HSVToRGB", images))


_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617], [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021], [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512], [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _matrix(op: str, images: TensorLike, kernel: list[list[float]]) -> Tensor:
    images = convert_to_tensor(images)
    dtype = np.dtype(images.dtype)
    if dtype.kind != "f" and str(dtype) != "bfloat16":
        raise TypeError(f"tf.image.{op}: Cannot convert {kernel} to EagerTensor of dtype {dtype.name} (the image "
                        "must be floating point; convert it with tf.image.convert_image_dtype)")
    if images.ndim < 1 or images.shape[-1] != 3:
        raise ValueError(f"tf.image.{op}: the last dimension must be 3, got shape {tuple(images.shape)}")
    module = xp(images)
    return module.tensordot(images, module.asarray(kernel, dtype), axes=[[images.ndim - 1], [0]]).astype(dtype)


def rgb_to_yiq(images: TensorLike) -> Tensor:
    return _matrix("rgb_to_yiq", images, _RGB_TO_YIQ)


def yiq_to_rgb(images: TensorLike) -> Tensor:
    return _matrix("yiq_to_rgb", images, _YIQ_TO_RGB)


def rgb_to_yuv(images: TensorLike) -> Tensor:
    return _matrix("rgb_to_yuv", images, _RGB_TO_YUV)


def yuv_to_rgb(images: TensorLike) -> Tensor:
    return _matrix("yuv_to_rgb", images, _YUV_TO_RGB)


def _in_float(image: TensorLike) -> tuple[Any, np.dtype]:
    image = convert_to_tensor(image)
    original = np.dtype(image.dtype)
    values = image if original in _FLOAT_16_32 else convert_image_dtype(image, np.float32)
    return values, original


def _rgb_checked(image: TensorLike, op: str) -> tuple[Any, Any]:
    """The image as floats and its original dtype; RGB images only, as TF's."""
    values, original = _in_float(image)
    if values.ndim < 3 or values.shape[-1] != 3:
        raise InvalidArgumentError(None, None, f"tf.image.{op}: input must be at least 3-D with 3 channels "
                                               f"(R, G, B), got shape {list(values.shape)}")
    return values, original


def adjust_saturation(image: TensorLike, saturation_factor: TensorLike, name: str | None = None) -> Tensor:
    """Saturation (HSV) multiplied by `saturation_factor` and clipped to [0, 1], with TF's kernel arithmetic."""
    values, original = _rgb_checked(image, "adjust_saturation")
    factor = xp(values, saturation_factor).asarray(saturation_factor, np.float32)
    adjusted = saturation_kernel(values.astype(np.float32), factor)
    return convert_image_dtype(adjusted.astype(values.dtype), original)


def adjust_hue(image: TensorLike, delta: TensorLike, name: str | None = None) -> Tensor:
    """Hue (HSV) turned by `delta` in [-1, 1] (a full turn is 1)."""
    if not is_jax(delta) and not -1 <= float(np.asarray(delta)) <= 1:
        raise ValueError("delta must be in the interval [-1, 1]")
    values, original = _rgb_checked(image, "adjust_hue")
    adjusted = hue_kernel(values.astype(np.float32), xp(values, delta).asarray(delta, np.float32))
    return convert_image_dtype(adjusted.astype(values.dtype), original)


def adjust_gamma(image: TensorLike, gamma: float = 1, gain: float = 1) -> Tensor:
    """`gain * image ** gamma` on the image scaled to [0, 1] (integers converted back, saturated)."""
    if isinstance(gamma, (int, float)) and gamma < 0:
        raise ValueError("Gamma should be a non-negative real number.")
    values, original = _in_float(image)
    module = xp(values, gamma, gain)
    adjusted = module.asarray(gain, values.dtype) * values ** module.asarray(gamma, values.dtype)
    return convert_image_dtype(adjusted.astype(values.dtype), original, saturate=True)


def _check_hue(max_delta: float) -> None:
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")


def random_saturation(image: TensorLike, lower: float, upper: float, seed: int | None = None) -> Tensor:
    """`adjust_saturation` by a factor uniform in [lower, upper)."""
    _check_range("random_saturation", lower, upper)
    image = convert_to_tensor(image)
    factor = _host_draw("random_saturation", image, seed).uniform(lower, upper)
    return adjust_saturation(image, np.float32(factor))


def random_hue(image: TensorLike, max_delta: float, seed: int | None = None) -> Tensor:
    """`adjust_hue` by a delta uniform in [-max_delta, max_delta), `max_delta` in [0, 0.5]."""
    _check_hue(max_delta)
    image = convert_to_tensor(image)
    delta = _host_draw("random_hue", image, seed).uniform(-max_delta, max_delta)
    return adjust_hue(image, np.float32(delta))


def stateless_random_saturation(image: TensorLike, lower: float, upper: float, seed: TensorLike) -> Tensor:
    """`adjust_saturation` by a factor uniform in [lower, upper), drawn from `seed` (TF's number)."""
    _check_range("stateless_random_saturation", lower, upper)
    return adjust_saturation(image, stateless_uniform([], seed, lower, upper))


def stateless_random_hue(image: TensorLike, max_delta: float, seed: TensorLike) -> Tensor:
    """`adjust_hue` by a delta uniform in [-max_delta, max_delta), drawn from `seed` (TF's number)."""
    _check_hue(max_delta)
    return adjust_hue(image, stateless_uniform([], seed, -max_delta, max_delta))


NAMES: dict[str, Any] = dict(
    rgb_to_hsv=rgb_to_hsv, hsv_to_rgb=hsv_to_rgb, rgb_to_yiq=rgb_to_yiq, yiq_to_rgb=yiq_to_rgb,
    rgb_to_yuv=rgb_to_yuv, yuv_to_rgb=yuv_to_rgb, adjust_saturation=adjust_saturation, adjust_hue=adjust_hue,
    adjust_gamma=adjust_gamma, random_saturation=random_saturation, random_hue=random_hue,
    stateless_random_saturation=stateless_random_saturation, stateless_random_hue=stateless_random_hue,
)
