"""`tf.data.DatasetSpec`: the spec of a dataset, as a `tf.function` input signature or a nested spec names it.

TF 2.21 (observed): `DatasetSpec.from_value(ds)` prints `DatasetSpec(TensorSpec(shape=(), dtype=tf.int64,
name=None), TensorShape([]))`; two specs of one element spec are equal; a dataset is not an instance of it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jdist.input.tensor_spec import TensorShape
from jdist.tfdata.iterator import specs_compatible

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

# The Dataset class, registered by `jdist.tfdata.dataset` (which, through `window`, makes DatasetSpecs itself).
VALUE_TYPE: list[type] = []


class DatasetSpec:
    """`tf.data.DatasetSpec(element_spec, dataset_shape=())`."""

    def __init__(self, element_spec: Any, dataset_shape: Any = ()):
        self._element_spec = element_spec
        self._dataset_shape = TensorShape(dataset_shape)

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    @property
    def value_type(self) -> type:
        return VALUE_TYPE[0]

    @staticmethod
    def from_value(value: Dataset) -> DatasetSpec:
        """The spec of the dataset `value`."""
        return DatasetSpec(value.element_spec)

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        """Whether a dataset, or a DatasetSpec, has elements this spec allows."""
        other = spec_or_value if isinstance(spec_or_value, DatasetSpec) else DatasetSpec.from_value(spec_or_value)
        return self._dataset_shape == other._dataset_shape and specs_compatible(self._element_spec,
                                                                                other.element_spec)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"DatasetSpec({self._element_spec!r}, {self._dataset_shape!r})"
