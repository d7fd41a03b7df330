"""Python control flow on tensors in `strategy.run`'s function: converted by AutoGraph, as TF converts it.

TF converts `if`/`while` on a tensor and `for` over `tf.range(tensor)` into graph ops (AutoGraph) in a
`tf.function` and in the function `strategy.run` calls inside one (observed in TF 2.21: both branches' prints
show once per replica trace). jdist compiles `strategy.run`'s function with JAX, so it converts the function
(`jdist.interop.autograph`) there too, also outside a `tf.function` (TF runs it eagerly as Python there; the
values agree, the trace-time prints differ), unless the enclosing `tf.function` says `autograph=False`.
What still reads a tensor's value in Python (`int(tensor)`, `.numpy()`, a `return` inside a tensor loop)
gets an error in TF's terms with the fix.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import jax

from jdist.strategy import extensions

_VALUE_READS = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                jax.errors.TracerArrayConversionError)
_STATUS = threading.local()


@contextlib.contextmanager
def autograph_status(enabled: bool) -> Iterator[None]:
    """While a `tf.function` body runs: whether its `autograph` option converts the functions it passes on."""
    stack = _STATUS.__dict__.setdefault("stack", [])
    stack.append(bool(enabled))
    try:
        yield
    finally:
        stack.pop()


def converted(fn: Callable) -> Any:
    """`fn` as `strategy.run` calls it: converted by AutoGraph unless a `tf.function(autograph=False)` runs."""
    stack = _STATUS.__dict__.get("stack", [])
    if stack and not stack[-1]:
        return fn
    convert = extensions.registered("autograph")  # jdist.interop.autograph, a layer above the runtime
    return fn if convert is None else convert(fn)


def reads_traced_value(error: BaseException) -> bool:
    """Whether tracing failed because Python code asked for a traced tensor's value."""
    return isinstance(error, _VALUE_READS)


def control_flow_error(error: BaseException, where: str) -> TypeError:
    """TF's words for `error` (see the module docstring), with the fix."""
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return TypeError(
        f"{where} reads a tensor's value in Python (`int(tensor)`, `float(tensor)`, `.numpy()`, or control flow "
        "AutoGraph did not convert: under `tf.function(autograph=False)`, in a function whose source is unavailable, "
        "or marked do_not_convert), which "
        "a compiled function cannot do. Fix: write `if` as tf.cond or tf.where, a loop over a tensor count as "
        "tf.while_loop (or loop over a Python int known when tracing), and keep `.numpy()` out of the function. "
        f"JAX said: {said}")
