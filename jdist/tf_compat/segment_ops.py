"""TF's segment reductions and rankings: `tf.math.segment_sum`, `unsorted_segment_max`, `top_k`, `in_top_k`.

On numpy or JAX as `ops`. TF's rules, observed in TF 2.21: a segment no id names is 0 in `segment_*` (ids
sorted, output length `max(id) + 1`), but the dtype's lowest value in `unsorted_segment_max` (-3.4028235e38 for
float32, not -inf); negative ids are dropped by the `unsorted_*` ops; `segment_mean` of ints truncates, while
`unsorted_segment_mean` of int32 is float64; `top_k` gives int32 indices, the lower index first among ties.
"""
from __future__ import annotations

import collections
from types import ModuleType

import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat.math_ops import truediv
from jdist.tf_compat.ops import _index_dtype, convert_to_tensor, is_jax, xp
from jdist.typing import ArrayLike, Tensor, TensorLike


def _lowest(dtype: np.dtype) -> float | int:
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _segments(module: ModuleType, kind: str, data: ArrayLike, ids: ArrayLike, n: int) -> tuple[Tensor, Tensor]:
    """Per segment: the sum or max of `data`'s rows with that id, and how many rows it has. Ids outside
    [0, n) are dropped."""
    keep = (ids >= 0) & (ids < n)
    safe = module.where(keep, ids, 0)
    mask = keep.reshape(keep.shape + (1,) * (data.ndim - ids.ndim))
    counts_shape = (n,)
    if module is np:
        counts = np.zeros(counts_shape, np.int64)
        np.add.at(counts, safe[keep], 1)
        if kind == "sum":
            out = np.zeros((n,) + data.shape[ids.ndim:], data.dtype)
            np.add.at(out, safe[keep], data[keep])
        else:
            out = np.full((n,) + data.shape[ids.ndim:], _lowest(data.dtype), data.dtype)
            np.maximum.at(out, safe[keep], data[keep])
        return out, counts
    counts = module.zeros(counts_shape, np.int32).at[safe].add(keep.astype(np.int32))
    if kind == "sum":
        out = module.zeros((n,) + data.shape[ids.ndim:], data.dtype).at[safe].add(
            module.where(mask, data, 0))
    else:
        low = _lowest(data.dtype)
        out = module.full((n,) + data.shape[ids.ndim:], low, data.dtype).at[safe].max(
            module.where(mask, data, low))
    return out, counts


def _sorted_count(op: str, ids: ArrayLike) -> int:
    """`max(id) + 1` for the sorted-segment ops, which need ids known on the host (the output's length)."""
    if is_jax(ids):
        try:
            return int(ids.max()) + 1 if ids.size else 0
        except Exception as error:  # a tracer: the length would depend on the values
            raise ValueError(f"tf.math.{op} inside compiled code: the output length depends on the ids' values; use "
                             f"tf.math.unsorted_{op}(data, segment_ids, num_segments) with a fixed count") from error
    values = np.asarray(ids)
    if values.size and (np.any(np.diff(values.reshape(-1)) < 0) or values.min() < 0):
        raise ValueError(f"tf.math.{op}: segment ids must be sorted and non-negative (TF: 'segment ids are not "
                         f"increasing'); got {values.tolist()}; use tf.math.unsorted_{op} for unsorted ids")
    return int(values.max()) + 1 if values.size else 0


def _check_unsorted(op: str, ids: ArrayLike, n: int) -> None:
    if not is_jax(ids) and np.size(ids) and np.max(ids) >= n:
        raise ValueError(f"tf.math.{op}: segment id {int(np.max(ids))} is out of range [0, {n}) (TF raises); "
                         "negative ids are dropped, ids >= num_segments are an error")


def _empty_to_zero(module: ModuleType, out: Tensor, counts: Tensor) -> Tensor:
    empty = (counts == 0).reshape(counts.shape + (1,) * (out.ndim - 1))
    return module.where(empty, module.zeros_like(out), out)


def _mean(module: ModuleType, total: Tensor, counts: Tensor, truncate: bool) -> Tensor:
    safe = module.maximum(counts, 1).reshape(counts.shape + (1,) * (total.ndim - 1))
    if total.dtype.kind in "iu" and truncate:
        return module.trunc(total / safe).astype(total.dtype)
    if total.dtype.kind in "iu":
        return truediv(total, safe.astype(total.dtype))
    return (total / safe).astype(total.dtype)


def segment_sum(data: TensorLike, segment_ids: TensorLike, name: str | None = None) -> Tensor:
    """Sum of `data`'s rows per (sorted) segment id; segments no id names are 0."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    return _segments(xp(data, ids), "sum", data, ids, _sorted_count("segment_sum", ids))[0]


def segment_mean(data: TensorLike, segment_ids: TensorLike, name: str | None = None) -> Tensor:
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    module = xp(data, ids)
    total, counts = _segments(module, "sum", data, ids, _sorted_count("segment_mean", ids))
    return _mean(module, total, counts, truncate=True)


def segment_max(data: TensorLike, segment_ids: TensorLike, name: str | None = None) -> Tensor:
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    module = xp(data, ids)
    out, counts = _segments(module, "max", data, ids, _sorted_count("segment_max", ids))
    return _empty_to_zero(module, out, counts)


def unsorted_segment_sum(data: TensorLike, segment_ids: TensorLike, num_segments: int,
                         name: str | None = None) -> Tensor:
    """Sum of `data`'s rows per segment id in any order, for ids in [0, num_segments) (negative ids dropped)."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    _check_unsorted("unsorted_segment_sum", ids, int(num_segments))
    return _segments(xp(data, ids), "sum", data, ids, int(num_segments))[0]


def unsorted_segment_mean(data: TensorLike, segment_ids: TensorLike, num_segments: int,
                          name: str | None = None) -> Tensor:
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    _check_unsorted("unsorted_segment_mean", ids, int(num_segments))
    module = xp(data, ids)
    total, counts = _segments(module, "sum", data, ids, int(num_segments))
    return _mean(module, total, counts, truncate=False)


def unsorted_segment_max(data: TensorLike, segment_ids: TensorLike, num_segments: int,
                         name: str | None = None) -> Tensor:
    """Max per segment; a segment no id names holds the dtype's lowest value, as TF's."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    _check_unsorted("unsorted_segment_max", ids, int(num_segments))
    return _segments(xp(data, ids), "max", data, ids, int(num_segments))[0]


def descending_order(x: ArrayLike, axis: int = -1) -> ArrayLike:
    """Indices sorting `x` from largest to smallest along `axis`, equal values in their original order."""
    module = xp(x)
    if module is not np:
        return module.argsort(x, axis=axis, stable=True, descending=True)
    n = x.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)


TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])  # TF's result type (`.values`, `.indices`)


def top_k(input: TensorLike, k: int = 1, sorted: bool = True, index_type: DTypeLike = "int32",  # noqa: A002
          name: str | None = None) -> TopKV2:
    """The `k` largest entries of the last axis and their indices (largest first; `sorted=False` gives the same
    order, one TF allows)."""
    x = convert_to_tensor(input)
    k = int(k)
    if x.ndim == 0 or k > x.shape[-1] or k < 0:
        raise ValueError(f"tf.math.top_k: `input` must have at least k={k} entries on its last axis; "
                         f"got shape {x.shape}")
    module = xp(x)
    indices = descending_order(x)[..., :k]
    return TopKV2(module.take_along_axis(x, indices, axis=-1), indices.astype(_index_dtype(x, index_type)))


def in_top_k(targets: TensorLike, predictions: TensorLike, k: int, name: str | None = None) -> Tensor:
    """Whether each target's prediction is among its row's `k` largest (ties count in its favour); False for a
    target outside the row or a row holding a non-finite prediction, as TF's."""
    targets, predictions = convert_to_tensor(targets), convert_to_tensor(predictions)
    module = xp(targets, predictions)
    classes = predictions.shape[-1]
    inside = (targets >= 0) & (targets < classes)
    safe = module.where(inside, targets, 0).astype(np.int32)
    target_score = module.take_along_axis(predictions, safe[:, None], axis=-1)
    more = module.sum(predictions > target_score, axis=-1)
    finite = module.all(module.isfinite(predictions), axis=-1)
    return inside & finite & (more < k)


SEGMENTS = dict(
    segment_sum=segment_sum, segment_mean=segment_mean, segment_max=segment_max,
    unsorted_segment_sum=unsorted_segment_sum, unsorted_segment_mean=unsorted_segment_mean,
    unsorted_segment_max=unsorted_segment_max, top_k=top_k, in_top_k=in_top_k,
)
