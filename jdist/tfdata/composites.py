"""Composite tensors (ragged, sparse) as `tf.data` elements: the kinds registered here, and the protocol.

`tf.data` slices, batches and unbatches TF's composite tensors by their own rules (observed in TF 2.21:
`from_tensor_slices` of a RaggedTensor gives its rows, `batch` of them a RaggedTensor, a SparseTensor's
rows are SparseTensors). The types themselves live in `jdist.tf_compat`, a higher layer than this package,
so they register here (`register`) and `tf.data` reaches them only through the `CompositeKind` protocol.
"""
from __future__ import annotations

from typing import Any, Protocol


class CompositeKind(Protocol):
    """How `tf.data` handles one composite type (values and their element specs)."""

    def is_value(self, value: Any) -> bool:
        """Whether `value` is a tensor of this kind."""
        ...

    def is_spec(self, spec: Any) -> bool:
        """Whether `spec` is this kind's element spec."""
        ...

    def spec_of(self, value: Any) -> Any:
        """The spec of a whole value (its leading dimension included)."""
        ...

    def rows(self, value: Any) -> list:
        """The rows of `value` along its first dimension, each as `tf.data` gives an element of its row spec."""
        ...

    def row_spec(self, spec: Any) -> Any:
        """The spec of one row of a value of `spec` (`from_tensor_slices`, `unbatch`)."""
        ...

    def batch_spec(self, spec: Any, size: int | None) -> Any:
        """The spec of `size` stacked rows of `spec` (None: a size not known statically)."""
        ...

    def stack(self, rows: list, spec: Any) -> Any:
        """One value of `batch_spec(spec, len(rows))` from rows of `spec` (dense rows too, where `spec` says so)."""
        ...

    def to_numpy(self, value: Any) -> Any:
        """`value` as `as_numpy_iterator` gives it."""
        ...

    def dense_row_spec(self, spec: Any) -> Any:
        """`ragged_batch`'s spec for rows of the dense `spec` (a `TensorSpec`) of this kind, None to keep it."""
        ...


_KINDS: list[CompositeKind] = []


def register(kind: CompositeKind) -> None:
    """Makes `kind`'s values and specs known to `tf.data` (once per kind)."""
    if kind not in _KINDS:
        _KINDS.append(kind)


def kind_of_value(value: Any) -> CompositeKind | None:
    """The registered kind of `value`, None for anything else (a dense tensor)."""
    for kind in _KINDS:
        if kind.is_value(value):
            return kind
    return None


def kind_of_spec(spec: Any) -> CompositeKind | None:
    """The registered kind whose spec `spec` is, None for a `TensorSpec` (or anything else)."""
    for kind in _KINDS:
        if kind.is_spec(spec):
            return kind
    return None


def is_composite(value: Any) -> bool:
    """Whether `value` is a registered composite tensor (kept whole by `tf.data`'s conversions)."""
    return bool(_KINDS) and kind_of_value(value) is not None


def spec_of(value: Any) -> Any:
    """A composite tensor's spec (its kind's), None for anything else."""
    kind = kind_of_value(value) if _KINDS else None
    return kind.spec_of(value) if kind is not None else None


def registered() -> list[CompositeKind]:
    """The registered kinds, in registration order."""
    return list(_KINDS)


def to_numpy(value: Any) -> Any:
    """A composite tensor as `as_numpy_iterator` gives it (its kind's rule)."""
    kind = kind_of_value(value)
    if kind is None:
        raise TypeError(f"to_numpy: {type(value).__name__} is not a registered composite tensor")
    return kind.to_numpy(value)
