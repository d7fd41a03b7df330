"""More of `tf.random`: the stateless gamma, Poisson, binomial, categorical and truncated normals, the stateful
`gamma` / `poisson`, `Algorithm` and `create_rng_state`.

The stateless ops are deterministic functions of (shape, seed, parameters), as TF's, keyed by the seed's TF
Philox words (jdist.tf_compat.philox): on the host numpy draws from a Philox generator with that key (no JAX
program: a `tf.data` map stays on the host); for a JAX seed (also a traced one, inside compiled code)
`jax.random` draws from a key made of those words. Their distributions, shapes and dtypes are TF 2.21's
(observed); their numbers are not TF's (unlike `stateless_normal` / `stateless_uniform`), and the host's are not
compiled code's. `stateless_truncated_normal` gives TF's numbers exactly for a seed known on the host (TF's
truncated-normal kernel over jdist.tf_compat.philox's words), `jax.random`'s for a traced seed.
`gamma` and `poisson` draw on the host with numpy, as `truncated_normal`.
"""
from __future__ import annotations

import enum
from typing import Any

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
import scipy.special as sp
from jax.typing import DTypeLike

from jdist.tf_compat import philox, traced_random
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.generator_draws import key_for
from jdist.tf_compat.nn_ops import _check_not_tracing, _host_only
from jdist.tf_compat.ops import convert_to_tensor, is_jax
from jdist.tf_compat.random_ops import _check_seed, _shape
from jdist.typing import ShapeLike, Tensor, TensorLike


class Algorithm(enum.Enum):
    """`tf.random.Algorithm`: the generator algorithms, by TF's numbers."""

    PHILOX = 1
    THREEFRY = 2
    AUTO_SELECT = 3


_ALGORITHMS = {"philox": 1, "threefry": 2, "auto_select": 3, 1: 1, 2: 2, 3: 3}
_STATE_SIZES = {1: 3, 2: 2, 3: 3}


def create_rng_state(seed: int | TensorLike, alg: Any) -> np.ndarray:
    """TF's initial generator state for `seed`: an int split into 64-bit words (low first), a list taken as
    words; left-padded with zeros to the algorithm's size (3 for Philox, 2 for ThreeFry), int64."""
    key = getattr(alg, "value", alg)
    key = key.lower() if isinstance(key, str) else key
    if key not in _ALGORITHMS:
        raise ValueError(f"Argument `alg` got unsupported value {alg}. Supported values are philox for the Philox "
                         "algorithm, threefry for the ThreeFry algorithm, and auto_select for auto-selection.")
    size = _STATE_SIZES[_ALGORITHMS[key]]
    if isinstance(seed, (int, np.integer)):
        value, words = int(seed), []
        for _ in range(size):
            words.append(value & 0xFFFFFFFFFFFFFFFF)
            value >>= 64
    else:
        words = [int(w) for w in np.asarray(seed).reshape(-1)]
    signed = [w - (1 << 64) if w >= 1 << 63 else w for w in words][:size]
    return np.asarray([0] * (size - len(signed)) + signed, np.int64)


def _sample(kind: str, shape: tuple[int, ...], dtype: str, key: jax.Array, params: tuple) -> Any:
    compute = jax.dtypes.canonicalize_dtype(np.dtype(dtype))
    if kind == "gamma":
        alpha, beta = params
        return (jax.random.gamma(key, alpha, shape, compute) / beta).astype(compute)
    if kind == "poisson":
        return jax.random.poisson(key, params[0], shape).astype(compute)
    if kind == "binomial":
        counts, probs = params
        return jax.random.binomial(key, counts, probs, shape).astype(compute)
    if kind == "categorical":
        return jax.random.categorical(key, params[0][:, None, :], axis=-1, shape=shape).astype(compute)
    mean, stddev, low, high = params  # truncated normal in [low, high] standard deviations
    draw = jax.random.truncated_normal(key, low, high, shape, compute)
    return (draw * stddev + mean).astype(compute)


def _host_sample(kind: str, shape: tuple[int, ...], seed: TensorLike, params: tuple) -> np.ndarray:
    """numpy's draw for `seed`: a Philox generator keyed by the seed's TF Philox words."""
    words = philox.host_words(seed, 4).astype(np.uint64)
    rng = np.random.Generator(np.random.Philox(key=[int(words[0] | words[1] << np.uint64(32)),
                                                    int(words[2] | words[3] << np.uint64(32))]))
    values = [np.asarray(p, np.float64) for p in params]
    if kind == "gamma":
        return rng.standard_gamma(np.broadcast_to(values[0], shape), shape) / values[1]
    if kind == "poisson":
        return rng.poisson(np.broadcast_to(values[0], shape), shape)
    if kind == "binomial":
        return rng.binomial(np.broadcast_to(values[0], shape).astype(np.int64), values[1], shape)
    if kind == "categorical":
        return np.argmax(values[0][:, None, :] + rng.gumbel(size=shape + values[0].shape[-1:]), axis=-1)
    mean, stddev, low, high = values  # inverse CDF of the normal between low and high standard deviations
    lower, upper = sp.ndtr(low), sp.ndtr(high)
    return sp.ndtri(lower + rng.uniform(size=shape) * (upper - lower)) * stddev + mean


def _draw(op: str, kind: str, shape: tuple[int, ...], dtype: np.dtype, seed: TensorLike, params: tuple) -> Tensor:
    """The draw for `seed`: numpy's on the host (no JAX program), `jax.random`'s for a JAX seed."""
    _check_seed(op, seed)
    if not is_jax(seed):
        return np.asarray(_host_sample(kind, shape, seed, params)).astype(dtype)
    words = philox.traced_words(seed, 4) if isinstance(seed, jax.core.Tracer) else \
        jnp.asarray(philox.host_words(seed, 4))
    compute = dtype.name if kind in ("gamma", "truncated_normal") else "int32"
    return _sample(kind, shape, compute, key_for(words), params).astype(jax.dtypes.canonicalize_dtype(dtype))


def _float_params(*values: TensorLike) -> tuple:
    return tuple(jnp.asarray(v, jnp.float32) if is_jax(v) else np.asarray(v, np.float32) for v in values)


def _ends_with(op: str, size: tuple[int, ...], *params: Any) -> None:
    batch = np.broadcast_shapes(*(np.shape(p) for p in params))
    if len(batch) > len(size) or (batch and tuple(size[len(size) - len(batch):]) != batch):
        raise InvalidArgumentError(message=f"Shape passed in must end with broadcasted shape. ({op}: shape "
                                           f"{list(size)}, parameters' shape {list(batch)})")


def stateless_gamma(shape: ShapeLike, seed: TensorLike, alpha: TensorLike, beta: TensorLike | None = None,
                    dtype: DTypeLike = "float32", name: str | None = None) -> Tensor:
    """Gamma(alpha, rate beta) draws of `shape`, which must end with the parameters' broadcast shape."""
    size, target = _shape(shape), numpy_dtype(dtype)
    alpha, beta = _float_params(alpha, 1.0 if beta is None else beta)
    _ends_with("tf.random.stateless_gamma", size, alpha, beta)
    return _draw("stateless_gamma", "gamma", size, target, seed, (alpha, beta))


def stateless_poisson(shape: ShapeLike, seed: TensorLike, lam: TensorLike, dtype: DTypeLike = "int32",
                      name: str | None = None) -> Tensor:
    """Poisson(lam) draws of `shape` (ending with lam's shape), int32 by default."""
    size = _shape(shape)
    (lam,) = _float_params(lam)
    _ends_with("tf.random.stateless_poisson", size, lam)
    return _draw("stateless_poisson", "poisson", size, numpy_dtype(dtype), seed, (lam,))


def stateless_binomial(shape: ShapeLike, seed: TensorLike, counts: TensorLike, probs: TensorLike,
                       output_dtype: DTypeLike = "int32", name: str | None = None) -> Tensor:
    """Binomial(counts, probs) draws of `shape`, int32 by default."""
    size = _shape(shape)
    counts, probs = _float_params(counts, probs)
    _ends_with("tf.random.stateless_binomial", size, counts, probs)
    return _draw("stateless_binomial", "binomial", size, numpy_dtype(output_dtype), seed, (counts, probs))


def stateless_categorical(logits: TensorLike, num_samples: int, seed: TensorLike, dtype: DTypeLike = "int64",
                          name: str | None = None) -> Tensor:
    """`num_samples` class indices per row of the 2-D `logits` (unnormalized log-probabilities): [batch,
    num_samples], int64 by default."""
    scores = convert_to_tensor(logits)
    if scores.ndim != 2:
        raise ValueError(f"tf.random.stateless_categorical: `logits` must be 2-D [batch_size, num_classes]; got "
                         f"{list(scores.shape)}")
    (scores,) = _float_params(scores)
    size = (scores.shape[0], int(num_samples))
    return _draw("stateless_categorical", "categorical", size, numpy_dtype(dtype), seed, (scores,))


def _block_words(seed: TensorLike, blocks: np.ndarray) -> np.ndarray:
    """TF's Philox words for `seed` at counter blocks `blocks` (any shape): shape + [4]."""
    first, second = (int(v) for v in np.asarray(seed).reshape(-1))
    key, (c2, c3) = philox._scrambled((first, second))
    counters = np.asarray(blocks, np.uint64)
    words = philox._host_rounds([counters, np.zeros_like(counters), np.full_like(counters, c2),
                                 np.full_like(counters, c3)], key)
    return np.stack(words, axis=-1).astype(np.uint32)


def _tf_truncated_normal(seed: TensorLike, count: int, wide: bool) -> np.ndarray:
    """TF's numbers: output group g (4 floats, or 2 doubles) takes Box-Muller normals from Philox blocks
    256 * g (128 * g for doubles) on, keeping those with |z| < 2 (TF's TruncatedNormalDistribution)."""
    group, skip = (2, 128) if wide else (4, 256)
    groups = -(-count // group)
    out = np.empty((groups, group), np.float64 if wide else np.float32)
    pending, blocks = np.arange(groups), 4
    while pending.size:
        words = _block_words(seed, pending[:, None] * skip + np.arange(blocks)[None, :]).reshape(-1)
        normals = philox.normal_float64(words) if wide else philox.normal_float32(words)
        normals = np.asarray(normals).reshape(pending.size, -1)
        kept = np.abs(normals) < 2
        enough = kept.sum(axis=1) >= group
        for row in np.flatnonzero(enough):
            out[pending[row]] = normals[row][kept[row]][:group]
        pending, blocks = pending[~enough], blocks * 2  # rare: more blocks for the groups still short
    return out.reshape(-1)[:count]


def stateless_truncated_normal(shape: ShapeLike, seed: TensorLike, mean: TensorLike = 0.0,
                               stddev: TensorLike = 1.0, dtype: DTypeLike = "float32",
                               name: str | None = None) -> Tensor:
    """Normal draws kept within 2 standard deviations of `mean` (the rest redrawn). TF's numbers for a seed
    known on the host (Philox, jdist.tf_compat.philox); `jax.random`'s for a seed traced in compiled code."""
    size, target = _shape(shape), numpy_dtype(dtype)
    _check_seed("stateless_truncated_normal", seed)
    if isinstance(seed, jax.core.Tracer):
        params = (*_float_params(mean, stddev), np.float32(-2.0), np.float32(2.0))
        return _draw("stateless_truncated_normal", "truncated_normal", size, target, seed, params)
    wide = target == np.float64
    draw = _tf_truncated_normal(seed, int(np.prod(size)), wide).reshape(size)
    compute = np.float64 if wide else np.float32
    values = (draw * np.asarray(stddev, compute) + np.asarray(mean, compute)).astype(target)  # TF: rnd * std + mean
    return jnp.asarray(values) if is_jax(seed) else values


def stateless_parameterized_truncated_normal(shape: ShapeLike, seed: TensorLike, means: TensorLike = 0.0,
                                             stddevs: TensorLike = 1.0, minvals: TensorLike = -2.0,
                                             maxvals: TensorLike = 2.0, name: str | None = None) -> Tensor:
    """Normal(means, stddevs) draws within [minvals, maxvals], float32 (TF's dtype for float parameters)."""
    size = _shape(shape)
    mean, stddev, low, high = _float_params(means, stddevs, minvals, maxvals)
    _ends_with("tf.random.stateless_parameterized_truncated_normal", size, mean, stddev, low, high)
    params = (mean, stddev, (low - mean) / stddev, (high - mean) / stddev)
    return _draw("stateless_parameterized_truncated_normal", "truncated_normal", size, np.dtype(np.float32), seed,
                 params)


@traced_random.per_call
def gamma(shape: ShapeLike, alpha: TensorLike, beta: TensorLike | None = None, dtype: DTypeLike = "float32",
          seed: int | None = None, name: str | None = None) -> np.ndarray:
    """`shape` + the parameters' broadcast shape of Gamma(alpha, rate beta) draws, on the host (numpy's)."""
    _check_not_tracing("gamma")
    rng = _host_only("gamma", seed)
    a, b = np.asarray(alpha, np.float64), np.asarray(1.0 if beta is None else beta, np.float64)
    size = _shape(shape) + np.broadcast_shapes(a.shape, b.shape)
    return (rng.standard_gamma(np.broadcast_to(a, size), size) / b).astype(numpy_dtype(dtype))


@traced_random.per_call
def poisson(shape: ShapeLike, lam: TensorLike, dtype: DTypeLike = "float32", seed: int | None = None,
            name: str | None = None) -> np.ndarray:
    """`shape` + lam's shape of Poisson(lam) draws, on the host (numpy's); float32 by default, as TF's."""
    _check_not_tracing("poisson")
    rng = _host_only("poisson", seed)
    rate = np.asarray(lam, np.float64)
    size = _shape(shape) + rate.shape
    return rng.poisson(np.broadcast_to(rate, size), size).astype(numpy_dtype(dtype))


RANDOM = dict(
    Algorithm=Algorithm, create_rng_state=create_rng_state, stateless_gamma=stateless_gamma,
    stateless_poisson=stateless_poisson, stateless_binomial=stateless_binomial,
    stateless_categorical=stateless_categorical, stateless_truncated_normal=stateless_truncated_normal,
    stateless_parameterized_truncated_normal=stateless_parameterized_truncated_normal, gamma=gamma,
    poisson=poisson,
)
