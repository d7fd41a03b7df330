"""What a script reads off a `tf.Variable` where TF's and Keras's variables differ: `dtype` and `value`.

A `tf.Variable` here is a Keras variable, whose `dtype` is a string ("float32") and whose `value` is a
property. TF 2.21's (observed):

* `v.dtype` is a `tf.DType`: `repr` `tf.float32`, `print` `<dtype: 'float32'>`, `.name`, `.is_floating`,
  `.as_numpy_dtype`, equal to `tf.float32`, "float32" and `np.float32` (jdist's `DType` is also read as its
  numpy dtype by numpy and JAX: `np.zeros(2, v.dtype)`).
* `v.value` is a method: `v.value()` is the current value (a tensor), as `v.read_value()`; `v.value` alone is
  a bound method.

Keras's, JAX's and jdist's own code read both as Keras's (a dtype name, the `value` property), so TF's forms
are what a script's own code gets: the calling frame's module says which (`jdist.input.calling_code.library_code`).
"""
from __future__ import annotations

import types
from typing import Any

from jdist.tf_compat.dtype_table import DType, as_dtype


def tf_dtype(keras_dtype: Any) -> DType:
    """TF's `DType` for the Keras variable's dtype name."""
    return as_dtype(keras_dtype)


def _value(self: Any) -> Any:
    """TF's `v.value()`: the variable's current value."""
    return self.read_value()


_value.__name__ = "value"
_value.__qualname__ = "BaseResourceVariable.value"  # as TF's bound method shows itself


def value_method(variable: Any) -> types.MethodType:
    """`v.value` as a script sees it: TF's bound method (`v.value()` reads the value)."""
    return types.MethodType(_value, variable)
