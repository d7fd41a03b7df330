"""`tf.RaggedTensor` and `tf.SparseTensor` as `tf.data` elements, and `tf.SparseTensorSpec`.

`jdist.tfdata` sits below this package, so it handles composite tensors through the protocol of
`jdist.tfdata.composites`; importing this module registers the two kinds. Their rules, observed in TF 2.21:
a RaggedTensor's rows are dense tensors at ragged rank 1 (spec `RaggedTensorSpec(TensorShape([None]), tf.string,
0, tf.int64)`) and RaggedTensors above it; a batch of rows of a ragged spec is a RaggedTensor whatever its rows'
lengths; `ragged_batch` makes each component with an unknown dimension ragged. A SparseTensor's rows are
SparseTensors (`SparseTensorSpec(TensorShape([4]), tf.int32)`), and batching them prefixes each index with its
row (the batch's dense shape `[rows, 4]`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.ragged import RaggedTensor, from_rows
from jdist.tf_compat.ragged_ops import RaggedTensorSpec
from jdist.tf_compat.sparse import SparseTensor
from jdist.tfdata import composites


def _dims(shape: TensorShape) -> list:
    return list(shape.as_list()) if shape.rank is not None else []


class SparseTensorSpec:
    """`tf.SparseTensorSpec`: the dense shape (None where unknown) and dtype of a SparseTensor."""

    def __init__(self, shape: Any = None, dtype: Any = "float32"):
        self.shape = TensorShape(shape)
        self.dtype: DType = as_dtype(dtype)

    @classmethod
    def from_value(cls, value: SparseTensor) -> SparseTensorSpec:
        return cls(value.shape, value.dtype)

    @property
    def value_type(self) -> type:
        return SparseTensor

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        other = SparseTensorSpec.from_value(spec_or_value) if isinstance(spec_or_value, SparseTensor) else \
            spec_or_value
        if not isinstance(other, SparseTensorSpec) or other.dtype != self.dtype:
            return False
        a, b = self.shape, other.shape
        return a.rank is None or b.rank is None or (a.rank == b.rank and all(
            x is None or y is None or x == y for x, y in zip(a.as_list(), b.as_list())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SparseTensorSpec) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:  # TF 2.21's text (observed): SparseTensorSpec(TensorShape([4]), tf.int32)
        return f"SparseTensorSpec(TensorShape({_dims(self.shape) if self.shape.rank is not None else None}), " \
               f"{self.dtype!r})"


class _RaggedKind:
    """`tf.data`'s rules for RaggedTensor components (`jdist.tfdata.composites.CompositeKind`)."""

    def is_value(self, value: Any) -> bool:
        return isinstance(value, RaggedTensor)

    def is_spec(self, spec: Any) -> bool:
        return isinstance(spec, RaggedTensorSpec)

    def spec_of(self, value: Any) -> Any:
        return RaggedTensorSpec.from_value(value)

    def rows(self, value: Any) -> list:
        return [value[i] for i in range(value.nrows_int())]

    def row_spec(self, spec: Any) -> Any:
        return RaggedTensorSpec(_dims(spec.shape)[1:], spec.dtype, max(spec.ragged_rank - 1, 0),
                                spec.row_splits_dtype)

    def batch_spec(self, spec: Any, size: int | None) -> Any:
        return RaggedTensorSpec([size, *_dims(spec.shape)], spec.dtype, spec.ragged_rank + 1, spec.row_splits_dtype)

    def stack(self, rows: list, spec: Any) -> Any:
        template = np.zeros((0, *[d or 0 for d in _dims(spec.shape)[1:]]), spec.dtype.as_numpy_dtype)
        return from_rows(list(rows), template)

    def to_numpy(self, value: Any) -> Any:
        return np.asarray(value.numpy())  # rows of different lengths: an object array of them (TF 2.21)

    def dense_row_spec(self, spec: Any) -> Any:
        """`ragged_batch`'s spec for rows of the dense `spec`: ragged where a dimension is unknown."""
        dims = _dims(spec.shape)
        return RaggedTensorSpec(dims, spec.dtype, 0) if None in dims else None


class _SparseKind:
    """`tf.data`'s rules for SparseTensor components (`jdist.tfdata.composites.CompositeKind`)."""

    def is_value(self, value: Any) -> bool:
        return isinstance(value, SparseTensor)

    def is_spec(self, spec: Any) -> bool:
        return isinstance(spec, SparseTensorSpec)

    def spec_of(self, value: Any) -> Any:
        return SparseTensorSpec.from_value(value)

    def rows(self, value: Any) -> list:
        indices, values = np.asarray(value.indices), np.asarray(value.values)
        shape = tuple(int(d) for d in np.asarray(value.dense_shape))
        out = []
        for i in range(shape[0]):
            keep = indices[:, 0] == i
            out.append(SparseTensor(indices[keep][:, 1:], values[keep], shape[1:]))
        return out

    def row_spec(self, spec: Any) -> Any:
        return SparseTensorSpec(_dims(spec.shape)[1:], spec.dtype)

    def batch_spec(self, spec: Any, size: int | None) -> Any:
        return SparseTensorSpec([size, *_dims(spec.shape)], spec.dtype)

    def stack(self, rows: list, spec: Any) -> Any:
        shapes = [tuple(int(d) for d in np.asarray(r.dense_shape)) for r in rows]
        if len({len(s) for s in shapes}) != 1:
            raise ValueError(f"batch: SparseTensor rows of different ranks ({sorted(set(shapes))}); give every "
                             "row the same rank")
        parts = [np.concatenate([np.full((len(np.asarray(r.indices)), 1), i, np.int64),
                                 np.asarray(r.indices, np.int64).reshape(-1, len(shapes[0]))], axis=1)
                 for i, r in enumerate(rows)]
        values = np.concatenate([np.asarray(r.values) for r in rows])
        dense = (len(rows), *np.max(np.asarray(shapes, np.int64).reshape(len(rows), -1), axis=0).tolist())
        return SparseTensor(np.concatenate(parts), values, dense)

    def to_numpy(self, value: Any) -> Any:  # TF 2.21 (observed): the dense array
        values = np.asarray(value.values)
        dense = np.full(tuple(int(d) for d in np.asarray(value.dense_shape)), b"" if values.dtype.kind in "OSU" else 0,
                        object if values.dtype.kind in "OSU" else values.dtype)
        indices = np.asarray(value.indices, np.int64)
        dense[tuple(indices.T)] = values
        return dense

    def dense_row_spec(self, spec: Any) -> Any:
        return None


composites.register(_RaggedKind())
composites.register(_SparseKind())
