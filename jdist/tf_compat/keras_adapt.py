"""`adapt(dataset)` of Keras's `Normalization` and `Discretization` on a jdist `tf.data.Dataset`.

Keras 3 asks `isinstance(data, tf.data.Dataset)` of TensorFlow itself, which raises "This requires the
tensorflow module" without TensorFlow, for a jdist dataset and (for `Discretization`) even for numpy. TF's
preprocessing tutorials adapt both on `tf.data` (`normalizer.adapt(dataset.map(lambda x, y: x[name]))`,
`FeatureSpace.adapt`). Here a jdist dataset is read batch by batch, as Keras reads TF's: `Normalization`
takes the moments of all its batches (an unbatched rank-1 dataset is batched by 128 first, as Keras does), and
`Discretization` merges each batch's quantile summary (observed in TF 2.21 with Keras 3.15: the same
mean, variance and bin boundaries as TF's).
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

_INSTALLED = False


def is_dataset(data: Any) -> bool:
    """Whether `data` is a jdist `tf.data.Dataset` (or an iterator over one)."""
    from jdist.tfdata.dataset import Dataset

    return isinstance(data, Dataset)


def numpy_batches(data: Any, steps: int | None = None) -> list[np.ndarray]:
    """The batches of a jdist dataset as numpy (the first item of a tuple element: the features)."""
    if steps is not None:
        data = data.take(steps)
    batches = []
    for element in data:
        batch = element[0] if isinstance(element, tuple) else element
        batches.append(np.asarray(batch))
    return batches


def install() -> None:
    """Let Keras's `Normalization.adapt` and `Discretization.adapt` take a jdist dataset."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    from keras.src import backend
    from keras.src.layers.preprocessing.discretization import Discretization
    from keras.src.layers.preprocessing.normalization import Normalization

    normalization_adapt = Normalization.adapt

    @functools.wraps(normalization_adapt)
    def adapt_normalization(self: Any, data: Any, steps: int | None = None) -> None:
        if is_dataset(data):
            spec = data.element_spec
            spec = spec[0] if isinstance(spec, tuple) else spec
            if len(spec.shape) == 1:
                data = data.batch(128)
            # the moments of all batches at once: Keras's batch-by-batch folding up to float rounding
            data = np.concatenate(numpy_batches(data, steps), axis=0)
        return normalization_adapt(self, data)

    discretization_adapt = Discretization.adapt

    @functools.wraps(discretization_adapt)
    def adapt_discretization(self: Any, data: Any, steps: int | None = None) -> None:
        if self.num_bins is None:
            return discretization_adapt(self, data, steps)  # Keras's own error
        if is_dataset(data):
            batches: Any = numpy_batches(data, steps)
        elif isinstance(data, np.ndarray) or backend.is_tensor(data):
            batches = [data]
        else:  # an iterable of batches (a list of arrays, a generator), as Keras takes it
            batches = [b for i, b in enumerate(data) if steps is None or i < steps]
        self.reset_state()
        for batch in batches:
            self.update_state(batch)
        self.finalize_state()

    Normalization.adapt = adapt_normalization
    Discretization.adapt = adapt_discretization
