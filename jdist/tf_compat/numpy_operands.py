"""The dtype a `tf.math` binary function gives a numpy operand, as TF's eager ops convert it.

TF does not promote as numpy does: a numpy array or scalar given to `tf.math.multiply`, `tf.math.add`,
`tf.maximum`, `tf.math.equal`, `tf.matmul`... is converted to the dtype the op already has, so
`tf.math.multiply(tf.constant([1.0]), np.array([2.0]))` is float32, not float64, and
`tf.math.add(tf.constant([1, 2]), np.array([2.5, 3.5]))` is int32 `[3, 5]` (truncated). Observed in TF 2.21:

- a tensor first: the numpy operand is cast to the tensor's dtype (ints wrap, floats truncate toward zero);
- numpy first, a tensor second: cast to the tensor's dtype (`tf.math.multiply(np.array([1.5]), tf.constant([1]))`
  is int32 `[1]`), except in `tf.math.add` and `tf.matmul`, whose first operand fixes the dtype: there a
  different dtype is TF's InvalidArgumentError;
- no tensor: the first operand's dtype (a Python number's TF dtype: int32, float32), the second cast to it.

Where no numpy value meets another operand, `None` is returned and the caller's own rule applies.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jdist.errors import dtype_mismatch
from jdist.tfdata import operands


def _is_numpy(value: Any) -> bool:
    return (isinstance(value, np.ndarray) and not operands.is_tensor(value)) or (
        isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)))


def _is_python(value: Any) -> bool:
    return isinstance(value, (bool, int, float, list, tuple)) and not isinstance(value, np.generic)


def _cast(value: Any, dtype: Any, op: str) -> np.ndarray:
    array = np.asarray(value)
    target = np.dtype(dtype)
    if (array.dtype.kind in "OSU") != (target.kind in "OSU"):  # text and numbers: TF's error, not numpy's
        raise dtype_mismatch(operands.OPS.get(op, op), 1, target.name, "string" if array.dtype.kind in "OSU"
                             else array.dtype.name)
    if array.dtype.kind in "OSU":
        return array
    with np.errstate(over="ignore", invalid="ignore"):  # TF wraps an integer that does not fit (uint8 300 is 44)
        return array.astype(target)


# TF's Python wrappers of these convert the first operand alone, then the second towards its dtype: a numpy
# value given first keeps its own dtype (TF 2.21: `tf.math.add(np.array([2.5]), tf.constant([1]))` is
# "cannot compute AddV2 as input #1(zero-based) was expected to be a double tensor but is a int32 tensor").
_FIRST_FIXES = ("add", "matmul")


def matched(x: Any, y: Any, op: str, to_tensor: Callable[[Any], Any]) -> tuple[Any, Any] | None:
    """`(x, y)` as TF's eager op `op` (numpy's name: "add", "multiply", "matmul"...) takes them where one is a
    numpy value, with the other converted to it or it to the other (`to_tensor`: `tf.convert_to_tensor`, which
    gives a variable's value and a Python number TF's dtype); `None` where neither is numpy."""
    if not (_is_numpy(x) or _is_numpy(y)):
        return None
    if operands.is_tensor(x):
        return to_tensor(x), _cast(y, x.dtype, op)
    if operands.is_tensor(y):
        source, target = np.dtype(np.asarray(x).dtype), np.dtype(y.dtype)
        if op in _FIRST_FIXES and source != target:
            raise dtype_mismatch(operands.OPS.get(op, op), 1, source.name, target.name)
        return _cast(x, target, op), to_tensor(y)
    if _is_numpy(x) and _is_numpy(y):
        return np.asarray(x), _cast(y, np.asarray(x).dtype, op)
    if _is_python(x) and _is_numpy(y):
        first = to_tensor(x)
        return first, _cast(y, first.dtype, op)
    return None
