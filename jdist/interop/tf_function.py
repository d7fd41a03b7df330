"""`jdist.function`: TF's `@tf.function`, accepted as written.

In jdist, `strategy.run` already traces and compiles the replica function (once per
argument structure, as `tf.function` retraces), and `strategy.reduce` runs on the
results, so a function that calls them needs no second compilation around it: the
decorator returns the function unchanged. Code outside `strategy.run` that should be
compiled uses `jax.jit`.
"""
from __future__ import annotations

import functools
from typing import Any, Callable


def function(func: Callable | None = None, *, input_signature: Any = None, autograph: bool = True,
             jit_compile: bool | None = None, reduce_retracing: bool = False,
             experimental_compile: bool | None = None, **ignored: Any) -> Any:
    """`@jdist.function` or `@jdist.function(...)`: returns `func` itself (see the module docstring)."""
    if func is None:
        return functools.partial(function, input_signature=input_signature, autograph=autograph,
                                 jit_compile=jit_compile, reduce_retracing=reduce_retracing)
    return func
