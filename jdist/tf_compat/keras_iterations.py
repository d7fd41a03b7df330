"""A Keras optimizer's `iterations` as TF's Keras 3 shows it to a script: an int64 counter.

Observed in TF 2.21 with Keras 3.15 (`tf.keras.optimizers.SGD`, after `fit` of 4 steps): `opt.iterations` is
Keras's `Variable`, `.dtype` is 'int64' (a str, equal to `tf.int64`), `print` and `repr` show
`<Variable path=sgd/iteration, shape=(), dtype=int64, value=4>`, `.numpy()` is `np.int64(4)` (a numpy
scalar), `int(...)` is 4; the same under `MirroredStrategy`. Keras on JAX makes the counter int32 (JAX holds
64-bit integers only with `jax_enable_x64`). The counter keeps its 32-bit value, so Keras's compiled steps are
unchanged; a script's reads of it are TF's: the counter's class becomes a subclass whose `dtype` is 'int64'
for a script's code (Keras's own code still reads 'int32', as `tf.Variable`'s `dtype` does in
`jdist.tf_compat.variables`), and whose `numpy()` and `repr` are TF's. It counts to 2**31 - 1 steps.
"""
from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from jdist.input.calling_code import library_code

_INSTALLED: list[bool] = []


@functools.cache
def _counter_class(base: type) -> type:
    """`base` (Keras's JAX variable class) with TF's int64 reads for a script's code."""

    class Variable(base):  # type: ignore[misc, valid-type]
        @property
        def dtype(self) -> Any:
            own = base.dtype.fget(self)  # type: ignore[attr-defined]
            return own if library_code(sys._getframe(1)) else "int64"

        def numpy(self) -> Any:
            """TF's: `np.int64(n)`, a numpy scalar."""
            return np.int64(np.asarray(self.value))

        def __repr__(self) -> str:
            return f"<Variable path={self.path}, shape={self.shape}, dtype=int64, value={self.numpy()}>"

        __str__ = __repr__

    Variable._tf_int64_counter = True  # type: ignore[attr-defined]
    Variable.__qualname__ = base.__qualname__
    Variable.__module__ = base.__module__
    return Variable


def as_int64_counter(variable: Any) -> None:
    """Makes Keras's int32 optimizer counter read as TF's int64 one (see the module docstring)."""
    if str(getattr(variable, "_dtype", "")) == "int32" and not variable.shape:
        variable.__class__ = _counter_class(type(variable))


def is_int64_counter(variable: Any) -> bool:
    """Whether `variable` is a 32-bit Keras counter that reads as TF's int64 one."""
    return bool(getattr(type(variable), "_tf_int64_counter", False))


def install() -> None:
    """Every Keras optimizer made from now on has TF's int64-reading `iterations`."""
    if _INSTALLED:
        return
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    original = BaseOptimizer.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        counter = getattr(self, "_iterations", None)
        if counter is not None:
            as_int64_counter(counter)

    BaseOptimizer.__init__ = __init__  # type: ignore[method-assign]
    _INSTALLED.append(True)
