"""`tf.convert_to_tensor` and `tf.constant`: a value as a tensor, with TF's dtypes, on numpy or JAX.

TF's rules, observed in TF 2.21: a Python int becomes int32 and a Python float float32 (`tf.constant(1)`); numpy
values keep their dtype (`tf.constant(np.float64(1))` is float64) and are cast to a requested `dtype`; a Python
number the requested dtype cannot hold is TypeError ("Cannot convert 2.0 to EagerTensor of dtype int32").
A value that already is a tensor is never cast: `tf.convert_to_tensor(int32 tensor, dtype=tf.float32)` is
ValueError "Tensor conversion requested dtype float32 for Tensor with dtype int32: <tf.Tensor: ...>" (also
in a `tf.function`), `tf.constant(int32 tensor, dtype=tf.float32)` TypeError "Expected tensor [1 2] with dtype
tf.float32, but got dtype tf.int32.", and `tf.convert_to_tensor(variable, dtype=other)` ValueError "Incompatible
type conversion requested to type float32 for `tf.Variable of type int32. ..." while `tf.constant(variable,
dtype=other)` casts its value. `tf.cast` is the conversion. A list holding tensors is packed and converted
(`tf.convert_to_tensor([int32 tensor], tf.float32)` is float32). JAX holds 64-bit values in 32 bits (without
x64), so a device array of int32 is taken as the int64 asked for.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from jdist.errors import dtype_mismatch
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tfdata import operands, tensor_numpy, weak_promotion
from jdist.tfdata.tensor_text import as_tf_numpy, dtype_name
from jdist.typing import ArrayLike, TensorLike


def is_jax(*values: object) -> bool:
    """Whether any leaf of `values` is a JAX array, tracer or JAX-convertible object (a variable)."""
    return any(isinstance(v, jax.Array) or hasattr(v, "__jax_array__") for v in jax.tree.leaves(values))


def xp(*values: object) -> ModuleType:
    """The array module for these inputs: `jax.numpy` if any is a JAX value, else numpy."""
    return jnp if is_jax(*values) else np


def check_python_value(value: object, dtype: np.dtype | None) -> None:
    """TF's TypeError for Python numbers a dtype cannot hold exactly (observed, TF 2.21: `tf.constant(2.0,
    dtype=tf.int32)`, `tf.Variable(1).assign(0.5)` and `tf.constant(1, dtype=tf.bool)` are "Cannot convert 2.0
    to EagerTensor of dtype int32"), where a cast would silently drop the fraction. Numpy values are cast."""
    if dtype is None or dtype.kind not in "iub" or not isinstance(value, (bool, int, float, complex, list, tuple)):
        return
    try:
        array = np.asarray(value)
    except ValueError:  # non-rectangular: the conversion itself says so
        return
    kind = array.dtype.kind if array.size else "i"  # `tf.constant([], tf.int32)` is TF's empty int32 tensor
    if kind in "fc" or (dtype.kind == "b" and kind in "iu"):
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name}; give "
                        f"{'booleans' if dtype.kind == 'b' else 'integer values'}, or tf.cast a tensor to the dtype.")


def _host_array(value: TensorLike, dtype: np.dtype | None) -> np.ndarray:
    """A numpy array with TF's dtypes for Python values (int -> int32, float -> float32)."""
    if dtype is not None:
        check_python_value(value, dtype)
        if dtype.kind == "O":  # tf.string: text only, held as UTF-8 bytes (TF 2.21, observed)
            text = np.asarray(value, dtype=object)
            if any(not isinstance(s, (str, bytes)) for s in text.flat):
                raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype string")
            return as_tf_numpy(text)
        if dtype.kind in "iu" and isinstance(value, (int, list, tuple)) and not isinstance(value, bool):
            return np.asarray(value).astype(dtype)  # TF wraps a Python int out of range (-1 as uint8 is 255)
        with np.errstate(over="ignore"):  # TF: 1e40 as float32 is inf, silently
            return np.asarray(value, dtype=dtype)
    if isinstance(value, (np.ndarray, np.generic)) or (hasattr(value, "__array__") and not isinstance(value, list)):
        # numpy's dtype, as TF 2.21 (observed): a pandas DataFrame / Series of int64 and float64 is float64 / int64
        array = np.asarray(value)
        return as_tf_numpy(array)  # text as TF holds it: UTF-8 bytes in an object array (`tf.string`)
    try:
        array = np.asarray(value)
    except ValueError as err:
        if "inhomogeneous" not in str(err):
            raise
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor. For rows of "
                         "different lengths, use tf.ragged.constant.") from None
    if array.dtype.kind in "SU":  # text kept whole: numpy's fixed-width text drops trailing NULs, TF's does not
        return as_tf_numpy(np.asarray(value, dtype=object))
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if array.dtype == np.int64:
        small = array.size == 0 or (array.min() >= np.iinfo(np.int32).min and array.max() <= np.iinfo(np.int32).max)
        return array.astype(np.int32) if small else array
    return array


def _is_variable(value: Any) -> bool:
    return hasattr(value, "assign") and hasattr(value, "value") and hasattr(value, "dtype")


def _held_as(value: Any, target: np.dtype) -> bool:
    """Whether tensor `value` already has dtype `target` (a device array's 32 bits standing for 64 bits)."""
    have = np.dtype(value.dtype)
    if have == target or (have.kind in "OSU" and target.kind in "OSU"):
        return True
    return operands.is_device_array(value) and have == np.dtype(jax.dtypes.canonicalize_dtype(target))


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, np.ndarray) else f"{type(value).__name__}(shape={np.shape(value)})"


def checked_tensor(value: Any, target: np.dtype | None, arg: str = "") -> bool:
    """Whether `value` is a tensor (TF takes it as it is); TF's ValueError where it is one of another dtype than
    `target` (`arg`: a prefix naming the argument, as TF's `"initial_value: "`)."""
    if not operands.is_tensor(value):
        return False
    if target is None or _held_as(value, target):
        return True
    have, want = dtype_name(value.dtype), dtype_name(target)
    if _is_variable(value):
        raise ValueError(f"{arg}Incompatible type conversion requested to type {want} for `tf.Variable of type "
                         f"{have}. (Variable: {value!r})")
    raise ValueError(f"{arg}Tensor conversion requested dtype {want} for Tensor with dtype {have}: "
                     f"{_shown(value)}")


_NUMBERS = (bool, int, float, complex, str, bytes)


def _tensor_leaves(value: Any) -> list[Any]:
    """The tensors in a (nested) list or tuple, in order (TF's auto-packing looks through nested lists)."""
    found: list[Any] = []
    for item in value:
        if type(item) in _NUMBERS:
            continue
        if isinstance(item, (list, tuple)):
            found.extend(_tensor_leaves(item))
        elif operands.is_tensor(item):
            found.append(item)
    return found


def _packed_dtype(value: Sequence[Any]) -> np.dtype | None:
    """TF 2.21's dtype for a (nested) list holding tensors (observed): the first tensor's, its Python numbers
    converted to it (`[int64 tensor, 1]` int64, `[uint8 tensor, 300]` uint8 [3, 44], `[int64 tensor, 2.5]`
    TypeError "Cannot convert 2.5 to EagerTensor of dtype int64"); a tensor of another dtype is InvalidArgumentError
    "cannot compute Pack as input #1(zero-based) was expected to be a int64 tensor but is a int32 tensor [Op:Pack]
    name: packed". None where the list holds no tensor (Python values: int32 / float32)."""
    tensors = _tensor_leaves(value)
    if not tensors:
        return None
    first = tensors[0]
    for other in tensors[1:]:
        if not operands.same_dtype(first.dtype, other.dtype, first, other):
            index = next((i for i, v in enumerate(value) if v is other), tensors.index(other))
            error = dtype_mismatch("Pack", index, np.dtype(first.dtype).name, np.dtype(other.dtype).name)
            raise type(error)(None, None, error.message + "packed")
    dtype = np.dtype(first.dtype)
    if dtype.kind in "iub":
        for leaf in jax.tree.leaves(list(value)):
            if isinstance(leaf, float) or (dtype.kind == "b" and type(leaf) is int):
                raise TypeError(f"Cannot convert {leaf!r} to EagerTensor of dtype {dtype.name}")
    return dtype


def convert_to_tensor(value: TensorLike, dtype: DTypeLike | None = None, dtype_hint: DTypeLike | None = None,
                      name: str | None = None) -> ArrayLike:
    """`tf.convert_to_tensor`: a JAX array for JAX values, else a numpy array with TF's dtypes; a tensor of
    another dtype than `dtype` is TF's ValueError (cast it with `tf.cast`)."""
    target = numpy_dtype(dtype)
    if checked_tensor(value, target):  # TF's ValueError for a tensor of another dtype
        target = None  # it has `dtype` (a device array its 32-bit form): nothing to cast
    if is_jax(value):
        return jnp.asarray(value, dtype=target)
    if target is None and isinstance(value, (list, tuple)):
        target = _packed_dtype(value)  # a list holding tensors takes the first tensor's dtype, as TF packs it
    array = _host_array(value, target)
    if target is None and dtype_hint is not None and not isinstance(value, (np.ndarray, np.generic)):
        with contextlib.suppress(TypeError, ValueError):  # a hint is taken only where the value fits it (TF's)
            array = _host_array(value, numpy_dtype(dtype_hint))
    return array


def constant(value: TensorLike, dtype: DTypeLike | None = None, shape: Sequence[int] | None = None,
             name: str | None = None) -> ArrayLike:
    """`tf.constant`: as `convert_to_tensor`; a scalar `value` with `shape` fills that shape. A tensor of another
    dtype than `dtype` is TF's TypeError; a variable's value is cast."""
    target = numpy_dtype(dtype)
    if _is_variable(value) and target is not None:
        value = jnp.asarray(value).astype(target)
    elif (operands.is_tensor(value) and target is not None and not _held_as(value, target)
          and weak_promotion.casts_to(value, target, tensor_numpy.NUMPY_BEHAVIOR["mode"])):
        value = np.asarray(value).astype(target)  # `tf.constant(int16 tensor, tf.float32)` in mode "all"/"safe"
    elif operands.is_tensor(value) and target is not None and not _held_as(value, target):
        tensor: Any = value
        shown = as_tf_numpy(np.asarray(tensor)) if isinstance(tensor, np.ndarray) else type(tensor).__name__
        have, want = dtype_name(tensor.dtype), dtype_name(target)
        raise TypeError(f"Expected tensor {shown} with dtype tf.{want}, but got dtype tf.{have}.")
    array = convert_to_tensor(value, dtype)
    if dtype is None and tensor_numpy.NUMPY_BEHAVIOR["mode"] != "legacy" and weak_promotion.python_value(value):
        array = weak_promotion.weak(array)  # `tf.constant(5)` under dtype_conversion_mode "all"/"safe"
    if shape is None:
        return array
    module = xp(array)
    if array.size == 1:
        return module.broadcast_to(module.reshape(array, ()), tuple(shape))
    return module.reshape(array, tuple(shape))
