"""`tf.summary.image` and `tf.summary.audio`: TensorBoard's image and audio summaries, PNG and WAV encoded in
Python (zlib and struct; no imaging library needed).

What TF 2.21 writes (observed, read back with `tf.compat.v1.train.summary_iterator`): an image summary is a
string tensor `[width, height, png_1, ..., png_n]` for the first `max_outputs` images of a `[k, h, w, c]` batch
(1 to 4 channels: gray, gray+alpha, RGB, RGBA) under the "images" plugin; floats become uint8 as
`tf.image.convert_image_dtype(..., saturate=True)` makes them (`x * 255.5`, clipped, truncated; NaN is 0). An
audio summary is a `[n, 2]` string tensor of (16-bit PCM WAV, empty label) for `[k, frames, channels]` floats in
[-1, 1] under the "audio" plugin (content: WAV encoding). Both work on traced data too (`tf.summary.scalar`'s way).
"""
from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from jdist.callbacks.event_file import encode_tensor_value
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.summary_writers import record

_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type (gray, gray+alpha, RGB, RGBA)
_AUDIO_PLUGIN_CONTENT = b"\x10\x0b"  # AudioPluginData{encoding: WAV}, as TF writes it


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(image: np.ndarray) -> bytes:
    """An 8-bit PNG of a uint8 `[height, width, channels]` image (1 to 4 channels), rows unfiltered."""
    height, width, channels = image.shape
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    rows = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, width * channels)], axis=1)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + _chunk(b"IEND", b""))


def as_uint8(images: np.ndarray) -> np.ndarray:
    """`tf.image.convert_image_dtype(images, tf.uint8, saturate=True)`."""
    if images.dtype == np.uint8:
        return images
    if images.dtype.kind == "f" or images.dtype.name == "bfloat16":
        scaled = np.nan_to_num(images.astype(np.float32) * np.float32(255.5), nan=0.0)
        return np.clip(scaled, 0, 255).astype(np.uint8)
    if images.dtype.kind in "iu":  # TF's integer rescaling: divide by (in.max + 1) / 256
        scale = (int(np.iinfo(images.dtype).max) + 1) // 256
        return np.clip(images.astype(np.int64) // max(scale, 1), 0, 255).astype(np.uint8)
    if images.dtype == np.bool_:
        return images.astype(np.uint8) * 255
    raise TypeError(f"tf.summary.image takes numeric images, got {images.dtype}")


def image_value(tag: str, data: np.ndarray, max_outputs: int = 3, description: str = "") -> bytes:
    """The encoded summary value of `tf.summary.image(tag, data, max_outputs=...)`."""
    if data.ndim != 4:
        raise ValueError(f"Tensor  must have rank 4.  Received rank {data.ndim}, shape {tuple(data.shape)}")
    if max_outputs < 0:
        raise ValueError(f"max_outputs must be non-negative, got {max_outputs}")
    if not 1 <= data.shape[3] <= 4:
        raise InvalidArgumentError(None, None, f"image must have 1, 2, 3, or 4 channels, got {data.shape[3]}")
    images = as_uint8(data[:max_outputs])
    pngs = [encode_png(image) for image in images]
    value = np.array([str(data.shape[2]).encode(), str(data.shape[1]).encode(), *pngs], dtype=object)
    return encode_tensor_value(tag, value, "images", description)


def image(name: str, data: Any, step: Any = None, max_outputs: int = 3, description: str | None = None) -> Any:
    """`tf.summary.image`: the first `max_outputs` images of a `[k, h, w, c]` batch as PNGs; True if written."""
    return record(name, data, step, lambda d: image_value(name, d, int(max_outputs), description or ""))


def weight_image(weight: np.ndarray, channels_last: bool = True) -> np.ndarray | None:
    """Keras 3's TensorBoard picture of a weight (`write_images`, its `_log_weight_as_image`), or None where Keras
    draws none: squeezed; a vector is one 1-pixel-wide column image, a matrix one image with its longer side as
    the width, a 3-d kernel one image per output channel; kept only with 1, 3 or 4 channels."""
    w = np.squeeze(np.asarray(weight))
    if w.ndim == 1:
        w = w.reshape(1, w.shape[0], 1, 1)
    elif w.ndim == 2:
        w = w.T if w.shape[0] > w.shape[1] else w
        w = w.reshape(1, w.shape[0], w.shape[1], 1)
    elif w.ndim == 3:
        w = np.transpose(w, (2, 0, 1)) if channels_last else w
        w = w.reshape(*w.shape, 1)
    return w if w.ndim == 4 and w.shape[-1] in (1, 3, 4) else None


def encode_wav(audio: np.ndarray, sample_rate: int) -> bytes:
    """A 16-bit PCM WAV file of `[frames, channels]` floats in [-1, 1] (clipped), TF's `tf.audio.encode_wav`."""
    frames, channels = audio.shape
    scaled = audio.astype(np.float32) * np.float32(32768.0)  # TF's: x * 2**15, rounded half away from 0, clipped
    samples = np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5)), -32768, 32767).astype("<i2")
    data = samples.tobytes()
    fmt = struct.pack("<HHIIHH", 1, channels, sample_rate, sample_rate * channels * 2, channels * 2, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + struct.pack("<I", len(data)) + data)


def _audio_value(tag: str, data: np.ndarray, sample_rate: int, max_outputs: int, description: str) -> bytes:
    if data.ndim != 3:
        raise ValueError(f"Tensor  must have rank 3.  Received rank {data.ndim}, shape {tuple(data.shape)}")
    if max_outputs < 0:
        raise ValueError(f"max_outputs must be non-negative, got {max_outputs}")
    clips = [[encode_wav(clip, sample_rate), b""] for clip in data[:max_outputs]]
    value = np.array(clips, dtype=object).reshape(len(clips), 2)
    return encode_tensor_value(tag, value, "audio", description, _AUDIO_PLUGIN_CONTENT)


def audio(name: str, data: Any, sample_rate: Any, step: Any = None, max_outputs: int = 3, encoding: Any = None,
          description: str | None = None) -> Any:
    """`tf.summary.audio`: the first `max_outputs` clips of a `[k, frames, channels]` batch of floats in
    [-1, 1] as WAV files at `sample_rate` Hz; True if written."""
    if encoding not in (None, "wav"):
        raise ValueError(f"Unknown encoding: {encoding!r}")
    rate = int(np.asarray(sample_rate))
    return record(name, data, step, lambda d: _audio_value(name, d, rate, int(max_outputs), description or ""))


NAMES = dict(image=image, audio=audio)
