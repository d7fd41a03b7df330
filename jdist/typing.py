"""Names for the values jdist's public API takes and returns, so a signature says what it means.

The bottom layer: it imports no jdist module, so every folder may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import jax
import numpy as np

# A pytree: nested tuples, lists, dicts and registered nodes (a `TrainState`, a `Batch`, a flax
# module's variables) whose leaves are arrays or Python scalars. JAX registers node types at run
# time, so no static type can list them: the alias is `Any` to the checker and a name to the reader.
PyTree: TypeAlias = Any

# One array, on the host or on devices.
ArrayLike: TypeAlias = np.ndarray | jax.Array

# What Keras passes callbacks as `logs` and returns from `evaluate(return_dict=True)`: name -> value.
Logs: TypeAlias = Mapping[str, float]

__all__ = ["ArrayLike", "Logs", "PyTree"]
