"""More segment and scatter ops: `tf.math.segment_min` / `segment_prod`, `unsorted_segment_min` /
`unsorted_segment_sqrt_n`, `tf.tensor_scatter_nd_sub` / `_max` / `_min`, `tf.dynamic_stitch`.

On numpy or JAX as `ops` (`segment_ops`, `scatter_ops` hold the others). TF's rules, observed in TF 2.21: a
segment no id names is 0 in `segment_min` and 1 in `segment_prod`, but the dtype's highest value in
`unsorted_segment_min` (3.4028235e38 for float32, 2147483647 for int32); `unsorted_segment_sqrt_n` is the sum over
sqrt(count), 0 for an empty segment, floats only; `dynamic_stitch` writes the pieces in order, so a later index
wins, and rows no index names are 0.
"""
from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any, cast

import jax
import numpy as np

from jdist.tf_compat.ops import convert_to_tensor, is_jax, require_float, xp
from jdist.tf_compat.scatter_ops import _coordinates
from jdist.tf_compat.segment_ops import _check_unsorted, _segments, _sorted_count
from jdist.typing import ArrayLike, Tensor, TensorLike


def _highest(dtype: np.dtype) -> float | int:
    return np.finfo(dtype).max if dtype.kind == "f" else np.iinfo(dtype).max


def _reduce(module: ModuleType, kind: str, data: ArrayLike, ids: ArrayLike, n: int) -> tuple[Tensor, Tensor]:
    """Per segment: the min or product of `data`'s rows with that id, and how many rows it has (ids outside
    [0, n) dropped)."""
    keep = (ids >= 0) & (ids < n)
    safe = module.where(keep, ids, 0)
    fill = _highest(np.dtype(data.dtype)) if kind == "min" else 1
    shape = (n,) + tuple(data.shape[ids.ndim:])
    if module is np:
        counts = np.zeros((n,), np.int64)
        np.add.at(counts, safe[keep], 1)
        out = np.full(shape, fill, data.dtype)
        (np.minimum if kind == "min" else np.multiply).at(out, safe[keep], data[keep])
        return out, counts
    mask = keep.reshape(keep.shape + (1,) * (data.ndim - ids.ndim))
    counts = module.zeros((n,), np.int32).at[safe].add(keep.astype(np.int32))
    start = cast(jax.Array, module.full(shape, fill, data.dtype)).at[safe]
    masked = module.where(mask, data, fill)
    return (start.min(masked) if kind == "min" else start.multiply(masked)), counts


def _zero_empty(module: ModuleType, out: Tensor, counts: Tensor) -> Tensor:
    empty = (counts == 0).reshape(counts.shape + (1,) * (out.ndim - 1))
    return module.where(empty, module.zeros_like(out), out)


def segment_min(data: TensorLike, segment_ids: TensorLike, name: str | None = None) -> Tensor:
    """Min of `data`'s rows per (sorted) segment id; segments no id names are 0."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    module = xp(data, ids)
    out, counts = _reduce(module, "min", data, ids, _sorted_count("segment_min", ids))
    return _zero_empty(module, out, counts)


def segment_prod(data: TensorLike, segment_ids: TensorLike, name: str | None = None) -> Tensor:
    """Product of `data`'s rows per (sorted) segment id; segments no id names are 1."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    return _reduce(xp(data, ids), "prod", data, ids, _sorted_count("segment_prod", ids))[0]


def unsorted_segment_min(data: TensorLike, segment_ids: TensorLike, num_segments: int,
                         name: str | None = None) -> Tensor:
    """Min per segment id in any order; a segment no id names holds the dtype's highest value, as TF's."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    _check_unsorted("unsorted_segment_min", ids, int(num_segments))
    return _reduce(xp(data, ids), "min", data, ids, int(num_segments))[0]


def unsorted_segment_sqrt_n(data: TensorLike, segment_ids: TensorLike, num_segments: int,
                            name: str | None = None) -> Tensor:
    """The sum of each segment's rows over sqrt(its row count); 0 for an empty segment. Floats only."""
    data, ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
    require_float("tf.math.unsorted_segment_sqrt_n", data)
    _check_unsorted("unsorted_segment_sqrt_n", ids, int(num_segments))
    module = xp(data, ids)
    total, counts = _segments(module, "sum", data, ids, int(num_segments))
    root = module.sqrt(module.maximum(counts, 1).astype(total.dtype))
    return (total / root.reshape(root.shape + (1,) * (total.ndim - 1))).astype(total.dtype)


def _scatter(op: str, kind: str, tensor: TensorLike, indices: TensorLike, updates: TensorLike) -> Tensor:
    tensor, indices, updates = convert_to_tensor(tensor), convert_to_tensor(indices), convert_to_tensor(updates)
    coordinates = _coordinates(op, indices, tensor.shape)
    if xp(tensor, indices, updates) is np:
        out = np.array(tensor, copy=True)
        ufunc = {"sub": np.subtract, "max": np.maximum, "min": np.minimum}[kind]
        ufunc.at(out, coordinates, updates)
        return out
    at = xp(tensor).asarray(tensor).at[coordinates]
    if kind == "sub":
        return at.add(-xp(updates).asarray(updates), mode="drop")
    return (at.max if kind == "max" else at.min)(updates, mode="drop")


def tensor_scatter_nd_sub(tensor: TensorLike, indices: TensorLike, updates: TensorLike,
                          name: str | None = None) -> Tensor:
    """A copy of `tensor` with `updates` subtracted at `indices` (repeated indices subtract each)."""
    return _scatter("tf.tensor_scatter_nd_sub", "sub", tensor, indices, updates)


def tensor_scatter_nd_max(tensor: TensorLike, indices: TensorLike, updates: TensorLike,
                          name: str | None = None) -> Tensor:
    """A copy of `tensor` holding the larger of it and `updates` at `indices`."""
    return _scatter("tf.tensor_scatter_nd_max", "max", tensor, indices, updates)


def tensor_scatter_nd_min(tensor: TensorLike, indices: TensorLike, updates: TensorLike,
                          name: str | None = None) -> Tensor:
    """A copy of `tensor` holding the smaller of it and `updates` at `indices`."""
    return _scatter("tf.tensor_scatter_nd_min", "min", tensor, indices, updates)


def dynamic_stitch(indices: Sequence[TensorLike], data: Sequence[TensorLike], name: str | None = None) -> Tensor:
    """`merged[indices[m][i...]] = data[m][i...]`, the pieces written in order (a later one wins); the output
    has max(index) + 1 rows, 0 where no index names one. The indices must be host values (they set the length)."""
    if len(indices) != len(data) or not indices:
        raise ValueError(f"tf.dynamic_stitch: give as many `data` pieces as `indices` ({len(indices)} and "
                         f"{len(data)}), at least one")
    if is_jax(*indices):
        raise ValueError("tf.dynamic_stitch inside compiled code: the output length depends on the indices' "
                         "values; pass the indices as host values (the data may be traced)")
    ids = [np.asarray(convert_to_tensor(i)) for i in indices]
    pieces: list[Any] = [convert_to_tensor(d) for d in data]
    flat_ids = np.concatenate([i.reshape(-1) for i in ids]).astype(np.int64)
    rows = int(flat_ids.max()) + 1 if flat_ids.size else 0
    if flat_ids.size and flat_ids.min() < 0:
        raise ValueError(f"tf.dynamic_stitch: indices must be non-negative, got {int(flat_ids.min())}")
    inner = tuple(pieces[0].shape[ids[0].ndim:])
    module = xp(*pieces)
    flat = module.concatenate([module.reshape(p, (-1,) + inner) for p, i in zip(pieces, ids)])
    last = np.full(rows, -1, np.int64)
    np.maximum.at(last, flat_ids, np.arange(flat_ids.size))  # the last piece naming a row wins
    taken = module.take(flat, np.maximum(last, 0), axis=0)
    named = (last >= 0).reshape((rows,) + (1,) * len(inner))
    return module.where(named, taken, module.zeros_like(taken))


SEGMENTS = dict(segment_min=segment_min, segment_prod=segment_prod, unsorted_segment_min=unsorted_segment_min,
                unsorted_segment_sqrt_n=unsorted_segment_sqrt_n)
TOP_LEVEL = dict(tensor_scatter_nd_sub=tensor_scatter_nd_sub, tensor_scatter_nd_max=tensor_scatter_nd_max,
                 tensor_scatter_nd_min=tensor_scatter_nd_min, dynamic_stitch=dynamic_stitch)
