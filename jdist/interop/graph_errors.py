"""TF's errors for Python control flow on a traced tensor, which JAX reports with its own error types.

A `tf.function(autograph=False)` body that uses a tensor as a Python `bool` (`if x > 0:`) cannot be traced:
TF 2.21 raises `OperatorNotAllowedInGraphError` (a TypeError) "Using a symbolic `tf.Tensor` as a Python `bool`
is not allowed. ..." (observed), where JAX raises `TracerBoolConversionError`. The class lives here, below
`jdist.tf_compat`, so that both the tracer of `tf.function` and `tf.errors` name the same type.
"""
from __future__ import annotations

import jax

_RESOLUTIONS = (" You can attempt the following resolutions to the problem: If you are running in Graph mode, use "
                "Eager execution mode or decorate this function with @tf.function. If you are using AutoGraph, you "
                "can try decorating this function with @tf.function. If that does not work, then you may be using "
                "an unsupported feature or your source code may not be visible to AutoGraph. See "
                "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/autograph/g3doc/reference/"
                "limitations.md#access-to-source-code for more information.")
BOOL_TEXT = "Using a symbolic `tf.Tensor` as a Python `bool` is not allowed." + _RESOLUTIONS


class OperatorNotAllowedInGraphError(TypeError):
    """Python control flow on a traced tensor (TF's is a TypeError too, not an OpError)."""


def symbolic_bool_error(error: BaseException) -> OperatorNotAllowedInGraphError | None:
    """TF's error for JAX's `TracerBoolConversionError` (a tensor used as a Python bool while tracing); None for
    other errors."""
    if isinstance(error, jax.errors.TracerBoolConversionError):
        return OperatorNotAllowedInGraphError(BOOL_TEXT)
    return None
