"""The base of `tf.data`'s streamed transformations: the `Dataset` class they build on, a dataset whose passes
are generators over the input's elements (`streamed`), and the element-spec checks of transformations that
join datasets (`specs_match`, `common_spec`: TF 2.21's, observed).

Kept apart so that `combinators`, `padding`, `sources` and `grouping` share it without importing each other.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from jdist.tfdata import composite_batch, structure
from jdist.tfdata._iterators import Generated

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

Key = tuple


_DATASET: list[type] = []  # the class `install` gave these methods to (tf.data's Dataset)


def dataset_class() -> Any:
    """tf.data's `Dataset` class (set by `combinators.install`)."""
    return _DATASET[0]


def streamed(base: Dataset, elements: Callable[[Key], Iterator], cardinality: int, spec: Callable[[], Any],
             kind: str, static: bool | None = None) -> Dataset:
    """`static=False` where the spec is read off a first element (see `Dataset._static`)."""
    return base._derive(lambda key: Generated(lambda: elements(key)), cardinality, spec, kind, static=static)


def specs_match(a: Any, b: Any) -> bool:
    """Whether elements of specs `a` and `b` have one structure and the same dtypes."""
    la, lb = structure.leaves(a), structure.leaves(b)
    return (len(la) == len(lb) and all(np.dtype(x.dtype) == np.dtype(y.dtype) for x, y in zip(la, lb))
            and repr(structure.map_leaves(lambda _: 0, a)) == repr(structure.map_leaves(lambda _: 0, b)))


def common_spec(a: Any, b: Any) -> Any:
    """The spec both elements fit (TF 2.21's, observed: shapes (3,) and (4,) give (None,), ranks that differ
    an unknown shape)."""
    others = iter(structure.leaves(b))

    def merged(x: Any) -> Any:
        y = next(others)
        if composite_batch.has_composite_spec(x):  # ragged, sparse: merged by their own spec
            return composite_batch.merged((x, y))
        if x.shape is None or y.shape is None or len(x.shape) != len(y.shape):
            return structure.TensorSpec(None, x.dtype)
        return structure.TensorSpec(tuple(p if p == q else None for p, q in zip(x.shape, y.shape)), x.dtype)
    return structure.map_leaves(merged, a)
