"""The values AutoGraph's converted statements carry: when a condition is a traced tensor, and how a branch's or
a loop's Python variables become a program's values and back.

A condition that is a Python value (a bool, an int, a numpy value) keeps the statement plain Python, as TF keeps
a Python condition. A tensor while a program is traced (an argument of the compiled program, computed from one,
or a constant: all are graph tensors in TF) makes the statement a `lax.cond` / `lax.while_loop`. Values that
cross such a statement are flattened: tensors and Python numbers become the program's values (Python `int` as
int32, `float` as float32, `bool` as bool, as TF converts them); other leaves (None, strings, objects) must come
out as they went in.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jdist.interop import trace_state


class Undefined:
    """A Python variable not yet assigned where a converted statement starts (TF's `Undefined`)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Undefined({self.name!r})"

    def __bool__(self) -> bool:
        raise UnboundLocalError(f"local variable {self.name!r} referenced before assignment")


def marked(kind: type, message: str) -> Exception:
    """TF's error for a converted statement, marked so a `tf.function` raises it rather than run the body as
    Python (which would hide it)."""
    error = kind(message)
    error.jdist_autograph = message  # type: ignore[attr-defined]
    return error


def plain(error: BaseException) -> BaseException:
    """A marked error with its own text only (JAX appends a note on traceback filtering to errors it passes)."""
    clean = type(error)(error.jdist_autograph)  # type: ignore[attr-defined]
    clean.jdist_autograph = error.jdist_autograph  # type: ignore[attr-defined]
    return clean.with_traceback(error.__traceback__)


def is_autograph_error(error: BaseException) -> bool:
    return bool(getattr(error, "jdist_autograph", False))


def is_undefined(value: Any) -> bool:
    return isinstance(value, Undefined)


def _unwrapped(value: Any) -> Any:
    """A Keras variable's current value (the traced one inside a compiled function)."""
    if hasattr(value, "assign") and hasattr(value, "value") and hasattr(value, "dtype"):
        return value.value
    return value


def is_traced(value: Any) -> bool:
    """Whether `value` (a condition or an iterable) is a tensor of the program being traced: one the trace does
    not know, or any tensor while a program is traced (TF's graph makes `if tf.constant(True):` a `tf.cond`:
    observed in TF 2.21, both branches print at trace)."""
    value = _unwrapped(value)
    if isinstance(value, Tracer):
        return True
    tensor = isinstance(value, jax.Array) or _host_tensor(value) and value.dtype.kind not in "OSU"
    return tensor and trace_state.under_jit()


def _host_tensor(value: Any) -> bool:
    """A tensor jdist holds on the host (`tf.constant`, a `tf.data` element): an ndarray with TF's `.numpy()`."""
    return isinstance(value, np.ndarray) and callable(getattr(value, "numpy", None))


_PY_DTYPES = {bool: np.dtype(bool), int: np.dtype(np.int32), float: np.dtype(np.float32)}


class Static:
    """A leaf carried unchanged through a converted statement (compared by equality)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Static):
            return False
        try:
            return bool(self.value is other.value or self.value == other.value)
        except Exception:  # noqa: BLE001 - an object whose == is not a bool
            return False

    def __hash__(self) -> int:
        return 0


def _is_leaf(value: Any) -> bool:
    return hasattr(value, "assign") and hasattr(value, "dtype") or isinstance(value, Undefined)


def as_program_value(leaf: Any) -> Any:
    """A leaf as a program value (array), or `Static` where it stays Python."""
    if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, np.generic):
        return jnp.asarray(leaf, dtype=_PY_DTYPES[type(leaf)] if type(leaf) in _PY_DTYPES else None)
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
        return jnp.asarray(leaf)
    return Static(leaf)


def flatten(values: tuple) -> tuple[list, Any]:
    """`values` (one per variable) as flat leaves, each an array or a `Static`, and their structure."""
    leaves, treedef = jax.tree.flatten(values, is_leaf=_is_leaf)
    return [as_program_value(leaf) for leaf in leaves], treedef


def unflatten(treedef: Any, leaves: list) -> tuple:
    return jax.tree.unflatten(treedef, [leaf.value if isinstance(leaf, Static) else leaf for leaf in leaves])


def dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name


def per_name(names: tuple[str, ...], values: tuple) -> list[tuple[str, list, Any]]:
    """Per variable: its name, flat leaves and structure (see `flatten`)."""
    rows = []
    for name, value in zip(names, values):
        leaves, treedef = flatten((value,))
        rows.append((name, leaves, treedef))
    return rows
