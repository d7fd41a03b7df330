"""Slicing, batching and unbatching elements that hold composite tensors (ragged, sparse), by their specs.

TF 2.21 (observed) decides from the element spec, not from one element's value: `from_tensor_slices` of a
RaggedTensor of ragged rank 1 gives dense rows whose spec is still `RaggedTensorSpec(TensorShape([None]), ...,
0, ...)`, and `batch` of those gives RaggedTensors even where the rows happen to have one length. So these
functions walk an element together with its spec; components of a `TensorSpec` keep `structure`'s rules.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from jdist.input.tensor_shape import TensorShape
from jdist.tfdata import composites, structure


def has_composite(element: Any) -> bool:
    """Whether any component of `element` is a composite tensor."""
    return any(composites.is_composite(x) for x in structure.leaves(element))


def has_composite_spec(spec: Any) -> bool:
    """Whether any component of the element spec `spec` is a composite tensor's spec."""
    return any(composites.kind_of_spec(s) is not None for s in structure.leaves(spec))


def slices(components: Any) -> tuple[Any, int, Any]:
    """`from_tensor_slices` of a structure holding composite tensors: (the rows of each component, random
    access by index; the number of rows; the row element spec)."""
    def count(x: Any) -> int:
        kind = composites.kind_of_value(x)
        shape = kind.spec_of(x).shape if kind is not None else x.shape
        if not len(shape):
            raise ValueError("from_tensor_slices: every component needs at least one dimension to slice (got a "
                             "scalar); use Dataset.from_tensors for a single element")
        return int(shape[0])
    sizes = [count(x) for x in structure.leaves(components)]
    if len(set(sizes)) != 1:
        raise ValueError(f"from_tensor_slices: every component must have the same size in dimension 0; got {sizes}")

    def rows(x: Any) -> Any:
        kind = composites.kind_of_value(x)
        return kind.rows(x) if kind is not None else structure.read_only(x)
    return structure.map_leaves(rows, components), sizes[0], unbatched_spec(structure.spec_of(components))


def batched_spec(spec: Any, size: int | None) -> Any:
    """`batch`'s element spec: `size` (None: not static) rows of `spec`."""
    def one(s: Any) -> Any:
        kind = composites.kind_of_spec(s)
        return kind.batch_spec(s, size) if kind is not None else structure.batched_spec(s, size)
    return structure.map_leaves(one, spec)


def unbatched_spec(spec: Any) -> Any:
    """`unbatch`'s element spec: one row of `spec`."""
    def one(s: Any) -> Any:
        kind = composites.kind_of_spec(s)
        return kind.row_spec(s) if kind is not None else structure.unbatched_spec(s)
    return structure.map_leaves(one, spec)


def stacker(spec: Callable[[], Any] | None) -> Callable[[list], Any]:
    """`batch`'s batch function: `structure.stack`, or, where the element spec (`spec()`, read when a batch
    holds composites or `spec` is given) holds composite specs, each such component stacked by its kind."""
    read: list = []  # the spec, read once (None: it holds no composite spec)

    def stack(elements: list) -> Any:
        if not read:
            known = spec() if spec is not None else None
            read.append(known if known is not None and has_composite_spec(known) else None)
        known = read[0]
        if known is None:
            if not has_composite(elements[0]):
                return structure.stack(elements)
            known = structure.spec_of(elements[0])
        return _stack(elements, known)
    return stack


def _stack(elements: list, spec: Any) -> Any:
    if isinstance(spec, dict):
        return {k: _stack([e[k] for e in elements], spec[k]) for k in spec}
    if isinstance(spec, tuple):
        items = [_stack([e[i] for e in elements], s) for i, s in enumerate(spec)]
        return type(spec)(*items) if hasattr(spec, "_fields") else tuple(items)
    kind = composites.kind_of_spec(spec)
    return kind.stack(elements, spec) if kind is not None else structure.stack(elements)


def unstack(batch: Any) -> list:
    """The rows of a batched element (`unbatch`), composite components cut by their kind."""
    if not has_composite(batch):
        return structure.unstack(batch)
    rows: list = []
    for x in structure.leaves(batch):
        kind = composites.kind_of_value(x)
        rows.append(kind.rows(x) if kind is not None else list(x))
    sizes = sorted({len(r) for r in rows})
    if len(sizes) != 1:
        raise ValueError(f"unbatch: every component needs the same leading dimension; got {sizes}")
    columns = iter(zip(*rows)) if rows else iter(())
    return [_rebuild(batch, iter(row)) for row in columns]


def _rebuild(template: Any, values: Any) -> Any:
    return structure.map_leaves(lambda _: next(values), template)


def ragged_rows(spec: Any) -> Any:
    """`ragged_batch`'s row spec (TF 2.21, observed): a component whose shape has an unknown dimension is
    batched ragged (spec `RaggedTensorSpec(TensorShape([None, None]), tf.int64, 1, tf.int64)`), the rest dense."""
    def one(s: Any) -> Any:
        if composites.kind_of_spec(s) is not None:
            return s
        for kind in composites.registered():
            ragged = kind.dense_row_spec(s)
            if ragged is not None:
                return ragged
        return s
    return structure.map_leaves(one, spec)


def merged(column: tuple) -> Any:
    """The composite spec that all of `column` (one component's specs, over several elements) fit: a dimension
    that differs is None (a map's outputs: `RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, ...)`)."""
    first = copy.copy(column[0])
    ranks = {None if c.shape.rank is None else len(c.shape) for c in column}
    if ranks == {len(first.shape)} and first.shape.rank is not None:
        first.shape = TensorShape([d[0] if len(set(d)) == 1 else None
                                   for d in zip(*(c.shape.as_list() for c in column))])
    else:
        first.shape = TensorShape(None)
    return first


def leading_unknown(spec: Any) -> Any:
    """`spec` with each component's leading dimension unknown (a map over batches: the last batch is short)."""
    def one(s: Any) -> Any:
        if composites.kind_of_spec(s) is not None:
            if s.shape.rank:
                s = copy.copy(s)
                s.shape = TensorShape([None, *s.shape.as_list()[1:]])
            return s
        return structure.TensorSpec((None, *s.shape[1:]), s.dtype) if s.shape else s
    return structure.map_leaves(one, spec)


def conform(spec: Any, value: Any, mismatch: Callable[[], Exception], error: Callable[[str], Exception]) -> Any:
    """A generator's `value` for the composite `spec` of its `output_signature`: kept where its own spec fits,
    else TF 2.21's errors (observed): another kind, "did not match the expected structure" (`mismatch()`); a
    dense tensor or a spec that does not fit, "yielded an element of <its spec> where an element of <spec> was
    expected"."""
    kind, found = composites.kind_of_spec(spec), composites.kind_of_value(value)
    if found is None:
        try:
            got = structure.spec_of(structure.to_leaf(value))
        except (TypeError, ValueError):
            raise mismatch() from None
    elif found is not kind:
        raise mismatch()
    else:
        got = found.spec_of(value)
        if spec.is_compatible_with(got):
            return value
    raise error(f"`generator` yielded an element of {got} where an element of {spec} was expected.")


def dense_only(spec: Any, op: str) -> None:
    """TF 2.21's TypeError (observed) for `padded_batch` of elements with a ragged or sparse component."""
    for s in structure.leaves(spec):
        if composites.kind_of_spec(s) is not None:
            raise TypeError(f"`{op}` is only supported for datasets that produce tensor elements but type spec of "
                            f"elements in the input dataset is not a subclass of TensorSpec: `{s}`. (Batch them "
                            "with `batch`, or convert them to dense tensors in a `map` first.)")
