"""`tf.data.Dataset`'s transformations that regroup elements, with TF 2.21's semantics (observed): `window`,
`rebatch`, `group_by_window`, `bucket_by_sequence_length`. They stream, as `combinators`' do; `Dataset` gets
them as methods (`install`).
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from jdist.tfdata import structure, user_functions
from jdist.tfdata.combinators import dataset_class, padded_batch, streamed
from jdist.tfdata.options import UNKNOWN
from jdist.tfdata.spec import DatasetSpec

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

Key = tuple


def _listed(rows: list, spec: Any) -> Dataset:
    """A dataset of these elements (a window or a group) whose element spec is the input's `spec`."""
    import grain

    source = grain.MapDataset.source(rows)
    return dataset_class()(lambda key: source, len(rows), lambda: spec, kind="VariantDataset")


def window(self: Dataset, size: int, shift: int | None = None, stride: int = 1, drop_remainder: bool = False,
           name: str | None = None) -> Dataset:
    """Windows of `size` elements every `shift`, taking every `stride`-th: each a dataset (a tuple or dict of
    datasets for a structured element), as TF's (`flat_map(lambda w: w.batch(size))` makes them batches)."""
    size, step, stride = int(size), int(shift or size), int(stride)
    if min(size, step, stride) < 1:
        raise ValueError("Dataset.window: size, shift and stride must be positive")
    span = (size - 1) * stride + 1

    def as_datasets(rows: list) -> Any:
        specs = structure.leaves(self.element_spec)
        columns = iter([_listed(list(col), spec) for col, spec in zip(zip(*(structure.leaves(r) for r in rows)),
                                                                       specs)])
        return structure.map_leaves(lambda _: next(columns), rows[0])

    def elements(key: Key) -> Iterator:
        buffer: list = []
        start = 0
        for element in self._elements(key):
            buffer.append(element)
            while len(buffer) >= start + span:
                yield as_datasets(buffer[start:start + span:stride])
                start += step
            dropped = min(start, len(buffer))  # nothing before the next window's start is needed again
            del buffer[:dropped]
            start -= dropped
        while not drop_remainder and start < len(buffer):
            yield as_datasets(buffer[start:start + span:stride])
            start += step

    n = self._cardinality
    if n >= 0:  # TF 2.21's (observed): the windows that fit, or one per start without drop_remainder
        n = (0 if n < span else (n - span) // step + 1) if drop_remainder else -(-n // step)
    return streamed(self, elements, n, lambda: structure.map_leaves(DatasetSpec, self.element_spec),
                    "WindowDataset")


def rebatch(self: Dataset, batch_size: Any, drop_remainder: bool = False, name: str | None = None) -> Dataset:
    """The batches' rows batched again `batch_size` at a time, or cycling through a list of sizes (TF 2.21:
    `range(10).batch(4).rebatch(3)` gives [0 1 2] [3 4 5] [6 7 8] [9]; `range(8).batch(4).rebatch([1, 3])`
    gives [0] [1 2 3] [4] [5 6 7]). Its cardinality is unknown, also for an infinite input, as TF's."""
    sizes = [int(b) for b in np.ravel(np.asarray(batch_size))]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"Dataset.rebatch: batch sizes must be positive, got {batch_size!r}")
    rows = self.unbatch()

    def elements(key: Key) -> Iterator:
        it = rows._elements(key)
        for size in itertools.cycle(sizes):
            batch = list(itertools.islice(it, size))
            if not batch or (len(batch) < size and drop_remainder):
                return
            yield structure.stack(batch)

    leading = sizes[0] if drop_remainder and len(set(sizes)) == 1 else None
    return streamed(self, elements, UNKNOWN, lambda: structure.batched_spec(rows.element_spec, leading),
                    "RebatchDataset")


def group_by_window(self: Dataset, key_func: Callable[..., Any], reduce_func: Callable[[Any, Dataset], Dataset],
                    window_size: int | None = None, window_size_func: Callable[[Any], Any] | None = None,
                    name: str | None = None) -> Dataset:
    """Elements grouped by `key_func`; a group of `window_size` becomes `reduce_func(key, window)`'s elements
    at once, the groups left at the end in ascending key order (TF 2.21's order, observed)."""
    if (window_size is None) == (window_size_func is None):
        raise ValueError("Dataset.group_by_window: give exactly one of window_size and window_size_func")
    input_spec = user_functions.input_spec_of(self)
    if input_spec is not None:  # TF traces key_func and reduce_func once, when the dataset is made (observed)
        user_functions.on_placeholder(key_func, input_spec)
        try:
            window = _listed([structure.placeholder(input_spec)], input_spec)
        except ValueError:
            pass
        else:
            user_functions.trace_call(lambda: reduce_func(structure.HostTensor.of(np.int64(0)), window))
    key_func, reduce_func = user_functions.quiet(key_func), user_functions.quiet(reduce_func)

    def emit(group_key: int, rows: list) -> Iterator:
        yield from iter(reduce_func(structure.HostTensor.of(np.int64(group_key)), _listed(rows, self.element_spec)))

    def elements(key: Key) -> Iterator:
        groups: dict[int, list] = {}
        for element in self._elements(key):
            group_key = int(np.asarray(structure.call(key_func, element)))
            size = int(np.asarray(window_size if window_size_func is None else window_size_func(np.int64(group_key))))
            rows = groups.setdefault(group_key, [])
            rows.append(element)
            if len(rows) >= size:
                del groups[group_key]
                yield from emit(group_key, rows)
        for group_key in sorted(groups):
            yield from emit(group_key, groups[group_key])

    def spec() -> Any:  # the spec of the datasets reduce_func makes (of a window of the first element)
        with user_functions.silenced():  # TF's spec runs nothing: no print shows
            for element in self._spec_elements():
                group_key = structure.HostTensor.of(np.int64(np.asarray(structure.call(key_func, element))))
                return reduce_func(group_key, _listed([element], self.element_spec)).element_spec
        raise ValueError("element_spec: the dataset is empty, so its windows cannot be inspected")
    return streamed(self, elements, UNKNOWN, spec, "GroupByWindowDataset", static=False)


def bucket_by_sequence_length(self: Dataset, element_length_func: Callable[..., Any],
                              bucket_boundaries: Sequence[int], bucket_batch_sizes: Sequence[int],
                              padded_shapes: Any = None, padding_values: Any = None,
                              pad_to_bucket_boundary: bool = False, no_padding: bool = False,
                              drop_remainder: bool = False, name: str | None = None) -> Dataset:
    """Elements bucketed by length (bucket i: lengths in [boundary i-1, boundary i)) and batched per bucket,
    padded to the batch's longest (or to the bucket's boundary - 1), as TF's."""
    boundaries = [int(b) for b in bucket_boundaries]
    sizes = [int(b) for b in bucket_batch_sizes]
    if len(sizes) != len(boundaries) + 1:
        raise ValueError("len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1")

    def bucket(*element: Any) -> int:
        length = int(np.asarray(element_length_func(*element)))
        if pad_to_bucket_boundary and length >= max(boundaries):
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, "When pad_to_bucket_boundary=True, elements must have length "
                                                   "< max(bucket_boundaries).")
        return int(np.searchsorted(boundaries, length, side="right"))

    def reduce(bucket_id: Any, group: Dataset) -> Dataset:
        size = sizes[int(bucket_id)]
        if no_padding:
            return group.batch(size, drop_remainder=drop_remainder)
        shapes = padded_shapes
        if pad_to_bucket_boundary:
            edge = boundaries[int(bucket_id)] - 1 if int(bucket_id) < len(boundaries) else None
            shapes = structure.map_leaves(lambda s: [edge, *([None] * (len(s.shape) - 1))], group.element_spec)
        return padded_batch(group, size, shapes, padding_values, drop_remainder)

    grouped = group_by_window(self, bucket, reduce, window_size_func=lambda bucket_id: sizes[int(bucket_id)])
    # TF 2.21's spec (observed): one for every bucket, so batch and padded dimensions are None unless given
    like = self.batch(1) if no_padding else padded_batch(self, 1, None if pad_to_bucket_boundary else padded_shapes)
    return grouped._derive(grouped._build, UNKNOWN, lambda: like.element_spec, "GroupByWindowDataset")




METHODS = {f.__name__: f for f in (window, rebatch, group_by_window, bucket_by_sequence_length)}


def install(dataset: type) -> None:
    """Adds the transformations as methods of `Dataset`."""
    for name, method in METHODS.items():
        setattr(dataset, name, method)
