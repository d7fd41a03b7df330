"""`tf.TensorShape` (TF 2.21's behaviour, observed): a tuple of dimensions, None where unknown, with TF's shape
algebra (`is_compatible_with`, `merge_with`, `concatenate`, `with_rank`, `num_elements`, ... and their error
texts), and `tf.TensorShape(None)`, the shape of unknown rank.

A dimension of None fits any size. The shape of unknown rank prints `<unknown>` (repr `TensorShape(None)`);
`rank`, `ndims`, `dims`, `num_elements()` and any dimension (`shape[0]`) are None; `len()`, iteration and
`as_list()` are TF's ValueErrors; it is false; it equals only another unknown shape (and None); it is
compatible with every shape, `merge_with(s)` gives `s`, `concatenate` and slices stay unknown, `with_rank(n)`
gives n unknown dimensions. A `tf.Variable(..., shape=tf.TensorShape(None))` keeps this shape whatever is
assigned to it.
"""
from __future__ import annotations

import math
from typing import Any, Iterator


def as_shape(value: Any) -> Any:
    """`value` (a TensorShape, a list or tuple of dimensions, None for unknown rank) as a TensorShape."""
    return value if isinstance(value, TensorShape) else TensorShape(value)


def _dims_fit(a: Any, b: Any) -> bool:
    return a is None or b is None or a == b


class ShapeMethods:
    """The methods a TensorShape of known rank adds to its tuple of dimensions."""

    @property
    def ndims(self) -> int | None:
        return self.rank  # type: ignore[attr-defined]

    def num_elements(self) -> int | None:
        """The number of elements; None when a dimension is unknown."""
        dims = list(self)  # type: ignore[call-overload]
        return None if None in dims else math.prod(dims)

    def is_compatible_with(self, other: Any) -> bool:
        """TF's: the same rank and every pair of dimensions equal or unknown (any shape of unknown rank fits)."""
        other = as_shape(other)
        if other.rank is None:
            return True
        return len(self) == len(other) and all(_dims_fit(a, b) for a, b in zip(self, other))  # type: ignore

    def assert_is_compatible_with(self, other: Any) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are incompatible")

    def merge_with(self, other: Any) -> Any:
        """TF's: the shape both describe (known dimensions of either); ValueError when they do not fit."""
        shape = as_shape(other)
        if shape.rank is None:
            return self
        if not self.is_compatible_with(shape):
            raise ValueError(f"Shapes {self} and {shape} are not compatible")
        return as_shape([a if a is not None else b for a, b in zip(self, shape)])  # type: ignore[call-overload]

    def most_specific_compatible_shape(self, other: Any) -> Any:
        """TF's: the dimensions both have the same, None elsewhere; unknown rank when the ranks differ."""
        shape = as_shape(other)
        if shape.rank is None or shape.rank != len(self):  # type: ignore[arg-type]
            return as_shape(None)
        return as_shape([a if a == b else None for a, b in zip(self, shape)])  # type: ignore[call-overload]

    def concatenate(self, other: Any) -> Any:
        shape = as_shape(other)
        return shape if shape.rank is None else as_shape([*self, *shape])  # type: ignore[misc]

    def with_rank(self, rank: int) -> Any:
        self.assert_has_rank(rank)
        return self

    def assert_has_rank(self, rank: int) -> None:
        if len(self) != rank:  # type: ignore[arg-type]
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank_at_least(self, rank: int) -> Any:
        if len(self) < rank:  # type: ignore[arg-type]
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def assert_is_fully_defined(self) -> None:
        if None in list(self):  # type: ignore[call-overload]
            raise ValueError(f"Shape {self} is not fully defined")


class TensorShape(ShapeMethods, tuple):
    """`tf.TensorShape`: a tuple of dimensions (None where unknown) with TF's `as_list`, `rank`, `dims` and TF's
    shape algebra (`ShapeMethods`); `TensorShape(None)` is TF's shape of unknown rank (`UnknownShape`)."""

    def __new__(cls, dims: Any = ()):
        if dims is None or isinstance(dims, TensorShape) and dims.rank is None:
            return UnknownShape()
        return super().__new__(cls, (None if d is None else int(d) for d in dims))

    def as_list(self) -> list:
        return list(self)

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        item = tuple.__getitem__(self, key)
        if not isinstance(key, slice):
            return item
        try:
            return TensorShape(item)  # TF's: a slice is a TensorShape (observed, TF 2.21)
        except Exception:  # noqa: BLE001 - symbolic dimensions (jax.export): the tuple as it is
            return item

    @property
    def rank(self) -> int:
        return len(self)

    @property
    def dims(self) -> list:
        return list(self)

    def is_fully_defined(self) -> bool:
        return None not in self

    def __repr__(self) -> str:
        return f"TensorShape({list(self)})"

    def __str__(self) -> str:
        """TF's `print(t.shape)`: `(2, 3)`, `(None, 3)`, `()` (and `(2,)` for one dimension)."""
        return tuple.__repr__(tuple(self))

class UnknownShape(TensorShape):
    """The TensorShape of unknown rank (an empty tuple underneath, which no method shows)."""

    def __new__(cls, dims: Any = None):
        return tuple.__new__(cls, ())

    @property
    def rank(self) -> None:  # type: ignore[override]
        return None

    @property
    def ndims(self) -> None:  # type: ignore[override]
        return None

    @property
    def dims(self) -> None:  # type: ignore[override]
        return None

    def as_list(self) -> list:
        raise ValueError("as_list() is not defined on an unknown TensorShape.")

    def is_fully_defined(self) -> bool:
        return False

    def num_elements(self) -> None:
        return None

    def __len__(self) -> int:
        raise ValueError("Cannot take the length of shape with unknown rank.")

    def __iter__(self) -> Iterator[Any]:
        raise ValueError("Cannot iterate over a shape with unknown rank.")

    def __bool__(self) -> bool:
        return False

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        return UnknownShape() if isinstance(key, slice) else None

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, UnknownShape)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash("TensorShape(None)")

    def __add__(self, other: Any) -> Any:  # type: ignore[override]
        return self

    def __radd__(self, other: Any) -> Any:
        return self

    def __repr__(self) -> str:
        return "TensorShape(None)"

    def __str__(self) -> str:
        return "<unknown>"

    def is_compatible_with(self, other: Any) -> bool:
        return True

    def merge_with(self, other: Any) -> Any:
        return as_shape(other)

    def most_specific_compatible_shape(self, other: Any) -> Any:
        return self

    def concatenate(self, other: Any) -> Any:
        return self

    def with_rank(self, rank: int) -> Any:
        return TensorShape([None] * rank)

    def assert_has_rank(self, rank: int) -> None:
        return None

    def with_rank_at_least(self, rank: int) -> Any:
        return self

    def assert_is_fully_defined(self) -> None:
        raise ValueError("Shape <unknown> is not fully defined")


UnknownShape.__name__ = UnknownShape.__qualname__ = "TensorShape"  # TF's one class for every shape


def is_unknown(shape: Any) -> bool:
    """Whether `shape` is TF's shape of unknown rank."""
    return isinstance(shape, UnknownShape)
