"""Names for the values jdist's public API takes and returns, so a signature says what it means.

The bottom layer: it imports no jdist module, so every folder may use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

import jax
import numpy as np
import numpy.typing as npt

# A pytree: nested tuples, lists, dicts and registered nodes (a `TrainState`, a `Batch`, a flax
# module's variables) whose leaves are arrays or Python scalars. JAX registers node types at run
# time, so no static type can list them: the alias is `Any` to the checker and a name to the reader.
PyTree: TypeAlias = Any

# One array, on the host or on devices.
ArrayLike: TypeAlias = np.ndarray | jax.Array

# What a `tf.` op (jdist.tf_compat) returns: a numpy array or scalar on the host (numpy's reductions
# return scalars), a JAX array or tracer inside compiled code.
Tensor: TypeAlias = np.ndarray | np.generic | jax.Array

# What a `tf.` op takes, as `tf.convert_to_tensor` does: whatever numpy makes an array of (arrays,
# numpy and Python scalars, nested lists, strings, Keras variables) and JAX arrays and tracers.
TensorLike: TypeAlias = npt.ArrayLike | jax.Array

# A shape argument (`tf.zeros`, `tf.reshape`, `tf.random.uniform`): an int, a list or tuple of ints,
# or a 1-D integer array (what `tf.shape` returns).
ShapeLike: TypeAlias = int | Sequence[int] | np.ndarray | jax.Array

# An `axis` argument: one axis, several, or None for all of them.
Axis: TypeAlias = int | Sequence[int] | None

# What Keras passes callbacks as `logs` and returns from `evaluate(return_dict=True)`: name -> value.
Logs: TypeAlias = Mapping[str, float]



class IndexedSource(Protocol):
    """A source read by index: grain's `MapDataset`, a sequence of batches."""

    def __getitem__(self, index: int, /) -> PyTree: ...

    def __len__(self) -> int: ...


# What `experimental_distribute_dataset` splits: an iterable of global batches (a tf.data or grain
# dataset, a DataLoader, a generator, `jdist.ArrayDataset`) or a source read by index.
DatasetLike: TypeAlias = Iterable[PyTree] | IndexedSource

__all__ = ["ArrayLike", "Axis", "DatasetLike", "IndexedSource", "Logs", "PyTree", "ShapeLike", "Tensor",
           "TensorLike"]
