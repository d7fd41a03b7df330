"""`batch`'s error for elements of different shapes, in the text of the TF 2.21 kernel that batches them.

TF 2.21 (observed): `range(1, 4).map(lambda x: tf.range(x)).batch(2)` raises InvalidArgumentError "Cannot add
tensor to the batch: number of elements does not match. ..." (a `map` right before `batch` is fused with it,
and the fused kernel says so); any other input, e.g. a `flat_map` of `from_tensors(tf.range(x))`, a `from_generator`
or a `map` followed by `prefetch`, raises "Cannot batch tensors with different shapes in component 0. First
element had shape [1] and element 1 had shape [2]." (component: the index among the element's tensors).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from jdist.tfdata import composite_batch, structure, user_functions

if TYPE_CHECKING:
    from jdist.tfdata.dataset import Dataset

_FUSED = ("MapDataset", "ParallelMapDataset")  # TF fuses these with a following `batch`


def stacker(dataset: Dataset) -> Callable[[list], Any]:
    """`batch`'s batch function over `dataset`'s elements (`composite_batch.stacker`: TF batches by the element
    spec, read where it reads no element, a static one or one already read), raising TF's text for elements
    of different shapes."""
    stack = composite_batch.stacker(lambda: dataset._spec if dataset._spec is not None or not dataset._static else
                                    user_functions.input_spec_of(dataset))
    if dataset._kind in _FUSED:
        return stack

    def batched(elements: list) -> Any:
        try:
            return stack(elements)
        except ValueError as error:
            different = _different_shapes(elements)
            if different is None:
                raise
            raise different from error
    return batched


def _shape_text(shape: tuple) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _different_shapes(elements: list) -> Exception | None:
    """TF's error for the first component whose shape differs between `elements`, or None."""
    from jdist.errors import InvalidArgumentError

    columns = list(zip(*(structure.leaves(e) for e in elements)))
    for index, column in enumerate(columns):
        shapes = [tuple(np.shape(v)) for v in column]
        other = next((j for j, s in enumerate(shapes) if s != shapes[0]), None)
        if other is not None:
            return InvalidArgumentError(
                None, None, f"Cannot batch tensors with different shapes in component {index}. First element had "
                            f"shape {_shape_text(shapes[0])} and element {other} had shape "
                            f"{_shape_text(shapes[other])}. (pad them with padded_batch, batch them with "
                            "ragged_batch, or resize them in a map first)")
    return None
