"""`tf.audio`: 16-bit PCM WAV files to float32 samples and back, on the host (struct and numpy).

TF 2.21's rules (observed): `decode_wav` gives `DecodeWav(audio, sample_rate)`, audio `[frames, channels]`
float32 `sample / 32768` (so in [-1, 1)) and an int32 sample rate; `desired_channels` takes the file's first
channels, repeating its last one when more are asked; `desired_samples` cuts or pads with zeros. `encode_wav`
writes the same bytes as TF (`jdist.tf_compat.summary_images.encode_wav`: `x * 32768`, rounded, clipped; NaN 0).
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.summary_images import encode_wav as _wav_bytes


class DecodeWav(NamedTuple):
    """What `tf.audio.decode_wav` returns, as TF's."""
    audio: Any
    sample_rate: Any


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(None, None, message)


def _contents(contents: Any) -> bytes:
    value = np.asarray(contents, dtype=object)
    if value.ndim != 0:
        raise _invalid(f"contents must be scalar, got shape {list(value.shape)}")
    item = value[()]
    return item.encode() if isinstance(item, str) else bytes(item)


def _chunks(data: bytes) -> tuple[int, int, bytes]:
    """The (channels, sample rate, PCM bytes) of a RIFF/WAVE file of 16-bit samples."""
    if len(data) >= 4 and data[:4] != b"RIFF":
        raise _invalid(f"Header mismatch: Expected RIFF but found {data[:4].decode('latin-1')}")
    if len(data) < 12:
        raise _invalid("Data too short when trying to read string")
    if data[8:12] != b"WAVE":
        raise _invalid(f"Header mismatch: Expected WAVE but found {data[8:12].decode('latin-1')}")
    pos, fmt, pcm = 12, None, None
    while pos + 8 <= len(data):
        kind, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if kind == b"fmt ":
            fmt = body
        elif kind == b"data":
            pcm = body
            break
        pos += 8 + size + (size & 1)
    if fmt is None or len(fmt) < 16:
        raise _invalid("Bad file format: no 'fmt ' chunk of at least 16 bytes in the WAV data")
    audio_format, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
    if audio_format != 1:
        raise _invalid(f"Bad audio format for WAV: Expected 1 (PCM), but got{audio_format}")
    if bits != 16:
        raise _invalid(f"Can only read 16-bit WAV files, but received {bits}")
    if channels < 1:
        raise _invalid("Bad number of channels: 0")
    if pcm is None:
        raise _invalid("No data chunk found in WAV")
    return channels, rate, pcm


def decode_wav(contents: Any, desired_channels: int = -1, desired_samples: int = -1, name: Any = None) -> DecodeWav:
    """A 16-bit PCM WAV file's samples as float32 `[frames, channels]` in [-1, 1), and its sample rate."""
    channels, rate, pcm = _chunks(_contents(contents))
    frames = len(pcm) // (2 * channels)
    samples = np.frombuffer(pcm[:frames * channels * 2], "<i2").reshape(frames, channels)
    audio = samples.astype(np.float32) / np.float32(32768.0)
    out_channels = channels if int(desired_channels) < 0 else int(desired_channels)
    out_frames = frames if int(desired_samples) < 0 else int(desired_samples)
    picked = audio[:, np.minimum(np.arange(out_channels), channels - 1)]
    out = np.zeros((out_frames, out_channels), np.float32)
    out[:min(frames, out_frames)] = picked[:out_frames]
    return as_tensors(DecodeWav(out, np.asarray(rate, np.int32)))


def encode_wav(audio: Any, sample_rate: Any, name: Any = None) -> Any:
    """float32 `[frames, channels]` samples (clipped to [-1, 1]) as a 16-bit PCM WAV file (a string scalar)."""
    samples = np.asarray(audio)
    if samples.dtype.kind != "f":
        raise TypeError(f"tf.audio.encode_wav takes float32 audio, got {samples.dtype}")
    samples = samples.astype(np.float32)
    if samples.ndim != 2:
        raise _invalid(f"audio must be 2-dimensional{list(samples.shape)}")
    rate = np.asarray(sample_rate)
    if rate.ndim != 0:
        raise _invalid(f"Input sample_rate should be a scalar tensor, got {list(rate.shape)} instead.")
    clean = np.where(np.isnan(samples), np.float32(0), samples)
    return as_tensors(np.asarray(_wav_bytes(clean, int(rate)), dtype=object))


AUDIO = dict(decode_wav=decode_wav, encode_wav=encode_wav)
