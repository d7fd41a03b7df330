"""`tf.Tensor`, `tf.is_tensor`, `tf.executing_eagerly`, `tf.get_logger`.

jdist's tensors are what its ops return: numpy arrays on the host (`tf.constant(1.)`, a `tf.data` map
function), JAX arrays, and tracers inside compiled code. `isinstance(x, tf.Tensor)` is True for all of these
(TF 2.21 says False for a numpy array: in TF a numpy array is not a tensor, in jdist it is the host's tensor),
and False for a `tf.Variable`, as in TF 2.21 (observed); `tf.is_tensor` is also True for variables (observed).
`tf.executing_eagerly()` is False inside a `tf.function` call (as TF 2.21's, observed) and while JAX traces
(`strategy.run`, which jdist always compiles; TF 2.21 says True inside a `strategy.run` called eagerly, observed),
True elsewhere.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any

import jax
import numpy as np

from jdist.interop.trace_state import under_jit
from jdist.strategy import function_trace, traced_functions
from jdist.tf_compat.config_switches import functions_run_eagerly


class _TensorMeta(type):
    def __instancecheck__(cls, value: Any) -> bool:
        if isinstance(value, (jax.Array, np.ndarray)):
            return True
        return isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_, np.object_))


class Tensor(metaclass=_TensorMeta):
    """`tf.Tensor` for `isinstance` checks and annotations: JAX arrays, tracers, numpy arrays and scalars."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError("tf.Tensor cannot be constructed directly: make one with tf.constant(value) or "
                        "tf.convert_to_tensor(value).")


def is_tensor(x: Any) -> bool:
    """`tf.is_tensor`: a tensor (see `Tensor`) or a variable (TF 2.21: `tf.is_tensor(tf.Variable(1.))` is True)."""
    if isinstance(x, Tensor):
        return True
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(x, keras.Variable)


def tracing() -> bool:
    """Whether JAX is tracing the code that calls this (`jax.jit`, `strategy.run`, a `lax` loop's body)."""
    return under_jit()


def init_scope() -> contextlib.AbstractContextManager:
    """`tf.init_scope()`: inside a traced `tf.function`, what the block does runs once, at trace time, on the
    variables themselves (TF lifts it out of the graph: the function guide's `Model` prints 1, 1, 1); elsewhere
    it changes nothing."""
    return function_trace.outside_trace() if function_trace.active() else contextlib.nullcontext()


def executing_eagerly() -> bool:
    """False inside a `tf.function` call (TF's graph mode; True there after `tf.config.run_functions_eagerly(True)`)
    and while JAX traces (`strategy.run`, `jax.jit`)."""
    return not ((traced_functions.in_function() and not functions_run_eagerly()) or tracing())


def get_logger() -> logging.Logger:
    """`tf.get_logger()`: Python's logger named "tensorflow", as TF's."""
    return logging.getLogger("tensorflow")
