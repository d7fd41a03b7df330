"""`tf.ragged.constant`, `tf.ragged.map_flat_values`, `tf.ragged.range`: building ragged tensors.

Kept apart from `ragged` (the `RaggedTensor` class itself) so that each module stays small; `NAMES` is
`tf.ragged`'s namespace.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jdist.tf_compat import ops
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.nested_lists import check_nesting, depth_of
from jdist.tf_compat.ragged import RaggedTensor, _tensor


def constant(pylist: Any, dtype: Any = None, ragged_rank: int | None = None, inner_shape: Any = None,
             name: Any = None, row_splits_dtype: Any = None) -> Any:
    """`tf.ragged.constant`: a nested Python list with rows of any lengths; a scalar stays a tensor."""
    if not isinstance(pylist, (list, tuple)) and np.ndim(pylist) == 0:
        return as_tensors(_tensor(pylist, dtype))
    depth = depth_of(pylist)
    check_nesting(pylist, depth)
    rank = depth - 1 if ragged_rank is None else ragged_rank
    flat: list = list(pylist)
    splits: list[np.ndarray] = []
    for _ in range(rank):
        lengths = [len(row) for row in flat]
        splits.append(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        flat = [item for row in flat for item in row]
    values = _tensor(flat, dtype) if flat else np.zeros((0,), numpy_dtype(dtype) or np.float32)
    if values.dtype == np.float64 and dtype is None:
        values = values.astype(np.float32)
    return as_tensors(RaggedTensor.from_nested_row_splits(values, splits))  # no ragged dimension: a tensor


def map_flat_values(op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`tf.ragged.map_flat_values`: `op` on the flat values of the ragged arguments, the row partition kept."""
    ragged = [a for a in list(args) + list(kwargs.values()) if isinstance(a, RaggedTensor)]
    if not ragged:
        return op(*args, **kwargs)
    flat = [a.flat_values if isinstance(a, RaggedTensor) else a for a in args]
    named = {k: v.flat_values if isinstance(v, RaggedTensor) else v for k, v in kwargs.items()}
    return ragged[0].with_flat_values(np.asarray(op(*flat, **named)))


def ragged_range(starts: Any, limits: Any = None, deltas: Any = 1, dtype: Any = None, name: Any = None,
                 row_splits_dtype: Any = None) -> RaggedTensor:
    """`tf.ragged.range`: one `tf.range` per row."""
    if limits is None:
        starts, limits = 0, starts
    starts_, limits_, deltas_ = np.broadcast_arrays(np.asarray(starts), np.asarray(limits), np.asarray(deltas))
    rows = [np.asarray(ops.range(s, stop, d, dtype)) for s, stop, d in
            zip(starts_.reshape(-1), limits_.reshape(-1), deltas_.reshape(-1))]
    flat = np.concatenate(rows) if rows else np.zeros((0,), np.int32)
    return RaggedTensor.from_row_lengths(flat, [len(r) for r in rows])


NAMES = dict(constant=constant, map_flat_values=map_flat_values, range=ragged_range, RaggedTensor=RaggedTensor)
