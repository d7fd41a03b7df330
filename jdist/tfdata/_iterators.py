"""The few iterators `tf.data` needs that grain does not have, as grain `IterDataset`s.

Each is checkpointable through grain's `get_state` / `set_state`. Their state is the
number of elements already returned in this pass: restoring rebuilds the pass and
replays that many elements. Every pass is a pure function of its key (seeds included),
so the replay gives the same elements, and the position is exact.

- `BufferShuffle`: TF's shuffle buffer (fill `buffer_size` elements, then return a
  random one and put the next input in its place), so element k of the output comes
  from the first k + buffer_size inputs, as in TF.
- `Slices`, `Repeated`: random-access sources (`from_tensor_slices`, `repeat(n)`), so
  batches index straight into them.
- `Generated`: elements from a Python callable (`from_generator`, `unbatch`, `cache`,
  `repeat`, `skip`: anything easier to say as a Python generator over its inputs).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import grain
import numpy as np

from jdist.strategy import function_trace
from jdist.tfdata import structure


class _ReplayIterator(grain.DatasetIterator):
    """Iterates `make()`; its state is how many elements it returned."""

    def __init__(self, make: Callable[[], Iterator]):
        super().__init__()
        self._make = make
        self._it = make()
        self._count = 0

    def __next__(self) -> Any:
        value = next(self._it)
        self._count += 1
        return value

    def get_state(self) -> dict[str, Any]:
        return {"count": self._count}

    def set_state(self, state: dict[str, Any]) -> None:
        self._it = self._make()
        self._count = 0
        for _ in range(int(state["count"])):
            next(self._it)
            self._count += 1


class GuardedIterator(grain.DatasetIterator):
    """A pass's iterator that stops a running `tf.function` trace before it takes an element: TF reads the
    iterator on every call of the function, so the function runs as Python (`jdist.strategy.function_trace`)."""

    def __init__(self, inner: grain.DatasetIterator):
        super().__init__()
        self._inner = inner

    def __next__(self) -> Any:
        function_trace.refuse("reading a tf.data iterator")
        return next(self._inner)

    def get_state(self) -> dict[str, Any]:
        return self._inner.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._inner.set_state(state)


class Generated(grain.IterDataset):
    """A grain `IterDataset` whose each pass is a fresh `make()` generator."""

    def __init__(self, make: Callable[[], Iterator]):
        super().__init__()
        self._make_iterator = make

    def __iter__(self) -> grain.DatasetIterator:
        return _ReplayIterator(self._make_iterator)

    def __str__(self) -> str:
        return "Generated"


def buffer_shuffle(source: Callable[[], Iterator], buffer_size: int, seed: int) -> Iterator:
    """TF's windowed shuffle over the elements of `source()`, drawn with numpy's PCG64 from `seed`."""
    draws = _Draws(seed)
    it = source()
    buffer: list = []
    for element in it:
        buffer.append(element)
        if len(buffer) >= buffer_size:
            break
    while buffer:
        i = draws.below(len(buffer))
        out = buffer[i]
        try:
            buffer[i] = next(it)
        except StopIteration:
            buffer[i] = buffer[-1]
            buffer.pop()
        yield out


def window_permutation(n: int, buffer_size: int, seed: int) -> np.ndarray:
    """The order `buffer_shuffle` gives `range(n)` for this seed: the same draws, made on indices, so a
    random-access dataset stays random access (and resumes in O(1)) under a windowed shuffle."""
    return np.fromiter(buffer_shuffle(lambda: iter(range(n)), buffer_size, seed), np.int64, count=n)


class _Draws:
    """Uniform integers below a bound, from floats drawn in blocks (one numpy call per 4096 draws)."""

    def __init__(self, seed: int):
        self._rng = np.random.default_rng(seed)
        self._block = np.empty(0)
        self._next = 0

    def below(self, bound: int) -> int:
        if self._next == len(self._block):
            self._block, self._next = self._rng.random(4096), 0
        value = self._block[self._next]
        self._next += 1
        return min(int(value * bound), bound - 1)


_SEQUENTIAL = grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)


class Slices(grain.MapDataset):
    """Element i of every component: `from_tensor_slices`'s random-access source."""

    def __init__(self, components: Any, length: int):
        super().__init__()
        self._components, self._length = components, length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.slice(index)
        return structure.map_leaves(lambda a: a[index % self._length], self._components)

    def __str__(self) -> str:
        return f"Slices(len={self._length})"


class Repeated(grain.MapDataset):
    """`count` passes of a random-access child, each built with its own key (own shuffle order)."""

    def __init__(self, make: Callable[[tuple], grain.MapDataset], key: tuple, length: int, count: int):
        super().__init__()
        self._make, self._key, self._n, self._count = make, key, length, count
        self._built: dict[int, grain.MapDataset] = {}

    def __len__(self) -> int:
        return self._n * self._count

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.slice(index)
        rep, i = divmod(int(index), self._n)
        child = self._built.get(rep)
        if child is None:
            if len(self._built) > 2:
                self._built.clear()
            child = self._built[rep] = self._make((*self._key, rep))
        return child[i]


class Permuted(grain.MapDataset):
    """Element `order[i]` of a random-access parent at position i."""

    def __init__(self, parent: grain.MapDataset, order: np.ndarray):
        super().__init__(parent)
        self._order = order

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.slice(index)
        return self._parent[int(self._order[index % len(self._order)])]


def as_iter(ds: grain.MapDataset | grain.IterDataset, threads: int = 0) -> grain.IterDataset:
    if isinstance(ds, grain.MapDataset):
        threaded = grain.ReadOptions(num_threads=threads, prefetch_buffer_size=2 * threads)
        return ds.to_iter_dataset(_SEQUENTIAL if threads <= 0 else threaded)
    return ds
