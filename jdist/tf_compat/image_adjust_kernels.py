"""TF's `AdjustSaturation` and `AdjustHue` kernels' float32 arithmetic, so that `tf.image.adjust_saturation` /
`adjust_hue` (and their `random_*` / `stateless_random_*` forms) give TF's values to the last bit.

These two kernels do not go through `tf.image.rgb_to_hsv` / `hsv_to_rgb`: each has its own per-pixel colour
arithmetic, and a float32 result that differs from it by one unit in the last place turns into a different
uint8 value once converted back (`x * 255.5`, truncated). TF 2.21's results, observed on random images with
grays and ties, equal these formulas bit for bit:

- saturation: `v = max(r, g, b)`, `range = v - min(r, g, b)`, `s = range / v` (0 where v is 0), the hue
  `norm * (g - b)` (red largest), `norm * (b - r) + 2/6` or `norm * (r - g) + 4/6` with `norm = 1 / (6 range)`,
  where the `2/6` and `4/6` sums are done in double precision and rounded to float32; `s` scaled and clipped to
  [0, 1]; back to RGB by `c = s v`, `m = v - c`, `x = c (1 - |fmod(6 h, 2) - 1|)` and the sextant `int(6 h)`.
- hue: the hue in [0, 6) from the sorted channels (`sextant + ratio` or `sextant + 1 - ratio`, `ratio = (mid -
  min) / (max - min)`), turned by `6 delta` and wrapped into [0, 6), then the middle channel rebuilt as
  `min + ratio (max - min)`.

Host values compute in numpy; JAX values in `jax.numpy` (the double-precision sum emulated in float32 with an
exact two-sum, since JAX holds float32 without x64).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.tf_compat.ops import xp

_F32 = np.float32


def _plus_double(value: Any, constant: float) -> Any:
    """float32 `value + constant` as C++'s `float + double` rounded back to float: the exact sum, rounded once."""
    if xp(value) is np:
        return (value.astype(np.float64) + constant).astype(_F32)
    high = _F32(constant)
    low = _F32(constant - float(high))
    total = value + high
    back = total - value
    error = (value - (total - back)) + (high - back)  # the float32 sum's rounding error, exactly (two-sum)
    return total + (error + low)


def _pick(index: Any, choices: list[Any], default: Any) -> Any:
    """`choices[index]` per pixel, `default` where `index` is out of range (the kernels' `switch`)."""
    module = xp(index, *choices)
    return module.select([index == i for i in range(len(choices))], choices, default)


def saturation_kernel(rgb: Any, factor: Any) -> Any:
    """TF's AdjustSaturation on float32 RGB values [..., 3] (`factor` a float32 scalar)."""
    module = xp(rgb, factor)
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    value = module.maximum(red, module.maximum(green, blue))
    spread = value - module.minimum(red, module.minimum(green, blue))
    with np.errstate(divide="ignore", invalid="ignore"):
        saturation = module.where(value > 0, spread / module.where(value > 0, value, _F32(1)), _F32(0))
        norm = _F32(1) / (_F32(6) * spread)
        hue = module.where(red == value, norm * (green - blue),
                           module.where(green == value, _plus_double(norm * (blue - red), 2.0 / 6.0),
                                        _plus_double(norm * (red - green), 4.0 / 6.0)))
    hue = module.where(spread <= 0, _F32(0), hue)
    hue = module.where(hue < 0, hue + _F32(1), hue)
    saturation = module.minimum(_F32(1), module.maximum(_F32(0), saturation * factor))
    chroma = saturation * value
    floor = value - chroma
    sixths = hue * _F32(6)
    sextant = sixths.astype(np.int32)
    within = module.fmod(sixths, _F32(2))  # TF's repeated subtraction of 2 from a value in [0, 6]: exact
    middle = chroma * (_F32(1) - module.abs(within - _F32(1)))
    zero = module.zeros_like(chroma)
    red = _pick(sextant, [chroma, middle, zero, zero, middle, chroma], zero)
    green = _pick(sextant, [middle, chroma, chroma, middle, zero, zero], zero)
    blue = _pick(sextant, [zero, zero, middle, chroma, chroma, middle], zero)
    return module.stack([red + floor, green + floor, blue + floor], axis=-1)


def hue_kernel(rgb: Any, delta: Any) -> Any:
    """TF's AdjustHue on float32 RGB values [..., 3] (`delta` a float32 scalar in [-1, 1])."""
    module = xp(rgb, delta)
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    sextant = module.where(red < green,
                           module.where(blue < red, 1, module.where(blue > green, 3, 2)),
                           module.where(blue < green, 0, module.where(blue > red, 4, 5)))
    top = _pick(sextant, [red, green, green, blue, blue], red)
    mid = _pick(sextant, [green, red, blue, green, red], blue)
    low = _pick(sextant, [blue, blue, red, red, green], green)
    rising = (sextant & 1) == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (mid - low) / (top - low)
    hue = sextant.astype(_F32) + module.where(rising, ratio, _F32(1) - ratio)
    hue = module.where(top == low, _F32(0), hue)
    hue = hue + module.asarray(delta, _F32) * _F32(6)
    for _ in range(2):  # TF's `while (h < 0) h += 6; while (h >= 6) h -= 6;` (h starts in [-6, 12))
        hue = module.where(hue < 0, hue + _F32(6), hue)
        hue = module.where(hue >= 6, hue - _F32(6), hue)
    sextant = hue.astype(np.int32)
    ratio = hue - sextant.astype(_F32)
    ratio = module.where((sextant & 1) == 0, ratio, _F32(1) - ratio)
    mid = low + ratio * (top - low)
    return module.stack([_pick(sextant, [top, mid, low, low, mid], top),
                         _pick(sextant, [mid, top, top, mid, low], low),
                         _pick(sextant, [low, low, mid, top, top], mid)], axis=-1)
