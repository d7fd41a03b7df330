"""`tf.data.experimental`: TF's older names for Dataset transformations, and the few it has of its own.

Most are `Dataset.apply` forms of Dataset methods (`ds.apply(tf.data.experimental.unbatch())` is
`ds.unbatch()`); the rest behave as TF 2.21 was observed to (tests/test_tfdata_experimental.py):
`assert_cardinality` fails the pass with FailedPreconditionError when the count is wrong, `group_by_reducer`
gives one finalized state per key in ascending key order, `pad_to_cardinality` pads a dict dataset with
zero elements marked `valid=False`, `from_list` is one element per list item, and
`choose_from_datasets` here skips an exhausted dataset by default (`stop_on_empty_dataset=False`, unlike
`Dataset.choose_from_datasets`).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import numpy as np

from jdist.tfdata import combinators, composite_batch, grouping, saving, snapshots, structure
from jdist.tfdata._iterators import Generated
from jdist.tfdata.dataset import Dataset
from jdist.tfdata.iterator import Optional, specs_compatible
from jdist.tfdata.options import INFINITE, UNKNOWN

Transformation = Callable[[Dataset], Dataset]

SHARD_HINT = -1  # TF's placeholder for `shard(SHARD_HINT, SHARD_HINT)` under AutoShardPolicy.HINT


def _stream(dataset: Dataset, elements: Callable[[tuple], Iterator], cardinality: int, spec: Callable[[], Any],
            kind: str, static: bool | None = None) -> Dataset:
    return dataset._derive(lambda key: Generated(lambda: elements(key)), cardinality, spec, kind, static=static)


# ---------------------------------------------------------------- Dataset methods, in `apply` form
def unbatch() -> Transformation:
    """`Dataset.unbatch`."""
    return lambda dataset: dataset.unbatch()


def enumerate_dataset(start: int = 0) -> Transformation:
    """`Dataset.enumerate(start)`."""
    return lambda dataset: dataset.enumerate(start)


def ignore_errors(log_warning: bool = False) -> Transformation:
    """`Dataset.ignore_errors`: elements whose computation raised are dropped."""
    return lambda dataset: combinators.ignore_errors(dataset, log_warning)


def scan(initial_state: Any, scan_func: Callable[[Any, Any], Any]) -> Transformation:
    """`Dataset.scan`."""
    return lambda dataset: combinators.scan(dataset, initial_state, scan_func)


def take_while(predicate: Callable[..., Any]) -> Transformation:
    """`Dataset.take_while`."""
    return lambda dataset: combinators.take_while(dataset, predicate)


def unique() -> Transformation:
    """`Dataset.unique`."""
    return lambda dataset: combinators.unique(dataset)


def group_by_window(key_func: Callable[..., Any], reduce_func: Callable[[Any, Dataset], Dataset],
                    window_size: int | None = None, window_size_func: Callable[[Any], Any] | None = None
                    ) -> Transformation:
    """`Dataset.group_by_window`."""
    return lambda dataset: grouping.group_by_window(dataset, key_func, reduce_func, window_size,
                                                     window_size_func)


def bucket_by_sequence_length(element_length_func: Callable[..., Any], bucket_boundaries: Sequence[int],
                              bucket_batch_sizes: Sequence[int], padded_shapes: Any = None,
                              padding_values: Any = None, pad_to_bucket_boundary: bool = False,
                              no_padding: bool = False, drop_remainder: bool = False) -> Transformation:
    """`Dataset.bucket_by_sequence_length`."""
    return lambda dataset: grouping.bucket_by_sequence_length(
        dataset, element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes, padding_values,
        pad_to_bucket_boundary, no_padding, drop_remainder)


def map_and_batch(map_func: Callable[..., Any], batch_size: int, num_parallel_batches: int | None = None,
                  drop_remainder: bool = False, num_parallel_calls: int | None = None) -> Transformation:
    """`map(map_func)` then `batch(batch_size, drop_remainder)` (TF's fused form)."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("`num_parallel_batches` and `num_parallel_calls` are mutually exclusive.")
    calls = num_parallel_calls if num_parallel_batches is None else int(num_parallel_batches) * int(batch_size)
    return lambda dataset: dataset.map(map_func, num_parallel_calls=calls).batch(batch_size, drop_remainder)


def parallel_interleave(map_func: Callable[..., Dataset], cycle_length: int, block_length: int = 1,
                        sloppy: bool | None = False, buffer_output_elements: int | None = None,
                        prefetch_input_elements: int | None = None) -> Transformation:
    """`Dataset.interleave(map_func, cycle_length, block_length)`: elements in interleave's order also when
    `sloppy` (an order TF's sloppy mode may give too)."""
    return lambda dataset: combinators.interleave(dataset, map_func, cycle_length, block_length,
                                                  num_parallel_calls=cycle_length)


def shuffle_and_repeat(buffer_size: int, count: int | None = None, seed: int | None = None) -> Transformation:
    """`shuffle(buffer_size, seed).repeat(count)`: each repetition reshuffled (TF 2.21 gives the same elements
    as that pair, observed)."""
    return lambda dataset: dataset.shuffle(buffer_size, seed).repeat(count)


def dense_to_ragged_batch(batch_size: int, drop_remainder: bool = False, row_splits_dtype: Any = np.int64
                          ) -> Transformation:
    """`batch`, each component whose shape has an unknown dimension batched into a RaggedTensor (TF 2.21,
    observed: rows of `tf.range(i)` give `<tf.RaggedTensor [[0], [0, 1]]>`); components of one known shape
    are batched densely, as `batch` does."""
    def apply(dataset: Dataset) -> Dataset:
        row = composite_batch.ragged_rows(dataset.element_spec)
        batched = dataset.batch(batch_size, drop_remainder)
        if not composite_batch.has_composite_spec(row):
            if any(s.shape is None or None in s.shape for s in structure.leaves(row)):
                raise NotImplementedError(  # no RaggedTensor registered (`jdist.tfdata.composites`)
                    f"dense_to_ragged_batch: the elements' shapes vary (element_spec {row}); ragged batches need "
                    "jdist.tf_compat's RaggedTensor (import jdist.tf_compat), or pad them with Dataset.padded_batch")
            return batched
        stack = composite_batch.stacker(lambda: row)
        size = int(batch_size)
        return dataset._derive(
            lambda key: dataset._build(key).batch(size, drop_remainder=bool(drop_remainder), batch_fn=stack),
            batched._cardinality, lambda: composite_batch.batched_spec(row, size if drop_remainder else None),
            "_DenseToRaggedDataset")
    return apply


def assert_cardinality(expected_cardinality: int) -> Transformation:
    """The elements unchanged, with cardinality `expected_cardinality`; a pass with another count fails with
    TF's FailedPreconditionError (at the first extra element, or at the end)."""
    expected = int(np.asarray(expected_cardinality))

    def apply(dataset: Dataset) -> Dataset:
        if dataset._cardinality == expected:
            return dataset._derive(dataset._build, expected, lambda: dataset.element_spec, "AssertCardinalityDataset")

        def elements(key: tuple) -> Iterator:
            from jdist.errors import FailedPreconditionError

            count = 0
            for element in dataset._elements(key):
                count += 1
                if expected != INFINITE and count > expected:
                    raise FailedPreconditionError(None, None, f"Input dataset was expected to contain {expected} "
                                                              f"elements but contained at least {count} elements.")
                yield element
            if count != expected:
                which = "infinite" if expected == INFINITE else str(expected)
                raise FailedPreconditionError(None, None, f"Input dataset was expected to contain {which} "
                                                          f"elements but contained only {count} elements.")
        return _stream(dataset, elements, expected, lambda: dataset.element_spec, "AssertCardinalityDataset")
    return apply


def get_single_element(dataset: Dataset) -> Any:
    """`dataset.get_single_element()`."""
    return dataset.get_single_element()


def get_structure(dataset_or_iterator: Any) -> Any:
    """The `element_spec` of a dataset or iterator."""
    return dataset_or_iterator.element_spec


def copy_to_device(target_device: str, source_device: str = "/cpu:0") -> Transformation:
    """The dataset unchanged: jdist's tf.data runs on the host, and the distributed iterator (or the Trainer)
    puts each batch on the devices, so there is no copy to ask for."""
    return lambda dataset: dataset


def prefetch_to_device(device: str, buffer_size: int | None = None) -> Transformation:
    """The dataset unchanged: batches reach the devices through the distributed iterator, which reads ahead
    (`InputOptions.experimental_per_replica_buffer_size`), not through the host pipeline."""
    return lambda dataset: dataset


# ---------------------------------------------------------------- sources
def choose_from_datasets(datasets: Sequence[Dataset], choice_dataset: Dataset, stop_on_empty_dataset: bool = False
                         ) -> Dataset:
    """Element i from `datasets[choice_i]` (`choice_dataset` of int64 scalars, TF's TypeError otherwise); an
    exhausted dataset is skipped unless `stop_on_empty_dataset`."""
    return combinators.choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)


def sample_from_datasets(datasets: Sequence[Dataset], weights: Sequence[float] | None = None,
                         seed: int | None = None, stop_on_empty_dataset: bool = False) -> Dataset:
    """`Dataset.sample_from_datasets` (numpy's draws: the same elements as TF's, in another order)."""
    return combinators.sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset)


def Counter(start: int = 0, step: int = 1, dtype: Any = np.int64) -> Dataset:  # noqa: N802
    """`Dataset.counter`: start, start + step, ... forever."""
    return combinators.counter(start, step, dtype)


def RandomDataset(seed: int | None = None, rerandomize_each_iteration: bool | None = None,  # noqa: N802
                  name: str | None = None) -> Dataset:
    """`Dataset.random`: int64 scalars forever (numpy's draws, not TF's numbers)."""
    return combinators.random(seed, rerandomize_each_iteration)


def from_list(elements: Sequence[Any], name: str | None = None) -> Dataset:
    """One element per item of `elements`, each a tensor or a structure of them; all of one structure and
    dtype (a dimension that differs between items is None in the spec, TF's ragged case)."""
    import grain

    rows = [structure.normalize(e) for e in elements]
    if not rows:
        raise ValueError("Invalid `elements`. `elements` should not be empty. If you want an empty dataset, use "
                         "`tf.data.Dataset.range(0)`.")
    specs = [structure.spec_of(r) for r in rows]
    if not all(specs_compatible(_unknown_dims(specs[0]), s) for s in specs):
        raise TypeError(f"from_list: the items must share one structure and dtype; got {specs[0]} and "
                        f"{next(s for s in specs if not specs_compatible(_unknown_dims(specs[0]), s))}")

    def spec() -> Any:
        columns = zip(*(structure.leaves(s) for s in specs))
        merged = iter([structure.TensorSpec(tuple(d[0] if len(set(d)) == 1 else None
                                                   for d in zip(*(c.shape for c in col)))
                                             if len({len(c.shape) for c in col}) == 1 else None, col[0].dtype)
                       for col in columns])
        return structure.map_leaves(lambda _: next(merged), specs[0])

    source = grain.MapDataset.source(rows)
    return Dataset(lambda key: source, len(rows), spec, kind="ListDataset")


def _unknown_dims(spec: Any) -> Any:
    return structure.map_leaves(lambda s: structure.TensorSpec(None, s.dtype), spec)


def get_next_as_optional(iterator: Any) -> Optional:
    """`iterator.get_next_as_optional()`: the next element as an `Optional`, without a value at the end."""
    return iterator.get_next_as_optional()


# ---------------------------------------------------------------- TF's own
def pad_to_cardinality(cardinality: int, mask_key: str = "valid") -> Transformation:
    """A dict dataset padded to `cardinality` elements: its own marked `mask_key: True`, then elements of
    zeros (b"" for strings) marked False (TF 2.21's, observed, and its ValueErrors)."""
    target = int(cardinality)

    def apply(dataset: Dataset) -> Dataset:
        spec = dataset.element_spec
        if not isinstance(spec, dict):
            raise ValueError("`pad_to_cardinality` requires its input dataset to be a dictionary.")
        have = dataset._cardinality
        if have < 0:
            raise ValueError(f"The dataset passed into `pad_to_cardinality` must have a known cardinalty, but has "
                             f"cardinality {have}")
        if have > target:
            raise ValueError(f"The dataset passed into `pad_to_cardinality` must have a cardinalty less than the "
                             f"target cardinality ({target}), but has cardinality {have}")
        padding = structure.map_leaves(lambda s: np.zeros(s.shape, s.dtype) if np.dtype(s.dtype).kind != "O"
                                       else np.full(s.shape, b"", object), spec)
        padding = {**padding, mask_key: np.False_}
        marked = dataset.map(lambda element: {**element, mask_key: True})
        return combinators.concatenate(marked, Dataset.from_tensors(padding).repeat(target - have))
    return apply


class Reducer:
    """`tf.data.experimental.Reducer(init_func, reduce_func, finalize_func)`: a key's state is
    `init_func(key)`, then `reduce_func(state, element)` per element, and `finalize_func(state)` its output (a
    tuple state spread into arguments)."""

    def __init__(self, init_func: Callable[[Any], Any], reduce_func: Callable[[Any, Any], Any],
                 finalize_func: Callable[..., Any]):
        self._init_func, self._reduce_func, self._finalize_func = init_func, reduce_func, finalize_func

    @property
    def init_func(self) -> Callable[[Any], Any]:
        return self._init_func

    @property
    def reduce_func(self) -> Callable[[Any, Any], Any]:
        return self._reduce_func

    @property
    def finalize_func(self) -> Callable[..., Any]:
        return self._finalize_func


def group_by_reducer(key_func: Callable[..., Any], reducer: Reducer) -> Transformation:
    """Elements grouped by `key_func` (an int64 scalar), each group reduced by `reducer`: one output per key,
    in ascending key order (TF 2.21's, observed), after the whole pass."""
    def apply(dataset: Dataset) -> Dataset:
        def elements(key: tuple) -> Iterator:
            states: dict[int, Any] = {}
            for element in dataset._elements(key):
                group = int(np.asarray(structure.call(key_func, element)))
                if group not in states:
                    states[group] = structure.normalize(reducer.init_func(structure.HostTensor.of(np.int64(group))))
                state = structure.map_leaves(structure.HostTensor.of, states[group])
                value = structure.map_leaves(structure.HostTensor.of, element)
                states[group] = structure.normalize(reducer.reduce_func(state, value))
            for group in sorted(states):
                yield structure.normalize(structure.call(reducer.finalize_func, states[group]))

        def spec() -> Any:
            first = next(iter(_stream(dataset, elements, UNKNOWN, lambda: None, "")._spec_elements()), None)
            if first is None:
                raise ValueError("element_spec: the dataset is empty, so its reduced elements cannot be inspected")
            return structure.spec_of(first)
        return _stream(dataset, elements, UNKNOWN, spec, "GroupByReducerDataset", static=False)
    return apply


def cardinality(dataset: Dataset) -> Any:
    """`dataset.cardinality()`: -1 infinite, -2 unknown."""
    return dataset.cardinality()


NAMES: dict[str, Any] = {f.__name__: f for f in (
    unbatch, enumerate_dataset, ignore_errors, scan, take_while, unique, group_by_window, bucket_by_sequence_length,
    map_and_batch, parallel_interleave, shuffle_and_repeat, dense_to_ragged_batch, assert_cardinality,
    get_single_element, get_structure, copy_to_device, prefetch_to_device, choose_from_datasets,
    sample_from_datasets, Counter, RandomDataset, from_list, get_next_as_optional, pad_to_cardinality,
    group_by_reducer, cardinality)}
NAMES.update(Reducer=Reducer, Optional=Optional, SHARD_HINT=SHARD_HINT)


def save(dataset: Dataset, path: str, compression: str | None = None, shard_func: Callable[..., Any] | None = None,
         checkpoint_args: Any = None) -> None:
    """`tf.data.experimental.save`: `dataset.save(path, ...)` (jdist.tfdata.saving)."""
    saving.save(dataset, path, compression, shard_func, checkpoint_args)


load = saving.load  # `tf.data.experimental.load`: `tf.data.Dataset.load`
NAMES.update(save=save, load=load)
NAMES.update(snapshot=snapshots.snapshot_transformation)  # `tf.data.experimental.snapshot`


def ragged_batch(self: Dataset, batch_size: int, drop_remainder: bool = False, row_splits_dtype: Any = np.int64,
                 name: str | None = None) -> Dataset:
    """`dense_to_ragged_batch` as a method: components of one known shape batched densely (TF 2.21, observed:
    spec `(None, 2)`), the rest into RaggedTensors."""
    return dense_to_ragged_batch(batch_size, drop_remainder, row_splits_dtype)(self)


Dataset.ragged_batch = ragged_batch  # pyright: ignore[reportAttributeAccessIssue]  (a method of TF's Dataset)
