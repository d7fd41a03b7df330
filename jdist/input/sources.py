"""Where batches come from: adapters over grain, tf.data and Python iterables, with resumable positions.

Every source is read through a *cursor* for one epoch: `next()` returns the next batch
(a pytree of arrays) and `state()` the JSON-friendly position after it, from which
`open_cursor(..., state=...)` resumes exactly there.

- Random-access sources (grain `MapDataset`, `ArrayDataset`, lists of batches): the
  position is an index. grain `MapDataset`s and `ArrayDataset` are *epoch-aware*: epoch
  `e` reads indices `e * len + i`, which grain's `shuffle(seed=...)` (and
  `ArrayDataset(shuffle=True)`) answer with a new, reproducible permutation per epoch.
- grain `IterDataset` / `DataLoader`: grain's own checkpointable iterator state.
- tf.data datasets (only if TensorFlow is installed) and other iterables: the number of
  batches read; resuming re-reads and skips them (`Dataset.skip` for tf.data), so the
  iterable must give the same batches each time it is iterated.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable, Iterator, Protocol, Sequence, runtime_checkable

import jax
import numpy as np

from jdist.strategy.batch import leading_size


# ------------------------------------------------------------------ sources
@runtime_checkable
class PassSource(Protocol):
    """A dataset read in numbered passes, each in its own order (`jdist.data.Dataset`: TF's
    reshuffle per iteration), and resumable inside a pass.

    `begin_pass(index)` returns `(index, iterator)`: pass `index` (the next unread pass when
    None), as an iterator with grain's `get_state()` / `set_state()`. The same index always
    gives the same elements, so a saved `(index, state)` resumes exactly, in any process.
    """

    def begin_pass(self, index: int | None = None) -> tuple[int, Any]: ...


@dataclasses.dataclass(frozen=True)
class FileSource:
    """A dataset read from files, which `AutoShardPolicy.FILE` can split across workers.

    `make_dataset(files)` builds the dataset (anything `experimental_distribute_dataset`
    accepts, batched with the global batch size, as in TF) from a list of paths. Under
    FILE each worker calls it with its own files (`files[worker::num_workers]`); otherwise
    with all of them.
    """

    files: Sequence[str | os.PathLike]
    make_dataset: Callable[[list[str]], Any]

    def __post_init__(self):
        files = [os.fspath(f) for f in self.files]
        if not files:
            raise ValueError("FileSource needs at least one file.")
        if not callable(self.make_dataset):
            raise TypeError("FileSource.make_dataset must be a callable taking a list of paths.")
        object.__setattr__(self, "files", tuple(files))

    def files_for(self, worker: int, num_workers: int) -> list[str]:
        """`worker`'s share of the files (all of them for one worker)."""
        return [os.fspath(f) for f in self.files[worker::num_workers]]  # str already, by __post_init__


class ArrayDataset:
    """Global batches over in-memory arrays: `tf.data.Dataset.from_tensor_slices(arrays)
    [.shuffle()].batch(batch_size, drop_remainder)` for numpy.

    `arrays` is any pytree of arrays sharing their leading dimension. With `shuffle=True`
    each epoch uses its own permutation, drawn from `(seed, epoch)`, so runs are
    reproducible and a resumed run sees the same order.

    As a tf.data dataset, each `iter()` (each `for` loop) is one pass over the data: the
    first pass is epoch 0, the next epoch 1 (reshuffled), and so on. Distributed datasets
    index it by epoch instead (`dataset[epoch * len(dataset) + i]`).
    """

    def __init__(self, arrays: Any, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                 drop_remainder: bool = False):
        if not jax.tree.leaves(arrays):
            raise ValueError("ArrayDataset needs at least one array.")
        n = leading_size(jax.tree.map(np.asarray, arrays), "ArrayDataset's arrays")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self._arrays = jax.tree.map(np.asarray, arrays)
        self._n: int = n
        self.batch_size = batch_size
        self._shuffle, self._seed, self._drop = shuffle, seed, drop_remainder
        self._order: tuple[int, np.ndarray] | None = None
        self._passes = 0

    def __iter__(self) -> Iterator[Any]:
        epoch, self._passes = self._passes, self._passes + 1
        return (self[epoch * len(self) + i] for i in range(len(self)))

    def __len__(self) -> int:
        return self._n // self.batch_size if self._drop else -(-self._n // self.batch_size)

    def order(self, epoch: int) -> np.ndarray:
        """The example order of `epoch`."""
        if not self._shuffle:
            return np.arange(self._n)
        cached = self._order
        if cached is None or cached[0] != epoch:
            cached = (epoch, np.random.default_rng([self._seed, epoch]).permutation(self._n))
            self._order = cached
        return cached[1]

    def __getitem__(self, index: int) -> Any:
        if len(self) == 0:
            raise IndexError("ArrayDataset is empty.")
        epoch, i = divmod(int(index), len(self))
        rows = self.order(epoch)[i * self.batch_size:(i + 1) * self.batch_size]
        return jax.tree.map(lambda x: x[rows], self._arrays)


# ------------------------------------------------------------------ cursors
class _IndexCursor:
    def __init__(self, dataset: Any, epoch: int, start: int, epoch_aware: bool):
        self._ds, self._length = dataset, len(dataset)
        self._offset = epoch * self._length if epoch_aware else 0
        self._i = start

    def next(self) -> Any:
        while self._i < self._length:
            item = self._ds[self._offset + self._i]
            self._i += 1
            if item is not None:  # grain's filter leaves None at dropped indices
                return item
        raise StopIteration

    def state(self) -> Any:
        return {"index": self._i}


class _GrainIteratorCursor:
    def __init__(self, iterator: Any, state: Any):
        self._it = iterator
        if state is not None:
            grain_state = state["grain"]
            self._it.set_state(grain_state.encode() if state.get("bytes") else grain_state)

    def next(self) -> Any:
        return next(self._it)

    def state(self) -> Any:
        grain_state = self._it.get_state()
        if isinstance(grain_state, bytes):  # DataLoader iterators hold JSON bytes
            return {"grain": grain_state.decode(), "bytes": True}
        return {"grain": grain_state}


class _PassCursor:
    """A `PassSource`'s next pass (or the saved one), its position kept as grain's state."""

    def __init__(self, dataset: PassSource, state: Any):
        self._pass, iterator = dataset.begin_pass(None if state is None else int(state["pass"]))
        self._inner = _GrainIteratorCursor(iterator, state)

    def next(self) -> Any:
        return self._inner.next()

    def state(self) -> Any:
        return {"pass": self._pass, **self._inner.state()}


class _CountingCursor:
    def __init__(self, iterator: Iterator, skip: int, count: int = 0):
        self._it = iterator
        self._count = count
        for _ in range(skip):
            next(self._it)
            self._count += 1

    def next(self) -> Any:
        item = next(self._it)
        self._count += 1
        return item

    def state(self) -> Any:
        return {"count": self._count}


def _grain_types() -> tuple:
    grain = sys.modules.get("grain")
    if grain is None:
        return (), ()
    return (grain.MapDataset,), (grain.IterDataset, grain.DataLoader)


def _is_tf_dataset(dataset: Any) -> bool:
    return type(dataset).__module__.startswith("tensorflow") and hasattr(dataset, "as_numpy_iterator")


def check_dataset(dataset: Any) -> None:
    """A clear error for things that are not datasets of batches."""
    if isinstance(dataset, (np.ndarray, jax.Array, dict, str, bytes)) or not (
            hasattr(dataset, "__iter__") or hasattr(dataset, "__getitem__")):
        raise TypeError(
            f"experimental_distribute_dataset needs a dataset of global batches (a grain dataset or DataLoader, "
            f"a tf.data.Dataset, or an iterable of batches), got {type(dataset).__name__}. For arrays in "
            "memory use jdist.ArrayDataset(arrays, global_batch_size)."
        )


def open_cursor(dataset: Any, epoch: int, state: Any = None) -> Any:
    """A cursor over `dataset`'s batches for `epoch`, resumed at `state` if given."""
    map_types, iter_types = _grain_types()
    if isinstance(dataset, PassSource):
        return _PassCursor(dataset, state)
    if isinstance(dataset, map_types) or isinstance(dataset, ArrayDataset):
        return _IndexCursor(dataset, epoch, state["index"] if state else 0, epoch_aware=True)
    if isinstance(dataset, (list, tuple)):
        return _IndexCursor(dataset, epoch, state["index"] if state else 0, epoch_aware=False)
    if isinstance(dataset, iter_types):
        return _GrainIteratorCursor(iter(dataset), state)
    skip = state["count"] if state else 0
    if _is_tf_dataset(dataset):
        return _CountingCursor(dataset.skip(skip).as_numpy_iterator(), 0, count=skip)
    iterator = iter(dataset)
    if iterator is dataset and (epoch > 0 or skip):
        raise ValueError(
            f"The dataset is a one-shot iterator ({type(dataset).__name__}); it cannot be read again for epoch "
            f"{epoch} or resumed. Pass a re-iterable instead: a list, a grain dataset, jdist.ArrayDataset, or an "
            "object whose __iter__ returns a fresh iterator."
        )
    return _CountingCursor(iterator, skip)


def dataset_length(dataset: Any) -> int | None:
    """The number of batches per epoch, when the source knows it."""
    if isinstance(dataset, (ArrayDataset, list, tuple)):
        return len(dataset)
    if isinstance(dataset, PassSource):
        try:
            return len(dataset)  # type: ignore[arg-type]  # tf.data datasets have __len__
        except TypeError:  # tf.data's infinite or unknown cardinality
            return None
    return None  # grain's len() counts indices its filters may leave empty
