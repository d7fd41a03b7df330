"""More of `tf.random`: `truncated_normal`, `categorical` (host-side, as `nn_ops`'s), and the stateless ops.

TF's numbers cannot be reproduced bit for bit; what matches TF 2.21 (observed) is the distributions, shapes and
dtypes, and for the stateless ops that the same `seed` (shape [2]) gives the same numbers. jdist's stateless ops
draw with `jax.random` from a key made of the two seed values, so they give the same numbers on the host (as
numpy) and inside compiled code, where the seed may be a traced value.
"""
from __future__ import annotations

from typing import Any, cast

import jax
import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.nn_ops import _check_not_tracing, _host_only
from jdist.tf_compat.ops import convert_to_tensor, is_jax
from jdist.typing import ShapeLike, Tensor, TensorLike


def _shape(shape: ShapeLike) -> tuple[int, ...]:
    return tuple(int(s) for s in np.asarray(shape).reshape(-1))


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


def _stateless_key(op: str, seed: TensorLike) -> jax.Array:
    if np.shape(seed) != (2,):
        raise ValueError(f"tf.random.{op}: `seed` must have shape [2] (two ints, as TF's), got shape "
                         f"{list(np.shape(seed))}")
    values = jax.numpy.asarray(seed).astype(np.uint32)
    return jax.random.fold_in(jax.random.key(values[0]), values[1])


def _finish(values: jax.Array, seed: TensorLike) -> Tensor:
    return values if is_jax(seed) else np.asarray(values)


def stateless_normal(shape: ShapeLike, seed: TensorLike, mean: float = 0.0, stddev: float = 1.0,
                     dtype: DTypeLike = "float32", name: str | None = None, alg: str = "auto_select") -> Tensor:
    target = numpy_dtype(dtype)
    key = _stateless_key("stateless_normal", seed)
    draw = jax.random.normal(key, _shape(shape), jax.dtypes.canonicalize_dtype(target))
    return _finish(mean + stddev * draw, seed).astype(target) if not is_jax(seed) else mean + stddev * draw


def stateless_uniform(shape: ShapeLike, seed: TensorLike, minval: TensorLike = 0, maxval: TensorLike | None = None,
                      dtype: DTypeLike = "float32", name: str | None = None, alg: str = "auto_select") -> Tensor:
    """Uniform in [minval, maxval) (maxval 1 for floats); ints need both bounds, or neither for the full range."""
    target = numpy_dtype(dtype)
    key = _stateless_key("stateless_uniform", seed)
    size = _shape(shape)
    if target.kind in "iu":
        if (minval is None) != (maxval is None):
            raise ValueError(f"For integer `dtype` argument {target}, argument `minval` and `maxval` must be both "
                             f"None or not None. Got `minval`={minval} and `maxval`={maxval}.")
        low, high = (np.iinfo(target).min, np.iinfo(target).max) if maxval is None else (minval, maxval)
        low, high = cast(Any, low), cast(Any, high)  # ints or int arrays, as jax.random takes
        draw = jax.random.randint(key, size, low, high, jax.dtypes.canonicalize_dtype(target))
    else:
        draw = jax.random.uniform(key, size, jax.dtypes.canonicalize_dtype(target), cast(Any, minval),
                                  cast(Any, 1.0 if maxval is None else maxval))
    return _finish(draw, seed).astype(target) if not is_jax(seed) else draw


RANDOM_EXTRA = dict(
    truncated_normal=truncated_normal, categorical=categorical, stateless_normal=stateless_normal,
    stateless_uniform=stateless_uniform,
)
