"""TF's rule for the two operands of a binary op (`+`, `tf.add`, `<`, `tf.maximum`, ...) on host tensors.

Observed in TF 2.21 (tests/test_tf_compat_operands.py):
- two tensors must have one dtype: `tf.constant([1, 2]) + tf.constant([1., 2.])` is InvalidArgumentError
  "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor", and so
  are int64 with int32 and float64 with float32 (numpy would promote silently);
- a Python number, list or numpy value takes the tensor's dtype: `tf.constant([1., 2.]) + np.array([1., 2.])`
  and `- np.array([1, 2])` are float32, `tf.constant([1], tf.uint8) * 300` is uint8 44 (it wraps);
- a Python float (or a list of them) for an integer tensor is TypeError "Cannot convert 2.5 to EagerTensor of
  dtype int32" (2.0 too); right of a tensor in `+` it is the InvalidArgumentError above ("... but is a float
  tensor"), in `/` TypeError "`x` and `y` must have the same dtype, got tf.int32 != tf.float32." (as are two
  tensors of different dtypes in `/`); a numpy value is cast, also float to int (`np.array([1.5]) + t` is 1);
- true division of integers gives float32 for 8- and 16-bit ones, float64 for 32- and 64-bit ones.
A device array (JAX's, what `strategy.run` returns) is a tensor too, but JAX holds 64-bit values in 32 bits, so
a host tensor and a device array of one kind (int and int, float and float) are taken as they are. The rule is
for a script's own operators: a host tensor is a numpy array, and numpy's, JAX's, Keras's and jdist's own code
(`np.testing` comparing an int32 tensor with an int64 array) keeps numpy's rules
(`jdist.input.calling_code.library_code`); TF's tensors would have become plain arrays there.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jdist.errors import dtype_mismatch

# TF's op names, for its error text.
OPS = {"add": "AddV2", "sub": "Sub", "mul": "Mul", "truediv": "RealDiv", "floordiv": "FloorDiv",
       "mod": "FloorMod", "pow": "Pow", "matmul": "MatMul", "lt": "Less", "le": "LessEqual", "gt": "Greater",
       "ge": "GreaterEqual", "eq": "Equal", "ne": "NotEqual", "and": "LogicalAnd", "or": "LogicalOr",
       "xor": "LogicalXor", "maximum": "Maximum", "minimum": "Minimum", "power": "Pow", "multiply": "Mul",
       "subtract": "Sub", "equal": "Equal", "not_equal": "NotEqual", "less": "Less", "less_equal": "LessEqual",
       "greater": "Greater", "greater_equal": "GreaterEqual", "logical_and": "LogicalAnd",
       "logical_or": "LogicalOr"}


def is_device_array(x: Any) -> bool:
    """A JAX array or tracer (a device value, or one being traced)."""
    return isinstance(x, jax.Array)


# The host tensor type (`jdist.tfdata.structure.HostTensor`), which registers itself when defined. Every
# operator of a host tensor asks `is_tensor`, so the types are kept as the tuple `isinstance` takes.
_HOST_TENSORS: tuple[type, ...] = ()


def register_host_tensor(cls: type) -> type:
    global _HOST_TENSORS
    _HOST_TENSORS += (cls,)
    return cls


def is_tensor(x: Any) -> bool:
    """A value TF would already hold as a tensor: a host tensor, a device array or a variable; numbers, lists and
    numpy values are converted to the other operand's dtype instead."""
    return isinstance(x, _HOST_TENSORS) or is_device_array(x) or (
        hasattr(x, "assign") and hasattr(x, "value") and hasattr(x, "dtype"))


def converted(value: Any, dtype: Any, op: str, tensor_first: bool = False) -> np.ndarray:
    """`value` (a number, list or numpy value) as the other operand's `dtype`, or TF's error where TF refuses
    (`tensor_first`: the tensor is the left operand). Observed in TF 2.21: numpy values are cast (`int32 tensor +
    np.array([1.5, 2.])` is `[2, 4]`); a Python float or list of floats for an integer tensor is TypeError
    "Cannot convert 2.5 to EagerTensor of dtype int32", except right of a tensor in `+` (InvalidArgumentError
    "cannot compute AddV2 ... but is a float tensor") and `/` ("`x` and `y` must have the same dtype, got
    tf.int32 != tf.float32.")."""
    target = np.dtype(dtype)
    array = np.asarray(value)
    numpy = isinstance(value, (np.ndarray, np.generic))
    if target.kind in "iub" and array.dtype.kind == "f" and not (numpy and target.kind in "iu"):
        if tensor_first and op == "add" and not numpy:
            raise dtype_mismatch(OPS.get(op, op), 1, target.name, "float32")
        if tensor_first and op == "truediv" and not numpy:
            raise _divide_mismatch(target, np.dtype(np.float32))
        if not numpy:
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {target.name}")
        raise dtype_mismatch(OPS.get(op, op), 1, target.name, array.dtype.name)
    if target.kind in "iub" and array.dtype.kind == "c" or target.kind == "b" and array.dtype.kind in "iuf":
        raise dtype_mismatch(OPS.get(op, op), 1, target.name, array.dtype.name)
    if array.dtype.kind in "OSU" or target.kind in "OSU":
        return array
    with np.errstate(over="ignore", invalid="ignore"):  # TF wraps an integer that does not fit (uint8 300 is 44)
        return array.astype(target) if numpy or (array.dtype.kind in "iub" and target.kind in "iu") else \
            np.asarray(value, dtype=target)


def same_dtype(a: Any, b: Any, x: Any = None, y: Any = None) -> bool:
    """Whether TF takes dtypes `a` and `b` (of tensors `x`, `y`) as one: equal (int32 and uint8, int32 and
    int64 are not; TF 2.21's AddV2, AddN, ConcatV2 and divide refuse them, observed), or both text. A device array
    (JAX holds 64-bit values in 32 bits, without x64) matches a tensor of its kind."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b or (a.kind in "OSU" and b.kind in "OSU"):
        return True
    return a.kind == b.kind and (is_device_array(x) or is_device_array(y))


def check_pair(op: str, x: Any, y: Any) -> tuple[Any, Any]:
    """`(x, y)` as TF takes them for `op`: a non-tensor converted to the tensor's dtype, or TF's error."""
    x_tensor, y_tensor = is_tensor(x), is_tensor(y)
    if x_tensor and y_tensor:
        dx, dy = np.dtype(x.dtype), np.dtype(y.dtype)
        if dx.kind not in "OSU" and dy.kind not in "OSU" and not same_dtype(dx, dy, x, y):
            if op == "truediv":  # TF 2.21: `int32 tensor / float32 tensor`
                raise _divide_mismatch(dx, dy)
            raise dtype_mismatch(OPS.get(op, op), 1, dx.name, dy.name)
        return x, y
    if x_tensor and convertible(y):
        return x, converted(y, x.dtype, op, tensor_first=True)
    if y_tensor and convertible(x):
        return converted(x, y.dtype, op), y
    return x, y


def _divide_mismatch(a: np.dtype, b: np.dtype) -> TypeError:
    return TypeError(f"`x` and `y` must have the same dtype, got tf.{a.name} != tf.{b.name}.")


def convertible(value: Any) -> bool:
    """A Python number or list, or a numpy value: TF converts it to the tensor's dtype."""
    if isinstance(value, (bool, int, float, np.generic)):
        return True
    if isinstance(value, np.ndarray):
        return not is_tensor(value)
    return isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, list, tuple, np.generic))
                                                     for v in value)


def true_divide_dtype(dtype: Any) -> np.dtype | None:
    """The float dtype TF's true division of `dtype` integers gives (None for floats: they stay)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iub":
        return None
    return np.dtype(np.float32) if dtype.itemsize <= 2 else np.dtype(np.float64)
