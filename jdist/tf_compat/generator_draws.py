"""The numbers a `tf.random.Generator` draws: pure JAX functions of its state, the same on the host and inside
compiled code (`strategy.run`, `tf.function`), so a generator used in both goes on with one stream.

The state is four uint32 words: the counter's low and high halves and the key's (TF's Philox state [counter,
counter_high, key], without counter_high). A draw's `jax.random` key folds the key and the counter (plus an
`offset`, and a replica id for per-replica streams) into a threefry key; each draw moves the counter by one.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.core
import jax.numpy as jnp
import numpy as np

_REPLICA_TAG = 0x9E3779B9  # separates per-replica streams from offset ones


def x64() -> bool:
    """Whether JAX holds 64-bit values (`jax_enable_x64`)."""
    return jax.dtypes.canonicalize_dtype(np.int64) == np.dtype(np.int64)


def add(words: Any, step: Any) -> Any:
    """`words` with the 64-bit counter (words 0, 1) moved on by `step` (uint32 arithmetic, with carry)."""
    xp = jnp if isinstance(words, jax.Array) else np
    words = xp.asarray(words).astype(xp.uint32)
    low = words[0] + xp.asarray(step).astype(xp.uint32)
    high = words[1] + (low < words[0]).astype(xp.uint32)
    return xp.stack([low, high, words[2], words[3]])


def key_for(words: Any, offset: Any = 0, replica: Any = None) -> jax.Array:
    """The draw's key: the generator's key and counter (+ `offset`), and `replica` for a per-replica stream."""
    words = add(jnp.asarray(words), offset)
    key = jax.random.key(0)
    for word in (words[2], words[3], words[0], words[1]):
        key = jax.random.fold_in(key, word)
    if replica is not None:
        key = jax.random.fold_in(jax.random.fold_in(key, _REPLICA_TAG), jnp.asarray(replica).astype(jnp.uint32))
    return key


def _int_bits(key: jax.Array, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Integers over `dtype`'s whole range; 64-bit ones from two 32-bit draws (combined on the host)."""
    if dtype.itemsize <= 4:
        return jax.random.bits(key, shape, jnp.dtype(f"uint{dtype.itemsize * 8}")).view(
            jnp.dtype(dtype)) if dtype.kind == "i" else jax.random.bits(key, shape, jnp.dtype(dtype))
    words = jax.random.bits(key, (*shape, 2), jnp.uint32)
    if isinstance(words, jax.core.Tracer) and not x64():  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.random.Generator: {dtype} values inside compiled code need 64-bit JAX "
                         "(jax.config.update('jax_enable_x64', True)); draw int32 / uint32 there instead.")
    pairs = np.asarray(words).astype(np.uint64)
    return ((pairs[..., 1] << np.uint64(32)) | pairs[..., 0]).view(dtype)


Sampler = Callable[[jax.Array], Any]


def normal(shape: tuple[int, ...], dtype: np.dtype, mean: Any, stddev: Any) -> Sampler:
    return lambda key: mean + stddev * jax.random.normal(key, shape, jax.dtypes.canonicalize_dtype(dtype))


def truncated_normal(shape: tuple[int, ...], dtype: np.dtype, mean: Any, stddev: Any) -> Sampler:
    return lambda key: mean + stddev * jax.random.truncated_normal(key, -2.0, 2.0, shape,
                                                                   jax.dtypes.canonicalize_dtype(dtype))


def uniform(shape: tuple[int, ...], dtype: np.dtype, minval: Any, maxval: Any) -> Sampler:
    target = jax.dtypes.canonicalize_dtype(dtype)
    if np.dtype(dtype).kind in "iu":
        return lambda key: jax.random.randint(key, shape, minval, maxval, target)
    return lambda key: jax.random.uniform(key, shape, target, minval, maxval)


def full_int(shape: tuple[int, ...], dtype: np.dtype) -> Sampler:
    return lambda key: _int_bits(key, shape, np.dtype(dtype))


def binomial(shape: tuple[int, ...], counts: Any, probs: Any) -> Sampler:
    return lambda key: jax.random.binomial(key, counts, probs, shape)
