"""`tf.RaggedTensor` and `tf.ragged`: rows of different lengths, on the host.

What TF's text ops return (`tf.strings.split` of several strings) and what input pipelines carry before
padding. A ragged tensor is its flat `values` (numpy, or another ragged tensor for more ragged dimensions) and
`row_splits` (int64: row i is `values[row_splits[i]:row_splits[i + 1]]`), as TF stores it. Compiled code takes
dense arrays: `to_tensor()` pads (TF's zeros, or `default_value`). It prints as TF 2.21 prints one (observed:
`<tf.RaggedTensor [[0, 1, 2, 3], [4, 5]]>`), with TF's own numpy formatting.
`tf.ragged.constant` and the other builders are in `ragged_factories`.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat import ops
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.ragged_errors import partition_error, uniform_splits
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
        self._uniform: int | None = None
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
    def from_row_starts(cls, values: Any, row_starts: Any, name: Any = None, validate: bool = True) -> RaggedTensor:
        starts = np.asarray(row_starts, dtype=np.int64).reshape(-1)
        return cls(_values(values), _splits(np.concatenate([starts, [_count(_values(values))]])), internal=True)

    @classmethod
    def from_row_limits(cls, values: Any, row_limits: Any, name: Any = None, validate: bool = True) -> RaggedTensor:
        limits = np.asarray(row_limits, dtype=np.int64).reshape(-1)
        return cls(_values(values), _splits(np.concatenate([[0], limits])), internal=True)

    @classmethod
    def from_uniform_row_length(cls, values: Any, uniform_row_length: Any, nrows: Any = None,
                                validate: bool = True, name: Any = None) -> RaggedTensor:
        """Rows of `uniform_row_length` values each (TF's shape then shows that length, not None)."""
        width, flat = int(uniform_row_length), _values(values)
        rows = int(nrows) if nrows is not None else (_count(flat) // width if width else 0)
        out = cls(flat, _splits(np.arange(rows + 1, dtype=np.int64) * width), internal=True)
        out._uniform = width
        return out

    @classmethod
    def from_sparse(cls, st_input: Any, name: Any = None, row_splits_dtype: Any = None) -> RaggedTensor:
        """A 2-D `tf.SparseTensor`'s rows, its values in index order (TF's rule: indices sorted)."""
        idx = np.asarray(st_input.indices, np.int64)
        rows = int(np.asarray(st_input.dense_shape).reshape(-1)[0])
        return cls.from_value_rowids(st_input.values, idx[:, 0], nrows=rows)

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
        return (as_tensors(self._row_splits), *inner)

    @property
    def ragged_rank(self) -> int:
        return len(self.nested_row_splits)

    @property
    def dtype(self) -> DType:
        return as_dtype("string" if self.flat_values.dtype == object else self.flat_values.dtype)

    @property
    def shape(self) -> TensorShape:
        """TF's: the number of rows, None for each ragged dimension, then the flat values' inner dimensions."""
        inner = self._values.shape[1:] if isinstance(self._values, RaggedTensor) else self._values.shape[1:]
        return TensorShape([self.nrows_int(), self._uniform] + list(inner))

    def bounding_shape(self, axis: Any = None, name: Any = None, out_type: Any = None) -> np.ndarray:
        """TF's: the length of each dimension, the longest row's for a ragged one (int64)."""
        rows = self._rows()
        inner = [np.asarray(r.bounding_shape()) if isinstance(r, RaggedTensor) else np.asarray(r.shape)
                 for r in rows]
        inner_rank = self.flat_values.ndim - 1 + self.ragged_rank
        bound = np.max(np.stack(inner), axis=0) if inner else np.zeros(inner_rank, np.int64)
        out = np.concatenate([[self.nrows_int()], bound]).astype(np.int64)
        return as_tensors(out if axis is None else out[axis])

    def to_sparse(self, name: Any = None) -> Any:
        """A `tf.SparseTensor` of the values at their [row, column, ...] indices, shaped `bounding_shape()`."""
        from jdist.tf_compat.sparse import SparseTensor

        dense_index = np.argwhere(np.ones(self.flat_values.shape[1:], bool)) if self.flat_values.ndim > 1 else None
        coords = _coords(self)
        if dense_index is not None:
            coords = np.array([list(c) + list(d) for c in coords for d in dense_index], np.int64)
        values = self.flat_values.reshape(-1) if dense_index is not None else self.flat_values
        return SparseTensor(coords.reshape(-1, self.shape.rank), values, self.bounding_shape())

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
        if shape is not None:  # TF's: cut or pad each dimension to `shape` (None keeps it)
            want = [out.shape[i] if d is None else int(d) for i, d in enumerate(TensorShape(shape).as_list())]
            padded = np.full(want, fill, dtype=out.dtype)
            common = tuple(slice(0, min(a, b)) for a, b in zip(out.shape, want))
            padded[common] = out[common]
            out = padded
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
        """TF's indexing: the first key picks rows, the rest apply within each row (ragged dimensions too)."""
        if isinstance(key, tuple):
            if len(key) == 0:
                return self
            picked = self[key[0]]
            if len(key) == 1:
                return picked
            if not isinstance(key[0], slice):
                inner = picked[key[1:]]
                return inner if isinstance(inner, RaggedTensor) else as_tensors(np.asarray(inner))
            return from_rows([row[key[1:]] for row in picked._rows()], picked.flat_values)
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
        """`op` on the values, TF's broadcasting: a dense operand of lower rank applies within each row, one of
        equal rank row by row (its first dimension 1 or `nrows`)."""
        try:
            if isinstance(other, RaggedTensor):
                mine, theirs = _levels(self), _levels(other)
                for x, y in zip(mine, theirs):
                    if x.tolist() != y.tolist():
                        raise partition_error(x, y, f"Ragged tensors {self.shape} and {other.shape} differ")
                return self.with_flat_values(np.asarray(op(self.flat_values, other.flat_values)))
            if not (isinstance(other, numbers.Number) or np.ndim(other) == 0):
                other = _tensor(other)
                if other.ndim >= self.shape.rank:
                    if other.shape[0] not in (1, self.nrows_int()):
                        raise partition_error(uniform_splits(other.shape[0], 1), uniform_splits(self.nrows_int(), 1),
                                              f"Incompatible shapes: {self.shape} and {other.shape}")
                    rows = [other[0 if other.shape[0] == 1 else i] for i in range(self.nrows_int())]
                    parts = [_apply(row, o, op) for row, o in zip(self._rows(), rows)]
                    return from_rows(parts, self.flat_values)
                if self.flat_values.ndim <= other.ndim:
                    return from_rows([_apply(row, other, op) for row in self._rows()], self.flat_values)
            flat = self.flat_values
            scalar = other if np.ndim(np.asarray(other)) else _tensor(other, flat.dtype)
            return self.with_flat_values(np.asarray(op(flat, scalar)))
        except InvalidArgumentError:
            raise
        except ValueError as error:
            dims = [] if isinstance(other, RaggedTensor) else list(np.shape(np.asarray(other)))
            width = dims[1] if len(dims) >= 2 else 1
            raise partition_error(uniform_splits(self.nrows_int(), width), self._row_splits,
                                  f"Incompatible shapes for a RaggedTensor {self.shape}: {error}") from error

    __add__, __radd__ = _operators(np.add)
    __sub__, __rsub__ = _operators(np.subtract)
    __mul__, __rmul__ = _operators(np.multiply)
    __truediv__, __rtruediv__ = _operators(np.true_divide)
    __floordiv__, __rfloordiv__ = _operators(np.floor_divide)
    __mod__, __rmod__ = _operators(np.mod)
    __pow__, __rpow__ = _operators(np.power)
    __and__, __rand__ = _operators(np.logical_and)
    __or__, __ror__ = _operators(np.logical_or)
    __lt__, __gt__ = _operators(np.less)[0], _operators(np.greater)[0]
    __le__, __ge__ = _operators(np.less_equal)[0], _operators(np.greater_equal)[0]

    __eq__, __ne__ = _operators(np.equal)[0], _operators(np.not_equal)[0]  # pyright: ignore[reportAssignmentType]
    __hash__ = object.__hash__

    def merge_dims(self, outer_axis: int, inner_axis: int) -> Any:
        """TF's: dimensions `outer_axis..inner_axis` as one (a tensor when all ragged ones merge away)."""
        rank = self.shape.rank
        outer, inner = outer_axis % rank, inner_axis % rank
        if outer >= inner:
            return self
        if outer > 0:
            return from_rows([r.merge_dims(outer - 1, inner - 1) if isinstance(r, RaggedTensor)
                              else np.asarray(r).reshape((-1,) + np.shape(r)[inner:]) for r in self._rows()],
                             self.flat_values)
        values = self._values
        merged = values.merge_dims(0, inner - 1) if isinstance(values, RaggedTensor) and inner > 1 else values
        if isinstance(merged, RaggedTensor):
            return merged
        return as_tensors(np.asarray(merged).reshape((-1,) + np.shape(merged)[inner:]))

    def __abs__(self) -> RaggedTensor:
        return self.with_flat_values(np.abs(self.flat_values))

    def __invert__(self) -> RaggedTensor:
        return self.with_flat_values(np.logical_not(self.flat_values))

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


def _levels(rt: RaggedTensor) -> list[np.ndarray]:
    """The row splits of each ragged dimension, then of the first uniform inner one."""
    flat = rt.flat_values
    inner = [uniform_splits(flat.shape[0], flat.shape[1])] if flat.ndim > 1 else []
    return [*rt.nested_row_splits, *inner]


def _apply(row: Any, other: Any, op: Callable[[Any, Any], Any]) -> Any:
    return row._elementwise(other, op) if isinstance(row, RaggedTensor) else np.asarray(op(row, other))


def from_rows(rows: list, template: Any) -> Any:
    """A ragged tensor of `rows` (numpy arrays or ragged tensors); rows of scalars make a dense tensor."""
    if rows and all(not isinstance(r, RaggedTensor) and np.ndim(r) == 0 for r in rows):
        return as_tensors(np.stack([np.asarray(r) for r in rows]))
    if rows and isinstance(rows[0], RaggedTensor):
        return RaggedTensor.from_row_lengths(concat_rows(rows), [r.nrows_int() for r in rows])
    arrays = [np.asarray(r) for r in rows]
    flat = np.concatenate(arrays) if arrays else np.asarray(template)[:0]
    return RaggedTensor.from_row_lengths(flat, [len(r) for r in arrays])


def concat_rows(parts: list) -> Any:
    """The rows of `parts` (ragged tensors of one ragged rank, or arrays) one after the other."""
    if not isinstance(parts[0], RaggedTensor):
        return np.concatenate([np.asarray(p) for p in parts])
    splits, offset = [np.zeros(1, np.int64)], 0
    for p in parts:
        splits.append(p._row_splits[1:] + offset)
        offset += int(p._row_splits[-1])
    return RaggedTensor(concat_rows([p._values for p in parts]), np.concatenate(splits), internal=True)


def _coords(rt: RaggedTensor) -> np.ndarray:
    """[row, position, ...] of each flat value along the ragged dimensions."""
    ids = np.asarray(rt.value_rowids())
    pos = np.arange(len(ids), dtype=np.int64) - rt._row_splits[ids]
    if not isinstance(rt._values, RaggedTensor):
        return np.stack([ids, pos], axis=1)
    inner = _coords(rt._values)
    return np.concatenate([ids[inner[:, :1]], pos[inner[:, :1]], inner[:, 1:]], axis=1)


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
