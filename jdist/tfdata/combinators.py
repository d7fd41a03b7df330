"""`tf.data.Dataset`'s transformations of one dataset that combine or regroup elements, with TF 2.21's semantics
(observed): `concatenate`, `flat_map`, `interleave`, `scan`, `unique`, `take_while`, `ignore_errors`; and where
`Dataset` gets them, with `padded_batch` (`padding`) and the sources `choose_from_datasets`,
`sample_from_datasets`, `counter`, `random` (`sources`), as methods (`install`). Windows and groups: `grouping`.

They stream (each pass a generator over the input's elements: `streaming`), so a saved position is replayed, as
for `filter`.
"""
from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from jdist.tfdata import compiled, dataset_plan, seeding, structure, tensor_text, traced_draws, user_functions
from jdist.tfdata.options import AUTOTUNE, INFINITE, UNKNOWN
from jdist.tfdata.padding import padded_batch
from jdist.tfdata.shape_inference import merged_spec
from jdist.tfdata.sources import choose_from_datasets, counter, random, sample_from_datasets
from jdist.tfdata.streaming import _DATASET, Key, common_spec, dataset_class, specs_match, streamed

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

__all__ = ["choose_from_datasets", "counter", "dataset_class", "padded_batch", "random", "sample_from_datasets",
           "streamed", "install"]


def concatenate(self: Dataset, dataset: Dataset, name: str | None = None) -> Dataset:
    """This dataset's elements, then `dataset`'s (TF's TypeError for elements of another structure or dtype)."""
    if not isinstance(dataset, dataset_class()):
        raise TypeError(f"Dataset.concatenate takes a Dataset, got {type(dataset).__name__}")
    if not specs_match(self.element_spec, dataset.element_spec):
        raise TypeError(f"Incompatible dataset elements:\n  {self.element_spec} vs.   {dataset.element_spec}")
    a, b = self._cardinality, dataset._cardinality
    card = INFINITE if INFINITE in (a, b) else (a + b if a >= 0 and b >= 0 else UNKNOWN)
    return streamed(self, lambda key: itertools.chain(self._elements(key), dataset._elements(key)), card,
                    lambda: common_spec(self.element_spec, dataset.element_spec), "ConcatenateDataset")


def _inner(map_func: Callable, element: Any, what: str, table: seeding.PassRandom | None = None) -> Dataset:
    """`map_func`'s dataset for `element`, its `tf.random` ops drawing from `table` (the pass's: TF 2.21, observed,
    `flat_map(lambda x: from_tensors(tf.random.uniform([], seed=7)))` gives different numbers per element, the
    same in every pass; unseeded and without a global seed, new numbers each pass)."""
    with seeding.drawing(table or seeding.PassRandom()):
        inner = structure.call(map_func, element)
    if not isinstance(inner, dataset_class()):
        raise user_functions.not_a_dataset(what, inner)
    return inner


def _first_inner_spec(self: Dataset, map_func: Callable, what: str) -> Callable[[], Any]:
    def spec() -> Any:
        with user_functions.silenced():  # TF's spec runs nothing: no print shows
            specs = [_inner(map_func, element, what).element_spec
                     for element in itertools.islice(self._spec_elements(), 2)]
        if specs:  # a dimension that differs between the first two datasets is None (TF's traced spec has it so)
            return merged_spec(specs) if len(specs) > 1 else specs[0]
        raise ValueError(f"element_spec: the dataset is empty, so the datasets of its {what} cannot be inspected")
    return spec


def flat_map(self: Dataset, map_func: Callable[..., Dataset], name: str | None = None) -> Dataset:
    """The elements of the dataset `map_func` makes of each element, one dataset after the other."""
    inner, spec = _traced_once(self, map_func, "flat_map")
    passes = seeding.PerPass()

    def elements(key: Key) -> Iterator:
        table = passes.of(key)
        for element in self._elements(key):
            yield from iter(inner(element, table))
    return streamed(self, elements, UNKNOWN, spec, "FlatMapDataset", static=False)


def _traced_once(self: Dataset, map_func: Callable, what: str) -> tuple[Callable, Callable[[], Any]]:
    """`map_func`'s dataset per element and their spec: from its one trace (`dataset_plan`, TF 2.21's one call,
    observed), else from a call per element (`_inner`, the spec off the first element's dataset)."""
    traced = dataset_plan.trace(self, map_func)
    if traced is None:
        called = user_functions.trace_dataset_function(self, map_func, what)
        return (lambda element, table: _inner(called, element, what, table)), _first_inner_spec(self, called, what)
    first = _first_inner_spec(self, lambda *args: traced.dataset(args[0] if len(args) == 1 else args), what)

    def spec() -> Any:
        try:
            return traced.spec()
        except Exception:  # noqa: BLE001 (a plan that cannot be built on ones: the first element's spec)
            return first()
    return traced.dataset, spec


def cores() -> int:
    """The CPU cores this process may run on (TF's `port::MaxParallelism`)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _cycle_length(cycle_length: int | None, num_parallel_calls: int | None) -> int:
    """TF 2.21's cycle length (observed on 2 cores: 2, and 1 with `num_parallel_calls=AUTOTUNE`): a given one, else
    the cores; with parallel calls, as many as the calls (at most the cores), or for AUTOTUNE a third of the cores
    (each open dataset gets two read-ahead threads)."""
    if cycle_length is not None and cycle_length >= 1:
        return int(cycle_length)
    if num_parallel_calls is None:
        return cores()
    if num_parallel_calls == AUTOTUNE:
        return -(-cores() // 3)
    return min(int(num_parallel_calls), cores())


def interleave(self: Dataset, map_func: Callable[..., Dataset], cycle_length: int | None = None,
               block_length: int | None = None, num_parallel_calls: int | None = None,
               deterministic: bool | None = None, name: str | None = None) -> Dataset:
    """TF's interleave: up to `cycle_length` of `map_func`'s datasets open at once, `block_length` elements
    taken from each in turn, an exhausted one replaced by the next input element's (TF 2.21: `range(1, 6)` of
    `from_tensors(x).repeat(6)` with cycle 2, block 4 gives 1 1 1 1 2 2 2 2 1 1 2 2 3 3 3 3 ...). The default
    cycle length is TF's (`_cycle_length`); elements come in this order also when `num_parallel_calls` is set
    (TF's deterministic order)."""
    inner, spec = _traced_once(self, map_func, "interleave")
    cycle = _cycle_length(cycle_length, num_parallel_calls)
    block = 1 if block_length is None or block_length < 1 else int(block_length)
    passes = seeding.PerPass()

    def elements(key: Key) -> Iterator:
        if num_parallel_calls is not None and num_parallel_calls != AUTOTUNE and int(num_parallel_calls) > cycle:
            from jdist.errors import InvalidArgumentError  # TF 2.21's error and text, when iterated (observed)

            raise InvalidArgumentError(None, None, "If `cycle_length` is set to a fixed value, `num_parallel_calls` "
                                                   "must be either `tf.data.AUTOTUNE` or a value less than or equal "
                                                   f"to `cycle_length`. However, `num_parallel_calls` is "
                                                   f"{int(num_parallel_calls)} and `cycle_length` is {cycle}")
        inputs, table = self._elements(key), passes.of(key)
        slots: list[Iterator | None] = [None] * cycle
        index, taken, open_, ended = 0, 0, 0, False
        while not (ended and open_ == 0):
            current = slots[index]
            if current is not None:
                try:
                    value = next(current)
                except StopIteration:
                    slots[index], open_ = None, open_ - 1
                    index, taken = (index + 1) % cycle, 0
                    continue
                taken += 1
                if taken == block:
                    index, taken = (index + 1) % cycle, 0
                yield value
            elif not ended:
                try:
                    element = next(inputs)
                except StopIteration:
                    ended = True
                    continue
                slots[index], open_ = iter(inner(element, table)), open_ + 1
            else:
                index, taken = (index + 1) % cycle, 0
    kind = "InterleaveDataset" if num_parallel_calls is None else "ParallelInterleaveDataset"  # TF's class names
    return streamed(self, elements, UNKNOWN, spec, kind, static=False)



def scan(self: Dataset, initial_state: Any, scan_func: Callable[[Any, Any], Any], name: str | None = None
         ) -> Dataset:
    """`new_state, output = scan_func(state, element)`: the outputs, the state carried along (TF's). The function
    is traced once, now, and run per element compiled where its trace is pure (`compiled.compile_scan`), or from
    the trace with its `tf.random` ops drawing per pass (`traced_draws.compile_scan`, `seeding.PerPass`, as
    `map`'s), else in Python, drawing so too."""
    state0 = structure.map_leaves(structure.HostTensor.of, structure.normalize(initial_state))
    input_spec = user_functions.input_spec_of(self)
    trace = user_functions.fold_trace(scan_func, state0, input_spec)
    fast = compiled.compile_scan(trace, state0, input_spec)
    drawn = None if fast is not None else traced_draws.compile_scan(trace, state0, input_spec)  # its tf.random
    scan_func = user_functions.quiet(scan_func)
    passes = seeding.PerPass()

    def scanned(inputs: Iterator, table: seeding.PassRandom) -> Iterator:
        state = structure.normalize(initial_state)
        for element in inputs:
            if fast is not None:
                state, output = fast(state, element)
            elif drawn is not None:
                state, output = drawn(state, element, table)
            else:
                with seeding.drawing(table):
                    state, output = scan_func(structure.map_leaves(structure.HostTensor.of, state),
                                              structure.map_leaves(structure.HostTensor.of, element))
            state = structure.normalize(state)
            yield structure.normalize(output)

    def elements(key: Key) -> Iterator:
        return scanned(self._elements(key), passes.of(key))

    def spec() -> Any:
        with user_functions.silenced():  # TF's spec runs nothing: no print shows, no draw of a pass is taken
            output = next(iter(scanned(self._spec_elements(), seeding.PassRandom())), None)
        if output is not None:
            out = structure.spec_of(output)
            return (structure.map_leaves(lambda s: structure.TensorSpec((None, *s.shape[1:]), s.dtype)
                                         if s.shape else s, out)
                    if structure.leading_unknown(self.element_spec) else out)
        raise ValueError("element_spec: the dataset is empty, so its scanned elements cannot be inspected")
    return streamed(self, elements, self._cardinality, spec, "ScanDataset", static=False)


def unique(self: Dataset, name: str | None = None) -> Dataset:
    """Each distinct element once, in first-seen order: int32, int64 or string scalars only (TF's TypeError)."""
    spec = self.element_spec
    dtype = getattr(spec, "dtype", None)
    if isinstance(spec, (tuple, dict)) or dtype is None or not (np.dtype(dtype) in (np.int32, np.int64)
                                                                 or np.dtype(dtype).kind in "OSU"):
        raise TypeError(f"`tf.data.Dataset.unique` does not support type <dtype: '{tensor_text.dtype_name(dtype)}'> "
                        "-- only `tf.int32`, `tf.int64`, and `tf.string` are supported.")

    def elements(key: Key) -> Iterator:
        seen: set = set()
        for element in self._elements(key):
            value = np.asarray(element).item()
            if value not in seen:
                seen.add(value)
                yield element
    return streamed(self, elements, UNKNOWN, lambda: self.element_spec, "UniqueDataset")


def take_while(self: Dataset, predicate: Callable[..., Any], name: str | None = None) -> Dataset:
    """The elements up to the first for which `predicate` is false."""
    after = " but its return type is{spec}."  # TF 2.21's text (observed)
    called = user_functions.check_predicate(predicate, user_functions.input_spec_of(self), after)  # TF's trace

    def verdict(element: Any) -> bool:
        return structure.verdict(called, element, after)
    return streamed(self, lambda key: itertools.takewhile(verdict, self._elements(key)), UNKNOWN,
                    lambda: self.element_spec, "TakeWhileDataset")


def ignore_errors(self: Dataset, log_warning: bool = False, name: str | None = None) -> Dataset:
    """The elements whose computation raised nothing: an element that raises is dropped."""
    def elements(key: Key) -> Iterator:
        import grain

        built = self._build(key)
        if isinstance(built, grain.MapDataset):  # random access: read by index, so a failed element is passed over
            it: Iterator = _EachOrError(built)
        else:
            it = self._elements(key)
        while True:
            try:
                yield next(it)
            except StopIteration:
                return
            except Exception as error:  # noqa: BLE001 (TF drops the element, whatever the error)
                if log_warning:
                    import logging

                    logging.getLogger("tensorflow").warning("Ignoring error: %s", error)
    return streamed(self, elements, UNKNOWN, lambda: self.element_spec, "IgnoreErrorsDataset")



class _EachOrError:
    """Element i of a random-access pass at the i-th `next`, which moves on also when the element raises (a
    stream's iterator would give the same failing element again)."""

    def __init__(self, built: Any):
        self._built, self._index = built, 0

    def __iter__(self) -> _EachOrError:
        return self

    def __next__(self) -> Any:
        if self._index >= len(self._built):
            raise StopIteration
        self._index += 1
        return self._built[self._index - 1]


METHODS = {f.__name__: f for f in (concatenate, flat_map, interleave, padded_batch, scan, unique, take_while,
                                    ignore_errors)}
SOURCES: dict[str, Any] = {f.__name__: f for f in (choose_from_datasets, sample_from_datasets, counter, random)}


def install(dataset: type) -> None:
    """Adds the transformations as methods and the sources as static methods of `Dataset`."""
    _DATASET[:] = [dataset]
    for name, method in METHODS.items():
        setattr(dataset, name, method)
    for name, source in SOURCES.items():
        setattr(dataset, name, staticmethod(source))
