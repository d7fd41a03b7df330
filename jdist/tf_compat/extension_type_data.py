"""Extension type values as `tf.data` elements (a `jdist.tfdata.composites` kind), as TF 2.21's (observed).

`from_tensors` takes any ExtensionType value; `from_tensor_slices`, `unbatch` and `batch` take a
`BatchableExtensionType`'s: a row slices every tensor field along its first dimension, and a `tf.TensorShape`
field (the guide's batch `shape`) loses its first dimension; a batch stacks the rows' tensors and prefixes the
shape field with the batch size (TF's default `ExtensionTypeBatchEncoder`). Slicing a plain ExtensionType is
refused (TF's AttributeError, with the advice to make it a BatchableExtensionType), and so is
`as_numpy_iterator` of extension values (TF's TypeError).
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jdist.input.tensor_spec import TensorShape, TensorSpec
from jdist.tf_compat import host_tensors
from jdist.tf_compat.extension_type import BatchableExtensionType, ExtensionType
from jdist.tf_compat.extension_type_spec import ExtensionTypeSpec
from jdist.tfdata import composites


def _value_type(spec_or_value: Any) -> type:
    return spec_or_value.value_type if isinstance(spec_or_value, ExtensionTypeSpec) else type(spec_or_value)


def _batchable(spec_or_value: Any, what: str) -> None:
    value_type = _value_type(spec_or_value)
    if not issubclass(value_type, BatchableExtensionType):
        # TF 2.21's error (observed) is this AttributeError, without the advice
        raise AttributeError(f"'{value_type.__name__}.Spec' object has no attribute '_to_batched_tensor_list': "
                             f"tf.data takes {what} of BatchableExtensionType values only; derive "
                             f"{value_type.__name__} from tf.experimental.BatchableExtensionType")


def _shapes(obj: Any, change: Any) -> Any:
    """`obj` (a value or spec) with each `tf.TensorShape` field changed by `change`; nested ones too."""
    fields = {}
    for field in _value_type(obj)._tf_extension_type_fields():
        value = getattr(obj, field.name, None)
        if isinstance(value, TensorShape) and value.rank is not None:
            value = change(value)
        elif isinstance(value, (ExtensionType, ExtensionTypeSpec)):
            value = _shapes(value, change)
        fields[field.name] = value
    rebuilt = object.__new__(type(obj))
    for name, value in fields.items():
        object.__setattr__(rebuilt, name, value)
    return rebuilt


class _ExtensionKind:
    """`tf.data`'s rules for ExtensionType values (`jdist.tfdata.composites.CompositeKind`)."""

    def is_value(self, value: Any) -> bool:
        return isinstance(value, ExtensionType)

    def is_spec(self, spec: Any) -> bool:
        return isinstance(spec, ExtensionTypeSpec)

    def spec_of(self, value: Any) -> Any:
        return value._type_spec

    def rows(self, value: Any) -> list:
        _batchable(value, "the rows")
        leaves, treedef = jax.tree.flatten(value)
        count = int(np.shape(leaves[0])[0]) if leaves else 0
        return [_shapes(jax.tree.unflatten(treedef, [host_tensors.as_tensors(np.asarray(leaf)[i]) for leaf in leaves]),
                        lambda shape: shape[1:]) for i in range(count)]

    def row_spec(self, spec: Any) -> Any:
        _batchable(spec, "the rows")
        spec = jax.tree.map(lambda s: TensorSpec(None if s.shape is None else tuple(s.shape)[1:], s.dtype), spec,
                            is_leaf=lambda s: isinstance(s, TensorSpec))
        return _shapes(spec, lambda shape: shape[1:])

    def batch_spec(self, spec: Any, size: int | None) -> Any:
        _batchable(spec, "a batch")
        spec = jax.tree.map(lambda s: TensorSpec(None if s.shape is None else (size, *tuple(s.shape)), s.dtype), spec,
                            is_leaf=lambda s: isinstance(s, TensorSpec))
        return _shapes(spec, lambda shape: TensorShape([size, *shape]))

    def stack(self, rows: list, spec: Any) -> Any:
        _batchable(rows[0] if rows else spec, "a batch")
        flat = [jax.tree.flatten(row) for row in rows]
        leaves = [host_tensors.as_tensors(np.stack([np.asarray(f[0][i]) for f in flat]))
                  for i in range(len(flat[0][0]))]
        return _shapes(jax.tree.unflatten(flat[0][1], leaves), lambda shape: TensorShape([len(rows), *shape]))

    def to_numpy(self, value: Any) -> Any:  # TF 2.21's TypeError (observed)
        raise TypeError("`tf.data.Dataset.as_numpy_iterator()` is not supported for datasets that produce values "
                        f"of type {type(value)}")

    def dense_row_spec(self, spec: Any) -> Any:
        return None


composites.register(_ExtensionKind())
