"""How TF's eager binary ops (`tf.add`, `tf.maximum`, `tf.math.floordiv`, ...) convert their two operands.

Observed in TF 2.21 (tests/test_tf_parity_guide_tensors.py):
- a Python value (number, list) takes the other operand's dtype (`tf.maximum(0., [1, -1])` is float32, where
  numpy would promote to float64); a Python float for an integer operand is TypeError "Cannot convert 2.5 to
  EagerTensor of dtype int32" (`tf.math.floordiv(int32 tensor, 2.5)`, `tf.math.squared_difference(2.5, ...)`);
  with no tensor, the first value's TF dtype (`squared_difference(7., 2)` is float32);
- a numpy value takes the tensor's dtype, cast (`floordiv(int32 [1, 2], np.float64(2.5))` is int32 `[0, 1]`;
  `jdist.tf_compat.numpy_operands`);
- two tensors of different dtypes are InvalidArgumentError "cannot compute FloorDiv as input #1(zero-based) was
  expected to be a int32 tensor but is a uint8 tensor" (`jdist.tfdata.operands.same_dtype`);
- `tf.add` converts `x` alone and `y` towards it, so the first operand fixes the dtype: `tf.add(1, float32
  tensor)`, `tf.add(int32 tensor, 2.5)` and `tf.add(1.5, int32 tensor)` are that InvalidArgumentError
  ("... expected to be a int32 tensor but is a float tensor [Op:AddV2]").
Under `tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all" | "safe")` both operands take TF's
promoted dtype instead (`jdist.tfdata.weak_promotion`: `tf.add(int8 numpy value, tf.constant(1))` is int8).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.errors import dtype_mismatch
from jdist.tf_compat import numpy_operands
from jdist.tf_compat.conversion import convert_to_tensor
from jdist.tfdata import operands, tensor_numpy, weak_promotion
from jdist.typing import ArrayLike, TensorLike


def _is_python(value: Any) -> bool:
    return isinstance(value, (int, float, bool, list, tuple)) and not isinstance(value, np.generic)


def _converted_to(value: Any, dtype: Any) -> Any:
    array = np.asarray(value)
    if array.dtype.kind == "f" and np.dtype(dtype).kind in "iub":
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {np.dtype(dtype).name}")
    return convert_to_tensor(value, dtype=dtype)


def _first_fixes(x: TensorLike, y: TensorLike, tf_op: str) -> tuple[Any, Any] | None:
    """TF's `tf.add`: `x` alone, `y` towards its dtype (a numpy `y` cast), then one dtype or TF's error; None for
    text and numpy `x` (their own rules)."""
    if isinstance(x, (np.ndarray, np.generic)) and not operands.is_tensor(x):
        return None
    first: Any = convert_to_tensor(x)
    dtype = np.dtype(first.dtype)
    if dtype.kind in "OSU":
        return None
    if operands.is_tensor(y):
        second: Any = convert_to_tensor(y)
    elif isinstance(y, (np.ndarray, np.generic)):
        return None
    else:
        second = convert_to_tensor(y, dtype_hint=dtype)
    if not operands.same_dtype(dtype, second.dtype, first, second):
        raise dtype_mismatch(tf_op, 1, dtype.name, np.dtype(second.dtype).name)
    return first, second


def matching(x: TensorLike, y: TensorLike, op: str) -> tuple[ArrayLike, ArrayLike]:
    """`(x, y)` as TF's eager op `op` takes them (`op`: numpy's name of a `tf.` op, "add", "maximum", or TF's op
    name, "FloorDiv", for its error text), or TF's error."""
    mode = tensor_numpy.NUMPY_BEHAVIOR["mode"]
    if mode in weak_promotion.MODES and not any(operands.is_device_array(v) for v in (x, y)):
        a, b, weak = weak_promotion.promoted(x, y, mode)  # TF's lattice under dtype_conversion_mode "all"/"safe"
        return (weak_promotion.weak(a), weak_promotion.weak(b)) if weak else (a, b)
    if operands.is_tensor(x) and operands.is_tensor(y):
        operands.check_pair(op, x, y)
    if op == "add":
        pair = _first_fixes(x, y, operands.OPS["add"])
        if pair is not None:
            return pair
    numpy_pair = numpy_operands.matched(x, y, op, convert_to_tensor)  # numpy takes TF's dtype, not numpy's
    if numpy_pair is not None:
        return numpy_pair
    if _is_python(y) or not _is_python(x):
        first: Any = convert_to_tensor(x)
        return first, _converted_to(y, first.dtype) if _is_python(y) else convert_to_tensor(y)
    second: Any = convert_to_tensor(y)
    return _converted_to(x, second.dtype), second
