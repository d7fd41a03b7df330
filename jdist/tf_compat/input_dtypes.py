"""How TF's eager ops give several inputs one dtype: `tf.concat`, `tf.stack`, `tf.add_n`, `tf.math.divide`.

jdist's host tensors are numpy arrays, whose own promotion would make `tf.stack([float32 tensor, 2])` float64.
TF 2.21 (observed) takes the dtype of the first input that is already a tensor and converts the others to it: a
numpy value is cast (`concat([float32 tensor, np.array([2.5])])` is float32; `concat([np int64, np float64])`
int64 `[2, 2]`), a Python value must fit ("Cannot convert [2.5] to EagerTensor of dtype int32"); with no tensor,
the first input's own dtype (`concat([[1], [2.0]])` is that TypeError, `concat([[1.0], [2]])` float32). Two
tensors of different dtypes are TF's InvalidArgumentError (`jdist.tfdata.operands.check_pair`). `tf.add_n`
converts each input alone (`add_n([float32 tensor, 2])`: "cannot compute AddN as input #1(zero-based) was
expected to be a float tensor but is a int32 tensor"). `tf.math.divide` converts a Python divisor towards the
dividend's dtype and then requires one dtype: "`x` and `y` must have the same dtype, got tf.int32 !=
tf.float32." (`divide(int32 tensor, 2.5)`, and `divide(float32 tensor, int32 tensor)`).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jdist.errors import dtype_mismatch
from jdist.tfdata import operands

Convert = Callable[..., Any]  # `tf.convert_to_tensor(value, dtype=None)`


def matching(op: str, values: Sequence[Any], to_tensor: Convert) -> list[Any]:
    """`values` as TF's eager op `op` (its graph name, e.g. "ConcatV2") takes a list of one dtype."""
    tensors = [v for v in values if operands.is_tensor(v)]
    for other in tensors[1:]:
        operands.check_pair(op, tensors[0], other)
    dtype = np.dtype(tensors[0].dtype) if tensors else None
    out = []
    for value in values:
        if operands.is_tensor(value):
            out.append(to_tensor(value))
        elif dtype is None:
            first = to_tensor(value)
            dtype = np.dtype(first.dtype)
            out.append(first)
        elif isinstance(value, (np.ndarray, np.generic)):
            out.append(np.asarray(value).astype(dtype))
        else:
            out.append(to_tensor(value, dtype))
    return out


def separately(op: str, values: Sequence[Any], to_tensor: Convert) -> list[Any]:
    """`values` each converted alone, then required to share the first one's dtype (TF's `add_n`)."""
    out = [to_tensor(v) for v in values]
    first = np.dtype(out[0].dtype)
    for index, other in enumerate(out[1:], start=1):
        if not _same(first, np.dtype(other.dtype), out[0], other):
            raise dtype_mismatch(op, index, first.name, np.dtype(other.dtype).name)
    return out


def _same(a: np.dtype, b: np.dtype, x: Any, y: Any) -> bool:
    """One dtype, or integers / floats JAX narrowed to 32 bits on the device (no 64-bit types without x64)."""
    return a == b or (a.kind == b.kind and (operands.is_device_array(x) or operands.is_device_array(y)))


def divide_operands(x: Any, y: Any, to_tensor: Convert) -> tuple[Any, Any] | None:
    """`(x, y)` as TF's `tf.math.divide` takes a tensor and a Python number or another tensor, or TF's
    TypeError; None where neither is a tensor or one is numpy (those keep their own rule)."""
    if isinstance(x, (np.ndarray, np.generic)) and not operands.is_tensor(x):
        return None
    if isinstance(y, (np.ndarray, np.generic)) and not operands.is_tensor(y):
        return None
    if operands.is_tensor(x):
        x = to_tensor(x)
        y = to_tensor(y) if operands.is_tensor(y) else to_tensor(y, dtype_hint=np.dtype(x.dtype))
    elif operands.is_tensor(y):
        y = to_tensor(y)
        x = to_tensor(x, np.dtype(y.dtype))  # a Python dividend must fit the tensor's dtype
    else:
        return None
    dx, dy = np.dtype(x.dtype), np.dtype(y.dtype)
    if not _same(dx, dy, x, y):
        raise TypeError(f"`x` and `y` must have the same dtype, got tf.{dx.name} != tf.{dy.name}.")
    return x, y
