"""`tf.data`'s sources that draw from other datasets or from nothing: `choose_from_datasets`,
`sample_from_datasets`, `counter`, `random`, with TF 2.21's semantics (observed). Kept apart from `combinators`
(the transformations of one dataset).
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from jdist.tfdata import seeding, structure
from jdist.tfdata._iterators import Generated
from jdist.tfdata.options import INFINITE, UNKNOWN
from jdist.tfdata.streaming import Key, common_spec, dataset_class, specs_match, streamed

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset


def _common_element_spec(datasets: Sequence[Dataset]) -> Any:
    """The spec all `datasets` fit (TF 2.21's TypeError and text, observed, for another structure or dtype)."""
    specs = [d.element_spec for d in datasets]
    if not all(specs_match(specs[0], other) for other in specs[1:]):
        listed = "\n".join(f"Dataset {i} element_spec={spec}." for i, spec in enumerate(specs))
        raise TypeError(f"Invalid `datasets`. `datasets` must have compatible element specs.\n {listed}")
    common = specs[0]
    for other in specs[1:]:
        common = common_spec(common, other)
    return common


def _directed_cardinality(datasets: Sequence[Dataset]) -> int:
    """TF 2.21's (observed): infinite when one of the datasets is, else unknown (whatever the choices)."""
    return INFINITE if any(d._cardinality == INFINITE for d in datasets) else UNKNOWN



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
