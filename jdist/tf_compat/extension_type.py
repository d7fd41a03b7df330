"""`tf.experimental.ExtensionType` and `BatchableExtensionType`: user-defined composite values, as TF 2.21's.

A subclass declares its fields with type annotations (`extension_type_fields`); TF's generated `__init__` takes one
argument per field (defaults from the class body), converts and checks each value, then calls `__validate__`.
A class body's own `__init__` sets the fields itself (each converted when it returns). Values are immutable:
setting or deleting a field outside the constructor is TF's AttributeError ("Cannot mutate attribute `mask`
outside the custom constructor of ExtensionType."). `==` is TF's (observed): False (a bool) for another type or
different static fields or tensor shapes, else a scalar bool tensor, all tensors elementwise equal; instances are
unhashable. `repr` is `Name(field=repr, ...)`. `_type_spec` / `tf.type_spec_from_value` give the class's `Spec`
(`extension_type_spec`).

Each subclass is a JAX pytree whose children are its tensor fields (static fields are the tree's aux data), so
`tf.function` traces once per spec and again when the spec changes (a Mapping's keys, a shape, a dtype),
`tf.nest.flatten(v, expand_composites=True)` gives the tensors, and `tf.cond` / `tf.while_loop` carry values.
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np

from jdist.tf_compat import extension_type_fields as _fields
from jdist.tf_compat.extension_type_spec import ExtensionTypeSpec, spec_of

_MUTATE = "Cannot mutate attribute `{}` outside the custom constructor of ExtensionType."
_BUILDING = "_tf_extension_type_building"


class ExtensionType:
    """`tf.experimental.ExtensionType`: subclass it with annotated fields (module docstring)."""

    Spec: type = ExtensionTypeSpec
    _tf_fields_cache: list | None = None

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        cls._tf_fields_cache = None
        if cls.__module__ == __name__:  # BatchableExtensionType: a base, not a value type
            return
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if isinstance(annotation, str):  # `from __future__ import annotations`: resolved where it can be
                annotation = _fields.resolved(cls, annotation)
            if name != "__name__" and not name.startswith("_tf_"):
                try:
                    _fields.check_annotation(annotation)
                except TypeError as error:
                    raise TypeError(f"In field {name!r}: {error}") from None
        user_init = cls.__dict__.get("__init__")
        cls.__init__ = _wrap_user_init(user_init) if user_init is not None else _generated_init  # type: ignore
        own_spec = cls.__dict__.get("Spec")
        spec_bases = (ExtensionTypeSpec,) if own_spec is None or not isinstance(own_spec, type) else (
            (own_spec,) if issubclass(own_spec, ExtensionTypeSpec) else (ExtensionTypeSpec,))
        body = {} if own_spec is None or issubclass(own_spec, ExtensionTypeSpec) else {
            k: v for k, v in vars(own_spec).items() if k not in ("__dict__", "__weakref__")}
        spec = type("Spec", spec_bases, {**body, "value_type": cls, "__module__": cls.__module__})
        spec.__qualname__ = f"{cls.__qualname__}.Spec"
        cls.Spec = spec
        jax.tree_util.register_pytree_node(cls, _flatten, functools.partial(_unflatten, cls))
        jax.tree_util.register_pytree_node(spec, _flatten, functools.partial(_unflatten_spec, spec))

    @classmethod
    def _tf_extension_type_fields(cls) -> list:
        if cls.__dict__.get("_tf_fields_cache") is None:
            cls._tf_fields_cache = _fields.class_fields(cls)
        return cls._tf_fields_cache  # type: ignore[return-value]

    def __new__(cls, *args: Any, **kwargs: Any):
        if cls in (ExtensionType, BatchableExtensionType):
            raise AssertionError(f"Cannot create an instance of {cls.__name__} because {cls.__name__} is an "
                                 "abstract base class.")
        return super().__new__(cls)

    def __setattr__(self, name: str, value: Any) -> None:
        if not self.__dict__.get(_BUILDING):
            raise AttributeError(_MUTATE.format(name))
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if not self.__dict__.get(_BUILDING):
            raise AttributeError(_MUTATE.format(name))
        object.__delattr__(self, name)

    def __repr__(self) -> str:
        body = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self._tf_extension_type_fields())
        return f"{type(self).__name__}({body})"

    def __eq__(self, other: object) -> Any:
        return _equal(self, other)

    def __ne__(self, other: object) -> Any:
        equal = _equal(self, other)
        return not equal if isinstance(equal, bool) else np.logical_not(equal)

    __hash__ = None  # type: ignore[assignment]  # TF's: unhashable (observed)

    @property
    def _type_spec(self) -> ExtensionTypeSpec:
        return type(self).Spec.from_fields({f.name: spec_of(getattr(self, f.name))
                                            for f in self._tf_extension_type_fields()})


class BatchableExtensionType(ExtensionType):
    """`tf.experimental.BatchableExtensionType`: an ExtensionType whose tensors share leading batch dimensions."""


def _bind(cls: type, args: tuple, kwargs: dict) -> dict:
    """The constructor's arguments bound to the fields (defaults filled), TF's TypeErrors for a bad one."""
    return _fields.bind(cls._tf_extension_type_fields(), args, kwargs)


def _finish(self: ExtensionType, values: dict) -> None:
    """Sets the converted fields, then calls `__validate__` (fields already set, still immutable)."""
    for field in type(self)._tf_extension_type_fields():
        object.__setattr__(self, field.name, _fields.convert(values[field.name], field.annotation, field.name))
    validate = getattr(self, "__validate__", None)
    if validate is not None:
        validate()


def _generated_init(self: ExtensionType, *args: Any, **kwargs: Any) -> None:
    _finish(self, _bind(type(self), args, kwargs))


def _wrap_user_init(init: Any) -> Any:
    @functools.wraps(init)
    def __init__(self: ExtensionType, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, _BUILDING, True)
        try:
            init(self, *args, **kwargs)
        finally:
            object.__delattr__(self, _BUILDING)
        missing = {f.name for f in type(self)._tf_extension_type_fields()
                   if f.name not in self.__dict__ and f.default is _fields._MISSING}
        if missing:  # TF's ValueError (observed, TF 2.21); a custom constructor sets each field
            raise ValueError(f"Missing required fields: {missing}")
        _finish(self, {f.name: self.__dict__.get(f.name, f.default) for f in type(self)._tf_extension_type_fields()})
    return __init__


def _children(obj: Any) -> tuple[list, list]:
    fields = obj.value_type._tf_extension_type_fields() if isinstance(obj, ExtensionTypeSpec) else \
        type(obj)._tf_extension_type_fields()
    # a field that holds tensors is a child, unless it is None (an Optional field left out: part of the spec)
    dynamic = [f.name for f in fields if _fields.holds_tensors(f.annotation) and getattr(obj, f.name, None) is not None]
    return dynamic, [f.name for f in fields if f.name not in dynamic]


def _flatten(obj: Any) -> tuple[tuple, Any]:
    dynamic, static = _children(obj)
    aux = (tuple(dynamic), tuple((name, _hashable(getattr(obj, name, None))) for name in static))
    return tuple(getattr(obj, name, None) for name in dynamic), aux


def _hashable(value: Any) -> Any:
    return _Static(value)


class _Static:
    """A static field's value in a tree's aux data: compared by value (a TensorShape, a tuple of ints, ...)."""

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and type(other.value) is type(self.value) and \
            repr(other.value) == repr(self.value)

    def __hash__(self) -> int:
        return hash(repr(self.value))


def _rebuild(obj: Any, aux: Any, children: Any) -> Any:
    dynamic, static = aux
    for name, value in zip(dynamic, children):
        object.__setattr__(obj, name, value)
    for name, value in static:
        object.__setattr__(obj, name, value.value)
    return obj


def _unflatten(cls: type, aux: Any, children: Any) -> Any:
    return _rebuild(object.__new__(cls), aux, children)


def _unflatten_spec(cls: type, aux: Any, children: Any) -> Any:
    return _rebuild(object.__new__(cls), aux, children)


def _equal(a: Any, b: Any) -> Any:
    """TF's `==` of two extension values (module docstring)."""
    if type(a) is not type(b):
        return False
    if a._type_spec != b._type_spec:  # static fields, shapes, dtypes or keys differ
        return False
    from jdist.tf_compat import host_tensors, ops as _ops, reductions as _reductions

    result = _ops.constant(True)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        result = _ops.logical_and(result, _reductions.reduce_all(_ops.equal(x, y)))
    return host_tensors.as_tensors(result)
