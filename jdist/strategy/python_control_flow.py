"""A replica function that reads a tensor's value in Python, where TF's AutoGraph would have converted the code.

TF converts `if`/`while` on a tensor and `for` over `tf.range(tensor)` into graph ops (AutoGraph). jdist compiles
`strategy.run`'s function with JAX, which has no such conversion: the Python statement asks for a value the
trace does not have. JAX's error names neither the cause in TF's terms nor the fix; this one does.
"""
from __future__ import annotations

import jax

_VALUE_READS = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                jax.errors.TracerArrayConversionError)


def reads_traced_value(error: BaseException) -> bool:
    """Whether tracing failed because Python code asked for a traced tensor's value."""
    return isinstance(error, _VALUE_READS)


def control_flow_error(error: BaseException, where: str) -> TypeError:
    """TF's words for `error` (see the module docstring), with the fix."""
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return TypeError(
        f"{where} reads a tensor's value in Python (an `if` or `while` on a tensor, a `for` over "
        "`tf.range(tensor)`, `int(tensor)`, `.numpy()`), which TF's AutoGraph turns into graph ops; jdist compiles "
        "it without AutoGraph. Fix: write `if` as tf.cond or tf.where, a loop over a tensor count as "
        "tf.while_loop (or loop over a Python int known when tracing), and keep `.numpy()` out of the function. "
        f"JAX said: {said}")
