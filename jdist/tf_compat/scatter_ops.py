"""TF's n-d indexing: `tf.gather_nd`, `tf.scatter_nd`, `tf.tensor_scatter_nd_update` / `_add`, `tf.boolean_mask`.

On numpy or JAX as `ops`. `indices[..., :]` holds a coordinate into the leading dimensions of `params` (or of
the output), so its last dimension is how many dimensions it indexes. TF's rules, observed in TF 2.21:
`scatter_nd` adds up updates to the same coordinate; an index outside the shape is an error on the host (inside
compiled code XLA drops the update); `boolean_mask` has a data-dependent shape and so runs on the host only here.
"""
from __future__ import annotations

from typing import cast

import jax
import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.typing import ArrayLike, ShapeLike, Tensor, TensorLike


def _coordinates(op: str, indices: ArrayLike, shape: tuple[int, ...]) -> tuple:
    """The index tuple for `indices`'s last axis, after checking host indices lie inside `shape`."""
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{op}: `indices` must be integers, got {indices.dtype}")
    depth = indices.shape[-1]
    if depth > len(shape):
        raise ValueError(f"{op}: indices' last dimension ({depth}) is more than the rank of the shape {list(shape)}")
    if not is_jax(indices):
        bounds = np.asarray(shape[:depth])
        bad = np.any((indices < 0) | (indices >= bounds), axis=-1)
        if np.any(bad):
            where = np.argwhere(bad)[0]
            raise OutOfRangeIndexError(None, None, _out_of_range_text(op, where, indices[tuple(where)], shape))
    return tuple(indices[..., i] for i in range(depth))


class OutOfRangeIndexError(InvalidArgumentError, IndexError):
    """TF's InvalidArgumentError for an index outside the shape (an IndexError too, as Python's indexing)."""


# TF's op names in its error texts (observed, TF 2.21)
_TF_OPS = {"tf.gather_nd": "GatherNd", "tf.scatter_nd": "ScatterNd", "tf.tensor_scatter_nd_update":
           "TensorScatterUpdate", "tf.tensor_scatter_nd_add": "TensorScatterAdd", "tf.tensor_scatter_nd_sub":
           "TensorScatterSub", "tf.tensor_scatter_nd_max": "TensorScatterMax", "tf.tensor_scatter_nd_min":
           "TensorScatterMin"}


def _out_of_range_text(op: str, where: np.ndarray, coordinate: ArrayLike, shape: tuple[int, ...]) -> str:
    """TF 2.21's text (observed): "indices[1] = [2, 5] does not index into shape [2,3] [Op:ScatterNd]"; gather_nd
    says "param shape [2,3], node name: GatherNd [Op:GatherNd]"."""
    tf_op = _TF_OPS.get(op, op)
    dims = ",".join(str(int(d)) for d in shape)
    place = ",".join(str(int(i)) for i in where)
    into = f"param shape [{dims}], node name: {tf_op}" if tf_op == "GatherNd" else f"shape [{dims}]"
    shown = np.asarray(coordinate).tolist()
    return (f"indices[{place}] = {shown} does not index into {into} [Op:{tf_op}]\n{op}: every "
            f"coordinate must lie in [0, dimension) of the shape; negative indices do not count from the end")


def _updates_for(op: str, indices: ArrayLike, updates: TensorLike, tensor: ArrayLike) -> ArrayLike:
    """`updates` as TF takes them (observed, TF 2.21): a Python float for an integer tensor is TypeError "Cannot
    convert [1.5] to EagerTensor of dtype int32"; outer dimensions other than the indices' are
    InvalidArgumentError "Outer dimensions of indices and update must match. Indices shape: [1,2], updates
    shape:[2] [Op:TensorScatterUpdate]"."""
    dtype = np.dtype(tensor.dtype)
    python = not hasattr(updates, "dtype") and not isinstance(updates, (np.ndarray, np.generic))
    if python and np.asarray(updates).dtype.kind in "fc" and dtype.kind in "iub":
        raise TypeError(f"Cannot convert {updates!r} to EagerTensor of dtype {dtype.name}")
    out = convert_to_tensor(updates, dtype=dtype) if python else convert_to_tensor(updates)
    outer = tuple(indices.shape[:-1])
    if tuple(out.shape[:len(outer)]) != outer:
        text = ",".join(str(int(d)) for d in indices.shape)
        raise InvalidArgumentError(None, None, f"Outer dimensions of indices and update must match. Indices shape: "
                                               f"[{text}], updates shape:[{','.join(str(d) for d in out.shape)}] "
                                               f"[Op:{_TF_OPS.get(op, op)}]")
    return out


def gather_nd(params: TensorLike, indices: TensorLike, batch_dims: int = 0, name: str | None = None,
              bad_indices_policy: str = "") -> Tensor:
    """`out[i...] = params[indices[i..., :]]`; with `batch_dims` b, indices index each of the b leading batch
    entries of `params` separately."""
    params, indices = convert_to_tensor(params), convert_to_tensor(indices)
    module = xp(params, indices)
    batch = int(batch_dims)
    coordinates = _coordinates("tf.gather_nd", indices, params.shape[batch:])
    if batch:
        leading = tuple(
            module.arange(params.shape[d]).reshape((-1,) + (1,) * (indices.ndim - 2 - d)) for d in range(batch))
        coordinates = leading + coordinates
    return params[coordinates]


def scatter_nd(indices: TensorLike, updates: TensorLike, shape: ShapeLike, bad_indices_policy: str = "",
               name: str | None = None) -> Tensor:
    """Zeros of `shape` with `updates` added at `indices` (updates to one coordinate add up)."""
    indices, updates = convert_to_tensor(indices), convert_to_tensor(updates)
    dims = tuple(int(s) for s in np.asarray(shape).reshape(-1))
    outer = indices.ndim - 1
    if tuple(updates.shape[:outer]) != tuple(indices.shape[:outer]):  # TF 2.21's text (observed)
        def text(shape: tuple[int, ...]) -> str:
            return "[" + ",".join(str(int(d)) for d in shape) + "]"
        raise InvalidArgumentError(None, None, f"Dimensions [0,{outer}) of indices[shape={text(indices.shape)}] must "
                                               f"match dimensions [0,{outer}) of updates[shape={text(updates.shape)}] "
                                               "[Op:ScatterNd]")
    module = xp(indices, updates)
    return _add(module, module.zeros(dims, updates.dtype), indices, updates, "tf.scatter_nd")


def _add(module, tensor: ArrayLike, indices: ArrayLike, updates: ArrayLike, op: str) -> Tensor:
    coordinates = _coordinates(op, indices, tensor.shape)
    if module is np:
        out = np.array(tensor, copy=True)
        np.add.at(out, coordinates, updates)
        return out
    return cast(jax.Array, tensor).at[coordinates].add(updates, mode="drop")


def tensor_scatter_nd_update(tensor: TensorLike, indices: TensorLike, updates: TensorLike,
                             name: str | None = None) -> Tensor:
    """A copy of `tensor` with `updates` written at `indices`."""
    tensor, indices = convert_to_tensor(tensor), convert_to_tensor(indices)
    updates = _updates_for("tf.tensor_scatter_nd_update", indices, updates, tensor)
    coordinates = _coordinates("tf.tensor_scatter_nd_update", indices, tensor.shape)
    if xp(tensor, indices, updates) is np:
        out = np.array(tensor, copy=True)
        out[coordinates] = updates
        return out
    return xp(tensor).asarray(tensor).at[coordinates].set(updates, mode="drop")


def tensor_scatter_nd_add(tensor: TensorLike, indices: TensorLike, updates: TensorLike, bad_indices_policy: str = "",
                          name: str | None = None) -> Tensor:
    tensor, indices = convert_to_tensor(tensor), convert_to_tensor(indices)
    updates = _updates_for("tf.tensor_scatter_nd_add", indices, updates, tensor)
    module = xp(tensor, indices, updates)
    return _add(module, module.asarray(tensor), indices, updates, "tf.tensor_scatter_nd_add")


def boolean_mask(tensor: TensorLike, mask: TensorLike, axis: int | None = None,
                 name: str = "boolean_mask") -> np.ndarray:
    """The entries of `tensor` where the k-D `mask` (matching its dimensions from `axis`, 0 by default) is
    True. On the host only: its length depends on the values."""
    if is_jax(tensor, mask):
        raise ValueError("tf.boolean_mask has a data-dependent shape, which compiled code (strategy.run, jax.jit) "
                         "cannot produce; multiply by the mask (x * tf.cast(mask, x.dtype)) or use "
                         "tf.where(mask, x, 0) to keep the shape, or mask on the host")
    x, keep = np.asarray(convert_to_tensor(tensor)), np.asarray(mask, dtype=bool)
    start = 0 if axis is None else int(axis) % x.ndim
    if x.shape[start:start + keep.ndim] != keep.shape:
        raise ValueError(f"Shapes {x.shape[start:start + keep.ndim]} and {keep.shape} are incompatible (TF 2.21's "
                         f"text): tf.boolean_mask: the mask's shape {keep.shape} must match the tensor's dimensions "
                         f"{x.shape[start:start + keep.ndim]} from axis {start} (tensor shape {x.shape})")
    return x[(np.s_[:],) * start + (keep,)]


SCATTER_OPS = dict(
    gather_nd=gather_nd, scatter_nd=scatter_nd, tensor_scatter_nd_update=tensor_scatter_nd_update,
    tensor_scatter_nd_add=tensor_scatter_nd_add, boolean_mask=boolean_mask,
)
