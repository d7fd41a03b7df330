"""Names for the values jdist's public API takes and returns, so a signature says what it means.

The bottom layer: it imports no jdist module, so every folder may use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeAlias

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



class IndexedSource(Protocol):
    """A source read by index: grain's `MapDataset`, a sequence of batches."""

    def __getitem__(self, index: int, /) -> PyTree: ...

    def __len__(self) -> int: ...


# What `experimental_distribute_dataset` splits: an iterable of global batches (a tf.data or grain
# dataset, a DataLoader, a generator, `jdist.ArrayDataset`) or a source read by index.
DatasetLike: TypeAlias = Iterable[PyTree] | IndexedSource

__all__ = ["ArrayLike", "DatasetLike", "IndexedSource", "Logs", "PyTree"]
