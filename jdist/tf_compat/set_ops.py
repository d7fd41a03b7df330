"""`tf.sets`: intersection, union, difference and size of the sets held in the last dimension of dense tensors
or SparseTensors, with TF 2.21's semantics (observed).

Each row (every index but the last) is one set: a dense row's values, or a SparseTensor row's entries. Results
are SparseTensors whose rows hold the sorted distinct members, so the last dimension is the largest result
set. The number of members depends on the values, so these ops compute on the host.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.tf_compat.linalg_ops import invalid
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tf_compat.sparse import SparseTensor, _traced, _validate
from jdist.typing import Tensor, TensorLike

_KINDS = ("int8", "int16", "int32", "int64", "uint8", "uint16")


def _check_dtype(values: np.ndarray, which: str) -> None:
    if values.dtype.kind not in "OSU" and values.dtype.name not in _KINDS:
        raise TypeError(f"'{which}' has invalid dtype `{values.dtype.name}` not in supported dtypes: "
                        f"{list(_KINDS) + ['string']}")


def _rows(x: SparseTensor | TensorLike, which: str, validate_indices: bool) -> tuple[tuple[int, ...], list[set]]:
    """The shape of the rows and each row's set (rows flattened in row-major order)."""
    if isinstance(x, SparseTensor):
        if _traced(x.indices, x.values):
            raise ValueError("tf.sets ops have a data-dependent number of entries, which compiled code "
                             "(strategy.run, jax.jit) cannot produce; call them on the host")
        shape = tuple(x.shape)
        if len(shape) < 2:
            raise invalid(f"Shape {list(shape)} has rank {len(shape)} < 2")
        _validate(x, order=validate_indices)
        idx, values = np.asarray(x.indices, np.int64), np.asarray(x.values)
        _check_dtype(values, which)
        flat = np.asarray(np.ravel_multi_index(tuple(idx[:, :-1].T), shape[:-1]) if len(idx) else [], np.int64)
        sets: list[set] = [set() for _ in range(int(np.prod(shape[:-1])))]
        for row, value in zip(flat.reshape(-1).tolist(), values.tolist()):
            sets[row].add(value)
        return shape[:-1], sets
    dense = np.asarray(convert_to_tensor(x))
    if dense.ndim < 2:
        raise invalid(f"Shape {list(dense.shape)} has rank {dense.ndim} < 2")
    _check_dtype(dense, which)
    return dense.shape[:-1], [set(row) for row in dense.reshape(-1, dense.shape[-1]).tolist()]


def _dtype(x: SparseTensor | TensorLike) -> np.dtype:
    return np.dtype(x.values.dtype if isinstance(x, SparseTensor) else convert_to_tensor(x).dtype)


def _set_operation(a: SparseTensor | TensorLike, b: SparseTensor | TensorLike, op: str,
                   validate_indices: bool) -> SparseTensor:
    dtype_a, dtype_b = _dtype(a), _dtype(b)
    if dtype_a != dtype_b and not (dtype_a.kind in "OSU" and dtype_b.kind in "OSU"):
        raise TypeError(f"Types don't match, {dtype_a.name} vs {dtype_b.name}.")
    shape_a, sets_a = _rows(a, "a", validate_indices)
    shape_b, sets_b = _rows(b, "b", validate_indices)
    if tuple(shape_a) != tuple(shape_b):
        raise invalid(f"Mismatched shapes {list(shape_a)} vs {list(shape_b)}")
    combine = {"intersection": set.intersection, "union": set.union, "difference": set.difference}[op]
    results = [sorted(combine(x, y)) for x, y in zip(sets_a, sets_b)]
    width = max((len(r) for r in results), default=0)
    row_coords = np.array(list(np.ndindex(*shape_a)), np.int64).reshape(-1, len(shape_a))
    indices = [list(row_coords[i]) + [j] for i, r in enumerate(results) for j in range(len(r))]
    values = [v for r in results for v in r]
    dtype = object if dtype_a.kind in "OSU" else dtype_a
    return SparseTensor(np.asarray(indices, np.int64).reshape(-1, len(shape_a) + 1), np.asarray(values, dtype),
                        tuple(shape_a) + (width,))


def intersection(a: SparseTensor | TensorLike, b: SparseTensor | TensorLike,
                 validate_indices: bool = True) -> SparseTensor:
    """`tf.sets.intersection`: per row, the sorted members in both `a` and `b`."""
    return _set_operation(a, b, "intersection", validate_indices)


def union(a: SparseTensor | TensorLike, b: SparseTensor | TensorLike, validate_indices: bool = True) -> SparseTensor:
    """`tf.sets.union`: per row, the sorted members of `a` or `b`."""
    return _set_operation(a, b, "union", validate_indices)


def difference(a: SparseTensor | TensorLike, b: SparseTensor | TensorLike, aminusb: bool = True,
               validate_indices: bool = True) -> SparseTensor:
    """`tf.sets.difference`: per row, the sorted members of `a` not in `b` (`b - a` if not `aminusb`)."""
    first, second = (a, b) if aminusb else (b, a)
    return _set_operation(first, second, "difference", validate_indices)


def size(a: SparseTensor, validate_indices: bool = True) -> Tensor:
    """`tf.sets.size`: the number of distinct members in each row of a SparseTensor (int32)."""
    if not isinstance(a, SparseTensor):
        raise TypeError(f"Expected `SparseTensor`, got {a!r}.")
    shape, sets = _rows(a, "a", validate_indices)
    return np.asarray([len(s) for s in sets], np.int32).reshape(shape)


SETS: dict[str, Any] = dict(intersection=intersection, union=union, difference=difference, size=size)
