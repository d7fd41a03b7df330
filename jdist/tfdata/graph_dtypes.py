"""TF 2.21's trace-time dtype errors for ops that take several inputs, and `Dataset.range`'s int64 bounds.

Eagerly TF runs an op on two dtypes and its kernel refuses it (InvalidArgumentError "cannot compute Pack as input
#2(zero-based) was expected to be a float tensor but is a int32 tensor"); when it traces (`tf.function`, a
`tf.data` function) it builds the op first and its op builder refuses it, with other text (observed, TF 2.21):
`tf.stack([f32, f32, i32, f32])` is TypeError "Tensors in list passed to 'values' of 'Pack' Op have types
[float32, float32, int32, float32] that don't all match." (`tf.concat`: 'ConcatV2'); `tf.where(c, 0, x)` with x
int64 converts the Python 0 alone (int32), then TypeError "Input 'e' of 'SelectV2' Op has type int64 that does
not match type int32 of argument 't'." (eagerly it is int64). `Dataset.range` converts its bounds to int64:
an int32 tensor is ValueError "stop: Tensor conversion requested dtype int64 for Tensor with dtype int32: ..."
(eagerly and traced; a numpy int32 value is converted).
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

from jdist.tfdata import operands


class TraceError(Exception):
    """Marks an error TF raises when it traces the function (`user_functions.graph_error` lets it through)."""


class TraceTypeError(TraceError, TypeError):
    """TF's trace-time TypeError."""


class TraceValueError(TraceError, ValueError):
    """TF's ValueError, eagerly and when traced."""


for _kind, _shown in ((TraceTypeError, "TypeError"), (TraceValueError, "ValueError")):
    _kind.__name__ = _kind.__qualname__ = _shown  # shown as TF's (`except TypeError` catches it too)

_PYTHON_DEFAULTS = {bool: "bool", int: "int32", float: "float32"}  # a Python value converted alone, as TF's


def _name(dtype: Any) -> str:
    kind = np.dtype(dtype)
    return "string" if kind.kind in "OSU" else kind.name


def _differ(a: Any, b: Any) -> bool:
    """Whether tensors `a` and `b` have two dtypes as TF holds them: a device array's 32-bit value (JAX without
    x64) stands for its kind's 64-bit one too."""
    da, db = np.dtype(a.dtype), np.dtype(b.dtype)
    if _name(da) == _name(db):
        return False
    narrow, kind_of = (a, da) if da.itemsize < db.itemsize else (b, db)
    return not (da.kind == db.kind and kind_of.itemsize == 4 and operands.is_device_array(narrow))


def check_list(op: str, values: Sequence[Any]) -> None:
    """TF's trace-time TypeError where the tensors among `values` (the op's list input) have several dtypes."""
    tensors = [v for v in values if operands.is_tensor(v) or hasattr(v, "aval")]
    if not any(_differ(tensors[0], t) for t in tensors[1:]):
        return
    first = _name(tensors[0].dtype)
    types = [_name(v.dtype) if (operands.is_tensor(v) or hasattr(v, "aval")) else first for v in values]
    raise TraceTypeError(f"Tensors in list passed to 'values' of '{op}' Op have types [{', '.join(types)}] that "
                         "don't all match.")


def check_select(x: Any, y: Any) -> None:
    """TF's trace-time TypeError for `tf.where(c, x, y)` where `x` is a Python value (converted alone: int32,
    float32) and `y` a tensor of another dtype."""
    if isinstance(x, (list, tuple)) or type(x) not in _PYTHON_DEFAULTS:
        return
    if not (operands.is_tensor(y) or hasattr(y, "aval")):
        return
    t, e = _PYTHON_DEFAULTS[type(x)], _name(y.dtype)
    if t != e:  # a device array's int32 standing for int64 (`_differ`) matches the Python int's int32 too
        raise TraceTypeError(f"Input 'e' of 'SelectV2' Op has type {e} that does not match type {t} of argument 't'.")


def check_range_bounds(args: Sequence[Any]) -> None:
    """`Dataset.range`'s ValueError for a tensor bound that is not int64 (TF converts each bound to int64)."""
    names = ("stop",) if len(args) == 1 else ("start", "stop", "step")[:len(args)]
    for name, value in zip(names, args):
        if not (operands.is_tensor(value) or hasattr(value, "aval")) or np.dtype(value.dtype) == np.int64:
            continue
        if operands.is_device_array(value) and np.dtype(value.dtype).kind in "iu" and \
                jax.dtypes.canonicalize_dtype(np.int64) != np.int64:
            continue  # JAX holds an int64 in 32 bits (without x64): its int32 may stand for int64
        raise TraceValueError(f"{name}: Tensor conversion requested dtype int64 for Tensor with dtype "
                              f"{_name(value.dtype)}: {value!r}")
