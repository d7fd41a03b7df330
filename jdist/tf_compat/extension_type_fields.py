"""The fields of a `tf.experimental.ExtensionType`: read from the class's type annotations, and each value checked
and converted as TF 2.21 converts it (observed).

A `tf.Tensor` field takes what `tf.convert_to_tensor` takes; `str`, `int`, `float`, `bool` fields take that type
(`int` takes a bool, `float` takes no int: "f: expected 'float', got 'int'"); `Tuple[X, ...]` takes a list or
tuple (a tuple kept); `Mapping[K, V]` becomes an `ImmutableDict`; `Union`/`Optional` take the first member that
converts; a nested ExtensionType field takes an instance; `tf.TensorShape` and `tf.DType` fields convert with
`tf.TensorShape(v)` and `tf.as_dtype(v)`. Another annotation is TF's TypeError at class definition
("In field 'x': Unsupported type annotation 'list'").
"""
from __future__ import annotations

import collections.abc
import sys
import typing
from typing import Any, NamedTuple

import numpy as np

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat import host_tensors, ops as _ops
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.predicates import Tensor

_MISSING = object()
_SCALARS = (str, int, float, bool, type(None), bytes)


class ImmutableDict(collections.abc.Mapping):
    """TF's `ImmutableDict`: a Mapping field's value (a read-only dict; `repr` as TF's)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._dict = dict(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._dict[key]

    def __iter__(self) -> Any:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __repr__(self) -> str:
        return f"ImmutableDict({self._dict!r})"

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._dict.items(), key=lambda kv: repr(kv[0]))))


class Field(NamedTuple):
    """One field: its name, annotation (resolved) and default (`_MISSING` for none)."""

    name: str
    annotation: Any
    default: Any


def bind(fields: list[Field], args: tuple, kwargs: dict, defaults: bool = True) -> dict:
    """A constructor's arguments bound to `fields` (an ExtensionType's or its Spec's), TF's TypeErrors for a
    missing or extra one (observed, TF 2.21); a field's default fills it where `defaults`."""
    if len(args) > len(fields):
        raise TypeError("too many positional arguments")
    values = {f.name: a for f, a in zip(fields, args)}
    names = {f.name for f in fields}
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"got an unexpected keyword argument {name!r}")
        if name in values:
            raise TypeError(f"multiple values for argument {name!r}")
        values[name] = value
    for field in fields:
        if field.name not in values:
            if not defaults or field.default is _MISSING:
                raise TypeError(f"missing a required argument: {field.name!r}")
            values[field.name] = field.default
    return {f.name: values[f.name] for f in fields}


def _is_extension_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "_tf_extension_type_fields")


def check_annotation(annotation: Any) -> None:
    """TF's TypeError for an annotation an ExtensionType field cannot have (forward references are checked later)."""
    if isinstance(annotation, (str, typing.ForwardRef)):
        return
    origin = typing.get_origin(annotation)
    if origin is not None:
        for arg in typing.get_args(annotation):
            if arg is not Ellipsis:
                check_annotation(arg)
        if origin in (tuple, collections.abc.Mapping, typing.Union) or str(origin) == "types.UnionType":
            return
    elif annotation in (Tensor, TensorShape, DType, *_SCALARS) or _is_extension_type(annotation) \
            or annotation is typing.Any:
        return
    name = getattr(annotation, "__name__", repr(annotation))
    raise TypeError(f"Unsupported type annotation {name!r}")


def resolved(cls: type, annotation: str) -> Any:
    """A string annotation evaluated in its class's module; as it is where it names what is not defined yet."""
    module = sys.modules.get(cls.__module__)
    try:
        return eval(annotation, dict(vars(module)) if module is not None else {}, {cls.__name__: cls})  # noqa: S307
    except Exception:  # noqa: BLE001 - a forward reference ("Node"): checked when the fields are read
        return annotation


def class_fields(cls: type) -> list[Field]:
    """The fields of `cls` and its bases, bases' first, with forward references (`"Node"`) resolved."""
    fields: dict[str, Field] = {}
    module = sys.modules.get(cls.__module__)
    namespace = dict(vars(module)) if module is not None else {}
    for klass in reversed(cls.__mro__):
        if not hasattr(klass, "_tf_extension_type_fields") or klass.__module__ == "jdist.tf_compat.extension_type":
            continue
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():
            if name.startswith("_tf_") or name == "__name__":
                continue
            try:
                hints = typing.get_type_hints(klass, globalns=namespace,
                                              localns={cls.__name__: cls, klass.__name__: klass})
            except Exception:  # noqa: BLE001 - a name defined in a function's body: each field on its own
                hints = {}
            if name not in hints and isinstance(annotation, str):
                annotation = resolved(klass, annotation)
            fields[name] = Field(name, hints.get(name, annotation), klass.__dict__.get(name, _MISSING))
    return list(fields.values())


def _type_name(annotation: Any) -> str:
    return repr(annotation.__name__) if isinstance(annotation, type) else str(annotation)


def convert(value: Any, annotation: Any, path: str) -> Any:
    """`value` checked and converted for a field declared `annotation` (TF's TypeError naming `path` otherwise)."""
    origin = typing.get_origin(annotation)
    if annotation is typing.Any:
        return value
    if annotation is Tensor:
        if _is_tracer(value) or isinstance(value, Tensor) and type(value) is not np.ndarray:
            return value
        try:
            if value is None:
                raise TypeError(value)
            return host_tensors.as_tensors(_ops.convert_to_tensor(value))
        except (TypeError, ValueError):
            raise TypeError(f"{path}: expected a Tensor, got {type(value).__name__!r}") from None
    if _is_extension_type(annotation):
        if isinstance(value, annotation):
            return value
        raise TypeError(f"{path}: expected {annotation.__name__!r}, got {type(value).__name__!r}")
    if annotation is TensorShape:
        return value if isinstance(value, TensorShape) else TensorShape(value)
    if annotation is DType:
        return as_dtype(value)
    if annotation in _SCALARS:
        ok = isinstance(value, annotation) and not (annotation is float and isinstance(value, int)) \
            and not (annotation is int and isinstance(value, float))
        if annotation is type(None):
            ok = value is None
        if not ok:
            raise TypeError(f"{path}: expected {annotation.__name__!r}, got {type(value).__name__!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{path}: expected 'tuple', got {type(value).__name__!r}")
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise TypeError(f"{path}: expected a tuple of length {len(args)}, got {len(value)}")
        return tuple(convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is collections.abc.Mapping:
        if not isinstance(value, collections.abc.Mapping):
            raise TypeError(f"{path}: expected 'Mapping', got {type(value).__name__!r}")
        key_type, value_type = typing.get_args(annotation)
        return ImmutableDict({convert(k, key_type, f"{path}[<key>]"): convert(v, value_type, f"{path}[{k!r}]")
                              for k, v in value.items()})
    if origin is typing.Union or str(origin) == "types.UnionType":
        for member in typing.get_args(annotation):
            try:
                return convert(value, member, path)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"{path}: expected {annotation}, got {type(value).__name__!r}")
    if isinstance(annotation, (str, typing.ForwardRef)):
        raise TypeError(f"{path}: Unsupported type annotation {annotation!r}")
    raise TypeError(f"{path}: Unsupported type annotation {_type_name(annotation)}")


def _is_tracer(value: Any) -> bool:
    from jax.core import Tracer

    return isinstance(value, Tracer)


def holds_tensors(annotation: Any) -> bool:
    """Whether a field so declared holds tensors (a pytree child), not a static value (kept in the tree's aux)."""
    if annotation is Tensor or _is_extension_type(annotation) or annotation is typing.Any:
        return True
    return any(holds_tensors(a) for a in typing.get_args(annotation) if a is not Ellipsis)


def _flatten_dict(value: ImmutableDict) -> tuple[list, tuple]:
    keys = sorted(value, key=repr)
    return [value[k] for k in keys], (tuple(keys), tuple(value))


def _unflatten_dict(aux: tuple, children: Any) -> ImmutableDict:
    by_key = dict(zip(aux[0], children))
    return ImmutableDict({k: by_key[k] for k in aux[1]})


def _register() -> None:
    import jax

    jax.tree_util.register_pytree_node(ImmutableDict, _flatten_dict, _unflatten_dict)


_register()
