"""`tf.image`'s codecs on the host, with Pillow: `decode_png` / `jpeg` / `gif` / `bmp` / `image`,
`decode_and_crop_jpeg`, `encode_png`, `encode_jpeg`, `is_jpeg` and `extract_jpeg_shape`.

Images are bytes, which compiled code has no type for, so these run on the host (a `tf.data` map function) and
refuse tracers. TF 2.21's rules (observed): every decode_* but `decode_bmp` reads any of JPEG, PNG, GIF and BMP
(`decode_png` of a JPEG works) and refuses other bytes with "Unknown image file format"; `channels` 0 keeps the
file's, 1 is the luma (0.299 R + 0.587 G + 0.114 B in libpng's 15-bit fixed point, truncated), 3 drops alpha or
repeats gray, 4 adds an opaque alpha; `decode_png` with `dtype=uint16` gives 8-bit files times 257; a GIF
decodes to [frames, height, width, 3] (with `decode_image`'s `expand_animations=False`, the first frame);
`decode_image`'s float dtypes scale to [0, 1]; `encode_*` return a scalar string. JPEG is decoded as TF's
`dct_method="INTEGER_ACCURATE"` does (libjpeg's ISLOW, what Pillow runs); TF's default method (INTEGER_FAST)
can differ by a few levels per pixel. A 16-bit colour PNG decodes to uint8 only (Pillow reads colour PNGs as
8 bits); encoded bytes are Pillow's, not byte for byte TF's, and decode to the same image.
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError, UnimplementedError
from jdist.tf_compat.image_ops import convert_image_dtype
from jdist.typing import Tensor, TensorLike

_UNKNOWN = "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required."


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as err:  # Pillow comes with matplotlib, a jdist dependency
        raise ImportError("tf.image's codecs need Pillow: pip install pillow") from err
    return Image


def _bytes(op: str, contents: Any) -> bytes:
    if isinstance(contents, jax.core.Tracer) or isinstance(contents, jax.Array):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.image.{op} runs on the host (in a tf.data map function): compiled code has no strings")
    if isinstance(contents, (bytes, bytearray)):
        return bytes(contents)
    array = np.asarray(contents, dtype=object)
    if array.ndim != 0:
        raise InvalidArgumentError(None, None, f"`contents` must be scalar but got shape{list(array.shape)} "
                                               f"[Op:{op}]")
    value = array.item()
    if isinstance(value, str):
        return value.encode("latin-1")
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"tf.image.{op}: `contents` must be a string (the file's bytes), got {type(value).__name__}")
    return bytes(value)


def _format(data: bytes) -> str | None:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:4] in (b"GIF8",):
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    return None


def _channels(image: Any, channels: int, draft_ok: bool) -> np.ndarray:
    """The decoded frame with TF's channel rules."""
    mode = image.mode
    if channels == 1 and draft_ok and image.format == "JPEG":
        image.draft("L", image.size)  # libjpeg's own grayscale output, as TF's
        mode = image.mode
    if mode in ("I;16", "I;16B", "I;16L", "I"):
        values = np.asarray(image).astype(np.uint16)[..., None]
        return np.repeat(values, 3, axis=-1) if channels == 3 else (
            np.concatenate([values, np.full_like(values, 65535)], -1) if channels == 4 else values)
    has_alpha = mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in image.info)
    natural = {"L": "L", "1": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA", "CMYK": "RGB", "YCbCr": "RGB",
               "P": "RGBA" if has_alpha else "RGB", "PA": "RGBA"}.get(mode, "RGB")
    target = {0: natural, 1: "L", 3: "RGB", 4: "RGBA"}[channels]
    if target == "L" and natural in ("RGB", "RGBA"):  # libpng's weights, truncated, as TF's
        rgb = np.asarray(image.convert("RGB"), dtype=np.int64)
        gray = (9798 * rgb[..., 0] + 19235 * rgb[..., 1] + 3735 * rgb[..., 2]) >> 15
        return gray.astype(np.uint8)[..., None]
    values = np.asarray(image if image.mode == target else image.convert(target), dtype=np.uint8)
    return values[..., None] if values.ndim == 2 else values


def _check_channels(op: str, channels: int | None, allowed: Sequence[int] = (0, 1, 3, 4)) -> int:
    value = 0 if channels is None else int(channels)
    if value not in allowed:
        if 4 not in allowed and value == 4:
            raise InvalidArgumentError(None, None, f"JPEG does not support 4 channels [Op:{op}]")
        raise InvalidArgumentError(None, None, f"`channels` must be {', '.join(map(str, allowed[:-1]))} or "
                                               f"{allowed[-1]} but got {value} [Op:{op}]")
    return value


def _open(op: str, contents: Any) -> tuple[Any, bytes, str]:
    data = _bytes(op, contents)
    kind = _format(data)
    if kind is None:
        raise InvalidArgumentError(None, None, f"{_UNKNOWN} [Op:{op}]")
    return _pillow().open(io.BytesIO(data)), data, kind


def _frames(image: Any) -> np.ndarray:
    frames = []
    for index in range(getattr(image, "n_frames", 1)):
        image.seek(index)
        frames.append(np.asarray(image.convert("RGB"), dtype=np.uint8))
    return np.stack(frames)


def _decode(op: str, contents: Any, channels: int, ratio: int = 1, animations: bool = False) -> np.ndarray:
    image, _, kind = _open(op, contents)
    if kind == "gif" and animations:
        return _frames(image)
    if kind == "jpeg" and ratio > 1:
        image.draft("L" if channels == 1 else "RGB", (-(-image.size[0] // ratio), -(-image.size[1] // ratio)))
    return _channels(image, channels, draft_ok=True)


def _sixteen_bit_colour(data: bytes) -> bool:
    return data[:8] == b"\x89PNG\r\n\x1a\n" and data[24] == 16 and data[25] in (2, 4, 6)


def decode_png(contents: TensorLike, channels: int = 0, dtype: DTypeLike = "uint8", name: str | None = None) -> Tensor:
    """The image in a PNG (or any supported) file: [height, width, channels] uint8 or uint16."""
    target = numpy_dtype(dtype)
    if target not in (np.dtype(np.uint8), np.dtype(np.uint16)):
        raise TypeError(f"tf.image.decode_png: dtype must be uint8 or uint16, got {dtype!r}")
    count = _check_channels("DecodePng", channels)
    data = _bytes("DecodePng", contents)
    if target == np.uint16 and _sixteen_bit_colour(data):
        raise UnimplementedError(None, None, "tf.image.decode_png: a 16-bit colour PNG decodes to uint8 only in "
                                             "jdist (Pillow reads it as 8 bits); decode it with dtype=tf.uint8")
    values = _decode("DecodePng", data, count)
    if target == np.uint16 and values.dtype == np.uint8:
        return values.astype(np.uint16) * np.uint16(257)
    if target == np.uint8 and values.dtype == np.uint16:
        return (values >> 8).astype(np.uint8)
    return values


def decode_jpeg(contents: TensorLike, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1, dct_method: str = "",
                name: str | None = None) -> Tensor:
    """The image in a JPEG (or any supported) file, uint8; `ratio` 1, 2, 4 or 8 scales it down while decoding."""
    count = _check_channels("DecodeJpeg", channels, (0, 1, 3))
    if int(ratio) not in (1, 2, 4, 8):
        raise InvalidArgumentError(None, None, f"ratio must be 1, 2, 4, or 8, got {ratio}")
    values = _decode("DecodeJpeg", contents, count, int(ratio))
    return (values >> 8).astype(np.uint8) if values.dtype == np.uint16 else values


def decode_and_crop_jpeg(contents: TensorLike, crop_window: Sequence[int] | TensorLike, channels: int = 0,
                         ratio: int = 1, fancy_upscaling: bool = True, try_recover_truncated: bool = False,
                         acceptable_fraction: float = 1, dct_method: str = "", name: str | None = None) -> Tensor:
    """`decode_jpeg` cropped to `crop_window` [y, x, height, width]."""
    top, left, height, width = (int(v) for v in np.asarray(crop_window).reshape(-1))
    values = np.asarray(decode_jpeg(contents, channels, ratio))
    if top < 0 or left < 0 or top + height > values.shape[0] or left + width > values.shape[1]:
        raise InvalidArgumentError(None, None, f"jpeg::Uncompress failed. Invalid JPEG data or crop window: image "
                                               f"{list(values.shape[:2])}, crop window [{top}, {left}, {height}, "
                                               f"{width}] [Op:DecodeAndCropJpeg]")
    return values[top:top + height, left:left + width]


def decode_gif(contents: TensorLike, name: str | None = None) -> Tensor:
    """Every frame of a GIF: [frames, height, width, 3] uint8."""
    image, _, kind = _open("DecodeGif", contents)
    return _frames(image) if kind == "gif" else _channels(image, 3, draft_ok=False)[None]


def decode_bmp(contents: TensorLike, channels: int = 0, name: str | None = None) -> Tensor:
    """The image in a BMP (or any supported) file, uint8."""
    count = _check_channels("DecodeBmp", channels)
    data = _bytes("DecodeBmp", contents)
    kind = _format(data)
    if kind not in ("bmp", None):
        raise InvalidArgumentError(None, None, f"Trying to decode {kind.upper()} format using DecodeBmp op. Use "
                                               "`decode_png` or `decode_image` instead. [Op:DecodeBmp]")
    return _decode("DecodeBmp", data, count)


def decode_image(contents: TensorLike, channels: int | None = None, dtype: DTypeLike = "uint8",
                 name: str | None = None, expand_animations: bool = True) -> Tensor:
    """Any supported file: [height, width, channels] (a GIF: [frames, height, width, 3] unless
    `expand_animations=False`), in `dtype` (floats scaled to [0, 1])."""
    count = _check_channels("DecodeImage", channels)
    values = _decode("DecodeImage", contents, count, animations=expand_animations)
    target = numpy_dtype(dtype)
    if values.dtype == np.uint16 and target != np.uint16:
        values = (values >> 8).astype(np.uint8)
    return np.asarray(convert_image_dtype(values, target))


def _host_image(op: str, image: TensorLike, allowed: Sequence[np.dtype]) -> np.ndarray:
    if isinstance(image, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.image.{op} runs on the host (in a tf.data map function): compiled code has no strings")
    values = np.asarray(image)
    if values.dtype not in allowed:
        names = ", ".join(np.dtype(d).name for d in allowed)
        raise InvalidArgumentError(None, None, f"Value for attr 'T' of {values.dtype.name} is not in the list of "
                                               f"allowed values: {names} [Op:{op}]")
    if values.ndim != 3:
        raise InvalidArgumentError(None, None, f"images must be at least rank 3{list(values.shape)} [Op:{op}]")
    return values


def encode_png(image: TensorLike, compression: int = -1, name: str | None = None) -> Tensor:
    """The PNG file's bytes (a scalar string) for an [height, width, 1 to 4] uint8 (or 1-channel uint16) image."""
    values = _host_image("EncodePng", image, (np.dtype(np.uint8), np.dtype(np.uint16)))
    channels = values.shape[-1]
    if channels not in (1, 2, 3, 4):
        raise InvalidArgumentError(None, None, f"image must have 1, 2, 3, or 4 channels, got {channels}")
    if values.dtype == np.uint16 and channels != 1:
        raise UnimplementedError(None, None, "tf.image.encode_png: jdist writes 16-bit PNGs with one channel only "
                                             "(Pillow writes colour PNGs as 8 bits)")
    pillow = _pillow()
    frame = pillow.fromarray(np.ascontiguousarray(values[..., 0] if channels == 1 else values))  # L, LA, RGB(A), I;16
    out = io.BytesIO()
    frame.save(out, format="PNG", compress_level=6 if int(compression) < 0 else min(int(compression), 9))
    return np.asarray(out.getvalue(), dtype=object)


def encode_jpeg(image: TensorLike, format: str = "", quality: int = 95, progressive: bool = False,  # noqa: A002
                optimize_size: bool = False, chroma_downsampling: bool = True, density_unit: str = "in",
                x_density: int = 300, y_density: int = 300, xmp_metadata: str = "",
                name: str | None = None) -> Tensor:
    """The JPEG file's bytes (a scalar string) for an [height, width, 1 or 3] uint8 image."""
    values = _host_image("EncodeJpeg", image, (np.dtype(np.uint8),))
    channels = values.shape[-1]
    if channels not in (1, 3):
        raise InvalidArgumentError(None, None, f"image must have 1 or 3 channels, got {list(values.shape)} "
                                               "[Op:EncodeJpeg]")
    frame = _pillow().fromarray(np.ascontiguousarray(values[..., 0] if channels == 1 else values))
    out = io.BytesIO()
    dpi = (int(x_density), int(y_density)) if density_unit == "in" else (int(x_density * 2.54),
                                                                           int(y_density * 2.54))
    frame.save(out, format="JPEG", quality=int(quality), progressive=bool(progressive), optimize=bool(optimize_size),
               subsampling=2 if chroma_downsampling else 0, dpi=dpi)
    return np.asarray(out.getvalue(), dtype=object)


def is_jpeg(contents: TensorLike, name: str | None = None) -> Tensor:
    """Whether the bytes start as a JPEG file does."""
    return np.asarray(_bytes("is_jpeg", contents)[:3] == b"\xff\xd8\xff")


def extract_jpeg_shape(contents: TensorLike, output_type: DTypeLike = "int32", name: str | None = None) -> Tensor:
    """[height, width, channels] of a JPEG, from its header."""
    image, data, kind = _open("ExtractJpegShape", contents)
    if kind != "jpeg":
        raise InvalidArgumentError(None, None, f"Invalid JPEG data, size {len(data)} [Op:ExtractJpegShape]")
    channels = {"L": 1, "RGB": 3, "YCbCr": 3, "CMYK": 4}.get(image.mode, 3)
    return np.asarray([image.size[1], image.size[0], channels], dtype=numpy_dtype(output_type))


NAMES: dict[str, Any] = dict(
    decode_png=decode_png, decode_jpeg=decode_jpeg, decode_and_crop_jpeg=decode_and_crop_jpeg, decode_gif=decode_gif,
    decode_bmp=decode_bmp, decode_image=decode_image, encode_png=encode_png, encode_jpeg=encode_jpeg,
    is_jpeg=is_jpeg, extract_jpeg_shape=extract_jpeg_shape,
)
