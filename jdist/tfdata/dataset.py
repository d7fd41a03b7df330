"""`tf.data.Dataset` on grain: TF's transformations and semantics, elements as numpy arrays.

    ds = jdist.data.Dataset.from_tensor_slices((images, labels)).map(scale).cache().shuffle(10000).batch(64)
    dist_ds = strategy.experimental_distribute_dataset(ds)

A `Dataset` is a recipe: each pass (each `for` loop, or each epoch of a distributed
dataset) builds a grain pipeline from it, keyed by the pass number so shuffles draw a
new, reproducible order per pass (TF's `reshuffle_each_iteration=True`) and `repeat`
reshuffles each repetition. Pipelines that keep random access (slices, `range`, `map`,
`batch`, `take`, `skip`, `shard`, `enumerate`, `repeat(n)`, a shuffle whose buffer holds
every element) stay grain `MapDataset`s, so a saved position restores in O(1); the rest
(`filter`, `unbatch`, `from_generator`, a windowed shuffle, `cache`) are grain
`IterDataset`s whose position is replayed (see `_iterators`). `Dataset` is itself a
grain `IterDataset`, so grain's and Keras's own loaders take it as it is.

Semantics observed in TF 2.21 and kept here: a Python list is one tensor, a tuple or dict
is structure; `batch` keeps the short remainder unless `drop_remainder=True`;
`shard(n, i)` takes elements i, i + n, ...; `cardinality()` is -1 when infinite, -2 when
unknown; `len()` raises TypeError for both; `shuffle(b)` fills a buffer of `b` elements
and returns a random one, replacing it with the next input.
"""
from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Iterator

import grain
import numpy as np

import jdist.tfdata.batch_text as batch_text
import jdist.tfdata.composite_batch as composite_batch
import jdist.tfdata.spec as dataset_spec
from jdist.strategy import function_trace
from jdist.tfdata import (
    combinators,
    compiled,
    dataset_sources,
    files,
    grouping,
    mapping,
    saving,
    seeding,
    snapshots,
    structure,
    traced_draws,
    user_functions,
)
from jdist.tfdata._iterators import (
    Generated,
    GuardedIterator,
    Permuted,
    Repeated,
    as_iter,
    buffer_shuffle,
    window_permutation,
)
from jdist.tfdata.dataset_sources import check_count
from jdist.tfdata.iterator import NumpyIterator, OwnedIterator
from jdist.tfdata.options import INFINITE, UNKNOWN, Options
from jdist.tfdata.structure import HostTensor

Key = tuple
# Above this many elements a full-buffer shuffle draws each index (grain's index_shuffle) instead of holding a
# permutation (8 bytes an element).
_PERMUTATION_LIMIT = 1 << 24
# The pass key of the elements a spec is read from (`Dataset._spec_elements`): never a pass that is iterated.
SPEC_PASS: Key = (1 << 62,)


def _derive_seed(seed: int, key: Key) -> int:
    """A 32-bit seed (grain's range) for one pass: a function of the user's seed and the pass key only."""
    return int(np.random.SeedSequence([seed, *key]).generate_state(1, np.uint32)[0])


class Dataset(grain.IterDataset):
    """`tf.data.Dataset`: see the module docstring. Build one with a static constructor."""

    def __init__(self, make: Callable[[Key], Any], cardinality: int, spec: Callable[[], Any], *,
                 options: Options | None = None, threads: int = 0, kind: str = "Dataset", static: bool = False):
        super().__init__()
        # Whether the element spec is TF's static one (a source's, or derived from one without running a user
        # function): a spec read off a first element (`map`) may fix a dimension that varies.
        self._static = static
        self._make_pass = make
        self._cardinality = int(cardinality)
        self._spec_fn = spec
        self._spec: Any = None
        self._options = options or Options()
        self._threads = threads
        self._kind = kind
        self._passes = 0

    # ---------------------------------------------------------------- derived datasets
    def _derive(self, make: Callable[[Key], Any], cardinality: int, spec: Callable[[], Any], kind: str,
                threads: int | None = None, static: bool | None = None) -> Dataset:
        return Dataset(make, cardinality, spec, options=self._options, kind=kind,
                       threads=self._threads if threads is None else threads,
                       static=self._static if static is None else static)

    def _build(self, key: Key) -> Any:
        return self._make_pass(key)

    def _iter_pass(self, key: Key) -> grain.IterDataset:
        return as_iter(self._build(key), self._threads)

    def _elements(self, key: Key) -> Iterator:
        return iter(self._iter_pass(key))

    def _spec_elements(self) -> Iterator:
        """Elements to read a spec off: a pass of its own (`SPEC_PASS`), so that no pass iterated later finds its
        `tf.random` draws taken (TF 2.21, observed: reading `element_spec` of a `scan` after a seeded `map`
        leaves both passes alike)."""
        return self._elements(SPEC_PASS)

    # ---------------------------------------------------------------- sources (`jdist.tfdata.dataset_sources`)
    from_tensor_slices = staticmethod(dataset_sources.from_tensor_slices)
    from_tensors = staticmethod(dataset_sources.from_tensors)
    range = staticmethod(dataset_sources.range)
    from_generator = staticmethod(dataset_sources.from_generator)
    zip = staticmethod(dataset_sources.zip)

    # ---------------------------------------------------------------- transformations
    def map(self, map_func: Callable[..., Any], num_parallel_calls: int | None = None,
            deterministic: bool | None = None, name: str | None = None) -> Dataset:
        """`map_func` on each element, as TF: traced once when the dataset is made (`jdist.tfdata.mapping`)."""
        calls = None if num_parallel_calls is None else check_count("map", num_parallel_calls)
        return mapping.map_dataset(self, map_func, calls, deterministic, name)

    def filter(self, predicate: Callable[..., Any], name: str | None = None) -> Dataset:
        """The elements for which `predicate` is true (a boolean scalar)."""
        after = ", but its return type is {spec}."  # TF 2.21's text (observed); TF's trace, now:
        input_spec = user_functions.input_spec_of(self)
        trace = user_functions.single_trace(predicate, input_spec)  # once, as TF's (None: two calls instead)
        called = user_functions.check_predicate(predicate, input_spec, after, trace)
        fast = compiled.compile_predicate(predicate, input_spec, trace) or \
            user_functions.drawn_predicate(trace, input_spec)  # TF runs the traced graph per element
        passes = seeding.PerPass()  # its `tf.random` ops draw per pass, as `map`'s (TF 2.21, observed)

        def keep(table: seeding.PassRandom, element: Any) -> bool:
            with seeding.drawing(table):
                return fast(element) if fast is not None else structure.verdict(called, element, after)
        return self._derive(lambda key: as_iter(self._build(key), self._threads).filter(
            functools.partial(keep, passes.of(key))), UNKNOWN, lambda: self.element_spec, "FilterDataset")

    def batch(self, batch_size: int, drop_remainder: bool = False, num_parallel_calls: int | None = None,
              deterministic: bool | None = None, name: str | None = None) -> Dataset:
        """Consecutive elements stacked `batch_size` at a time; the short last batch kept unless dropped."""
        size = check_count("batch", batch_size)
        if size < 1:
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, f"Batch size must be greater than zero. (batch_size={size})")
        card = self._cardinality
        if card >= 0:
            card = card // size if drop_remainder else -(-card // size)
        stack = batch_text.stacker(self)  # TF batches by the element spec; TF's text for shapes that differ
        return self._derive(
            lambda key: self._build(key).batch(size, drop_remainder=bool(drop_remainder), batch_fn=stack),
            card, lambda: composite_batch.batched_spec(self.element_spec, size if drop_remainder else None),
            "BatchDataset")

    def unbatch(self, name: str | None = None) -> Dataset:
        """The rows of each element, one by one (the inverse of `batch`)."""
        def make(key: Key) -> grain.IterDataset:
            return Generated(lambda: (row for batch in self._elements(key) for row in composite_batch.unstack(batch)))
        card = self._cardinality
        if card >= 0:  # TF 2.21's (observed): times a static leading dimension, else unknown
            card = structure.unbatched_cardinality(card, self.element_spec) if self._static else UNKNOWN
        return self._derive(make, card, lambda: composite_batch.unbatched_spec(self.element_spec), "UnbatchDataset")

    def shuffle(self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True,
                name: str | None = None) -> Dataset:
        """TF's windowed shuffle: a buffer of `buffer_size` elements, one drawn at random at a time."""
        size = check_count("shuffle", buffer_size)
        if size < 1 and size != UNKNOWN:  # TF 2.21's error (observed); UNKNOWN_CARDINALITY buffers everything
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, "buffer_size must be greater than zero or UNKNOWN_CARDINALITY "
                                                   f"(got {size})")
        if size == UNKNOWN:
            size = 1 << 62
        base = seeding.op_seed(None if seed is None else check_count("shuffle", seed))
        full = self._cardinality >= 0 and size >= self._cardinality

        def make(key: Key) -> Any:
            pass_seed = _derive_seed(base, key if reshuffle_each_iteration else ())
            built = self._build(key)
            if isinstance(built, grain.MapDataset) and self._cardinality >= 0:
                if full and self._cardinality > _PERMUTATION_LIMIT:
                    return built.shuffle(seed=pass_seed)  # a full buffer is a uniform permutation, as TF's
                if full:  # numpy's permutation: grain's index_shuffle takes ~15 ms an element on a few rows
                    return Permuted(built, np.random.default_rng(pass_seed).permutation(self._cardinality))
                return Permuted(built, window_permutation(self._cardinality, size, pass_seed))
            return Generated(lambda: buffer_shuffle(lambda: iter(as_iter(built, self._threads)), size, pass_seed))

        return self._derive(make, self._cardinality, lambda: self.element_spec, "ShuffleDataset")

    def repeat(self, count: int | None = None, name: str | None = None) -> Dataset:
        """The dataset `count` times (forever for None or -1); each repetition is a new pass (reshuffled)."""
        n = -1 if count is None else check_count("repeat", count)
        card = self._cardinality
        if n < 0:
            card = INFINITE if card != 0 else 0
        elif card >= 0:
            card *= n
        elif card == INFINITE and n == 0:
            card = 0

        def make(key: Key) -> Any:
            if self._cardinality > 0 and isinstance(self._build(key + (0,)), grain.MapDataset):
                # Random access also when endless: 2**40 elements stand for forever.
                return Repeated(self._build, key, self._cardinality, n if n >= 0 else (1 << 40) // self._cardinality)
            reps = itertools.count() if n < 0 else range(n)

            def elements() -> Iterator:
                for rep in reps:
                    empty = True
                    for element in self._elements((*key, rep)):
                        empty = False
                        yield element
                    if empty:
                        return
            return Generated(elements)

        return self._derive(make, card, lambda: self.element_spec, "RepeatDataset")

    def take(self, count: int, name: str | None = None) -> Dataset:
        """The first `count` elements (all for -1)."""
        n = check_count("take", count)
        if n < 0:  # all the elements; TF 2.21 (observed) keeps the count for -1, and has it unknown below -1
            card = self._cardinality if n == -1 else UNKNOWN
            return self._derive(self._build, card, lambda: self.element_spec, "TakeDataset")
        card = n if self._cardinality == INFINITE else (min(n, self._cardinality) if self._cardinality >= 0
                                                         else UNKNOWN)
        return self._sliced(0, n, 1, card, "TakeDataset")

    def skip(self, count: int, name: str | None = None) -> Dataset:
        """All but the first `count` elements (none for -1)."""
        n = check_count("skip", count)
        card = self._cardinality
        if n < 0:
            card = 0
        elif card >= 0:
            card = max(0, card - n)
        return self._sliced(0, 0, 1, card, "SkipDataset") if n < 0 else self._sliced(n, None, 1, card, "SkipDataset")

    def shard(self, num_shards: int, index: int, name: str | None = None) -> Dataset:
        """Elements `index`, `index + num_shards`, ...: this worker's share (TF's `shard`)."""
        num, i = check_count("shard", num_shards), check_count("shard", index)
        if num < 1:
            raise ValueError(f"Dataset.shard: num_shards must be at least 1, got {num}")
        if not 0 <= i < num:
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, f"Index must be between 0 and {num - 1} (currently index = {i}).")
        card = self._cardinality
        if card >= 0:
            card = len(range(i, card, num))
        return self._sliced(i, None, num, card, "ShardDataset")

    def _sliced(self, start: int, stop: int | None, step: int, cardinality: int, kind: str) -> Dataset:
        """Elements `start:stop:step` of each pass: a grain slice where the pass is random access, else
        the stream's (take, skip and shard are this)."""
        def make(key: Key) -> Any:
            built = self._build(key)
            if isinstance(built, grain.MapDataset):
                return built.slice(slice(start, stop, step))
            return Generated(lambda: itertools.islice(iter(built), start, stop, step))
        return self._derive(make, cardinality, lambda: self.element_spec, kind)

    def enumerate(self, start: int = 0, name: str | None = None) -> Dataset:
        """(index, element) pairs, indices int64 from `start`."""
        first = check_count("enumerate", start)

        def make(key: Key) -> Any:
            built = self._build(key)
            return built.map_with_index(lambda i, element: (np.int64(first + i), element))
        return self._derive(make, self._cardinality,
                            lambda: (structure.TensorSpec((), np.dtype(np.int64)), self.element_spec),
                            "ZipDataset")  # TF's name: its enumerate zips a range

    def cache(self, filename: str = "", name: str | None = None) -> Dataset:
        """Keeps the elements of the first complete pass in memory (in files with `filename`:
        `files.file_cache`); later passes read them back (so a shuffle before `cache` is frozen, as in TF)."""
        if filename:
            return files.file_cache(self, str(filename))
        store: dict[str, list] = {}

        def make(key: Key) -> Any:
            if "done" in store:
                return grain.MapDataset.source(store["done"])

            def elements() -> Iterator:
                filled = []
                for element in self._elements(key):
                    filled.append(element)
                    yield element
                store.setdefault("done", filled)
            return Generated(elements)
        return self._derive(make, self._cardinality, lambda: self.element_spec, "CacheDataset")

    def prefetch(self, buffer_size: int, name: str | None = None) -> Dataset:
        """Elements unchanged. Batches are read ahead by jdist's distributed iterator (its
        `experimental_per_replica_buffer_size`) and by the Trainer; `map(num_parallel_calls=...)` sets
        how many threads read ahead here."""
        check_count("prefetch", buffer_size)
        return self._derive(self._build, self._cardinality, lambda: self.element_spec, "PrefetchDataset")

    def with_options(self, options: Options, name: str | None = None) -> Dataset:
        """The same elements with `options` merged over this dataset's (TF's `with_options`)."""
        if not isinstance(options, Options):
            raise TypeError(f"with_options takes a tf.data.Options, got {type(options).__name__}")
        out = self._derive(self._build, self._cardinality, lambda: self.element_spec, "OptionsDataset")
        out._options = self._options.merge(options)
        return out

    def options(self) -> Options:
        return self._options

    def apply(self, transformation_func: Callable[[Dataset], Dataset]) -> Dataset:  # type: ignore[override]
        """`transformation_func(self)`, which must return a Dataset."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError("Dataset.apply: the transformation must return a Dataset")
        return out

    # ---------------------------------------------------------------- reading
    @property
    def element_spec(self) -> Any:
        """The `TensorSpec` structure of an element (None for a dimension that varies, as after `batch`)."""
        if self._spec is None:
            self._spec = self._spec_fn()
        return self._spec

    def cardinality(self) -> HostTensor:
        """The number of elements: -1 (`INFINITE_CARDINALITY`) or -2 (`UNKNOWN_CARDINALITY`) when not known."""
        return HostTensor.of(np.int64(self._cardinality))

    def __len__(self) -> int:
        if self._cardinality == INFINITE:
            raise TypeError("The dataset is infinite.")
        if self._cardinality == UNKNOWN:
            raise TypeError("The dataset length is unknown.")
        return self._cardinality

    def __bool__(self) -> bool:
        return True  # a Dataset is truthy even when empty or of unknown length (no __len__ call)

    def __iter__(self) -> OwnedIterator:
        """The next pass: elements as host tensors (numpy arrays with `.numpy()`), reshuffled per pass."""
        return OwnedIterator(iter(self._iter_pass((self._claim_pass(),)).map(
            lambda e: structure.map_leaves(structure.as_tensor, e))), lambda: self.element_spec)

    def as_numpy_iterator(self) -> Iterator:
        """The next pass, as plain numpy values: numpy scalars and arrays, not tensors (TF's, observed: a map
        function's `tf.cast(x, tf.float32) * 2` gives `np.float32(0.0)`)."""
        return NumpyIterator(GuardedIterator(self.begin_pass()[1]), lambda: self.element_spec,
                             lambda element: structure.map_leaves(structure.as_numpy_read_only, element))

    def begin_pass(self, index: int | None = None) -> tuple[int, grain.DatasetIterator]:
        """Pass `index` (the next one when None) as a checkpointable grain iterator of numpy elements:
        how distributed datasets and the Trainer read and resume a dataset (`jdist.input.sources.PassSource`).
        Later passes continue after it, so a resumed run reshuffles as the uninterrupted one."""
        index = self._claim_pass(index)
        return index, iter(self._iter_pass((index,)))

    def _claim_pass(self, index: int | None = None) -> int:
        function_trace.refuse("iterating a tf.data dataset")  # a tf.function reading one runs as Python
        index = self._passes if index is None else int(index)
        self._passes = max(self._passes, index + 1)
        return index

    def reduce(self, initial_state: Any, reduce_func: Callable[[Any, Any], Any]) -> Any:
        """Folds `reduce_func(state, element)` over one pass; the state a structure of tensors, as TF's (TF 2.21:
        `range(5).reduce(np.int64(0), add)` prints `tf.Tensor(10, shape=(), dtype=int64)`)."""
        state = structure.map_leaves(HostTensor.of, structure.normalize(initial_state))
        input_spec = user_functions.input_spec_of(self)
        trace = user_functions.fold_trace(reduce_func, state, input_spec)  # TF traces it once
        called = user_functions.quiet(reduce_func)
        fast = compiled.compile_fold(reduce_func, state, input_spec, trace)  # TF runs the traced graph per element
        drawn = None if fast is not None else traced_draws.compile_fold(trace, state, input_spec)  # its tf.random
        table = seeding.PassRandom()  # its `tf.random` ops draw per `reduce` call, a pass (TF 2.21, observed)
        for element in self.begin_pass()[1]:
            if fast is not None:
                state = fast(state, element)
            elif drawn is not None:
                state = drawn(state, element, table)
            else:
                with seeding.drawing(table):
                    state = called(state, structure.map_leaves(HostTensor.of, element))
            state = structure.map_leaves(HostTensor.of, structure.normalize(state))
        return state

    def get_single_element(self, name: str | None = None) -> Any:
        """The one element of a dataset of one element (TF's InvalidArgumentError for none or several)."""
        from jdist.errors import InvalidArgumentError

        elements = list(itertools.islice(iter(self), 2))
        if len(elements) != 1:
            raise InvalidArgumentError(None, None, "Dataset was empty." if not elements else
                                       "Dataset had more than one element.")
        return elements[0]

    def __repr__(self) -> str:
        try:
            spec = self.element_spec
        except Exception:  # an empty mapped dataset has no spec to show
            spec = "?"
        public = ("CacheDataset", "TextLineDatasetV2", "CsvDatasetV2", "TFRecordDatasetV2")
        name = self._kind if self._kind in public else f"_{self._kind}"  # TF 2.21's (observed) names
        return f"<{name} element_spec={spec}>"


dataset_spec.VALUE_TYPE[:] = [Dataset]
combinators.install(Dataset)  # concatenate, flat_map, interleave, padded_batch, scan, ... (jdist.tfdata.combinators)
Dataset.list_files = staticmethod(files.list_files)  # pyright: ignore[reportAttributeAccessIssue]
Dataset.save = saving.save  # pyright: ignore[reportAttributeAccessIssue]  (jdist.tfdata.saving)
Dataset.load = staticmethod(saving.load)  # pyright: ignore[reportAttributeAccessIssue]
Dataset.snapshot = snapshots.snapshot  # pyright: ignore[reportAttributeAccessIssue]  (jdist.tfdata.snapshots)
grouping.install(Dataset)  # window, rebatch, group_by_window, bucket_by_sequence_length (jdist.tfdata.grouping)
