"""`tf.keras.utils.timeseries_dataset_from_array` as a jdist `tf.data.Dataset`.

Keras 3 builds its windows with TensorFlow's `tf.data` (`format="tf"`), which raises "This requires the
tensorflow module" without TensorFlow; TF's time-series tutorial makes every window dataset with it and
then maps, batches and fits on the result. This one follows Keras's rules (its argument checks, start
positions `0, stride, 2*stride, ...` over `len(data) - (sequence_length - 1) * sampling_rate` (fewer with
fewer targets), shuffled by `np.random.RandomState(seed)`, then a local shuffle of `batch_size * 8`
elements before batching) and returns a jdist dataset whose element is a window `data[p + r * k]` and,
with targets, `(window, targets[p])`, as TF's (observed in TF 2.21 with Keras 3.15).
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _check(data: Any, sequence_stride: int, sampling_rate: int, start_index: int | None,
           end_index: int | None) -> None:
    """Keras's argument checks, with its messages."""
    n = len(data)
    if start_index and not 0 <= start_index < n:
        raise ValueError("`start_index` must be 0 or greater and lower than the length of the data. "
                         f"Received: start_index={start_index}, for data of length {n}")
    if end_index:
        if start_index and end_index <= start_index:
            raise ValueError("`end_index` must be higher than `start_index`. Received: "
                             f"start_index={start_index}, and end_index={end_index} ")
        if end_index >= n:
            raise ValueError("`end_index` must be lower than the length of the data. Received: "
                             f"end_index={end_index}, for data of length {n}")
    if end_index is not None and end_index <= 0:
        raise ValueError(f"`end_index` must be higher than 0. Received: end_index={end_index}")
    if sampling_rate <= 0:
        raise ValueError(f"`sampling_rate` must be higher than 0. Received: sampling_rate={sampling_rate}")
    if sampling_rate >= n:
        raise ValueError("`sampling_rate` must be lower than the length of the data. Received: "
                         f"sampling_rate={sampling_rate}, for data of length {n}")
    if sequence_stride <= 0:
        raise ValueError(f"`sequence_stride` must be higher than 0. Received: sequence_stride={sequence_stride}")
    if sequence_stride >= n:
        raise ValueError("`sequence_stride` must be lower than the length of the data. Received: "
                         f"sequence_stride={sequence_stride}, for data of length {n}")


def timeseries_dataset_from_array(data: Any, targets: Any, sequence_length: int, sequence_stride: int = 1,
                                  sampling_rate: int = 1, batch_size: int | None = 128, shuffle: bool = False,
                                  seed: int | None = None, start_index: int | None = None,
                                  end_index: int | None = None, format: str = "tf") -> Any:
    """Sliding windows over `data` (axis 0 is time), optionally paired with `targets[start]`."""
    from jdist.tfdata.dataset import Dataset

    if format != "tf":
        raise ValueError(f'`format` should be "tf" (a tf.data.Dataset). Received: format={format}')
    _check(data, sequence_stride, sampling_rate, start_index, end_index)
    start = start_index or 0
    end = len(data) if end_index is None else end_index
    count = end - start - (sequence_length - 1) * sampling_rate
    if targets is not None:
        count = min(count, len(targets))
    index_dtype = "int32" if count < 2147483647 else "int64"
    positions = np.arange(0, count, sequence_stride, dtype=index_dtype)
    if shuffle:
        if seed is None:
            seed = np.random.randint(1_000_000)
        np.random.RandomState(seed).shuffle(positions)
    steps = np.asarray(data)[start:end]
    offsets = np.arange(0, sequence_length * sampling_rate, sampling_rate, dtype=index_dtype)
    starts = Dataset.from_tensor_slices(positions)
    dataset = starts.map(lambda p: steps[np.asarray(p) + offsets])
    if targets is not None:
        labels = np.asarray(targets)[start:end]
        dataset = Dataset.zip((dataset, starts.map(lambda p: labels[np.asarray(p)])))
    if batch_size is not None:
        if shuffle:
            dataset = dataset.shuffle(buffer_size=batch_size * 8, seed=seed)
        return dataset.batch(batch_size)
    return dataset.shuffle(buffer_size=1024, seed=seed) if shuffle else dataset
