"""`tf.Variable`: a Keras 3 variable with TF's constructor and extras (`read_value`, TF's repr).

Being a `keras.Variable` is what makes it work everywhere TF scripts use variables: created in
`strategy.scope()` it is placed by the strategy (replicated: mirrored), `strategy.run` hands it to the
compiled replica function and writes back what the function assigned (as for Keras models' weights,
`jdist.interop.keras_run`), `tf.train.Checkpoint(epoch=v)` saves and restores it, and `assign` /
`assign_add` / `assign_sub`, `numpy()`, arithmetic operators, `shape`, `name`, `trainable` are
Keras's. `dtype` is Keras's string ("float32"), which compares equal to `tf.float32`. Needs Keras on
JAX (`KERAS_BACKEND=jax`), as `tf.keras` does.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from jdist.tf_compat.dtypes import numpy_dtype
from jdist.tf_compat.keras_namespace import keras_module
from jdist.tf_compat.ops import convert_to_tensor


@functools.cache
def variable_class() -> type:
    """The `keras.Variable` subclass behind `tf.Variable` (made on first use: Keras is imported then)."""
    keras = keras_module()

    class TFVariable(keras.Variable):  # type: ignore[misc, valid-type]
        def read_value(self) -> Any:
            return self.value

        @property
        def variables(self) -> list:
            """`[self]`: what `tf.train.Checkpoint` and `strategy.run` collect from trackable objects."""
            return [self]

        def __repr__(self) -> str:
            """TF's (observed, TF 2.21): `<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>`."""
            value = np.asarray(self.value)
            shown = repr(value.item()) if value.ndim == 0 else repr(value)
            return f"<tf.Variable '{self.name}:0' shape={tuple(self.shape)} dtype={self.dtype}, numpy={shown}>"

    TFVariable.__name__ = TFVariable.__qualname__ = "Variable"
    return TFVariable


class _VariableType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, variable_class())

    def __call__(cls, initial_value: Any = None, trainable: bool = True, name: str | None = None,
                 dtype: Any = None, shape: Any = None, **ignored: Any) -> Any:
        if initial_value is None:
            raise ValueError("tf.Variable needs an initial_value")
        if callable(initial_value):
            initial_value = initial_value()
        value = convert_to_tensor(initial_value, dtype=numpy_dtype(dtype))
        return variable_class()(initializer=value, dtype=str(np.dtype(value.dtype)), trainable=trainable,
                                name=name or "Variable")


class Variable(metaclass=_VariableType):
    """`tf.Variable(initial_value, trainable=True, name=None, dtype=None)`: see the module docstring."""
