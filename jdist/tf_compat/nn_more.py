"""More of `tf.nn`: `lrn`, `crelu`, `softsign`, moments from statistics, `zero_fraction`, `collapse_repeated`,
`batch_norm_with_global_normalization`, the sparse embedding lookups, and `space_to_batch` (TF's
`tf.nn.space_to_batch` is `tf.space_to_batch`).

Computed with numpy on the host and `jax.numpy` on JAX values, as `ops`. TF 2.21's rules (observed): `lrn`
takes 4-D input and turns host input that is not float16 / bfloat16 / float32 into float32 (float64 included);
`softsign` refuses integers, `crelu` keeps them; `weighted_moments` computes float16 in float32 and divides by
the summed weights with 0 where they sum to 0; `sufficient_statistics` gives the count in `x`'s dtype and `shift`
back as given (None stays None); `zero_fraction` is float32 (NaN when empty); `collapse_repeated` pads with 0 to
the longest result; `embedding_lookup_sparse` returns one row per id up to the largest row that has ids and
`safe_embedding_lookup_sparse` one per row of `sp_ids`, dropping ids < 0 and (but for "sum") weights <= 0,
empty rows 0 or `params[default_id]`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.array_extra import space_to_batch
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.nn_ops import embedding_lookup
from jdist.tf_compat.ops import convert_to_tensor, is_jax, require_float, xp
from jdist.tf_compat.sparse import SparseTensor
from jdist.typing import Tensor, TensorLike

_LRN_TYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(jnp.bfloat16))


def local_response_normalization(input: TensorLike, depth_radius: int = 5, bias: float = 1.0,  # noqa: A002
                                 alpha: float = 1.0, beta: float = 0.5, name: str | None = None) -> Tensor:
    """`x / (bias + alpha * sum(x[..., d - r : d + r + 1] ** 2)) ** beta` over the last (depth) axis."""
    x = convert_to_tensor(input)
    if x.ndim != 4:
        raise InvalidArgumentError(None, None, f"in must be 4-dimensional, got shape {tuple(x.shape)} [Op:LRN]")
    if np.dtype(x.dtype) not in _LRN_TYPES:
        if is_jax(x):
            require_float("tf.nn.local_response_normalization", x, complex_ok=False)
        x = x.astype(np.float32)
    module = xp(x)
    radius = int(depth_radius)
    squares = module.pad(x * x, [(0, 0)] * 3 + [(radius, radius)])
    depth = x.shape[-1]
    total = sum(squares[..., k:k + depth] for k in range(2 * radius + 1))
    return (x / (bias + alpha * total) ** beta).astype(x.dtype)


lrn = local_response_normalization


def crelu(features: TensorLike, name: str | None = None, axis: int = -1) -> Tensor:
    """`concat([relu(x), relu(-x)], axis)`."""
    x = convert_to_tensor(features)
    module = xp(x)
    zero = module.zeros((), x.dtype)
    return module.concatenate([module.maximum(x, zero), module.maximum(-x, zero)], axis=axis)


def softsign(features: TensorLike, name: str | None = None) -> Tensor:
    """`x / (1 + |x|)`."""
    x = convert_to_tensor(features)
    require_float("tf.nn.softsign", x, complex_ok=False)
    return (x / (1 + xp(x).abs(x))).astype(x.dtype)


def _axes(axes: Sequence[int] | int) -> tuple[int, ...]:
    return tuple(int(a) for a in np.asarray(axes).reshape(-1))


def weighted_moments(x: TensorLike, axes: Sequence[int], frequency_weights: TensorLike, keepdims: bool = False,
                     name: str | None = None) -> tuple[Tensor, Tensor]:
    """The mean and variance of `x` over `axes`, each entry counted `frequency_weights` times (broadcast);
    0 where the weights sum to 0."""
    x, weights = convert_to_tensor(x), convert_to_tensor(frequency_weights)
    module = xp(x, weights)
    dtype = x.dtype
    wide = np.float32 if np.dtype(dtype) == np.float16 else dtype
    values, weights = x.astype(wide), module.asarray(weights, wide)
    where = _axes(axes)
    total = module.sum(module.broadcast_to(weights, module.broadcast_shapes(values.shape, weights.shape)),
                       axis=where, keepdims=True)
    safe = module.where(total == 0, module.ones_like(total), total)
    mean = module.where(total == 0, 0, module.sum(weights * values, axis=where, keepdims=True) / safe)
    spread = module.sum(weights * module.square(values - mean), axis=where, keepdims=True)
    variance = module.where(total == 0, 0, spread / safe)
    if not keepdims:
        mean, variance = module.squeeze(mean, where), module.squeeze(variance, where)
    return mean.astype(dtype), variance.astype(dtype)


def sufficient_statistics(x: TensorLike, axes: Sequence[int], shift: TensorLike | None = None,
                          keepdims: bool = False, name: str | None = None) -> tuple[Any, Any, Any, Any]:
    """(count, sum of `x - shift`, sum of its squares, `shift`) over `axes`; the count in `x`'s dtype."""
    x = convert_to_tensor(x)
    module = xp(x, shift)
    where = _axes(axes)
    count = module.asarray(np.prod([x.shape[a] for a in where]), x.dtype)
    centred = x if shift is None else x - module.asarray(shift, x.dtype)
    mean_ss = module.sum(centred, axis=where, keepdims=keepdims).astype(x.dtype)
    var_ss = module.sum(centred * centred, axis=where, keepdims=keepdims).astype(x.dtype)
    return count, mean_ss, var_ss, (None if shift is None else module.asarray(shift, x.dtype))


def normalize_moments(counts: TensorLike, mean_ss: TensorLike, variance_ss: TensorLike, shift: TensorLike | None,
                      name: str | None = None) -> tuple[Tensor, Tensor]:
    """The mean and variance from `sufficient_statistics`' sums."""
    mean_ss = convert_to_tensor(mean_ss)
    module = xp(counts, mean_ss, variance_ss, shift)
    divisor = 1 / module.asarray(counts, mean_ss.dtype)
    shifted = mean_ss * divisor
    mean = shifted if shift is None else shifted + module.asarray(shift, mean_ss.dtype)
    variance = module.asarray(variance_ss, mean_ss.dtype) * divisor - module.square(shifted)
    return mean, variance


def zero_fraction(value: TensorLike, name: str | None = None) -> Tensor:
    """The fraction of entries equal to 0, as float32."""
    x = convert_to_tensor(value)
    module = xp(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (module.sum(x == 0).astype(np.float32) / np.float32(x.size)).astype(np.float32)


def batch_norm_with_global_normalization(t: TensorLike, m: TensorLike, v: TensorLike, beta: TensorLike,
                                         gamma: TensorLike, variance_epsilon: float,
                                         scale_after_normalization: bool, name: str | None = None) -> Tensor:
    """`(t - m) / sqrt(v + epsilon) * gamma + beta` (without `gamma` unless `scale_after_normalization`)."""
    x = convert_to_tensor(t)
    module = xp(x, m, v, beta, gamma)
    inverse = 1 / module.sqrt(module.asarray(v, x.dtype) + np.asarray(variance_epsilon, x.dtype))
    if scale_after_normalization:
        inverse = inverse * module.asarray(gamma, x.dtype)
    return (x * inverse + (module.asarray(beta, x.dtype) - module.asarray(m, x.dtype) * inverse)).astype(x.dtype)


def collapse_repeated(labels: TensorLike, seq_length: TensorLike, name: str | None = None) -> tuple[Tensor, Tensor]:
    """Each row's runs of one label merged into one, within its `seq_length`; rows padded with 0 to the longest
    (inside compiled code to the input's width, the longest being unknown there)."""
    labels, lengths = convert_to_tensor(labels), convert_to_tensor(seq_length)
    module = xp(labels, lengths)
    width = labels.shape[1]
    position = module.arange(width)
    inside = position[None, :] < lengths[:, None]
    previous = module.concatenate([module.ones_like(labels[:, :1]), labels[:, :-1]], axis=1)
    keep = inside & ((position[None, :] == 0) | (labels != previous))
    new_length = module.sum(keep, axis=1).astype(lengths.dtype)
    slot = module.cumsum(keep, axis=1) - 1
    target = module.where(keep, slot, width)  # dropped labels go to a column cut off below
    rows = module.arange(labels.shape[0])[:, None] * module.ones_like(target)
    if module is np:
        out = np.zeros((labels.shape[0], width + 1), labels.dtype)
        out[rows, target] = np.where(keep, labels, 0)
        longest = int(new_length.max()) if new_length.size else 0
        return out[:, :longest], new_length
    out = jnp.zeros((labels.shape[0], width + 1), labels.dtype).at[rows, target].set(jnp.where(keep, labels, 0))
    return out[:, :width], new_length


_COMBINERS = ("mean", "sqrtn", "sum")


def _combine(rows: Any, weights: Any, segments: Any, count: int, combiner: str) -> Any:
    module = xp(rows, weights, segments)
    weighted = rows * weights[:, None]
    if module is np:
        total = np.zeros((count, rows.shape[1]), rows.dtype)
        np.add.at(total, segments, weighted)
        norm = np.zeros((count,), rows.dtype)
        np.add.at(norm, segments, weights if combiner == "mean" else weights * weights)
    else:
        total = jnp.zeros((count, rows.shape[1]), rows.dtype).at[segments].add(weighted)
        norm = jnp.zeros((count,), rows.dtype).at[segments].add(weights if combiner == "mean" else weights * weights)
    if combiner == "sum":
        return total
    norm = norm if combiner == "mean" else module.sqrt(norm)
    safe = module.where(norm == 0, module.ones_like(norm), norm)
    return module.where(norm[:, None] == 0, 0, total / safe[:, None]).astype(rows.dtype)


def _sparse_parts(sp_ids: Any, sp_weights: Any, params: Any, combiner: str, op: str) -> tuple[Any, Any, Any]:
    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner}")
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError(f"tf.nn.{op}: sp_ids must be a SparseTensor, got {type(sp_ids).__name__}")
    if sp_weights is not None and not isinstance(sp_weights, SparseTensor):
        raise TypeError(f"tf.nn.{op}: sp_weights must be a SparseTensor or None, got {type(sp_weights).__name__}")
    module = xp(sp_ids.values, params, None if sp_weights is None else sp_weights.values)
    segments = sp_ids.indices[:, 0]
    ids = sp_ids.values
    weights = (module.ones(ids.shape, np.dtype(params.dtype)) if sp_weights is None
               else module.asarray(sp_weights.values, params.dtype))
    return segments, ids, weights


def embedding_lookup_sparse(params: TensorLike, sp_ids: SparseTensor, sp_weights: SparseTensor | None,
                            combiner: str = "mean", max_norm: float | None = None, name: str | None = None,
                            allow_fast_lookup: bool = False) -> Tensor:
    """Per row of `sp_ids`, the `combiner` ("mean", "sqrtn" or "sum") of `params[id]` weighted by `sp_weights`:
    one output row per row of `sp_ids` up to the last that has ids (inside compiled code, every row)."""
    table = convert_to_tensor(params)
    segments, ids, weights = _sparse_parts(sp_ids, sp_weights, table, combiner, "embedding_lookup_sparse")
    rows = embedding_lookup(table, ids, max_norm=max_norm)
    traced = isinstance(segments, jax.core.Tracer)  # pyright: ignore[reportAttributeAccessIssue]
    count = sp_ids.shape[0] if traced else (int(np.max(np.asarray(segments))) + 1 if len(segments) else 0)
    return _combine(rows, weights, segments, count, combiner)


def safe_embedding_lookup_sparse(embedding_weights: TensorLike, sparse_ids: SparseTensor,
                                 sparse_weights: SparseTensor | None = None, combiner: str = "mean",
                                 default_id: int | None = None, max_norm: float | None = None,
                                 name: str | None = None, allow_fast_lookup: bool = False) -> Tensor:
    """`embedding_lookup_sparse` with ids < 0 dropped (and weights <= 0, unless `combiner` is "sum"), one output
    row per row of `sparse_ids`; a row left empty is 0, or `params[default_id]`."""
    table = convert_to_tensor(embedding_weights)
    segments, ids, weights = _sparse_parts(sparse_ids, sparse_weights, table, combiner,
                                           "safe_embedding_lookup_sparse")
    module = xp(table, ids, weights)
    valid = (ids >= 0) & ((weights > 0) if sparse_weights is not None and combiner != "sum" else True)
    rows = embedding_lookup(table, module.where(valid, ids, 0), max_norm=max_norm)
    weights = module.where(valid, weights, 0)
    count = sparse_ids.shape[0]
    out = _combine(rows, weights, segments, count, combiner)
    if module is np:
        present = np.zeros((count,), bool)
        np.add.at(present, segments[valid], True)
    else:
        present = jnp.zeros((count,), bool).at[segments].max(valid)
    fill: Any = (module.zeros((table.shape[1],), table.dtype) if default_id is None
            else embedding_lookup(table, module.asarray(int(default_id)), max_norm=max_norm))
    return module.where(present[:, None], out, fill[None, :])


NN: dict[str, Any] = dict(
    local_response_normalization=local_response_normalization, lrn=lrn, crelu=crelu, softsign=softsign,
    weighted_moments=weighted_moments, sufficient_statistics=sufficient_statistics,
    normalize_moments=normalize_moments, zero_fraction=zero_fraction,
    batch_norm_with_global_normalization=batch_norm_with_global_normalization, collapse_repeated=collapse_repeated,
    embedding_lookup_sparse=embedding_lookup_sparse, safe_embedding_lookup_sparse=safe_embedding_lookup_sparse,
    space_to_batch=space_to_batch,  # tf.nn.space_to_batch is tf.space_to_batch
)
