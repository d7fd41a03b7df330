"""`Dataset.padded_batch`: `batch` whose components are padded to one shape, with TF 2.21's results and errors
(observed). Kept apart from `combinators`: its padding and shape checks are a job of their own.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from jdist.tfdata import composite_batch, structure, tensor_text, user_functions
from jdist.tfdata.streaming import Key, streamed

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset


def _pad_value(value: Any, dtype: np.dtype) -> Any:
    """The scalar padding a component of `dtype`: TF's TypeError (observed text) for a value of another dtype,
    such as a Python int (int32) for an int64 component."""
    if value is None:
        return b"" if dtype.kind in "OSU" else np.zeros((), dtype)
    leaf = np.asarray(structure.to_leaf(value))
    text = leaf.dtype.kind in "OSU"
    if text != (dtype.kind in "OSU") or (not text and leaf.dtype != dtype):
        raise TypeError(f"Invalid `padding_values`. `padding_values` values type <dtype: "
                        f"'{tensor_text.dtype_name(leaf.dtype)}'> does not match type <dtype: "
                        f"'{tensor_text.dtype_name(dtype)}'> of the corresponding input component.")
    if leaf.ndim:
        raise ValueError(f"Invalid `padding_values`: each must be a scalar, got shape {leaf.shape}")
    return leaf.item()


def _padded(parts: list[np.ndarray], shape: Any, value: Any) -> np.ndarray:
    """Same-rank arrays stacked after padding each to `shape` (None dims: the batch's largest)."""
    arrays = [np.asarray(p, dtype=object) if isinstance(p, bytes) or np.asarray(p).dtype.kind == "S"
              else np.asarray(p) for p in parts]  # text as bytes objects, as `structure.stack` batches it
    rank = arrays[0].ndim
    if any(a.ndim != rank for a in arrays):
        raise ValueError(f"padded_batch: the elements have different ranks {sorted({a.ndim for a in arrays})}")
    largest = [max(a.shape[d] for a in arrays) for d in range(rank)]
    target = largest if shape is None else [largest[d] if s is None or s == -1 else int(s)
                                            for d, s in enumerate(shape)]
    if len(target) != rank:
        raise ValueError(f"padded_batch: padded shape {list(target)} does not have the elements' rank {rank}")
    dtype = arrays[0].dtype
    out = np.full([len(arrays), *target], _pad_value(value, dtype), dtype=dtype)
    for i, a in enumerate(arrays):
        if any(n > t for n, t in zip(a.shape, target)):
            from jdist.errors import DataLossError

            raise DataLossError(None, None, f"Attempted to pad to a smaller size than the input element: element "
                                            f"shape {list(a.shape)}, padded shape {list(target)}.")
        if a.ndim:
            out[(i, *(slice(0, n) for n in a.shape))] = a
        else:
            out[i] = a[()]  # a 0-d object array would be stored as the array itself
    return out


def _component_values(spec_like: Any, element: Any) -> list:
    """`spec_like` (a structure matching the element's, or None / one value for all) as one entry per leaf."""
    count = len(structure.leaves(element))
    if spec_like is None:
        return [None] * count
    if isinstance(element, (tuple, dict)):
        return structure.leaves(spec_like) if isinstance(spec_like, (tuple, dict)) else [spec_like] * count
    return [spec_like]


def padded_batch(self: Dataset, batch_size: int, padded_shapes: Any = None, padding_values: Any = None,
                 drop_remainder: bool = False, name: str | None = None) -> Dataset:
    """`batch` whose components are padded to the batch's largest shape (or to `padded_shapes`, None
    dimensions the largest) with `padding_values` (0, or b"" for strings): TF 2.21's results, and its
    DataLossError for an element larger than its padded shape."""
    size = int(batch_size)
    if size < 1:
        raise ValueError(f"Dataset.padded_batch: batch_size must be positive, got {size}")
    composite_batch.dense_only(user_functions.input_spec_of(self), "padded_batch")  # TF's check, when made

    def shape_entries(element: Any) -> list:
        if padded_shapes is None:
            return [None] * len(structure.leaves(element))
        if isinstance(element, (tuple, dict)):
            return [None if s is None else list(s) for s in _shape_leaves(padded_shapes)]
        return [list(padded_shapes)]

    def batched(rows: list) -> Any:
        first = rows[0]
        shapes, values = shape_entries(first), _component_values(padding_values, first)
        columns = zip(*(structure.leaves(row) for row in rows))
        out = iter([_padded(list(col), s, v) for col, s, v in zip(columns, shapes, values)])
        return structure.map_leaves(lambda _: next(out), first)

    def elements(key: Key) -> Iterator:
        it = self._elements(key)
        while rows := list(itertools.islice(it, size)):
            if len(rows) < size and drop_remainder:
                return
            yield batched(rows)

    if padding_values is not None:  # TF 2.21 checks their dtypes when the dataset is made (observed)
        element_spec = user_functions.input_spec_of(self)
        if element_spec is not None:
            for value, have in zip(_component_values(padding_values, element_spec), structure.leaves(element_spec)):
                _pad_value(value, np.dtype(have.dtype))
    if padded_shapes is not None:  # TF 2.21 checks them against the element spec when the dataset is made
        for padded, have in zip(shape_entries(self.element_spec), structure.leaves(self.element_spec)):
            if padded is not None and have.shape is not None and (len(padded) != len(have.shape) or any(
                    p not in (None, -1) and h is not None and int(p) < h for p, h in zip(padded, have.shape))):
                shown = tuple(None if p in (None, -1) else int(p) for p in padded)
                raise ValueError(f"The padded shape {shown} is not compatible with the shape {have.shape} of the "
                                 "corresponding input component.")
    card = self._cardinality
    if card >= 0:
        card = card // size if drop_remainder else -(-card // size)
    leading = size if drop_remainder else None

    def spec() -> Any:
        element = self.element_spec
        shapes = iter(shape_entries(element))

        def one(s: Any) -> Any:
            padded = next(shapes)
            if padded is None:
                dims = None if s.shape is None else [None] * len(s.shape)
            else:  # TF 2.21 (observed): a dimension given in padded_shapes is static, None or -1 is not
                dims = [None if d is None or int(d) == -1 else int(d) for d in padded]
            return structure.TensorSpec(None if dims is None else (leading, *dims), s.dtype)
        return structure.map_leaves(one, element)
    return streamed(self, elements, card, spec, "PaddedBatchDataset")


def _shape_leaves(padded_shapes: Any) -> list:
    """`padded_shapes` of a structured element, one shape (or None) per component."""
    if isinstance(padded_shapes, dict):
        return [s for v in padded_shapes.values() for s in _shape_leaves(v)]
    if isinstance(padded_shapes, tuple) and padded_shapes and all(
            s is None or isinstance(s, (list, tuple)) or hasattr(s, "as_list") for s in padded_shapes):
        return [s for v in padded_shapes for s in _shape_leaves(v)]
    as_list = getattr(padded_shapes, "as_list", None)
    return [None if padded_shapes is None else (as_list() if callable(as_list) else padded_shapes)]
