"""`tf.experimental.DynamicRaggedShape` and `tf.experimental.RowPartition`: the shape of a ragged tensor.

`tf.shape(rt)` gives one (TF 2.21): the number of rows, then each ragged dimension's row lengths, then the
uniform inner dimensions. `tf.zeros`, `tf.ones`, `tf.fill` and `tf.reshape` take one and give a ragged tensor of
that shape.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.ragged import RaggedTensor


class RowPartition:
    """`tf.experimental.RowPartition`: how a ragged dimension cuts its values into rows (row splits, int64)."""

    def __init__(self, row_splits: Any):
        self._splits = np.asarray(row_splits, np.int64).reshape(-1)

    @classmethod
    def from_row_lengths(cls, row_lengths: Any, validate: bool = True, dtype: Any = None) -> RowPartition:
        return cls(np.concatenate([[0], np.cumsum(np.asarray(row_lengths, np.int64).reshape(-1))]))

    @classmethod
    def from_row_splits(cls, row_splits: Any, validate: bool = True, dtype: Any = None) -> RowPartition:
        return cls(row_splits)

    def row_splits(self) -> np.ndarray:
        return as_tensors(self._splits.copy())

    def row_lengths(self) -> np.ndarray:
        return as_tensors(np.diff(self._splits))

    def nrows(self) -> np.ndarray:
        return as_tensors(np.int64(len(self._splits) - 1))

    def nvals(self) -> np.ndarray:
        return as_tensors(np.int64(self._splits[-1]))

    def __repr__(self) -> str:
        return f"tf.RowPartition(row_splits={self._splits})"


class DynamicRaggedShape:
    """`tf.experimental.DynamicRaggedShape`: row partitions (outermost first), then the flat values' shape."""

    def __init__(self, row_partitions: Any, inner_shape: Any, dtype: Any = None, validate: bool = True,
                 static_inner_shape: Any = None):
        self._partitions = tuple(row_partitions)
        self._inner = [int(d) for d in np.asarray(inner_shape).reshape(-1)]
        self._dtype = as_dtype(dtype if dtype is not None else "int64")

    @classmethod
    def from_lengths(cls, lengths: Any, num_row_partitions: Any = None, dtype: Any = "int64") -> DynamicRaggedShape:
        """`[4, (2, 1, 0, 8), 12]`: 4 rows, of those lengths, each value 12 wide (TF's notation)."""
        lengths = list(lengths)
        last = max([i for i, d in enumerate(lengths) if isinstance(d, (tuple, list))], default=0)
        partitions, rows = [], int(lengths[0]) if lengths else 0
        for d in lengths[1:last + 1]:
            row_lengths = list(d) if isinstance(d, (tuple, list)) else [int(d)] * rows
            partitions.append(RowPartition.from_row_lengths(row_lengths))
            rows = int(sum(row_lengths))
        inner = [rows] + [int(d) for d in lengths[last + 1:]] if lengths else []
        return cls(partitions, inner, dtype)

    @classmethod
    def from_tensor(cls, t: Any, dtype: Any = None) -> DynamicRaggedShape:
        if isinstance(t, RaggedTensor):
            return cls([RowPartition(s) for s in t.nested_row_splits], t.flat_values.shape, dtype)
        return cls([], np.shape(t), dtype)

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def num_row_partitions(self) -> int:
        return len(self._partitions)

    @property
    def rank(self) -> int:
        return len(self._partitions) + len(self._inner)

    @property
    def row_partitions(self) -> tuple:
        return self._partitions

    @property
    def inner_shape(self) -> np.ndarray:
        return as_tensors(np.asarray(self._inner, self._dtype.as_numpy_dtype))

    def static_lengths(self) -> list:
        """TF's notation: the number of rows, a tuple of row lengths per ragged dimension, then the inner ones."""
        if not self._partitions:
            return list(self._inner)
        rows = int(np.asarray(self._partitions[0].nrows()))
        return [rows] + [tuple(np.asarray(p.row_lengths()).tolist()) for p in self._partitions] + self._inner[1:]

    def __getitem__(self, index: Any) -> Any:
        lengths = self.static_lengths()
        if isinstance(index, slice):
            return DynamicRaggedShape.from_lengths(lengths[index], dtype=self._dtype)
        size = lengths[index]
        if isinstance(size, tuple):
            raise ValueError(f"Index {index} is not uniform")
        return as_tensors(np.asarray(size, self._dtype.as_numpy_dtype))

    def __repr__(self) -> str:
        return (f"<DynamicRaggedShape lengths={str(self.static_lengths()).replace(',)', ')')} "
                f"num_row_partitions={self.num_row_partitions}>")


def with_shape(flat: np.ndarray, shape: DynamicRaggedShape) -> Any:
    """`flat`'s values (in order) as a ragged tensor of `shape`."""
    if flat.size != int(np.prod(shape._inner)):
        raise InvalidArgumentError(None, None, f"Input to reshape is a tensor with {flat.size} values, but the "
                                   f"requested shape {shape.static_lengths()} has {int(np.prod(shape._inner))}")
    values = flat.reshape(shape._inner)
    if not shape._partitions:
        return as_tensors(values)
    return RaggedTensor.from_nested_row_splits(values, [p._splits for p in shape._partitions])
