"""More of `tf.sparse`: indicators, sparse segment reductions, softmax, elementwise max/min, split, expand_dims,
fill_empty_rows, reset_shape, mask, bincount and feature crosses, with TF 2.21's semantics (observed).

Ops with a fixed output size (`to_indicator`, `segment_*` given `num_segments`, `softmax`, `expand_dims`,
`reset_shape` given `new_shape`, `sampled_addmm`) work on numpy and inside compiled code (JAX); the ones whose
number of entries depends on the values (`maximum`, `minimum`, `split`, `fill_empty_rows`, `mask`, `bincount`,
`cross`, `cross_hashed`) compute on the host, as `tf.sparse.from_dense` does.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.farmhash import fingerprint64
from jdist.tf_compat.indexed_slices import IndexedSlices
from jdist.tf_compat.linalg_ops import invalid
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.tf_compat.sparse import SparseTensor, _sparse, _traced
from jdist.typing import Tensor, TensorLike


def _host(sp: SparseTensor, op: str) -> tuple[np.ndarray, np.ndarray]:
    """The indices and values on the host; compiled code cannot give a data-dependent number of entries."""
    if _traced(sp.indices, sp.values):
        raise ValueError(f"tf.sparse.{op} has a data-dependent number of entries, which compiled code "
                         "(strategy.run, jax.jit) cannot produce; call it on the host")
    return np.asarray(sp.indices, np.int64), np.asarray(sp.values)


def _flat_rows(module: Any, indices: Any, shape: Sequence[int]) -> Any:
    """Each entry's position among the rows (all dimensions but the last), flattened row-major."""
    flat = module.zeros_like(indices[:, 0])
    for i, n in enumerate(shape[:-1]):
        flat = flat * n + indices[:, i]
    return flat


def to_indicator(sp_input: SparseTensor, vocab_size: int, name: str | None = None) -> Tensor:
    """`tf.sparse.to_indicator`: a bool tensor `shape[:-1] + [vocab_size]`, true at each row's values."""
    sp = _sparse(sp_input, "to_indicator")
    module = xp(sp.indices, sp.values)
    shape = tuple(sp.shape[:-1]) + (int(vocab_size),)
    ids = sp.values.astype(np.int64) if module is np else sp.values.astype(sp.indices.dtype)
    coords = tuple(sp.indices[:, i] for i in range(len(shape) - 1)) + (ids,)
    if module is np:
        if len(ids) and ((ids < 0).any() or (ids >= shape[-1]).any()):
            raise invalid(f"Indices are not valid (out of bounds).  Shape: {list(shape)}")
        out = np.zeros(shape, bool)
        out[coords] = True
        return out
    return module.zeros(shape, bool).at[coords].set(True, mode="drop")


def _segment(kind: str, data: TensorLike, indices: TensorLike, segment_ids: TensorLike,
             num_segments: int | None) -> Tensor:
    x, idx, ids = (convert_to_tensor(v) for v in (data, indices, segment_ids))
    module = xp(x, idx, ids)
    if kind != "sum" and np.dtype(x.dtype).kind != "f":
        raise invalid(f"Value for attr 'T' of {np.dtype(x.dtype).name} is not in the list of allowed values: "
                      f"bfloat16, half, float, double (tf.sparse.segment_{kind} takes floats; cast the data)")
    if not _traced(idx, ids):
        host_idx, host_ids = np.asarray(idx).reshape(-1), np.asarray(ids).reshape(-1)
        bad = np.flatnonzero((host_idx < 0) | (host_idx >= x.shape[0]))
        if bad.size:
            raise invalid(f"Bad: indices[{bad[0]}] == {host_idx[bad[0]]} out of range [0, {x.shape[0]})")
        if host_ids.size and ((np.diff(host_ids) < 0).any() or host_ids[0] < 0):
            raise invalid("segment ids are not increasing")
        if num_segments is None:
            num_segments = int(host_ids[-1]) + 1 if host_ids.size else 0
        elif host_ids.size and host_ids[-1] >= int(num_segments):
            raise invalid("segment ids must be < num_segments")
    elif num_segments is None:
        raise ValueError(f"tf.sparse.segment_{kind} inside compiled code: the output length depends on the ids' "
                         "values; pass num_segments")
    n = int(num_segments)
    rows = x[idx]
    out_shape = (n,) + tuple(x.shape[1:])
    if module is np:
        total, counts = np.zeros(out_shape, x.dtype), np.zeros(n, x.dtype)
        np.add.at(total, ids, rows)
        np.add.at(counts, ids, 1)
    else:
        total = module.zeros(out_shape, x.dtype).at[ids].add(rows)
        counts = module.zeros(n, x.dtype).at[ids].add(1)
    if kind == "sum":
        return total
    counts = counts.reshape((n,) + (1,) * (x.ndim - 1))
    scale = counts if kind == "mean" else module.sqrt(counts)
    return module.where(counts > 0, total / module.maximum(scale, 1), module.zeros_like(total)).astype(x.dtype)


def segment_sum(data: TensorLike, indices: TensorLike, segment_ids: TensorLike, num_segments: int | None = None,
                name: str | None = None, sparse_gradient: bool = False) -> Tensor:
    """`tf.sparse.segment_sum`: `data[indices]` summed per (sorted) segment id."""
    return _segment("sum", data, indices, segment_ids, num_segments)


def segment_mean(data: TensorLike, indices: TensorLike, segment_ids: TensorLike, num_segments: int | None = None,
                 name: str | None = None, sparse_gradient: bool = False) -> Tensor:
    """`tf.sparse.segment_mean`: `data[indices]` averaged per (sorted) segment id; 0 for empty segments."""
    return _segment("mean", data, indices, segment_ids, num_segments)


def segment_sqrt_n(data: TensorLike, indices: TensorLike, segment_ids: TensorLike, num_segments: int | None = None,
                   name: str | None = None, sparse_gradient: bool = False) -> Tensor:
    """`tf.sparse.segment_sqrt_n`: the segment sums divided by the square root of each segment's size."""
    return _segment("sqrt_n", data, indices, segment_ids, num_segments)


def softmax(sp_input: SparseTensor, name: str | None = None) -> SparseTensor:
    """`tf.sparse.softmax`: softmax over each row's entries (the last dimension); absent entries stay absent."""
    sp = _sparse(sp_input, "softmax")
    if len(sp.shape) < 2:
        raise invalid(f"Input should have rank >= 2, but received shape: {list(sp.shape)}")
    if np.dtype(sp.values.dtype).kind != "f":
        raise invalid(f"Value for attr 'T' of {np.dtype(sp.values.dtype).name} is not in the list of allowed "
                      "values: half, float, double (tf.sparse.softmax takes floats)")
    module = xp(sp.indices, sp.values)
    rows = _flat_rows(module, sp.indices, sp.shape)
    n = int(np.prod(sp.shape[:-1]))
    values = sp.values
    if module is np:
        top = np.full(n, -np.inf, values.dtype)
        np.maximum.at(top, rows, values)
        exp = np.exp(values - top[rows])
        total = np.zeros(n, values.dtype)
        np.add.at(total, rows, exp)
    else:
        top = module.full(n, -np.inf, values.dtype).at[rows].max(values)
        exp = module.exp(values - top[rows])
        total = module.zeros(n, values.dtype).at[rows].add(exp)
    return sp.with_values((exp / total[rows]).astype(values.dtype))


def _elementwise(sp_a: SparseTensor, sp_b: SparseTensor, op: str) -> SparseTensor:
    a, b = _sparse(sp_a, op), _sparse(sp_b, op)
    if len(a.shape) != len(b.shape) or tuple(a.shape) != tuple(b.shape):
        raise invalid(f"Operands' shapes do not match: {list(a.shape)} and {list(b.shape)}")
    if np.dtype(a.values.dtype) != np.dtype(b.values.dtype):
        raise invalid(f"tf.sparse.{op}: both operands need one dtype, got {np.dtype(a.values.dtype).name} and "
                      f"{np.dtype(b.values.dtype).name}")
    (ia, va), (ib, vb) = _host(a, op), _host(b, op)
    union, inverse = np.unique(np.concatenate([ia, ib]).reshape(-1, len(a.shape)), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    dense_a, dense_b = np.zeros(len(union), va.dtype), np.zeros(len(union), vb.dtype)
    dense_a[inverse[:len(ia)]], dense_b[inverse[len(ia):]] = va, vb
    return SparseTensor(union, (np.maximum if op == "maximum" else np.minimum)(dense_a, dense_b), a.shape)


def maximum(sp_a: SparseTensor, sp_b: SparseTensor, name: str | None = None) -> SparseTensor:
    """`tf.sparse.maximum`: the elementwise max at every index either has (absent entries count as 0)."""
    return _elementwise(sp_a, sp_b, "maximum")


def minimum(sp_a: SparseTensor, sp_b: SparseTensor, name: str | None = None) -> SparseTensor:
    """`tf.sparse.minimum`: the elementwise min at every index either has (absent entries count as 0)."""
    return _elementwise(sp_a, sp_b, "minimum")


def split(sp_input: SparseTensor | None = None, num_split: int | None = None, axis: int | None = None,
          name: str | None = None) -> list[SparseTensor]:
    """`tf.sparse.split`: `num_split` SparseTensors along `axis`; the first `size % num_split` one longer."""
    sp = _sparse(sp_input, "split")
    if num_split is None or axis is None:
        raise ValueError("tf.sparse.split: num_split and axis are required")
    idx, values = _host(sp, "split")
    axis, count = int(axis) % len(sp.shape), int(num_split)
    size = sp.shape[axis]
    if not 1 <= count <= size:
        raise invalid(f"Input num_split should be between 1 and the splitting dimension size ({size}), got {count}")
    sizes = [size // count + (1 if i < size % count else 0) for i in range(count)]
    starts = np.cumsum([0] + sizes)
    pieces = []
    for start, length in zip(starts[:-1], sizes):
        keep = (idx[:, axis] >= start) & (idx[:, axis] < start + length)
        shifted = idx[keep] - np.eye(len(sp.shape), dtype=np.int64)[axis] * start
        pieces.append(SparseTensor(shifted, values[keep], tuple(length if i == axis else n
                                                                for i, n in enumerate(sp.shape))))
    return pieces


def expand_dims(sp_input: SparseTensor, axis: int | None = None, name: str | None = None) -> SparseTensor:
    """`tf.sparse.expand_dims`: a size-1 dimension inserted at `axis` (-1, the end, by default)."""
    sp = _sparse(sp_input, "expand_dims")
    rank = len(sp.shape)
    axis = -1 if axis is None else int(axis)
    if not -rank - 1 <= axis <= rank:
        raise invalid(f"tf.sparse.expand_dims: axis {axis} is out of range [{-rank - 1}, {rank}]")
    axis = axis % (rank + 1)
    module = xp(sp.indices, sp.values)
    zeros = module.zeros_like(sp.indices[:, :1])
    indices = module.concatenate([sp.indices[:, :axis], zeros, sp.indices[:, axis:]], axis=1)
    return SparseTensor._make(indices, sp.values, tuple(sp.shape[:axis]) + (1,) + tuple(sp.shape[axis:]))


def fill_empty_rows(sp_input: SparseTensor, default_value: TensorLike,
                    name: str | None = None) -> tuple[SparseTensor, np.ndarray]:
    """`tf.sparse.fill_empty_rows`: `default_value` at `[row, 0, ...]` of each row (first dimension) without
    entries, entries in row-major order; and a bool vector of which rows were empty."""
    sp = _sparse(sp_input, "fill_empty_rows")
    idx, values = _host(sp, "fill_empty_rows")
    fill = np.asarray(default_value)
    if values.dtype.kind not in "OSU":
        if fill.dtype.kind == "f" and values.dtype.kind in "iu" and fill != np.round(fill):
            raise TypeError(f"Cannot convert {default_value!r} to EagerTensor of dtype {values.dtype.name}")
        fill = fill.astype(values.dtype)
    else:
        fill = np.asarray(fill.item().encode() if isinstance(fill.item(), str) else fill.item(), object)
    empty = np.ones(sp.shape[0], bool)
    empty[idx[:, 0]] = False
    rows = np.flatnonzero(empty)
    extra = np.zeros((len(rows), len(sp.shape)), np.int64)
    extra[:, 0] = rows
    indices = np.concatenate([idx.reshape(-1, len(sp.shape)), extra])
    filled = np.concatenate([values, np.full(len(rows), fill, dtype=values.dtype)])
    order = np.lexsort(tuple(indices[:, i] for i in reversed(range(len(sp.shape)))))
    return SparseTensor(indices[order], filled[order], sp.shape), empty


def reset_shape(sp_input: SparseTensor, new_shape: Sequence[int] | TensorLike | None = None) -> SparseTensor:
    """`tf.sparse.reset_shape`: the same entries with `new_shape` (no smaller than the old), or by default the
    tightest shape holding the indices (`max index + 1` per dimension)."""
    sp = _sparse(sp_input, "reset_shape")
    if new_shape is None:
        idx, _ = _host(sp, "reset_shape")
        shape = tuple(int(n) for n in (idx.max(axis=0) + 1 if len(idx) else np.zeros(len(sp.shape), np.int64)))
        return SparseTensor._make(sp.indices, sp.values, shape)
    shape = tuple(int(n) for n in np.asarray(new_shape).reshape(-1))
    if len(shape) != len(sp.shape):
        raise ValueError(f"Dimensions {len(shape)} and {len(sp.shape)} are not compatible")
    if any(new < old for new, old in zip(shape, sp.shape)):
        raise ValueError(f"Requested new_shape should have dimension sizes >= sp_input.shape.  Found new_shape "
                         f"({list(shape)}), sp_input.shape ({list(sp.shape)}).")
    return SparseTensor._make(sp.indices, sp.values, shape)


def mask(a: IndexedSlices, mask_indices: TensorLike, name: str | None = None) -> IndexedSlices:
    """`tf.sparse.mask`: the IndexedSlices without the slices whose index is in `mask_indices`; on the host."""
    indices, values = np.asarray(a.indices), np.asarray(a.values)
    keep = ~np.isin(indices, np.asarray(mask_indices))
    return IndexedSlices(values[keep], indices[keep], a.dense_shape)


def bincount(values: SparseTensor | TensorLike, weights: SparseTensor | TensorLike | None = None, axis: int = 0,
             minlength: int | None = None, maxlength: int | None = None, binary_output: bool = False,
             name: str | None = None) -> SparseTensor:
    """`tf.sparse.bincount`: the counts (or summed weights) of each value, as a SparseTensor; `axis=-1` counts
    each row of a matrix apart. Values at or above `maxlength` are dropped; on the host."""
    if weights is not None and binary_output:
        raise ValueError("Arguments `binary_output` and `weights` are mutually exclusive. Please specify only one.")
    if axis not in (0, -1):
        raise ValueError(f"Unsupported value for argument axis={axis}. Only 0 and -1 are currently supported.")
    if isinstance(values, SparseTensor):
        if weights is not None and not isinstance(weights, SparseTensor):
            raise ValueError("Argument `weights` must be a SparseTensor if `values` is a SparseTensor. Received "
                             f"weights={weights!r}")
        idx, data = _host(values, "bincount")
        rows = idx[:, 0] if len(values.shape) > 1 else np.zeros(len(idx), np.int64)
        batch = values.shape[0] if len(values.shape) > 1 else 1
        weight = None if weights is None else _host(_sparse(weights, "bincount"), "bincount")[1]
    else:
        data = np.asarray(convert_to_tensor(values))
        if data.ndim > 2:
            raise invalid(f"Input must be a 1 or 2-dimensional tensor. Got: {list(data.shape)}")
        if isinstance(weights, SparseTensor):
            raise ValueError("tf.sparse.bincount: weights for dense values must be dense")
        weight = None if weights is None else np.asarray(convert_to_tensor(weights)).reshape(-1)
        batch = data.shape[0] if data.ndim == 2 else 1
        rows = np.repeat(np.arange(batch), data.shape[-1]) if data.ndim == 2 else np.zeros(data.size, np.int64)
        data = data.reshape(-1)
    if data.dtype.kind not in "iu":
        raise invalid(f"Value for attr 'T' of {data.dtype.name} is not in the list of allowed values: int32, int64")
    if data.size and data.min() < 0:
        raise invalid("Input values must all be non-negative")
    if axis == 0:
        rows, batch = np.zeros_like(rows), 1
    size = int(maxlength) if maxlength is not None else max(int(minlength or 0),
                                                             (int(data.max()) if data.size else 0) + 1)
    keep = data < size
    out = np.zeros((batch, size), data.dtype if weight is None else weight.dtype)
    np.add.at(out, (rows[keep], data[keep]), 1 if weight is None else weight[keep])
    present = np.zeros((batch, size), bool)
    present[rows[keep], data[keep]] = True
    if binary_output:
        out = present.astype(out.dtype)
    if axis == 0:
        out, present = out[0], present[0]
    indices = np.argwhere(present).astype(np.int64)
    return SparseTensor(indices, out[tuple(indices.T)], out.shape)


def _columns(inputs: Sequence[SparseTensor | TensorLike]) -> list[list[list[Any]]]:
    """Each input's features per batch row (a SparseTensor's entries of that row, a dense row's values)."""
    columns = []
    batch = None
    for i, feature in enumerate(inputs):
        if isinstance(feature, SparseTensor):
            idx, values = _host(feature, "cross")
            n = feature.shape[0]
            rows: list[list[Any]] = [[] for _ in range(n)]
            for row, value in zip(idx[:, 0].tolist(), values.tolist()):
                rows[row].append(value)
        else:
            dense = np.asarray(convert_to_tensor(feature))
            n = dense.shape[0]
            rows = [list(r) for r in dense.reshape(n, -1).tolist()]
        if batch is not None and n != batch:
            kind = "sparse" if isinstance(feature, SparseTensor) else "dense"
            raise invalid(f"Expected batch size {batch} got {n} at {kind} tensor {i}")
        batch = n
        columns.append(rows)
    return columns


def _crossed(inputs: Sequence[SparseTensor | TensorLike], combine: Any, dtype: Any) -> SparseTensor:
    columns = _columns(inputs)
    batch = len(columns[0]) if columns else 0
    indices, values = [], []
    for row in range(batch):
        for position, features in enumerate(itertools.product(*(column[row] for column in columns))):
            indices.append([row, position])
            values.append(combine(features))
    width = max((i[1] + 1 for i in indices), default=0)
    return SparseTensor(np.asarray(indices, np.int64).reshape(-1, 2), np.asarray(values, dtype), (batch, width))


def _text(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def cross(inputs: Sequence[SparseTensor | TensorLike], name: str | None = None,
          separator: str | None = None) -> SparseTensor:
    """`tf.sparse.cross`: per batch row, every combination of one feature of each input, joined by `separator`
    ("_X_") as strings (the first input varies slowest); on the host."""
    joint = ("_X_" if separator is None else separator).encode()
    return _crossed(inputs, lambda features: joint.join(_text(f) for f in features), object)


_KMUL = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1


def _fingerprint_cat64(first: int, second: int) -> int:
    """TF's FingerprintCat64: two 64-bit fingerprints combined."""
    def shift_mix(v: int) -> int:
        return v ^ (v >> 47)
    result = first ^ _KMUL
    result ^= (shift_mix((second * _KMUL) & _MASK) * _KMUL) & _MASK
    result = (result * _KMUL) & _MASK
    result = (shift_mix(result) * _KMUL) & _MASK
    return shift_mix(result)


def cross_hashed(inputs: Sequence[SparseTensor | TensorLike], num_buckets: int = 0, hash_key: int | None = None,
                 name: str | None = None) -> SparseTensor:
    """`tf.sparse.cross_hashed`: `cross`, each combination hashed (FarmHash Fingerprint64 of strings, integers
    as they are, combined with FingerprintCat64 from `hash_key`) into `num_buckets` (int64); on the host."""
    start = 0xDECAFCAFFE if hash_key is None else int(hash_key)

    def combine(features: tuple[Any, ...]) -> int:
        out = start & _MASK
        for feature in features:
            h = int(feature) & _MASK if isinstance(feature, int) else fingerprint64(_text(feature))
            out = _fingerprint_cat64(out, h)
        return out % int(num_buckets) if num_buckets > 0 else out % (2**63 - 1)

    return _crossed(inputs, combine, np.int64)


def sampled_addmm(indices: TensorLike, values: TensorLike, dense_shape: TensorLike, mat1: TensorLike,
                  mat2: TensorLike, beta: float = 1.0, alpha: float = 1.0,
                  output_type: DTypeLike = "float32") -> tuple[Tensor, Tensor, Tensor]:
    """`tf.sparse.sampled_addmm`: `alpha * (mat1 @ mat2)` sampled at `indices` plus `beta * values`; returns
    (indices, values, dense_shape) as TF does. Batched when the inputs have leading dimensions."""
    idx, vals, m1, m2 = (convert_to_tensor(v) for v in (indices, values, mat1, mat2))
    shape = convert_to_tensor(dense_shape)
    module = xp(idx, vals, m1, m2)
    product = module.matmul(m1, m2)
    if not is_jax(shape) and tuple(np.asarray(shape).tolist()) != tuple(product.shape):
        raise ValueError(f"Dense shape: {np.asarray(shape)} does not match output shape: {np.asarray(product.shape)}")
    if not _traced(idx):
        flat = np.asarray(idx).reshape(-1, 2)
        bad = np.flatnonzero(((flat < 0) | (flat >= product.shape[-2:])).any(axis=-1))
        if bad.size:
            raise invalid(f"indices[{bad[0]}] = {flat[bad[0]].tolist()} does not index into the "
                          f"output shape {list(product.shape)}")
    rows, cols = idx[..., 0], idx[..., 1]
    if module is np:
        sampled = np.take_along_axis(product.reshape(product.shape[:-2] + (-1,)),
                                     rows * product.shape[-1] + cols, axis=-1)
    else:
        sampled = jax.numpy.take_along_axis(product.reshape(product.shape[:-2] + (-1,)),
                                            rows * product.shape[-1] + cols, axis=-1)
    out = (alpha * sampled + beta * vals).astype(numpy_dtype(output_type))
    return idx, out, shape


SPARSE = dict(
    to_indicator=to_indicator, segment_sum=segment_sum, segment_mean=segment_mean, segment_sqrt_n=segment_sqrt_n,
    softmax=softmax, maximum=maximum, minimum=minimum, split=split, expand_dims=expand_dims,
    fill_empty_rows=fill_empty_rows, reset_shape=reset_shape, mask=mask, bincount=bincount, cross=cross,
    cross_hashed=cross_hashed, sampled_addmm=sampled_addmm,
)
