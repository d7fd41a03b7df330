"""The numbers a `tf.random.Generator` draws: pure JAX functions of its state, the same on the host and inside
compiled code (`strategy.run`, `tf.function`), so a generator used in both goes on with one stream.

The state is four uint32 words: the counter's low and high halves and the key's (TF's Philox state [counter,
counter_high, key], without counter_high). A draw's `jax.random` key folds the key and the counter (plus an
`offset`, and a replica id for per-replica streams) into a threefry key; each draw moves the counter by one.
On the host a draw is one compiled program per distribution, shape and dtype (a `tf.data` map draws per
element), its parameters passed in.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

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


def joined(low: Any, high: Any) -> Any:
    """Two uint32 words (low, high) as one uint64: numpy, or JAX with 64-bit types."""
    xp = jnp if isinstance(low, jax.Array) else np
    return (xp.asarray(high).astype(xp.uint64) << xp.uint64(32)) | xp.asarray(low).astype(xp.uint64)


def key_for(words: Any, offset: Any = 0, replica: Any = None) -> jax.Array:
    """The draw's key: the generator's key and counter (+ `offset`), and `replica` for a per-replica stream."""
    words = add(jnp.asarray(words), offset)
    key = jax.random.key(0)
    for word in (words[2], words[3], words[0], words[1]):
        key = jax.random.fold_in(key, word)
    if replica is not None:
        key = jax.random.fold_in(jax.random.fold_in(key, _REPLICA_TAG), jnp.asarray(replica).astype(jnp.uint32))
    return key


class Sampler(NamedTuple):
    """One distribution: `kind`, the draw's `shape` and numpy `dtype` name, and its parameters (numbers or
    arrays: `mean, stddev`, `minval, maxval`, `counts, probs`)."""

    kind: str
    shape: tuple[int, ...]
    dtype: str
    params: tuple = ()


def _sample(kind: str, shape: tuple[int, ...], dtype: str, key: jax.Array, params: tuple) -> Any:
    target = np.dtype(dtype)
    compute = jax.dtypes.canonicalize_dtype(target)
    if kind == "normal":
        mean, stddev = params
        return mean + stddev * jax.random.normal(key, shape, compute)
    if kind == "truncated_normal":
        mean, stddev = params
        return mean + stddev * jax.random.truncated_normal(key, -2.0, 2.0, shape, compute)
    if kind == "uniform":
        low, high = params
        if target.kind in "iu":
            return jax.random.randint(key, shape, low, high, compute)
        return jax.random.uniform(key, shape, compute, low, high)
    if kind == "binomial":
        counts, probs = params
        return jax.random.binomial(key, counts, probs, shape)
    if kind == "full_int":  # 64-bit values as two uint32 words (joined on the host)
        if target.itemsize > 4:
            return jax.random.bits(key, (*shape, 2), jnp.uint32)
        bits = jax.random.bits(key, shape, jnp.dtype(f"uint{target.itemsize * 8}"))
        return bits.view(compute) if target.kind == "i" else bits
    raise ValueError(f"unknown distribution {kind!r}")


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _host_sample(kind: str, shape: tuple[int, ...], dtype: str, words: jax.Array, params: tuple) -> Any:
    return _sample(kind, shape, dtype, key_for(words), params)


def _finish(sampler: Sampler, values: Any) -> Any:
    target = np.dtype(sampler.dtype)
    traced = isinstance(values, jax.core.Tracer)  # pyright: ignore[reportAttributeAccessIssue]
    if not traced:
        values = np.asarray(values)
    if sampler.kind == "full_int" and target.itemsize > 4:
        if traced and not x64():
            raise ValueError(f"tf.random.Generator: {target} values inside compiled code need 64-bit JAX "
                             "(jax.config.update('jax_enable_x64', True)); draw int32 / uint32 there instead.")
        return joined(values[..., 0], values[..., 1]).view(target)
    return values.astype(jax.dtypes.canonicalize_dtype(target) if traced else target)


def on_host(sampler: Sampler, words: np.ndarray) -> np.ndarray:
    """The draw for the state `words` (no offset, no replica), as numpy of the sampler's dtype."""
    return _finish(sampler, _host_sample(sampler.kind, sampler.shape, sampler.dtype, words, sampler.params))


def traced(sampler: Sampler, key: jax.Array) -> Any:
    """The draw inside compiled code, from a key made by `key_for`."""
    return _finish(sampler, _sample(sampler.kind, sampler.shape, sampler.dtype, key, sampler.params))
