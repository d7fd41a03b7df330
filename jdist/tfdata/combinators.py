"""`tf.data.Dataset`'s transformations that combine or regroup elements, with TF 2.21's semantics (observed):
`concatenate`, `flat_map`, `interleave`, `padded_batch`, `scan`, `unique`, `take_while`, `ignore_errors`, and the
sources `choose_from_datasets`, `sample_from_datasets`, `counter`, `random` (windows and groups: `grouping`).

They stream (each pass a generator over the input's elements), so a saved position is replayed, as for
`filter`. `Dataset` gets them as methods (`install`).
"""
from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from jdist.tfdata import seeding, structure, tensor_text, user_functions
from jdist.tfdata._iterators import Generated
from jdist.tfdata.options import AUTOTUNE, INFINITE, UNKNOWN

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

Key = tuple


_DATASET: list[type] = []  # the class `install` gave these methods to (tf.data's Dataset)


def dataset_class() -> Any:
    return _DATASET[0]


def streamed(base: Dataset, elements: Callable[[Key], Iterator], cardinality: int, spec: Callable[[], Any],
             kind: str, static: bool | None = None) -> Dataset:
    """`static=False` where the spec is read off a first element (see `Dataset._static`)."""
    return base._derive(lambda key: Generated(lambda: elements(key)), cardinality, spec, kind, static=static)


def _specs_match(a: Any, b: Any) -> bool:
    la, lb = structure.leaves(a), structure.leaves(b)
    return (len(la) == len(lb) and all(np.dtype(x.dtype) == np.dtype(y.dtype) for x, y in zip(la, lb))
            and repr(structure.map_leaves(lambda _: 0, a)) == repr(structure.map_leaves(lambda _: 0, b)))


def _common_spec(a: Any, b: Any) -> Any:
    """The spec both elements fit (TF 2.21's, observed: shapes (3,) and (4,) give (None,), ranks that differ
    an unknown shape)."""
    others = iter(structure.leaves(b))

    def merged(x: Any) -> Any:
        y = next(others)
        if x.shape is None or y.shape is None or len(x.shape) != len(y.shape):
            return structure.TensorSpec(None, x.dtype)
        return structure.TensorSpec(tuple(p if p == q else None for p, q in zip(x.shape, y.shape)), x.dtype)
    return structure.map_leaves(merged, a)


def concatenate(self: Dataset, dataset: Dataset, name: str | None = None) -> Dataset:
    """This dataset's elements, then `dataset`'s (TF's TypeError for elements of another structure or dtype)."""
    if not isinstance(dataset, dataset_class()):
        raise TypeError(f"Dataset.concatenate takes a Dataset, got {type(dataset).__name__}")
    if not _specs_match(self.element_spec, dataset.element_spec):
        raise TypeError(f"Incompatible dataset elements:\n  {self.element_spec} vs.   {dataset.element_spec}")
    a, b = self._cardinality, dataset._cardinality
    card = INFINITE if INFINITE in (a, b) else (a + b if a >= 0 and b >= 0 else UNKNOWN)
    return streamed(self, lambda key: itertools.chain(self._elements(key), dataset._elements(key)), card,
                    lambda: _common_spec(self.element_spec, dataset.element_spec), "ConcatenateDataset")


def _inner(map_func: Callable, element: Any, what: str) -> Dataset:
    inner = structure.call(map_func, element)
    if not isinstance(inner, dataset_class()):
        raise user_functions.not_a_dataset(what, inner)
    return inner


def _first_inner_spec(self: Dataset, map_func: Callable, what: str) -> Callable[[], Any]:
    def spec() -> Any:
        with user_functions.silenced():  # TF's spec runs nothing: no print shows
            for element in self._elements((0,)):
                return _inner(map_func, element, what).element_spec
        raise ValueError(f"element_spec: the dataset is empty, so the datasets of its {what} cannot be inspected")
    return spec


def flat_map(self: Dataset, map_func: Callable[..., Dataset], name: str | None = None) -> Dataset:
    """The elements of the dataset `map_func` makes of each element, one dataset after the other."""
    map_func = user_functions.trace_dataset_function(self, map_func, "flat_map")

    def elements(key: Key) -> Iterator:
        for element in self._elements(key):
            yield from iter(_inner(map_func, element, "flat_map"))
    return streamed(self, elements, UNKNOWN, _first_inner_spec(self, map_func, "flat_map"), "FlatMapDataset",
                    static=False)


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
    map_func = user_functions.trace_dataset_function(self, map_func, "interleave")
    cycle = _cycle_length(cycle_length, num_parallel_calls)
    block = 1 if block_length is None or block_length < 1 else int(block_length)

    def elements(key: Key) -> Iterator:
        if num_parallel_calls is not None and num_parallel_calls != AUTOTUNE and int(num_parallel_calls) > cycle:
            from jdist.errors import InvalidArgumentError  # TF 2.21's error and text, when iterated (observed)

            raise InvalidArgumentError(None, None, "If `cycle_length` is set to a fixed value, `num_parallel_calls` "
                                                   "must be either `tf.data.AUTOTUNE` or a value less than or equal "
                                                   f"to `cycle_length`. However, `num_parallel_calls` is "
                                                   f"{int(num_parallel_calls)} and `cycle_length` is {cycle}")
        inputs = self._elements(key)
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
                slots[index], open_ = iter(_inner(map_func, element, "interleave")), open_ + 1
            else:
                index, taken = (index + 1) % cycle, 0
    kind = "InterleaveDataset" if num_parallel_calls is None else "ParallelInterleaveDataset"  # TF's class names
    return streamed(self, elements, UNKNOWN, _first_inner_spec(self, map_func, "interleave"), kind, static=False)


def _pad_value(value: Any, dtype: np.dtype) -> Any:
    """The scalar padding a component of `dtype`: TF's TypeError (observed text) for a value of another dtype,
    such as a Python int (int32) for an int64 component."""
    if value is None:
        return b"" if dtype.kind in "OSU" else np.zeros((), dtype)
    leaf = np.asarray(structure.to_leaf(value))
    text = leaf.dtype.kind in "OSU"
    if text != (dtype.kind in "OSU") or (not text and leaf.dtype != dtype):
        raise TypeError(f"Invalid `padding_values`. `padding_values` values type <dtype: "
                        f"'{tensor_text.dtype_name(leaf.dtype)}'> does not match type <dtype: "
                        f"'{tensor_text.dtype_name(dtype)}'> of the corresponding input component.")
    if leaf.ndim:
        raise ValueError(f"Invalid `padding_values`: each must be a scalar, got shape {leaf.shape}")
    return leaf.item()


def _padded(parts: list[np.ndarray], shape: Any, value: Any) -> np.ndarray:
    """Same-rank arrays stacked after padding each to `shape` (None dims: the batch's largest)."""
    arrays = [np.asarray(p, dtype=object) if isinstance(p, bytes) or np.asarray(p).dtype.kind == "S"
              else np.asarray(p) for p in parts]  # text as bytes objects, as `structure.stack` batches it
    rank = arrays[0].ndim
    if any(a.ndim != rank for a in arrays):
        raise ValueError(f"padded_batch: the elements have different ranks {sorted({a.ndim for a in arrays})}")
    largest = [max(a.shape[d] for a in arrays) for d in range(rank)]
    target = largest if shape is None else [largest[d] if s is None or s == -1 else int(s)
                                            for d, s in enumerate(shape)]
    if len(target) != rank:
        raise ValueError(f"padded_batch: padded shape {list(target)} does not have the elements' rank {rank}")
    dtype = arrays[0].dtype
    out = np.full([len(arrays), *target], _pad_value(value, dtype), dtype=dtype)
    for i, a in enumerate(arrays):
        if any(n > t for n, t in zip(a.shape, target)):
            from jdist.errors import DataLossError

            raise DataLossError(None, None, f"Attempted to pad to a smaller size than the input element: element "
                                            f"shape {list(a.shape)}, padded shape {list(target)}.")
        if a.ndim:
            out[(i, *(slice(0, n) for n in a.shape))] = a
        else:
            out[i] = a[()]  # a 0-d object array would be stored as the array itself
    return out


def _component_values(spec_like: Any, element: Any) -> list:
    """`spec_like` (a structure matching the element's, or None / one value for all) as one entry per leaf."""
    count = len(structure.leaves(element))
    if spec_like is None:
        return [None] * count
    if isinstance(element, (tuple, dict)):
        return structure.leaves(spec_like) if isinstance(spec_like, (tuple, dict)) else [spec_like] * count
    return [spec_like]


def padded_batch(self: Dataset, batch_size: int, padded_shapes: Any = None, padding_values: Any = None,
                 drop_remainder: bool = False, name: str | None = None) -> Dataset:
    """`batch` whose components are padded to the batch's largest shape (or to `padded_shapes`, None
    dimensions the largest) with `padding_values` (0, or b"" for strings): TF 2.21's results, and its
    DataLossError for an element larger than its padded shape."""
    size = int(batch_size)
    if size < 1:
        raise ValueError(f"Dataset.padded_batch: batch_size must be positive, got {size}")

    def shape_entries(element: Any) -> list:
        if padded_shapes is None:
            return [None] * len(structure.leaves(element))
        if isinstance(element, (tuple, dict)):
            return [None if s is None else list(s) for s in _shape_leaves(padded_shapes)]
        return [list(padded_shapes)]

    def batched(rows: list) -> Any:
        first = rows[0]
        shapes, values = shape_entries(first), _component_values(padding_values, first)
        columns = zip(*(structure.leaves(row) for row in rows))
        out = iter([_padded(list(col), s, v) for col, s, v in zip(columns, shapes, values)])
        return structure.map_leaves(lambda _: next(out), first)

    def elements(key: Key) -> Iterator:
        it = self._elements(key)
        while rows := list(itertools.islice(it, size)):
            if len(rows) < size and drop_remainder:
                return
            yield batched(rows)

    if padding_values is not None:  # TF 2.21 checks their dtypes when the dataset is made (observed)
        element_spec = user_functions.input_spec_of(self)
        if element_spec is not None:
            for value, have in zip(_component_values(padding_values, element_spec), structure.leaves(element_spec)):
                _pad_value(value, np.dtype(have.dtype))
    if padded_shapes is not None:  # TF 2.21 checks them against the element spec when the dataset is made
        for padded, have in zip(shape_entries(self.element_spec), structure.leaves(self.element_spec)):
            if padded is not None and have.shape is not None and (len(padded) != len(have.shape) or any(
                    p not in (None, -1) and h is not None and int(p) < h for p, h in zip(padded, have.shape))):
                shown = tuple(None if p in (None, -1) else int(p) for p in padded)
                raise ValueError(f"The padded shape {shown} is not compatible with the shape {have.shape} of the "
                                 "corresponding input component.")
    card = self._cardinality
    if card >= 0:
        card = card // size if drop_remainder else -(-card // size)
    leading = size if drop_remainder else None

    def spec() -> Any:
        element = self.element_spec
        shapes = iter(shape_entries(element))

        def one(s: Any) -> Any:
            padded = next(shapes)
            if padded is None:
                dims = None if s.shape is None else [None] * len(s.shape)
            else:  # TF 2.21 (observed): a dimension given in padded_shapes is static, None or -1 is not
                dims = [None if d is None or int(d) == -1 else int(d) for d in padded]
            return structure.TensorSpec(None if dims is None else (leading, *dims), s.dtype)
        return structure.map_leaves(one, element)
    return streamed(self, elements, card, spec, "PaddedBatchDataset")


def _shape_leaves(padded_shapes: Any) -> list:
    """`padded_shapes` of a structured element, one shape (or None) per component."""
    if isinstance(padded_shapes, dict):
        return [s for v in padded_shapes.values() for s in _shape_leaves(v)]
    if isinstance(padded_shapes, tuple) and padded_shapes and all(
            s is None or isinstance(s, (list, tuple)) or hasattr(s, "as_list") for s in padded_shapes):
        return [s for v in padded_shapes for s in _shape_leaves(v)]
    as_list = getattr(padded_shapes, "as_list", None)
    return [None if padded_shapes is None else (as_list() if callable(as_list) else padded_shapes)]


def scan(self: Dataset, initial_state: Any, scan_func: Callable[[Any, Any], Any], name: str | None = None
         ) -> Dataset:
    """`new_state, output = scan_func(state, element)`: the outputs, the state carried along (TF's)."""
    state0 = structure.map_leaves(structure.HostTensor.of, structure.normalize(initial_state))
    user_functions.trace_fold(scan_func, state0, user_functions.input_spec_of(self))  # TF traces it now
    scan_func = user_functions.quiet(scan_func)

    def elements(key: Key) -> Iterator:
        state = structure.normalize(initial_state)
        for element in self._elements(key):
            state, output = scan_func(structure.map_leaves(structure.HostTensor.of, state),
                                      structure.map_leaves(structure.HostTensor.of, element))
            state = structure.normalize(state)
            yield structure.normalize(output)
    def spec() -> Any:
        with user_functions.silenced():  # TF's spec runs nothing: no print shows
            output = next(iter(elements((0,))), None)
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


def _common_element_spec(datasets: Sequence[Dataset]) -> Any:
    """The spec all `datasets` fit (TF 2.21's TypeError and text, observed, for another structure or dtype)."""
    specs = [d.element_spec for d in datasets]
    if not all(_specs_match(specs[0], other) for other in specs[1:]):
        listed = "\n".join(f"Dataset {i} element_spec={spec}." for i, spec in enumerate(specs))
        raise TypeError(f"Invalid `datasets`. `datasets` must have compatible element specs.\n {listed}")
    common = specs[0]
    for other in specs[1:]:
        common = _common_spec(common, other)
    return common


def _directed_cardinality(datasets: Sequence[Dataset]) -> int:
    """TF 2.21's (observed): infinite when one of the datasets is, else unknown (whatever the choices)."""
    return INFINITE if any(d._cardinality == INFINITE for d in datasets) else UNKNOWN


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


def choose_from_datasets(datasets: Sequence[Dataset], choice_dataset: Dataset, stop_on_empty_dataset: bool = True
                         ) -> Dataset:
    """Element i from `datasets[choice_i]`; an exhausted dataset ends it (or is skipped with
    `stop_on_empty_dataset=False`), as TF's."""
    datasets = list(datasets)
    choice = choice_dataset.element_spec
    if getattr(choice, "shape", None) != () or np.dtype(choice.dtype) != np.int64:  # TF 2.21's (observed)
        raise TypeError(f"Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` tensors "
                        f"but are {choice}.")
    spec = _common_element_spec(datasets)

    def elements(key: Key) -> Iterator:
        its = [d._elements(key) for d in datasets]
        for choice in choice_dataset._elements(key):
            index = int(np.asarray(choice))
            if not 0 <= index < len(its):
                from jdist.errors import InvalidArgumentError

                raise InvalidArgumentError(None, None, f"Selector index out of range: {index} >= {len(its)}")
            try:
                yield next(its[index])
            except StopIteration:
                if stop_on_empty_dataset:
                    return
    return streamed(datasets[0], elements, _directed_cardinality(datasets), lambda: spec, "DirectedInterleaveDataset")


def sample_from_datasets(datasets: Sequence[Dataset], weights: Sequence[float] | None = None,
                         seed: int | None = None, stop_on_empty_dataset: bool = False,
                         rerandomize_each_iteration: bool | None = None) -> Dataset:
    """Elements drawn from `datasets` at random with `weights` (uniform by default), until all (or, with
    `stop_on_empty_dataset=True`, one) are exhausted. numpy's draws: not TF's random sequence."""
    datasets = list(datasets)
    spec = _common_element_spec(datasets)
    p = np.full(len(datasets), 1.0 / len(datasets)) if weights is None else np.asarray(weights, np.float64)
    p = p / p.sum()
    base = seeding.op_seed(seed)

    def elements(key: Key) -> Iterator:
        rng = np.random.default_rng([base, *(key if rerandomize_each_iteration else ())])
        its = [d._elements(key) for d in datasets]
        live = p.copy()
        while live.sum() > 0:
            i = int(rng.choice(len(its), p=live / live.sum()))
            try:
                yield next(its[i])
            except StopIteration:
                if stop_on_empty_dataset:
                    return
                live[i] = 0.0
    return streamed(datasets[0], elements, _directed_cardinality(datasets), lambda: spec, "DirectedInterleaveDataset")


def counter(start: int = 0, step: int = 1, dtype: Any = np.int64, name: str | None = None) -> Dataset:
    """start, start + step, ... forever (TF's cardinality -1)."""
    kind = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    return dataset_class().range(1)._derive(
        lambda key: Generated(lambda: (kind.type(v) for v in itertools.count(start, step))), INFINITE,
        lambda: structure.TensorSpec((), kind), "ScanDataset")  # TF's: a scan of a counter


def random(seed: int | None = None, rerandomize_each_iteration: bool | None = None, name: str | None = None
           ) -> Dataset:
    """Random int64 scalars in [0, 2**32) forever, as TF 2.21's (observed); numpy's draws, not TF's numbers."""
    base = seeding.op_seed(seed)

    def make(key: Key) -> Generated:
        rng = np.random.default_rng([base, *(key if rerandomize_each_iteration else ())])
        return Generated(lambda: (np.int64(v) for v in iter(lambda: int(rng.integers(0, 1 << 32)), None)))
    return dataset_class().range(1)._derive(make, INFINITE, lambda: structure.TensorSpec((), np.dtype(np.int64)),
                                             "RandomDataset")


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
