"""`.numpy()` on JAX arrays, as TF scripts call it on every tensor and distributed value's parts.

TF 2.x scripts read results with `t.numpy()` (`for a in strategy.experimental_local_results(r):
rindices.extend(a.numpy())`). JAX arrays have no such method; importing `jdist.tf_compat` adds one to
JAX's concrete array type: `np.asarray(self)`, a numpy scalar for a 0-d array (TF's `EagerTensor.numpy`).
It only adds a name JAX does not define, and only once `jdist.tf_compat` is imported (a TF port opted in).
Inside compiled code (tracers) there is no value to read, as in TF's graph mode.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np


def _numpy(self: Any) -> Any:
    """The value as numpy (TF's `.numpy()`): a numpy scalar for a 0-d array, else an ndarray."""
    value = np.asarray(self)
    return value[()] if value.ndim == 0 else value


def give_arrays_numpy() -> None:
    """Adds `numpy` to JAX's array implementation types, found without making an array (which would start
    JAX's backend before `tf.config.set_logical_device_configuration` can split the CPU)."""
    for array_type in jax.Array.__subclasses__():
        if array_type.__name__ == "ArrayImpl" and not hasattr(array_type, "numpy"):
            array_type.numpy = _numpy  # type: ignore[attr-defined]
