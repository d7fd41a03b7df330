"""`MyType.Spec`: the TypeSpec of a `tf.experimental.ExtensionType`, and `tf.type_spec_from_value`.

As TF 2.21's (observed): a spec has the value type's fields, a tensor field's value replaced by its `TensorSpec`
(shape and dtype, not the values), a nested ExtensionType's by its spec, a Mapping's values by theirs (an
`ImmutableDict`, shown as a dict in the spec's repr); static fields (str, int, TensorShape, ...) are kept.
`A.Spec(x=TensorSpec(...), ...)` builds one; a class body's own `class Spec:` (with its `__init__`) is kept.
Two specs are equal when their fields are; `is_compatible_with` accepts a value or spec whose tensor shapes fit.
"""
from __future__ import annotations

import collections.abc
from typing import Any

import jax
import numpy as np

from jdist.input.tensor_spec import TensorShape, TensorSpec
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.extension_type_fields import ImmutableDict, bind


def spec_of(value: Any) -> Any:
    """The spec of a field's value: TensorSpec for a tensor, the spec of an ExtensionType, containers mapped."""
    if hasattr(type(value), "_tf_extension_type_fields"):
        return value._type_spec
    if isinstance(value, (TensorShape, DType)):
        return value
    if isinstance(value, ImmutableDict):
        return ImmutableDict({k: spec_of(v) for k, v in value.items()})
    if isinstance(value, tuple):
        return tuple(spec_of(v) for v in value)
    if hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, TensorSpec):
        return TensorSpec(tuple(value.shape), as_dtype(value.dtype))
    return value


def _shown(value: Any) -> Any:
    return dict(value) if isinstance(value, ImmutableDict) else value


class ExtensionTypeSpec:
    """The base of each ExtensionType's `Spec` (TF's `ExtensionTypeSpec`)."""

    value_type: type = type(None)  # set on each subclass
    _jdist_composite_spec = True  # a concrete function's argument spec (jdist.interop.concrete_function)

    def __init__(self, *args: Any, **kwargs: Any):
        values = bind(self.value_type._tf_extension_type_fields(), args, kwargs, defaults=False)
        for name in values:
            value = values[name]
            object.__setattr__(self, name, ImmutableDict(value) if isinstance(value, collections.abc.Mapping)
                               else value)

    @classmethod
    def from_fields(cls, values: dict) -> ExtensionTypeSpec:
        spec = object.__new__(cls)
        for name, value in values.items():
            object.__setattr__(spec, name, value)
        return spec

    def _fields(self) -> dict:
        return {f.name: getattr(self, f.name, None) for f in self.value_type._tf_extension_type_fields()}

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={_shown(value)!r}" for name, value in self._fields().items())
        return f"{self.value_type.__name__}.Spec({body})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and _key(self._fields()) == _key(other._fields())  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self), _key(self._fields())))

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        """TF's: a value or spec of the same type whose tensors' dtypes match and shapes fit."""
        other = spec_or_value if isinstance(spec_or_value, ExtensionTypeSpec) else \
            (spec_or_value._type_spec if hasattr(type(spec_or_value), "_tf_extension_type_fields") else None)
        if other is None or other.value_type is not self.value_type:
            return False
        return _compatible(self._fields(), other._fields())

    def most_specific_common_supertype(self, others: list) -> ExtensionTypeSpec | None:
        """TF's: the spec with the dimensions that differ among these specs unknown (None where they don't fit)."""
        fields = self._fields()
        for other in others:
            if type(other) is not type(self):
                return None
            fields = _common(fields, other._fields())
            if fields is None:
                return None
        return type(self).from_fields(fields)

    def __getattr__(self, name: str) -> Any:
        """`shape` where the spec names none: `tf.data` reads a batchable value's leading dimension from it (the
        first dimension of its first tensor); for a value that is not batchable, TF's error when sliced (observed,
        TF 2.21: AttributeError "'MT.Spec' object has no attribute '_to_batched_tensor_list'")."""
        if name != "shape" or "value_type" not in dir(type(self)):
            raise AttributeError(f"{type(self).__qualname__!r} object has no attribute {name!r}")
        value_type = self.value_type
        if not any(base.__name__ == "BatchableExtensionType" for base in value_type.__mro__):
            raise AttributeError(f"'{value_type.__name__}.Spec' object has no attribute '_to_batched_tensor_list': "
                                 "tf.data slices and batches BatchableExtensionType values only; derive "
                                 f"{value_type.__name__} from tf.experimental.BatchableExtensionType")
        specs = self._component_specs
        if not specs or specs[0].shape is None or not len(specs[0].shape):
            return TensorShape(None)
        return TensorShape(list(specs[0].shape)[:1])

    @property
    def _component_specs(self) -> list:
        return jax.tree.leaves(self, is_leaf=lambda x: isinstance(x, TensorSpec))


def _key(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        return ("TensorSpec", None if value.shape is None else tuple(value.shape), str(value.dtype))
    if isinstance(value, TensorShape):
        return ("TensorShape", None if value.rank is None else tuple(value.as_list()))
    if isinstance(value, (dict, ImmutableDict)):
        return tuple(sorted((k, _key(v)) for k, v in value.items()))
    if isinstance(value, tuple):
        return tuple(_key(v) for v in value)
    return value


def _compatible(a: Any, b: Any) -> bool:
    if isinstance(a, TensorSpec) and isinstance(b, TensorSpec):
        return str(a.dtype) == str(b.dtype) and TensorShape(a.shape).is_compatible_with(TensorShape(b.shape))
    if isinstance(a, ExtensionTypeSpec):
        return a.is_compatible_with(b)
    if isinstance(a, (dict, ImmutableDict)) and isinstance(b, (dict, ImmutableDict)):
        return set(a) == set(b) and all(_compatible(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, tuple) and not isinstance(a, TensorShape):
        return len(a) == len(b) and all(_compatible(x, y) for x, y in zip(a, b))
    return _key(a) == _key(b)


def _common(a: Any, b: Any) -> Any:
    if isinstance(a, TensorSpec) and isinstance(b, TensorSpec):
        if str(a.dtype) != str(b.dtype):
            return None
        if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
            return TensorSpec(None, a.dtype)
        return TensorSpec(tuple(x if x == y else None for x, y in zip(a.shape, b.shape)), a.dtype)
    if isinstance(a, ExtensionTypeSpec):
        return a.most_specific_common_supertype([b])
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return None
        merged = {k: _common(a[k], b[k]) for k in a}
        return None if any(v is None and a[k] is not None for k, v in merged.items()) else merged
    return a if _key(a) == _key(b) else None


def type_spec_from_value(value: Any) -> Any:
    """`tf.type_spec_from_value`: an ExtensionType's spec, or a tensor's (or Python value's) TensorSpec, as TF's
    (observed, TF 2.21: `3` gives TensorSpec(shape=(), dtype=tf.int32), "x" a tf.string one)."""
    if hasattr(type(value), "_tf_extension_type_fields"):
        return value._type_spec
    if hasattr(value, "_type_spec"):
        return value._type_spec
    from jdist.tf_compat import ops as _ops

    try:
        tensor = value if hasattr(value, "shape") and hasattr(value, "dtype") else _ops.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise TypeError(f"Could not build a TypeSpec for {value!r} of unsupported type {type(value)}.") from None
    return TensorSpec(tuple(np.shape(tensor)), as_dtype(tensor.dtype))
