"""Host-side batching for the Trainer: fixed-shape global batches with a mask.

Every global batch is padded to one size (a multiple of the replica count), the
padding marked by `mask == 0`, so one compiled step serves every batch and no
example is dropped or counted twice. `steps_per_execution` groups k batches into
one stacked `(k, batch, ...)` block; a short final block is filled with fully
masked steps, which the compiled loop skips.

This is the Trainer's private input path; a distributed dataset that yields
padded, masked global batches can replace it.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Iterator

import jax
import numpy as np


@dataclasses.dataclass
class HostBatch:
    """One padded global batch on the host: `x`, `y` pytrees of numpy arrays and the mask."""

    x: Any
    y: Any
    mask: np.ndarray

    @property
    def real(self) -> int:
        return int(self.mask.sum())


def round_up(n: int, multiple: int) -> int:
    return multiple * math.ceil(n / multiple)


def leading_size(tree: Any, what: str) -> int:
    """The common leading dimension of a pytree of arrays; clear errors otherwise."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError(f"{what} is empty: pass arrays with a leading batch dimension.")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in leaves}
    if None in sizes:
        raise ValueError(f"Every array in {what} needs a leading batch dimension (rank >= 1).")
    if len(sizes) > 1:
        raise ValueError(f"The arrays in {what} disagree on their leading dimension: {sorted(sizes)}.")
    return sizes.pop()


def pad_batch(x: Any, y: Any, size: int) -> HostBatch:
    """Pads a batch of `n <= size` examples to `size` by repeating its last example; mask marks real ones.

    Repeating a real example (rather than zeros) keeps every padded row a valid input,
    so no NaN can come out of a padding row into the masked sums.
    """
    n = leading_size((x, y) if y is not None else x, "a batch")
    if n > size:
        raise ValueError(
            f"A batch of {n} examples is larger than the batch size {size} this call compiled for; "
            f"pass batch_size={n} (or larger), or make every batch at most {size} examples."
        )
    if n == 0:
        raise ValueError("Got an empty batch (0 examples); drop it from the input.")
    index = np.minimum(np.arange(size), n - 1)
    take = lambda a: np.asarray(a)[index]  # noqa: E731
    mask = (np.arange(size) < n).astype(np.float32)
    return HostBatch(jax.tree.map(take, x), None if y is None else jax.tree.map(take, y), mask)


def pad_rows(batch: HostBatch, size: int) -> HostBatch:
    """`batch` (already padded) extended to `size` rows by repeating its last row, masked out."""
    rows = len(batch.mask)
    if size == rows:
        return batch
    index = np.minimum(np.arange(size), rows - 1)
    take = lambda a: np.asarray(a)[index]  # noqa: E731
    mask = np.where(np.arange(size) < rows, batch.mask[index], 0).astype(np.float32)
    return HostBatch(jax.tree.map(take, batch.x), None if batch.y is None else jax.tree.map(take, batch.y), mask)


def array_batches(x: Any, y: Any, batch_size: int, padded_size: int, *, order: np.ndarray | None = None,
                  max_steps: int | None = None) -> Iterator[HostBatch]:
    """Global batches of `batch_size` examples (in `order`), each padded to `padded_size`."""
    n = leading_size(x, "x")
    order = np.arange(n) if order is None else order
    steps = math.ceil(n / batch_size) if max_steps is None else max_steps
    for step in range(steps):
        idx = order[step * batch_size:(step + 1) * batch_size]
        pick = lambda a: np.asarray(a)[idx]  # noqa: E731
        yield pad_batch(jax.tree.map(pick, x), None if y is None else jax.tree.map(pick, y), padded_size)


def split_item(item: Any) -> tuple[Any, Any]:
    """Keras's rule for one element of an input iterable: `(x, y)`, `(x,)` or `x`."""
    if isinstance(item, (tuple, list)):
        if len(item) == 1:
            return item[0], None
        if len(item) == 2:
            return item[0], item[1]
        raise ValueError(
            f"An input batch must be x, (x,) or (x, y); got a {type(item).__name__} of {len(item)} "
            "elements (sample weights are not supported)."
        )
    return item, None


def iterable_batches(batches: Iterable[Any], padded_size: int, need_y: bool = False) -> Iterator[HostBatch]:
    for item in batches:
        x, y = split_item(item)
        if need_y and y is None:
            raise ValueError("fit() and evaluate() need (x, y) batches; got a batch without targets.")
        yield pad_batch(x, y, padded_size)


def first_batch_size(item: Any) -> int:
    x, y = split_item(item)
    return leading_size(x if y is None else (x, y), "the first batch")


def group(batches: Iterator[HostBatch], k: int) -> Iterator[list[HostBatch]]:
    """Lists of up to `k` consecutive batches."""
    block: list[HostBatch] = []
    for batch in batches:
        block.append(batch)
        if len(block) == k:
            yield block
            block = []
    if block:
        yield block


def stack_block(block: list[HostBatch], k: int) -> HostBatch:
    """`(k, batch, ...)` arrays for one execution; missing steps repeat the last batch, fully masked."""
    filler = dataclasses.replace(block[-1], mask=np.zeros_like(block[-1].mask))
    steps = block + [filler] * (k - len(block))
    stack = lambda *leaves: np.stack(leaves)  # noqa: E731
    return HostBatch(
        jax.tree.map(stack, *[b.x for b in steps]),
        None if steps[0].y is None else jax.tree.map(stack, *[b.y for b in steps]),
        np.stack([b.mask for b in steps]),
    )
