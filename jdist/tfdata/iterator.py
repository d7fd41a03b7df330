"""`tf.data.Iterator`, `tf.data.NumpyIterator`, `tf.data.IteratorSpec` and `tf.experimental.Optional`.

What a TF script does with them, as TF 2.21 does (observed): `isinstance(iter(ds), tf.data.Iterator)` is True
(and False for `iter([])`); `iterator.get_next()` is the next element, `get_next_as_optional()` an `Optional`
that has it or, at the end, none; `iterator.element_spec` is the dataset's; `ds.as_numpy_iterator()` is a
`tf.data.NumpyIterator`; an `Optional`'s `get_value()` without a value is InvalidArgumentError "The given
optional does not have a value.".
"""
from __future__ import annotations

import abc
from typing import Any, Callable

import grain
import numpy as np

from jdist.input import tensor_spec
from jdist.tfdata import structure
from jdist.tfdata._iterators import GuardedIterator


class Optional(abc.ABC):  # noqa: B024 (an ABC so that a distributed iterator's Optional registers)
    """`tf.experimental.Optional`: a value, or none (`Optional.from_value(v)`, `Optional.empty(spec)`)."""

    def __init__(self, value: Any = None, has_value: bool = False, element_spec: Any = None):
        self._value, self._has_value = value, bool(has_value)
        self._element_spec = element_spec

    @staticmethod
    def from_value(value: Any) -> Optional:
        """An Optional holding `value` (a structure of tensors)."""
        value = structure.normalize(value)
        return Optional(value, True, structure.spec_of(value))

    @staticmethod
    def empty(element_spec: Any) -> Optional:
        """An Optional with no value, of elements like `element_spec`."""
        return Optional(None, False, element_spec)

    def has_value(self, name: str | None = None) -> Any:
        """A boolean scalar tensor (`if opt.has_value():` reads it as a bool)."""
        return structure.HostTensor.of(np.bool_(self._has_value))

    def get_value(self, name: str | None = None) -> Any:
        """The value; InvalidArgumentError when there is none, as TF's."""
        if not self._has_value:
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, "The given optional does not have a value.")
        return structure.map_leaves(structure.HostTensor.of, self._value)

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    def __repr__(self) -> str:
        return f"Optional(has_value={self._has_value})"


Optional.register(tensor_spec.Optional)  # what a distributed iterator's get_next_as_optional returns


class Iterator(abc.ABC):
    """`tf.data.Iterator`: the type of `iter(dataset)`, for `isinstance` checks and annotations."""

    @abc.abstractmethod
    def get_next(self) -> Any:
        """The next element (StopIteration, jdist's OutOfRangeError, at the end)."""

    @abc.abstractmethod
    def get_next_as_optional(self) -> Optional:
        """The next element as an `Optional`: without a value at the end."""

    @property
    @abc.abstractmethod
    def element_spec(self) -> Any:
        """The structure of `TensorSpec`s of an element."""


class _SpecIterator(Iterator):
    """TF's iterator methods over Python's `next` and an element spec computed when first asked for."""

    _spec_fn: Callable[[], Any]

    def get_next(self) -> Any:
        return next(self)  # pyright: ignore[reportArgumentType]  (subclasses are Python iterators)

    def next(self) -> Any:
        """TF's Python-2 style name for `next(iterator)` (TF 2.21 has it, observed: StopIteration at the end)."""
        return next(self)  # pyright: ignore[reportArgumentType]

    def get_next_as_optional(self) -> Optional:
        try:
            return Optional(self.get_next(), True, self.element_spec)
        except StopIteration:
            return Optional.empty(self.element_spec)

    @property
    def element_spec(self) -> Any:
        return self._spec_fn()


class OwnedIterator(GuardedIterator, _SpecIterator):
    """What `iter(dataset)` returns: one pass's elements as host tensors, with TF's iterator methods."""

    def __init__(self, inner: grain.DatasetIterator, element_spec: Callable[[], Any]):
        super().__init__(inner)
        self._spec_fn = element_spec

    @property
    def _type_spec(self) -> IteratorSpec:
        return IteratorSpec(self.element_spec)


class NumpyIterator(_SpecIterator):
    """`tf.data.NumpyIterator`: what `as_numpy_iterator()` returns (numpy values, not tensors)."""

    def __init__(self, iterator: Any, element_spec: Callable[[], Any], convert: Callable[[Any], Any]):
        self._iterator, self._spec_fn, self._convert = iterator, element_spec, convert

    def __iter__(self) -> NumpyIterator:
        return self

    def __next__(self) -> Any:
        return self._convert(next(self._iterator))

    next = __next__

    def __repr__(self) -> str:
        return f"NumpyIterator(iterator={self._iterator!r})"


class IteratorSpec:
    """`tf.data.IteratorSpec(element_spec)`: the spec of an iterator (TF 2.21 prints
    `IteratorSpec(TensorSpec(shape=(), dtype=tf.int64, name=None),)`)."""

    def __init__(self, element_spec: Any):
        self._element_spec = element_spec

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    @property
    def value_type(self) -> type:
        return Iterator

    @staticmethod
    def from_value(value: Any) -> IteratorSpec:
        return IteratorSpec(value.element_spec)

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        other = spec_or_value if isinstance(spec_or_value, IteratorSpec) else IteratorSpec.from_value(spec_or_value)
        return specs_compatible(self._element_spec, other.element_spec)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"IteratorSpec{(self._element_spec,)!r}"


def specs_compatible(a: Any, b: Any) -> bool:
    """Whether two structures of TensorSpecs agree: the same structure and dtypes, shapes equal where known."""
    la, lb = structure.leaves(a), structure.leaves(b)
    if len(la) != len(lb) or repr(structure.map_leaves(lambda _: 0, a)) != repr(structure.map_leaves(lambda _: 0, b)):
        return False
    for x, y in zip(la, lb):
        if np.dtype(x.dtype) != np.dtype(y.dtype):
            return False
        if x.shape is not None and y.shape is not None and (
                len(x.shape) != len(y.shape) or any(p is not None and q is not None and p != q
                                                    for p, q in zip(x.shape, y.shape))):
            return False
    return True
