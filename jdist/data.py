"""`jdist.data.Dataset`: the `tf.data` chain the tutorials write, over in-memory arrays.

    train_dataset = jdist.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(images)).batch(512)

is a `jdist.ArrayDataset((images, labels), 512, shuffle=True)`: one pass per `for` loop,
reshuffled each pass (TF's `reshuffle_each_iteration=True`), the short last batch kept
unless `drop_remainder=True`. A shuffle buffer holding every example is a uniform
permutation, as TF's; a one-element buffer keeps the order, as TF's. Buffers in between
(TF's windowed shuffle) are refused rather than approximated.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jdist.input.sources import ArrayDataset


class Dataset:
    """Unbatched examples; `.shuffle(...)` then `.batch(...)` gives the `ArrayDataset` to distribute."""

    def __init__(self, arrays: Any, shuffle: bool = False, seed: int = 0):
        self._arrays, self._shuffle, self._seed = arrays, shuffle, seed

    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        arrays = jax.tree.map(np.asarray, tensors)
        sizes = {np.shape(x)[0] if np.ndim(x) else None for x in jax.tree.leaves(arrays)}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(
                f"from_tensor_slices: the arrays must share a leading dimension; got {sorted(map(str, sizes))}.")
        return Dataset(arrays)

    def __len__(self) -> int:
        return int(np.shape(jax.tree.leaves(self._arrays)[0])[0])

    def shuffle(self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True) -> "Dataset":
        if not reshuffle_each_iteration:
            raise ValueError("shuffle(reshuffle_each_iteration=False) is not supported: each pass is reshuffled.")
        if buffer_size == 1:
            return Dataset(self._arrays, self._shuffle, self._seed)
        if buffer_size < len(self):
            raise ValueError(
                f"shuffle(buffer_size={buffer_size}) over {len(self)} examples: jdist shuffles arrays in memory, "
                f"uniformly; use buffer_size >= {len(self)} (a full shuffle, what len(images) gives) or 1 (none).")
        return Dataset(self._arrays, True, 0 if seed is None else seed)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> ArrayDataset:
        return ArrayDataset(self._arrays, batch_size, shuffle=self._shuffle, seed=self._seed,
                            drop_remainder=drop_remainder)
