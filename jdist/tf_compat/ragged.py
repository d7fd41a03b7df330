"""`tf.RaggedTensor` and `tf.ragged`: rows of different lengths, on the host.

What TF's text ops return (`tf.strings.split` of several strings) and what input pipelines carry before
padding. A ragged tensor is its flat `values` (numpy, or another ragged tensor for more ragged dimensions) and
`row_splits` (int64: row i is `values[row_splits[i]:row_splits[i + 1]]`), as TF stores it. Compiled code takes
dense arrays: `to_tensor()` pads (TF's zeros, or `default_value`). It prints as TF 2.21 prints one (observed:
`<tf.RaggedTensor [[0, 1, 2, 3], [4, 5]]>`), with TF's own numpy formatting.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat import ops
from jdist.tf_compat.dtype_table import DType, as_dtype, numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tfdata import tensor_text


def _tensor(value: Any, dtype: Any = None) -> Any:
    """A host tensor: numpy with TF's dtypes, text as an object array of bytes (TF's `.numpy()`)."""
    return tensor_text.as_tf_numpy(ops.convert_to_tensor(value, dtype))


def _splits(row_splits: Any) -> np.ndarray:
    splits = np.asarray(row_splits, dtype=np.int64).reshape(-1)
    if splits.size == 0 or splits[0] != 0 or np.any(np.diff(splits) < 0):
        raise InvalidArgumentError(None, None, f"row_splits must start at 0 and never decrease; got {splits.tolist()}")
    return splits


def _operators(op: Callable[[Any, Any], Any]) -> tuple[Callable, Callable]:
    """A binary operator on the flat values, and its reflected form (`1 - rt`)."""
    def forward(self: RaggedTensor, other: Any) -> Any:
        return self._elementwise(other, op)

    def reflected(self: RaggedTensor, other: Any) -> Any:
        return self._elementwise(other, lambda a, b: op(b, a))

    return forward, reflected


class RaggedTensor:
    """`tf.RaggedTensor`: made with `tf.ragged.constant` or the `from_*` class methods, as in TF."""

    def __init__(self, values: Any, row_splits: Any, internal: bool = False):
        if not internal:
            raise ValueError("RaggedTensor constructor is private; please use one of the factory methods instead "
                             "(e.g., RaggedTensor.from_row_lengths())")
        self._values, self._row_splits = values, row_splits
        if int(row_splits[-1]) != _count(values):
            raise InvalidArgumentError(None, None, f"The last row split ({int(row_splits[-1])}) must equal the "
                                       f"number of values ({_count(values)})")

    # --- factories ---
    @classmethod
    def from_row_splits(cls, values: Any, row_splits: Any, name: Any = None, validate: bool = True) -> RaggedTensor:
        return cls(_values(values), _splits(row_splits), internal=True)

    @classmethod
    def from_row_lengths(cls, values: Any, row_lengths: Any, name: Any = None, validate: bool = True) -> RaggedTensor:
        lengths = np.asarray(row_lengths, dtype=np.int64).reshape(-1)
        return cls(_values(values), _splits(np.concatenate([[0], np.cumsum(lengths)])), internal=True)

    @classmethod
    def from_value_rowids(cls, values: Any, value_rowids: Any, nrows: Any = None, name: Any = None,
                          validate: bool = True) -> RaggedTensor:
        ids = np.asarray(value_rowids, dtype=np.int64).reshape(-1)
        if np.any(np.diff(ids) < 0):
            raise InvalidArgumentError(None, None, "value_rowids must be sorted in ascending order")
        rows = int(nrows) if nrows is not None else (int(ids[-1]) + 1 if ids.size else 0)
        counts = np.bincount(ids, minlength=rows)[:rows]
        return cls(_values(values), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), internal=True)

    @classmethod
    def from_nested_row_splits(cls, flat_values: Any, nested_row_splits: Any, name: Any = None,
                               validate: bool = True) -> RaggedTensor:
        result = _values(flat_values)
        for splits in reversed(list(nested_row_splits)):
            result = cls(result, _splits(splits), internal=True)
        return result

    @classmethod
    def from_tensor(cls, tensor: Any, lengths: Any = None, padding: Any = None, ragged_rank: int = 1,
                    name: Any = None, row_splits_dtype: Any = None) -> RaggedTensor:
        """Rows of a dense tensor, cut at `lengths`, or where only `padding` follows (TF's rule)."""
        dense = _tensor(tensor)
        if lengths is not None:
            keep = np.asarray(lengths, dtype=np.int64).reshape(-1)
        elif padding is not None:
            pad = dense == _tensor(padding, dense.dtype)
            pad = pad.reshape(pad.shape[:2] + (-1,)).all(axis=2) if dense.ndim > 2 else pad
            keep = np.array([len(row) - int(np.argmin(row[::-1])) if not row.all() else 0 for row in pad], np.int64)
        else:
            keep = np.full(dense.shape[0], dense.shape[1], np.int64)
        rows = [dense[i, :keep[i]] for i in range(dense.shape[0])]
        flat = np.concatenate(rows) if rows else dense.reshape((0,) + dense.shape[2:])
        return cls.from_row_lengths(flat, keep)

    # --- TF's properties ---
    @property
    def values(self) -> Any:
        return as_tensors(self._values)

    @property
    def row_splits(self) -> np.ndarray:
        return as_tensors(self._row_splits)

    @property
    def flat_values(self) -> np.ndarray:
        return self._values.flat_values if isinstance(self._values, RaggedTensor) else as_tensors(self._values)

    @property
    def nested_row_splits(self) -> tuple:
        inner = self._values.nested_row_splits if isinstance(self._values, RaggedTensor) else ()
        return (self._row_splits, *inner)

    @property
    def ragged_rank(self) -> int:
        return len(self.nested_row_splits)

    @property
    def dtype(self) -> DType:
        return as_dtype("string" if self.flat_values.dtype == object else self.flat_values.dtype)

    @property
    def shape(self) -> TensorShape:
        """TF's: the number of rows, None for each ragged dimension, then the flat values' inner dimensions."""
        return TensorShape([self.nrows_int()] + [None] * self.ragged_rank + list(self.flat_values.shape[1:]))

    def nrows_int(self) -> int:
        return len(self._row_splits) - 1

    def nrows(self, out_type: Any = None, name: Any = None) -> np.ndarray:
        return as_tensors(np.int64(self.nrows_int()))

    def row_lengths(self, axis: int = 1, name: Any = None) -> np.ndarray:
        return as_tensors(np.diff(self._row_splits))

    def row_starts(self, name: Any = None) -> np.ndarray:
        return as_tensors(self._row_splits[:-1])

    def row_limits(self, name: Any = None) -> np.ndarray:
        return as_tensors(self._row_splits[1:])

    def value_rowids(self, name: Any = None) -> np.ndarray:
        return as_tensors(np.repeat(np.arange(self.nrows_int(), dtype=np.int64), np.diff(self._row_splits)))

    # --- conversions ---
    def _rows(self) -> list:
        return [self._values[self._row_splits[i]:self._row_splits[i + 1]] for i in range(self.nrows_int())]

    def to_list(self) -> list:
        return [row.to_list() if isinstance(row, RaggedTensor) else row.tolist() for row in self._rows()]

    def numpy(self) -> np.ndarray:
        """TF's: the values' numpy cut into rows, an object array of them when their lengths differ, else one
        array (observed, TF 2.21: so a nested tensor's rows are object arrays of its inner rows)."""
        values = self._values.numpy() if isinstance(self._values, RaggedTensor) else np.asarray(self._values)
        splits = self._row_splits
        rows = [values[splits[i]:splits[i + 1]] for i in range(len(splits) - 1)]
        if not rows:
            return np.zeros((0, 0) + values.shape[1:], dtype=values.dtype)
        if any(len(row) != len(rows[0]) for row in rows):
            result = np.empty(len(rows), dtype=object)
            result[:] = rows
            return result
        return np.array(rows)

    def to_tensor(self, default_value: Any = None, name: Any = None, shape: Any = None) -> np.ndarray:
        """Padded to the longest row (TF's zeros, or `default_value`)."""
        rows = [row.to_tensor(default_value) if isinstance(row, RaggedTensor) else row for row in self._rows()]
        inner = self.flat_values
        width = max([len(row) for row in rows], default=0)
        deeper = [max([r.shape[i] for r in rows], default=0) for i in range(1, rows[0].ndim)] if rows else []
        deeper = deeper or list(inner.shape[1:])
        fill = (b"" if inner.dtype == object else 0) if default_value is None else _tensor(default_value)
        out = np.full([len(rows), width] + deeper, fill, dtype=inner.dtype)
        for i, row in enumerate(rows):
            out[(i, slice(0, len(row)), *[slice(0, d) for d in row.shape[1:]])] = row
        return as_tensors(out)

    def with_values(self, new_values: Any) -> RaggedTensor:
        return RaggedTensor(_values(new_values), self._row_splits, internal=True)

    def with_flat_values(self, new_values: Any) -> RaggedTensor:
        if isinstance(self._values, RaggedTensor):
            return self.with_values(self._values.with_flat_values(new_values))
        return self.with_values(new_values)

    def reduce_rows(self, name: str, reduce: Callable[[Any, Any], Any], axis: Any, keepdims: bool) -> Any:
        """`tf.reduce_<name>` of this tensor: over everything (`axis=None`), or along the rows (`axis=1`; an empty
        row gives the reduction's identity, as TF's: 0 for sum, the dtype's lowest for max)."""
        flat = self.flat_values
        if axis is None:
            return as_tensors(np.asarray(reduce(flat, None)))
        if self.ragged_rank != 1 or int(np.asarray(axis)) not in (1, -1 if flat.ndim == 1 else 1):
            raise NotImplementedError(f"tf.reduce_{name} of a RaggedTensor {self.shape} is provided over all values "
                                      "(axis=None) or along its rows (axis=1): use .to_tensor() for other axes")
        parts = [reduce(row, 0) if len(row) else _identity(name, flat) for row in self._rows()]
        out = np.stack([np.asarray(p) for p in parts]) if parts else np.zeros((0,) + flat.shape[1:], flat.dtype)
        return as_tensors(np.expand_dims(out, 1) if keepdims else out)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"A RaggedTensor {self.shape} has rows of different lengths and is no array: pad it with "
                         ".to_tensor(), or use .flat_values / .to_list().")

    # --- rows, printing, arithmetic ---
    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, tuple):
            parts: list = list(key)
            row = self[parts[0]]
            return row[tuple(parts[1:])] if len(parts) > 2 else row[parts[1]]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.nrows_int())
            if step != 1:
                return RaggedTensor.from_row_lengths(*_gathered(self, range(start, stop, step)))
            first, last = self._row_splits[start], self._row_splits[max(stop, start)]
            return RaggedTensor(self._values[first:last], self._row_splits[start:max(stop, start) + 1] - first,
                                internal=True)
        return as_tensors(self._rows()[key])

    def __iter__(self) -> Any:
        return iter([as_tensors(row) for row in self._rows()])

    def __repr__(self) -> str:
        with np.printoptions(formatter={"all": _formatter}):
            return f"<tf.RaggedTensor {_formatter(self.numpy())}>"

    __str__ = __repr__

    def _elementwise(self, other: Any, op: Callable[[Any, Any], Any]) -> RaggedTensor:
        if isinstance(other, RaggedTensor):
            if [s.tolist() for s in other.nested_row_splits] != [s.tolist() for s in self.nested_row_splits]:
                raise InvalidArgumentError(None, None, "Ragged tensors of different row partitions cannot be combined")
            return self.with_flat_values(op(self.flat_values, other.flat_values))
        if isinstance(other, numbers.Number) or np.ndim(other) == 0:
            return self.with_flat_values(op(self.flat_values, _tensor(other, self.flat_values.dtype)))
        return NotImplemented

    __add__, __radd__ = _operators(np.add)
    __sub__, __rsub__ = _operators(np.subtract)
    __mul__, __rmul__ = _operators(np.multiply)
    __truediv__ = _operators(np.true_divide)[0]

    def __neg__(self) -> RaggedTensor:
        return self.with_flat_values(-self.flat_values)


def _identity(name: str, flat: np.ndarray) -> np.ndarray:
    """What TF's reductions give for an empty row."""
    dtype, shape = flat.dtype, flat.shape[1:]
    if name in ("max", "min"):
        info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
        low = -np.inf if dtype.kind == "f" else info.min
        high = np.inf if dtype.kind == "f" else info.max
        return np.full(shape, low if name == "max" else high, dtype)
    fill = {"sum": 0, "prod": 1, "any": False, "all": True, "mean": np.nan}.get(name, 0)
    return np.full(shape, fill, dtype if name != "mean" or dtype.kind == "f" else np.float32)


def _count(values: Any) -> int:
    return values.nrows_int() if isinstance(values, RaggedTensor) else len(values)


def _formatter(x: Any) -> str:
    """TF's RaggedTensor text: numpy's array text with commas, recursively (and `[[], []]` for empty rows)."""
    if isinstance(x, np.ndarray):
        return np.array2string(x, separator=", ") if x.size else repr(x.tolist())
    return str(x)


def _values(values: Any) -> Any:
    return values if isinstance(values, RaggedTensor) else _tensor(values)


def _gathered(rt: RaggedTensor, rows: Any) -> tuple[Any, np.ndarray]:
    picked = [rt[i] for i in rows]
    flat = np.concatenate(picked) if picked else rt.values[:0]
    return flat, np.array([len(p) for p in picked], np.int64)


def constant(pylist: Any, dtype: Any = None, ragged_rank: int | None = None, inner_shape: Any = None,
             name: Any = None, row_splits_dtype: Any = None) -> Any:
    """`tf.ragged.constant`: a nested Python list with rows of any lengths; a scalar stays a tensor."""
    if not isinstance(pylist, (list, tuple)) and np.ndim(pylist) == 0:
        return as_tensors(_tensor(pylist, dtype))
    depth = _depth(pylist)
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


def _depth(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return 1 + max([_depth(v) for v in value], default=0)
    return 0


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
