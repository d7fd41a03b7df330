"""`tf.signal`: FFTs, windows, framing, short-time Fourier transforms, mel filters and DCTs, on numpy or JAX.

On numpy or JAX as `ops` (`numpy.fft` / `jax.numpy.fft`, results in TF's dtypes). TF's rules, observed in TF
2.21: `fft*` take complex input only and keep its dtype; `rfft` of float32 is complex64 (float64: complex128);
`irfft`'s default length is 2 * (n - 1); Hann and Hamming windows are periodic by default, computed as
`a - b * cos(2 pi k / N)` with N = length (periodic, even length) or length - 1; the Kaiser windows are
symmetric; `frame` gives [..., frames, frame_length, ...] and no frames for a signal shorter than one; `stft`
uses the next power of two as `fft_length` and a periodic Hann window; `dct` is scipy's unnormalized DCT (type
2: 2 * sum) along the last axis, `idct` the DCT of the inverse type; `linear_to_mel_weight_matrix` is TF's
HTK-mel triangle formula, its first (DC) row 0.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.fft
from jax.typing import DTypeLike

from jdist.tf_compat.array_ops import _ints
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import Tensor, TensorLike


def _complex(op: str, x: TensorLike) -> Any:
    x = convert_to_tensor(x)
    if np.dtype(x.dtype).kind != "c":
        raise InvalidArgumentError(message=f"Value for attr 'Tcomplex' of {np.dtype(x.dtype).name} is not in the "
                                           f"list of allowed values: complex64, complex128 ({op}; cast it first: "
                                           "tf.cast(x, tf.complex64))")
    return x


def _fft(tf_name: str, numpy_name: str, rank: int) -> Callable[..., Tensor]:
    def op(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
        x = _complex(f"tf.signal.{tf_name}", input)
        axes = tuple(range(-rank, 0))
        return getattr(xp(x).fft, numpy_name)(x, axes=axes).astype(x.dtype)

    op.__name__ = op.__qualname__ = tf_name
    op.__doc__ = f"The {'inverse ' if tf_name.startswith('i') else ''}FFT over the innermost {rank} dimension(s)."
    return op


fft, ifft = _fft("fft", "fftn", 1), _fft("ifft", "ifftn", 1)
fft2d, ifft2d = _fft("fft2d", "fftn", 2), _fft("ifft2d", "ifftn", 2)
fft3d, ifft3d = _fft("fft3d", "fftn", 3), _fft("ifft3d", "ifftn", 3)


def _complex_of(dtype: Any) -> np.dtype:
    return np.dtype(np.complex128 if np.dtype(dtype) == np.float64 else np.complex64)


def _real_of(dtype: Any) -> np.dtype:
    return np.dtype(np.float64 if np.dtype(dtype) == np.complex128 else np.float32)


def _rfft(tf_name: str, rank: int) -> Callable[..., Tensor]:
    def op(input_tensor: TensorLike, fft_length: TensorLike | None = None, name: str | None = None) -> Tensor:
        x = convert_to_tensor(input_tensor)
        if np.dtype(x.dtype).kind != "f":
            raise InvalidArgumentError(message=f"tf.signal.{tf_name} takes float32 or float64 input, got "
                                               f"{np.dtype(x.dtype).name}")
        lengths = None if fft_length is None else tuple(_ints(fft_length))
        out = xp(x).fft.rfftn(x, s=lengths, axes=tuple(range(-rank, 0)))
        return out.astype(_complex_of(x.dtype))

    op.__name__ = op.__qualname__ = tf_name
    op.__doc__ = f"The FFT of a real signal over the innermost {rank} dimension(s): the non-negative frequencies."
    return op


def _irfft(tf_name: str, rank: int) -> Callable[..., Tensor]:
    def op(input_tensor: TensorLike, fft_length: TensorLike | None = None, name: str | None = None) -> Tensor:
        x = _complex(f"tf.signal.{tf_name}", input_tensor)
        if fft_length is None:
            lengths = tuple(x.shape[-rank:-1]) + (2 * (x.shape[-1] - 1),)
        else:
            lengths = tuple(_ints(fft_length))
        out = xp(x).fft.irfftn(x, s=lengths, axes=tuple(range(-rank, 0)))
        return out.astype(_real_of(x.dtype))

    op.__name__ = op.__qualname__ = tf_name
    op.__doc__ = f"The inverse of `rfft` over the innermost {rank} dimension(s); a real signal of `fft_length`."
    return op


rfft, irfft = _rfft("rfft", 1), _irfft("irfft", 1)
rfft2d, irfft2d = _rfft("rfft2d", 2), _irfft("irfft2d", 2)
rfft3d, irfft3d = _rfft("rfft3d", 3), _irfft("irfft3d", 3)


def fftshift(x: TensorLike, axes: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """The zero frequency moved to the middle (numpy's `fftshift`)."""
    x = convert_to_tensor(x)
    return xp(x).fft.fftshift(x, axes=axes)


def ifftshift(x: TensorLike, axes: int | Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """The inverse of `fftshift`."""
    x = convert_to_tensor(x)
    return xp(x).fft.ifftshift(x, axes=axes)


def _raised_cosine(length: int, periodic: bool, dtype: DTypeLike, a: float, b: float) -> np.ndarray:
    """TF's `a - b * cos(2 pi k / N)` in `dtype`, N = length + (periodic and even length) - 1; [1] for length 1."""
    target = _window_dtype(dtype)
    length = int(length)
    if length == 1:
        return np.ones(1, target)
    span = target.type(length + (1 - length % 2) * int(bool(periodic)) - 1)
    count = np.arange(length).astype(target)
    return (target.type(a) - target.type(b) * np.cos(target.type(2 * np.pi) * count / span)).astype(target)


def hann_window(window_length: int, periodic: bool = True, dtype: DTypeLike = "float32",
                name: str | None = None) -> np.ndarray:
    """The Hann window, 0.5 - 0.5 cos(2 pi k / N) (periodic by default, as TF's)."""
    return _raised_cosine(window_length, periodic, dtype, 0.5, 0.5)


def hamming_window(window_length: int, periodic: bool = True, dtype: DTypeLike = "float32",
                   name: str | None = None) -> np.ndarray:
    """The Hamming window, 0.54 - 0.46 cos(2 pi k / N) (periodic by default, as TF's)."""
    return _raised_cosine(window_length, periodic, dtype, 0.54, 0.46)


def _window_dtype(dtype: DTypeLike) -> np.dtype:
    target = numpy_dtype(dtype) or np.dtype(np.float32)
    if target.kind != "f":
        raise ValueError(f"window dtype must be a floating point type, got {target.name}")
    return target


def kaiser_window(window_length: int, beta: float = 12.0, dtype: DTypeLike = "float32",
                  name: str | None = None) -> np.ndarray:
    """The (symmetric) Kaiser window: I0(beta sqrt(1 - (2k / (N - 1) - 1)^2)) / I0(beta)."""
    return np.kaiser(int(window_length), float(beta)).astype(_window_dtype(dtype))


def kaiser_bessel_derived_window(window_length: int, beta: float = 12.0, dtype: DTypeLike = "float32",
                                 name: str | None = None) -> np.ndarray:
    """The Kaiser-Bessel-derived window: sqrt of the Kaiser window's running sums (of length N / 2 + 1) over its
    total, mirrored."""
    kaiser = np.kaiser(int(window_length) // 2 + 1, float(beta))
    sums = np.cumsum(kaiser)
    half = np.sqrt(sums[:-1] / sums[-1])
    return np.concatenate([half, half[::-1]]).astype(_window_dtype(dtype))


def vorbis_window(window_length: int, dtype: DTypeLike = "float32", name: str | None = None) -> np.ndarray:
    """The Vorbis power-complementary window: sin(pi / 2 * sin(pi (k + 1/2) / N)^2)."""
    n = int(window_length)
    return np.sin(np.pi / 2 * np.sin(np.pi * (np.arange(n) + 0.5) / n) ** 2).astype(_window_dtype(dtype))


def frame(signal: TensorLike, frame_length: int, frame_step: int, pad_end: bool = False,
          pad_value: TensorLike = 0, axis: int = -1, name: str | None = None) -> Tensor:
    """Frames of `frame_length` every `frame_step` along `axis`: that axis becomes [frames, frame_length]. With
    `pad_end` the signal is padded with `pad_value` so that every sample starts a frame's step."""
    x = convert_to_tensor(signal)
    module = xp(x)
    axis = int(axis) % x.ndim
    length, size, step = x.shape[axis], int(frame_length), int(frame_step)
    if pad_end:
        count = -(-length // step)
        extra = max(0, (count - 1) * step + size - length)
        widths = [(0, extra if d == axis else 0) for d in range(x.ndim)]
        x = module.pad(x, widths, constant_values=module.asarray(pad_value, x.dtype))
    else:
        count = 1 + (length - size) // step if length >= size else 0
    index = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    return module.take(x, index.reshape(count, size), axis=axis)


def overlap_and_add(signal: TensorLike, frame_step: int, name: str | None = None) -> Tensor:
    """The inverse of framing: [..., frames, frame_length] summed into [..., (frames - 1) * step + frame_length]."""
    x = convert_to_tensor(signal)
    if x.ndim < 2:
        raise ValueError(f"tf.signal.overlap_and_add: `signal` must have at least 2 dimensions, got {x.shape}")
    frames, size, step = x.shape[-2], x.shape[-1], int(frame_step)
    total = (frames - 1) * step + size if frames else 0
    index = (np.arange(frames)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    values = x.reshape(x.shape[:-2] + (frames * size,))
    if is_jax(x):
        return jnp.zeros(x.shape[:-2] + (total,), x.dtype).at[..., index].add(values)
    out = np.zeros((total,) + x.shape[:-2], x.dtype)
    np.add.at(out, index, np.moveaxis(np.asarray(values), -1, 0))
    return np.moveaxis(out, 0, -1)


def _default_fft_length(frame_length: int) -> int:
    return 1 << max(0, (int(frame_length) - 1).bit_length())


def stft(signals: TensorLike, frame_length: int, frame_step: int, fft_length: int | None = None,
         window_fn: Callable[..., Any] | None = hann_window, pad_end: bool = False,
         name: str | None = None) -> Tensor:
    """The short-time Fourier transform: `rfft` of windowed frames, [..., frames, fft_length // 2 + 1]."""
    x = convert_to_tensor(signals)
    if np.dtype(x.dtype).kind != "f":
        raise ValueError(f"tf.signal.stft takes float32 or float64 signals, got {np.dtype(x.dtype).name}")
    length = int(fft_length) if fft_length is not None else _default_fft_length(frame_length)
    frames = frame(x, frame_length, frame_step, pad_end=pad_end)
    if window_fn is not None:
        frames = frames * xp(frames).asarray(window_fn(int(frame_length), dtype=x.dtype), x.dtype)
    return rfft(frames, [length])


def inverse_stft_window_fn(frame_step: int, forward_window_fn: Callable[..., Any] = hann_window,
                           name: str | None = None) -> Callable[..., np.ndarray]:
    """The window that makes `inverse_stft` invert `stft` with `forward_window_fn`: it divides by the sum of
    the squared forward windows that overlap each sample."""
    def window(frame_length: int, dtype: DTypeLike = "float32") -> np.ndarray:
        forward = np.asarray(forward_window_fn(int(frame_length), dtype=dtype))
        step, overlaps = int(frame_step), -(-int(frame_length) // int(frame_step))
        squared = np.pad(forward * forward, (0, overlaps * step - int(frame_length)))
        denominator = np.tile(squared.reshape(overlaps, step).sum(axis=0, keepdims=True), (overlaps, 1))
        return (forward / denominator.reshape(-1)[:int(frame_length)]).astype(forward.dtype)

    return window


def inverse_stft(stfts: TensorLike, frame_length: int, frame_step: int, fft_length: int | None = None,
                 window_fn: Callable[..., Any] | None = hann_window, name: str | None = None) -> Tensor:
    """`irfft` of each frame, windowed, overlapped and added (use `inverse_stft_window_fn` to invert `stft`)."""
    x = _complex("tf.signal.inverse_stft", stfts)
    length = int(fft_length) if fft_length is not None else _default_fft_length(frame_length)
    frames: Any = irfft(x, [length])
    frames = frames[..., :int(frame_length)]
    module = xp(frames)
    if frames.shape[-1] < int(frame_length):
        frames = module.pad(frames, [(0, 0)] * (frames.ndim - 1) + [(0, int(frame_length) - frames.shape[-1])])
    if window_fn is not None:
        frames = frames * module.asarray(window_fn(int(frame_length), dtype=frames.dtype), frames.dtype)
    return overlap_and_add(frames, frame_step)


def _hertz_to_mel(hertz: Any) -> Any:
    return np.float32(1127.0) * np.log(np.float32(1.0) + hertz / np.float32(700.0))


def linear_to_mel_weight_matrix(num_mel_bins: int = 20, num_spectrogram_bins: int = 129,
                                sample_rate: float = 8000, lower_edge_hertz: float = 125.0,
                                upper_edge_hertz: float = 3800.0, dtype: DTypeLike = "float32",
                                name: str | None = None) -> np.ndarray:
    """[num_spectrogram_bins, num_mel_bins] weights from linear frequency bins to mel bands: triangles on the
    HTK mel scale (1127 ln(1 + f / 700)) between `lower_edge_hertz` and `upper_edge_hertz`; the DC bin is 0."""
    target = numpy_dtype(dtype) or np.dtype(np.float32)
    if not 0.0 <= lower_edge_hertz < upper_edge_hertz <= sample_rate / 2.0 or int(num_mel_bins) <= 0:
        raise ValueError("tf.signal.linear_to_mel_weight_matrix: need num_mel_bins > 0 and 0 <= lower_edge_hertz < "
                         f"upper_edge_hertz <= sample_rate / 2; got {num_mel_bins}, {lower_edge_hertz}, "
                         f"{upper_edge_hertz}, {sample_rate}")
    nyquist = target.type(sample_rate) / target.type(2.0)
    linear = np.linspace(target.type(0.0), nyquist, int(num_spectrogram_bins), dtype=target)[1:]
    bins_mel = _hertz_to_mel(linear).astype(target)[:, None]
    edges = np.linspace(_hertz_to_mel(target.type(lower_edge_hertz)), _hertz_to_mel(target.type(upper_edge_hertz)),
                        int(num_mel_bins) + 2, dtype=target)
    lower, center, upper = edges[:-2][None, :], edges[1:-1][None, :], edges[2:][None, :]
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    weights = np.maximum(target.type(0.0), np.minimum(lower_slopes, upper_slopes))
    return np.pad(weights, [(1, 0), (0, 0)]).astype(target)


def dct(input: TensorLike, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
        norm: str | None = None, name: str | None = None) -> Tensor:
    """The discrete cosine transform of `type` (1 to 4) along the last axis, unnormalized or `norm='ortho'`;
    `n` truncates or zero-pads the input first."""
    x = convert_to_tensor(input)
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError(f"tf.signal.dct: axis must be -1 (as TF's), got {axis}")
    if int(type) not in (1, 2, 3, 4) or norm not in (None, "ortho") or (int(type) == 1 and norm == "ortho"):
        raise ValueError(f"tf.signal.dct: type must be 1 to 4 and norm None or 'ortho' (not for type 1); got type "
                         f"{type}, norm {norm!r}")
    if np.dtype(x.dtype).kind != "f":
        raise ValueError(f"tf.signal.dct takes float32 or float64 input, got {np.dtype(x.dtype).name}")
    if not is_jax(x):
        return np.asarray(scipy.fft.dct(x, type=int(type), n=n, axis=-1, norm=norm)).astype(x.dtype)
    if int(type) == 2:
        return jax.scipy.fft.dct(jnp.asarray(x), type=2, n=n, axis=-1, norm=norm).astype(x.dtype)
    out = x.shape[:-1] + ((int(n) if n is not None else x.shape[-1]),)
    spec = jax.ShapeDtypeStruct(out, x.dtype)
    return jax.pure_callback(lambda v: np.asarray(scipy.fft.dct(np.asarray(v), type=int(type), n=n, axis=-1,
                                                                norm=norm)).astype(v.dtype), spec, x)


_INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}


def idct(input: TensorLike, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
         norm: str | None = None, name: str | None = None) -> Tensor:
    """The inverse DCT: the DCT of the inverse type (3 for 2); the inverse up to a factor 1 / (2N) unnormalized
    (TF's), exactly with `norm='ortho'`."""
    return dct(input, type=_INVERSE_TYPE.get(int(type), int(type)), n=n, axis=axis, norm=norm)


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms: TensorLike, name: str | None = None) -> Tensor:
    """MFCCs: the type-2 DCT of log-mel spectrograms over their last axis, scaled by 1 / sqrt(2 * num_mel_bins)."""
    x = convert_to_tensor(log_mel_spectrograms)
    bins = x.shape[-1]
    return (dct(x, type=2) * xp(x).asarray(1.0 / np.sqrt(2.0 * bins), x.dtype)).astype(x.dtype)


SIGNAL = dict(
    fft=fft, ifft=ifft, fft2d=fft2d, ifft2d=ifft2d, fft3d=fft3d, ifft3d=ifft3d, rfft=rfft, irfft=irfft,
    rfft2d=rfft2d, irfft2d=irfft2d, rfft3d=rfft3d, irfft3d=irfft3d, fftshift=fftshift, ifftshift=ifftshift,
    hann_window=hann_window, hamming_window=hamming_window, kaiser_window=kaiser_window,
    kaiser_bessel_derived_window=kaiser_bessel_derived_window, vorbis_window=vorbis_window, frame=frame,
    overlap_and_add=overlap_and_add, stft=stft,
    inverse_stft=inverse_stft, inverse_stft_window_fn=inverse_stft_window_fn,
    linear_to_mel_weight_matrix=linear_to_mel_weight_matrix, dct=dct, idct=idct,
    mfccs_from_log_mel_spectrograms=mfccs_from_log_mel_spectrograms,
)
