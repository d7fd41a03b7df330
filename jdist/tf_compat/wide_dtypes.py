"""Eager results in TF's 64-bit dtypes, which JAX arrays cannot hold without `jax_enable_x64`.

TF 2.21 (observed): `tf.math.argmax(logits, axis=1, output_type=tf.int64)` and `tf.cast(logits, tf.int64)`
on a model's output are int64 tensors, and `tf.cast(x, tf.float64)` is float64. A Keras 3 model on JAX
returns JAX arrays, which hold 32 bits only, so a script that prints these (the custom training
walkthrough's `tf.stack([y, prediction], axis=1)`) showed `dtype=int32`, and stacking them with an int64
label batch from `tf.data` changed the labels' dtype too. Outside compiled code the value is concrete, so
the result is made on the host, in TF's dtype, as `tf.constant` and `tf.data` already do. Inside compiled
code (`strategy.run`, `tf.function`, `jax.jit`) the input is a tracer and JAX's 32-bit rule stays.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.core import Tracer


def needs_host(x: Any, target: np.dtype | None) -> bool:
    """Whether `x` is a concrete (untraced) JAX array and `target` a dtype JAX would narrow (int64, float64)."""
    if target is None or not isinstance(x, jax.Array) or isinstance(x, Tracer):
        return False
    return np.dtype(jax.dtypes.canonicalize_dtype(target)) != np.dtype(target)


def on_host(x: Any, target: np.dtype) -> np.ndarray:
    """`x` fetched to the host and converted to `target` (float to int truncates toward zero, as TF)."""
    return np.asarray(x).astype(target)
