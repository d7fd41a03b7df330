"""A `tf.function`'s tensor arguments printed as TF's trace prints them, while a body runs as Python in its place.

TF traces every signature, so a `print(x)` in the body shows a symbolic tensor, `Tensor("a:0", shape=(),
dtype=string)` (observed in TF 2.21, function guide: `double(tf.constant("a"))` prints `Tracing with
Tensor("a:0", shape=(), dtype=string)`). A signature jdist cannot compile (string tensors) runs its Python body
instead, with the argument tensors themselves; during that first run, which stands for TF's trace, those
tensors print as TF's symbolic ones, named after their parameters. Tensors the body makes, and arguments of a
built-in type (a numpy array), print as they are.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator

import numpy as np


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not hasattr(value, "assign")


def _dtype_name(value: Any) -> str:
    dtype = np.dtype(value.dtype)
    return "string" if dtype.kind in "OSU" else dtype.name


def _shape_text(value: Any) -> str:
    dims = tuple(np.shape(value))
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


@contextlib.contextmanager
def arguments_shown_symbolic(python_function: Callable, args: tuple, kwargs: dict) -> Iterator[None]:
    """While the block runs, the top-level tensor arguments print as TF's symbolic tensors (module docstring)."""
    try:
        bound = inspect.signature(python_function).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        yield
        return
    names = {id(value): name for name, value in bound.items() if _is_tensor(value)}
    classes = {type(value) for value in bound.values() if _is_tensor(value)}
    saved = []
    for cls in classes:
        original_str, original_repr = cls.__str__, cls.__repr__

        def text(self: Any, _original: Callable = original_str) -> str:
            name = names.get(id(self))
            if name is None:
                return _original(self)
            return f'Tensor("{name}:0", shape={_shape_text(self)}, dtype={_dtype_name(self)})'

        def representation(self: Any, _original: Callable = original_repr) -> str:
            name = names.get(id(self))
            if name is None:
                return _original(self)
            return f"<tf.Tensor '{name}:0' shape={_shape_text(self)} dtype={_dtype_name(self)}>"

        own = (cls, cls.__dict__.get("__str__"), cls.__dict__.get("__repr__"))
        try:
            cls.__str__ = text  # type: ignore[method-assign]
        except TypeError:  # a built-in type (numpy's ndarray): its tensors print as they are
            continue
        cls.__repr__ = representation  # type: ignore[method-assign]
        saved.append(own)
    try:
        yield
    finally:
        for cls, original_str, original_repr in saved:
            for attribute, original in (("__str__", original_str), ("__repr__", original_repr)):
                if original is None:
                    delattr(cls, attribute)
                else:
                    setattr(cls, attribute, original)
