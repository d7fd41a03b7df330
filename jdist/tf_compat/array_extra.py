"""More of TF's array ops: `tf.unique_with_counts`, `tf.unravel_index`, `tf.reverse_sequence`,
`tf.histogram_fixed_width_bins`, `tf.space_to_batch_nd` / `tf.batch_to_space`, `tf.parallel_stack`,
`tf.broadcast_dynamic_shape` / `broadcast_static_shape`, `tf.fingerprint`.

On numpy or JAX as `ops`. TF's rules, observed in TF 2.21: `unique_with_counts` keeps first-occurrence order and
its counts take `out_idx`'s dtype; `unravel_index` gives [len(dims), ...] in the indices' dtype;
`histogram_fixed_width_bins` clips to the first and last bin and is int32 whatever `dtype` says; `fingerprint`
is farmhash Fingerprint64 of each row's bytes, as 8 little-endian uint8 (for text rows of several strings: of
their fingerprints).
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat.array_ops import _ints, unique
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.farmhash import fingerprint64
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import Tensor, TensorLike

UniqueWithCounts = collections.namedtuple("UniqueWithCounts", ["y", "idx", "count"])  # TF's result type


def unique_with_counts(x: TensorLike, out_idx: DTypeLike = "int32", name: str | None = None) -> UniqueWithCounts:
    """`(y, idx, count)`: `tf.unique`'s values and indices, and how often each value occurs. On the host only."""
    if not is_jax(x) and np.ndim(convert_to_tensor(x)) != 1:
        raise InvalidArgumentError(message=f"unique expects a 1D vector, got shape {list(np.shape(x))} "
                                           "[Op:UniqueWithCounts]")
    y, idx = unique(x, out_idx)
    counts = np.bincount(np.asarray(idx, np.int64), minlength=len(y)).astype(numpy_dtype(out_idx))
    return UniqueWithCounts(y, idx, counts)


def unravel_index(indices: TensorLike, dims: TensorLike, name: str | None = None) -> Tensor:
    """The coordinates of flat `indices` in an array of shape `dims`: shape [len(dims)] + indices' shape."""
    flat, shape = convert_to_tensor(indices), convert_to_tensor(dims)
    if np.dtype(flat.dtype).kind not in "iu":
        raise TypeError(f"tf.unravel_index: `indices` must be int32 or int64, got {np.dtype(flat.dtype).name}")
    extent = _ints(shape)
    if not is_jax(flat):
        values = np.asarray(flat)
        if values.size and (values.min() < 0 or values.max() >= int(np.prod(extent))):
            raise InvalidArgumentError(message=f"index is out of bound as with dims {extent} [Op:UnravelIndex]")
    module = xp(flat)
    return module.stack(module.unravel_index(flat, tuple(extent))).astype(flat.dtype)


def reverse_sequence(input: TensorLike, seq_lengths: TensorLike, seq_axis: int | None = None,  # noqa: A002
                     batch_axis: int | None = None, name: str | None = None) -> Tensor:
    """Reverses the first `seq_lengths[b]` entries along `seq_axis` of each batch entry b (along `batch_axis`,
    0 by default); the rest stay."""
    x, lengths = convert_to_tensor(input), convert_to_tensor(seq_lengths)
    if seq_axis is None:
        raise ValueError("tf.reverse_sequence: give `seq_axis`")
    seq, batch = int(seq_axis) % x.ndim, int(batch_axis or 0) % x.ndim
    if lengths.shape != (x.shape[batch],):
        raise InvalidArgumentError(message=f"Length of seq_lengths != input.dims({batch}), ({lengths.shape[0]} vs. "
                                           f"{x.shape[batch]}) [Op:ReverseSequence]")
    if not is_jax(lengths) and np.any(np.asarray(lengths) > x.shape[seq]):
        raise InvalidArgumentError(message=f"seq_lens({int(np.argmax(np.asarray(lengths) > x.shape[seq]))}) > "
                                           f"input.dims({seq}) [Op:ReverseSequence]")
    module = xp(x, lengths)
    position = module.arange(x.shape[seq]).reshape([-1 if d == seq else 1 for d in range(x.ndim)])
    length = lengths.reshape([-1 if d == batch else 1 for d in range(x.ndim)]).astype(position.dtype)
    source = module.where(position < length, length - 1 - position, position)
    return module.take_along_axis(x, module.broadcast_to(source, x.shape), axis=seq)


def histogram_fixed_width_bins(values: TensorLike, value_range: TensorLike, nbins: int = 100,
                               dtype: DTypeLike = "int32", name: str | None = None) -> Tensor:
    """The bin of each value among `nbins` equal bins over `value_range` (outside values go to the first or last
    bin): floor(nbins * (v - low) / (high - low)) in the values' dtype, as TF's; int32, as TF's (`dtype` is not
    applied there either)."""
    x = convert_to_tensor(values)
    module = xp(x, value_range)
    bounds = module.asarray(value_range, x.dtype)
    scaled = (x - bounds[0]) / (bounds[1] - bounds[0])
    index = module.floor(module.asarray(nbins, x.dtype) * scaled)
    return module.clip(index, 0, int(nbins) - 1).astype(np.int32)


def _blocks(op: str, x: Any, block_shape: TensorLike, pairs: TensorLike) -> tuple[list[int], list[list[int]]]:
    block = _ints(block_shape)
    edges = _ints(pairs)
    if len(edges) != 2 * len(block) or x.ndim < len(block) + 1:
        raise ValueError(f"{op}: give one block size per spatial dimension and a [{len(block)}, 2] "
                         f"{'paddings' if 'space' in op else 'crops'}; got {block}, {edges} for shape {list(x.shape)}")
    return block, [edges[2 * i:2 * i + 2] for i in range(len(block))]


def space_to_batch_nd(input: TensorLike, block_shape: TensorLike, paddings: TensorLike,  # noqa: A002
                      name: str | None = None) -> Tensor:
    """Pads the spatial dimensions 1..M, cuts them into `block_shape` blocks and moves the offsets within a
    block to the batch dimension: [batch * prod(block)] + [padded / block] + the rest."""
    x = convert_to_tensor(input)
    block, pads = _blocks("tf.space_to_batch_nd", x, block_shape, paddings)
    module, m = xp(x), len(block)
    x = module.pad(x, [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)] * (x.ndim - 1 - m))
    for i, b in enumerate(block):
        if x.shape[1 + i] % b:
            raise InvalidArgumentError(message=f"padded_shape[{i}]={x.shape[1 + i]} is not divisible by "
                                               f"block_shape[{i}]={b} [Op:SpaceToBatchND]")
    rest = tuple(x.shape[1 + m:])
    split = [x.shape[0]] + [v for i, b in enumerate(block) for v in (x.shape[1 + i] // b, b)] + list(rest)
    order = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, len(split)))
    moved = module.transpose(module.reshape(x, split), order)
    return module.reshape(moved, [x.shape[0] * int(np.prod(block))] + [x.shape[1 + i] // b for i, b in
                                                                        enumerate(block)] + list(rest))


def batch_to_space(input: TensorLike, block_shape: TensorLike, crops: TensorLike,  # noqa: A002
                   name: str | None = None) -> Tensor:
    """The inverse of `space_to_batch_nd`: batch entries back to blocks of the spatial dimensions, then `crops`
    removed from their starts and ends."""
    x = convert_to_tensor(input)
    block, cuts = _blocks("tf.batch_to_space", x, block_shape, crops)
    module, m, total = xp(x), len(block), int(np.prod(block))
    if x.shape[0] % total:
        raise InvalidArgumentError(message=f"Input batch dimension ({x.shape[0]}) is not divisible by product of "
                                           f"block sizes ({total}) [Op:BatchToSpaceND]")
    batch, spatial, rest = x.shape[0] // total, list(x.shape[1:1 + m]), list(x.shape[1 + m:])
    split = module.reshape(x, block + [batch] + spatial + rest)
    order = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    joined = module.reshape(module.transpose(split, order), [batch] + [s * b for s, b in zip(spatial, block)] + rest)
    index = (slice(None),) + tuple(slice(c[0], joined.shape[1 + i] - c[1]) for i, c in enumerate(cuts))
    return joined[index]


def space_to_batch(input: TensorLike, block_shape: TensorLike, paddings: TensorLike,  # noqa: A002
                   name: str | None = None) -> Tensor:
    """`tf.space_to_batch` (TF 2's): `space_to_batch_nd`."""
    return space_to_batch_nd(input, block_shape, paddings)


def parallel_stack(values: Sequence[TensorLike], name: str = "parallel_stack") -> Tensor:
    """`tf.stack(values)` (TF's runs only in a graph; eager TF refuses it, jdist stacks everywhere)."""
    tensors = [convert_to_tensor(v) for v in values]
    return xp(*tensors).stack(tensors)


def broadcast_dynamic_shape(shape_x: TensorLike, shape_y: TensorLike) -> Tensor:
    """The shape two shapes broadcast to, as a tensor in their dtype."""
    x, y = convert_to_tensor(shape_x), convert_to_tensor(shape_y)
    try:
        out = np.broadcast_shapes(tuple(_ints(x)), tuple(_ints(y)))
    except ValueError:
        raise InvalidArgumentError(message=f"Incompatible shapes: {_ints(x)} vs. {_ints(y)} [Op:BroadcastArgs]") \
            from None
    return np.asarray(out, np.result_type(x.dtype, y.dtype))


def broadcast_static_shape(shape_x: Sequence[int | None], shape_y: Sequence[int | None]) -> TensorShape:
    """The `TensorShape` two shapes broadcast to; an unknown dimension stays unknown against 1."""
    x, y = list(TensorShape(shape_x)), list(TensorShape(shape_y))
    width = max(len(x), len(y))
    x, y = [1] * (width - len(x)) + x, [1] * (width - len(y)) + y
    out = []
    for a, b in zip(x, y):
        if a is not None and b is not None and a != b and 1 not in (a, b):
            raise ValueError("Incompatible shapes for broadcasting. Two shapes are compatible if for each dimension "
                             "pair they are either equal or one of them is 1. Received: "
                             f"{tuple(shape_x)} and {tuple(shape_y)}.")
        out.append(b if a == 1 else a if b == 1 else a if a is not None else b)
    return TensorShape(out)


def _fingerprint_rows(data: np.ndarray) -> np.ndarray:
    rows = data.reshape(data.shape[0], -1)
    if rows.dtype.kind in "OSU":
        texts = [[v if isinstance(v, bytes) else str(v).encode() for v in row] for row in rows]
        if rows.shape[1] != 1:  # several strings: the fingerprint of their fingerprints' bytes
            texts = [[np.asarray([fingerprint64(t) for t in row], "<u8").tobytes()] for row in texts]
        hashes = [fingerprint64(row[0]) for row in texts]
    else:
        hashes = [fingerprint64(np.ascontiguousarray(row).tobytes()) for row in rows]
    return np.asarray(hashes, "<u8").reshape(-1).view(np.uint8).reshape(len(hashes), 8)


def fingerprint(data: TensorLike, method: str = "farmhash64", name: str | None = None) -> Tensor:
    """Each row's farmhash Fingerprint64 as 8 uint8 (little-endian): shape [rows, 8]. Inside compiled code it is
    computed on the host (a callback)."""
    if method != "farmhash64":
        raise InvalidArgumentError(message=f"Unsupported fingerprint method: {method} [Op:Fingerprint]")
    x = convert_to_tensor(data)
    if x.ndim == 0:
        raise InvalidArgumentError(message="`data` should have at least one dimension: [] [Op:Fingerprint]")
    if is_jax(x):
        spec = jax.ShapeDtypeStruct((x.shape[0], 8), jnp.uint8)
        return jax.pure_callback(lambda v: _fingerprint_rows(np.asarray(v)), spec, x)
    return _fingerprint_rows(np.asarray(x))


TOP_LEVEL = dict(
    unique_with_counts=unique_with_counts, unravel_index=unravel_index, reverse_sequence=reverse_sequence,
    histogram_fixed_width_bins=histogram_fixed_width_bins, space_to_batch_nd=space_to_batch_nd,
    space_to_batch=space_to_batch, batch_to_space=batch_to_space, parallel_stack=parallel_stack,
    broadcast_dynamic_shape=broadcast_dynamic_shape, broadcast_static_shape=broadcast_static_shape,
    fingerprint=fingerprint,
)
