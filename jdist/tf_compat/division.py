"""TF's true division (`tf.math.divide`, `tf.math.truediv`, `tf.divide`): which operands it takes, in one place.

Observed in TF 2.21 (tests/test_tf_parity_guide_tensors.py). `tf.math.truediv(x, y)` converts `x` alone and `y`
towards `x`'s dtype, then requires one dtype: a numpy divisor is cast (`truediv(int32 [1, 2], np.array([2.5,
1.]))` divides by `[2, 1]`: `[0.5, 2.0]`), a Python float or list of floats for an integer `x` stays float32 and
is TypeError "`x` and `y` must have the same dtype, got tf.int32 != tf.float32.", as are two tensors of
different dtypes (int32 and uint8 too). `tf.math.divide(x, y)` (without `name`) first converts a non-tensor `x`
to the dtype of a tensor `y` (a numpy value is cast, `divide(np.array([2.5, 1.]), int32 [1, 2])` is `[2.0, 0.5]`;
a Python float is "Cannot convert 2.5 to EagerTensor of dtype int32"), then divides as `truediv`. Integers
divide as floats: 8- and 16-bit ones give float32, 32- and 64-bit ones float64 (`divide(uint8, 2)` is float32).
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jdist.tf_compat.conversion import convert_to_tensor, xp
from jdist.tfdata import operands
from jdist.tfdata.tensor_text import dtype_name
from jdist.typing import Tensor, TensorLike


def _is_numpy(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic)) and not operands.is_tensor(value) and \
        np.asarray(value).dtype.kind not in "OSU"


def _towards(value: Any, dtype: Any) -> Any:
    """`value` as TF converts an operand with a dtype hint: a tensor as it is, numpy cast, Python where it fits."""
    if operands.is_tensor(value):
        return convert_to_tensor(value)
    if _is_numpy(value) and np.dtype(dtype).kind not in "OSU":
        with np.errstate(all="ignore"):  # TF truncates and wraps, silently
            return np.asarray(value).astype(dtype)
    return convert_to_tensor(value, dtype_hint=dtype)


def truediv_operands(x: TensorLike, y: TensorLike) -> tuple[Any, Any]:
    """`(x, y)` as TF's `tf.math.truediv` takes them, or its TypeError for two dtypes."""
    first: Any = convert_to_tensor(x)
    second: Any = _towards(y, np.dtype(first.dtype))
    if not operands.same_dtype(first.dtype, second.dtype, first, second):
        raise TypeError(f"`x` and `y` must have the same dtype, got tf.{dtype_name(first.dtype)} != "
                        f"tf.{dtype_name(second.dtype)}.")
    return first, second


def divide_operands(x: TensorLike, y: TensorLike, named: bool = False) -> tuple[Any, Any]:
    """`(x, y)` as TF's `tf.math.divide` takes them (`named`: a `name` was given, and TF skips converting `x`
    towards `y`)."""
    if not named and not operands.is_tensor(x) and operands.is_tensor(y):
        divisor: Any = y
        x = convert_to_tensor(x, np.dtype(divisor.dtype))  # numpy is cast; a Python value must fit (TF's TypeError)
    return truediv_operands(x, y)


def true_divide(x: Any, y: Any) -> Tensor:
    """`x / y` for operands of one dtype: integers as TF's float (float32 up to 16 bits, else float64)."""
    module = xp(x, y)
    wide = operands.true_divide_dtype(np.result_type(np.dtype(x.dtype), np.dtype(y.dtype)))
    if wide is not None:
        if module is not np:
            wide = jax.dtypes.canonicalize_dtype(wide)  # JAX holds float64 as float32 (without x64)
        x, y = x.astype(wide), y.astype(wide)
    with np.errstate(divide="ignore", invalid="ignore"):
        return module.true_divide(x, y)
