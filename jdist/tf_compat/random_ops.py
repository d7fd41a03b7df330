"""More of `tf.random`: `truncated_normal`, `categorical` (host-side, as `nn_ops`'s), and the stateless ops.

The stateless ops give TF 2.21's numbers for a seed, bit for bit on the host (jdist.tf_compat.philox: TF's
Philox words and its conversions to floats, observed equal on float32 / float64 normals and uniforms and on
integers), and the same words inside compiled code, where the seed may be a traced value (floats within an ulp
there: XLA's log, sin and cos). `truncated_normal` and `categorical` draw with numpy: their distributions,
shapes and dtypes are TF's, their numbers are not.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.core
import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat import philox, traced_random
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.nn_ops import _check_not_tracing, _host_only
from jdist.tf_compat.ops import convert_to_tensor, is_jax
from jdist.typing import ShapeLike, Tensor, TensorLike


def _shape(shape: ShapeLike) -> tuple[int, ...]:
    return tuple(int(s) for s in np.asarray(shape).reshape(-1))


@traced_random.per_call
def truncated_normal(shape: ShapeLike, mean: float = 0.0, stddev: float = 1.0, dtype: DTypeLike = "float32",
                     seed: int | None = None, name: str | None = None) -> np.ndarray:
    """Normal values, redrawn where more than 2 standard deviations from the mean."""
    _check_not_tracing("truncated_normal")
    rng = _host_only("truncated_normal", seed)
    size = _shape(shape)
    values = rng.standard_normal(size)
    outside = np.abs(values) > 2
    while np.any(outside):
        values[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(values) > 2
    return (mean + stddev * values).astype(numpy_dtype(dtype))


@traced_random.per_call
def categorical(logits: TensorLike, num_samples: int, dtype: DTypeLike | None = None, seed: int | None = None,
                name: str | None = None) -> np.ndarray:
    """`num_samples` class indices per row of the 2-D `logits` (unnormalized log-probabilities); int64."""
    _check_not_tracing("categorical")
    rng = _host_only("categorical", seed)
    scores = np.asarray(convert_to_tensor(logits), dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"tf.random.categorical: `logits` must be 2-D [batch_size, num_classes]; got {scores.shape}")
    gumbel = rng.gumbel(size=(scores.shape[0], int(num_samples), scores.shape[1]))
    samples = np.argmax(scores[:, None, :] + gumbel, axis=-1)
    return samples.astype(numpy_dtype(dtype or "int64"))


def _check_seed(op: str, seed: TensorLike) -> None:
    if np.shape(seed) != (2,):
        raise ValueError(f"tf.random.{op}: `seed` must have shape [2] (two ints, as TF's), got shape "
                         f"{list(np.shape(seed))}")


def _words(seed: TensorLike, count: int) -> Any:
    """TF's Philox words for `seed` (jdist.tf_compat.philox): on the host for a value, traced for a traced seed."""
    return philox.traced_words(seed, count) if isinstance(seed, jax.core.Tracer) else philox.host_words(seed, count)


def _finish(values: Any, seed: TensorLike) -> Tensor:
    """Host numbers for a host seed; a JAX array for a JAX seed (traced or not), as before."""
    return jax.numpy.asarray(values) if is_jax(seed) else values


def stateless_normal(shape: ShapeLike, seed: TensorLike, mean: float = 0.0, stddev: float = 1.0,
                     dtype: DTypeLike = "float32", name: str | None = None, alg: str = "auto_select") -> Tensor:
    """TF's numbers for `seed` (Philox, Box-Muller: jdist.tf_compat.philox), times `stddev` plus `mean`."""
    _check_seed("stateless_normal", seed)
    target = numpy_dtype(dtype)
    size = _shape(shape)
    count = int(np.prod(size))
    traced = isinstance(seed, jax.core.Tracer)
    xp = jax.numpy if traced else np
    if target == np.float64:
        if traced:
            raise ValueError("tf.random.stateless_normal: float64 from a seed computed inside compiled code is not "
                             "provided; pass the seed as a value, or draw float32")
        draw = philox.normal_float64(_words(seed, 2 * count + (-2 * count) % 4))[:count]
        values = draw * np.float64(stddev) + np.float64(mean)
    else:
        draw = philox.normal_float32(_words(seed, count + count % 2), xp)[:count]
        values = draw * xp.float32(stddev) + xp.float32(mean)  # float32 arithmetic, as TF's `rnd * stddev + mean`
    return _finish(values.reshape(size).astype(target), seed)


def stateless_uniform(shape: ShapeLike, seed: TensorLike, minval: TensorLike | None = 0,
                      maxval: TensorLike | None = None, dtype: DTypeLike = "float32", name: str | None = None,
                      alg: str = "auto_select") -> Tensor:
    """Uniform in [minval, maxval) (maxval 1 for floats); ints need both bounds, or neither for the full range.
    TF's numbers for `seed` (jdist.tf_compat.philox)."""
    _check_seed("stateless_uniform", seed)
    target = numpy_dtype(dtype)
    size = _shape(shape)
    count = int(np.prod(size))
    traced = isinstance(seed, jax.core.Tracer)
    xp = jax.numpy if traced else np
    if target.kind in "iu":
        if (minval is None) != (maxval is None):
            raise ValueError(f"For integer `dtype` argument {target}, argument `minval` and `maxval` must be both "
                             f"None or not None. Got `minval`={minval} and `maxval`={maxval}.")
        values = _uniform_int(seed, count, target, minval, maxval, traced)
    elif target.itemsize == 8:
        if traced:
            raise ValueError("tf.random.stateless_uniform: float64 from a seed computed inside compiled code is not "
                             "provided; pass the seed as a value, or draw float32")
        low, high = np.asarray(minval, np.float64), np.asarray(1.0 if maxval is None else maxval, np.float64)
        values = philox.unit_float64(_words(seed, 2 * count)) * (high - low) + low
    elif target.itemsize == 2 and not traced:  # float16, bfloat16: TF's own 16-bit conversion, in its arithmetic
        low, high = np.asarray(minval, target), np.asarray(1.0 if maxval is None else maxval, target)
        values = philox.unit_16bit(_words(seed, count), target) * (high - low) + low
    else:
        low = xp.asarray(minval, xp.float32)
        high = xp.asarray(1.0 if maxval is None else maxval, xp.float32)
        values = philox.unit_float32(_words(seed, count), xp) * (high - low) + low  # TF: rnd * (max - min) + min
    return _finish(values.reshape(size).astype(target), seed)


def _uniform_int(seed: TensorLike, count: int, target: np.dtype, minval: Any, maxval: Any, traced: bool) -> Any:
    """TF's integers: a word (two for 64 bits) modulo the range, plus minval; the words themselves for the full
    range."""
    wide = target.itemsize == 8
    if traced:
        if wide:
            raise ValueError("tf.random.stateless_uniform: 64-bit integers from a seed computed inside compiled code "
                             "are not provided (JAX holds 32 bits); pass the seed as a value")
        import jax.numpy as jnp

        words = _words(seed, count)
        if minval is None:
            return jax.lax.bitcast_convert_type(words, jnp.int32)
        span = (jnp.asarray(maxval) - jnp.asarray(minval)).astype(jnp.uint32)
        return (words % span).astype(jnp.int32) + jnp.asarray(minval, jnp.int32)
    words = _words(seed, 2 * count if wide else count)
    bits = (words[0::2].astype(np.uint64) | (words[1::2].astype(np.uint64) << np.uint64(32))) if wide else words
    if minval is None:
        return bits.view(np.dtype(f"{target.kind}{8 if wide else 4}"))
    low = int(np.asarray(minval))
    span = (int(np.asarray(maxval)) - low) & (0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF)
    if span == 0:
        raise ValueError(f"tf.random.stateless_uniform: maxval must be greater than minval, got {minval} and {maxval}")
    return (bits.astype(np.uint64) % np.uint64(span)).astype(np.int64) + low


RANDOM_EXTRA = dict(
    truncated_normal=truncated_normal, categorical=categorical, stateless_normal=stateless_normal,
    stateless_uniform=stateless_uniform,
)
