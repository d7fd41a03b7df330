"""Host-side batching for the Trainer: fixed-shape global batches with a mask.

Every global batch is padded to one size (a multiple of the replica count), the
padding marked by `mask == 0`, so one compiled step serves every batch and no
example is dropped or counted twice. `steps_per_execution` groups k batches into
one stacked `(k, batch, ...)` block; a short final block is filled with fully
masked steps, which the compiled loop skips.

Each batch is a `jdist.strategy.batch.Batch` of Keras's `(x, y)` pair, its mask and optional
per-example `weight`s (Keras's `sample_weight`). Batches of a distributed dataset
(`strategy.experimental_distribute_dataset`) are already padded and on the devices: they
become `Batch`es as they are.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Iterable, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from jdist.layout import itemsize
from jdist.strategy.batch import Batch, leading_size, place_rows
from jdist.strategy.distributed_batch import DistributedBatch


def from_distributed(batch: DistributedBatch, sharding: NamedSharding) -> Batch:
    """A `jdist.DistributedBatch` whose element is `x`, `(x, y)` or `(x, y, sample_weight)`."""
    x, y, weight = split_item(batch.value)
    mask = batch.mask
    if batch.on_host:  # experimental_fetch_to_device=False: each process's share placed here
        x, y, weight, mask = place_rows((x, y, weight, np.asarray(mask)), sharding, rows="local")
    return Batch((x, y), mask, weight)


def round_up(n: int, multiple: int) -> int:
    return multiple * math.ceil(n / multiple)


def pad_batch(x: Any, y: Any, size: int, weight: Any = None) -> Batch:
    """Pads a batch of `n <= size` examples to `size` by repeating its last example; mask marks real ones.

    Repeating a real example (rather than zeros) keeps every padded row a valid input,
    so no NaN can come out of a padding row into the masked sums.
    """
    n = leading_size({"x": x, "y": y, "sample_weight": weight}, "batch")
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
    if weight is not None:
        weight = np.asarray(weight, np.float32)
        if weight.ndim != 1:
            raise ValueError(f"sample_weight must hold one weight per example, shape ({n},); got {weight.shape}.")
    return Batch((jax.tree.map(take, x), jax.tree.map(take, y)), mask, None if weight is None else take(weight))


def pad_rows(batch: Batch, size: int) -> Batch:
    """`batch` (already padded) extended to `size` rows by repeating its last row, masked out."""
    rows = len(batch.mask)
    if size == rows:
        return batch
    index = np.minimum(np.arange(size), rows - 1)
    take = lambda a: np.asarray(a)[index]  # noqa: E731
    mask = np.where(np.arange(size) < rows, batch.mask[index], 0).astype(np.float32)
    return Batch(jax.tree.map(take, batch.examples), mask, None if batch.weight is None else take(batch.weight))


# With one step per execution, full batches are still cut from the arrays a few at a time (one gather,
# one label check per run, `TrainerChecks.batches`), up to this many batches or this many bytes.
GATHER_BATCHES = 16
GATHER_BYTES = 32 << 20


def batches_per_gather(arrays: Any, batch_size: int) -> int:
    """How many batches of `batch_size` rows of `arrays` (a pytree, one example per row) to gather at once."""
    row = sum(itemsize(a.dtype if hasattr(a, "dtype") else np.result_type(a)) * math.prod(np.shape(a)[1:])
              for a in jax.tree.leaves(arrays))
    return max(1, min(GATHER_BATCHES, GATHER_BYTES // max(1, row * batch_size)))


def array_batches(x: Any, y: Any, batch_size: int, padded_size: int, *, order: np.ndarray | None = None,
                  max_steps: int | None = None, weight: Any = None, steps_per_block: int = 1) -> Iterator[Batch]:
    """Global batches of `batch_size` examples (in `order`), each padded to `padded_size`.

    Runs of up to `steps_per_block` full batches (no padding) are taken in one gather (a view
    of the arrays when not shuffled) as a stacked block whose rows are the batches, so a block
    reaches the devices without a copy per batch and another to stack them."""
    n = leading_size(x, "x")
    steps = math.ceil(n / batch_size) if max_steps is None else max_steps
    # Weights that are not one per example take the per-batch path, which names the problem.
    full = n // batch_size if padded_size == batch_size and (weight is None or np.ndim(weight) == 1) else 0
    index = np.arange(n) if order is None else order
    step = 0
    while step < steps:
        count = min(steps_per_block, steps - step, full - step)
        if count > 0:
            yield from _full_batches(x, y, weight, order, step * batch_size, count, batch_size)
            step += count
            continue
        idx = index[step * batch_size:(step + 1) * batch_size]
        pick = lambda a, idx=idx: np.asarray(a)[idx]  # noqa: E731
        yield pad_batch(jax.tree.map(pick, x), jax.tree.map(pick, y), padded_size,
                        None if weight is None else pick(weight))
        step += 1


def _full_batches(x: Any, y: Any, weight: Any, order: np.ndarray | None, start: int, count: int,
                  batch_size: int) -> Iterator[Batch]:
    """`count` full batches from row `start` (of `order`), as rows of one `(count, batch, ...)` block.

    The block is a copy of its own, never a view of the caller's arrays: on CPU, `device_put` of
    an aligned host array may alias it instead of copying."""
    end = start + count * batch_size

    def take(a):
        part = np.asarray(a)[start:end].copy() if order is None else np.asarray(a)[order[start:end]]
        return part.reshape((count, batch_size) + part.shape[1:])

    block = Batch((jax.tree.map(take, x), jax.tree.map(take, y)), np.ones((count, batch_size), np.float32),
                  None if weight is None else np.asarray(take(weight), np.float32))
    for i in range(count):
        row = lambda a, i=i: a[i]  # noqa: E731
        yield Batch(jax.tree.map(row, block.examples), block.mask[i],
                    None if block.weight is None else block.weight[i], row_of=(block, i))


def split_item(item: Any) -> tuple[Any, Any, Any]:
    """Keras's rule for one element of an input iterable: `(x, y, sample_weight)`, `(x, y)`, `(x,)`
    or `x`; returns `(x, y, sample_weight)` with None for what is missing."""
    if isinstance(item, (tuple, list)):
        if 1 <= len(item) <= 3:
            return tuple(item) + (None,) * (3 - len(item))
        raise ValueError(
            f"An input batch must be x, (x,), (x, y) or (x, y, sample_weight); got a {type(item).__name__} "
            f"of {len(item)} elements."
        )
    return item, None, None


def iterable_batches(batches: Iterable[Any], padded_size: int, need_y: bool = False) -> Iterator[Batch]:
    for item in batches:
        x, y, weight = split_item(item)
        if need_y and y is None:
            raise ValueError("fit() and evaluate() need (x, y) batches; got a batch without targets.")
        yield pad_batch(x, y, padded_size, weight)


def first_batch_size(item: Any) -> int:
    return leading_size(split_item(item), "the first batch")


def group(batches: Iterator[Batch], k: int) -> Iterator[list[Batch]]:
    """Lists of up to `k` consecutive batches."""
    block: list[Batch] = []
    for batch in batches:
        block.append(batch)
        if len(block) == k:
            yield block
            block = []
    if block:
        yield block


def stack_block(block: list[Batch], k: int) -> Batch:
    """`(k, batch, ...)` arrays for one execution; missing steps repeat the last batch, fully masked."""
    whole = block[0].row_of[0] if block[0].row_of is not None else None
    if (whole is not None and len(block) == k == len(whole.mask)
            and all(b.row_of is not None and b.row_of[0] is whole and b.row_of[1] == i for i, b in enumerate(block))):
        return whole  # the batches are the rows of one block taken together: no copy
    filler = block[-1].replace(mask=np.zeros_like(block[-1].mask), row_of=None)
    steps = block + [filler] * (k - len(block))
    return jax.tree.map(lambda *leaves: np.stack(leaves), *steps)


def stack_device_block(block: list[Batch], k: int, sharding: NamedSharding) -> Batch:
    """`stack_block` for batches already on the devices (one compiled stack per block shape)."""
    filler = block[-1].replace(mask=jnp.zeros_like(block[-1].mask))
    return _stacker(sharding)(block + [filler] * (k - len(block)))


@functools.cache
def _stacker(sharding: NamedSharding):
    return jax.jit(lambda steps: jax.tree.map(lambda *leaves: jnp.stack(leaves), *steps), out_shardings=sharding)


# ------------------------------------------------------------- Keras's fit arguments
def class_weights_for(y: Any, class_weight: Mapping[int, float]) -> np.ndarray:
    """Keras's `class_weight`: each example weighted by its class's weight (1 for classes not
    listed); `y` holds integer labels, `(n, 1)` labels or one-hot rows."""
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = labels.argmax(axis=-1) if labels.shape[-1] != 1 else labels.squeeze(-1)
    labels = np.round(labels).astype(np.int64)
    lookup = {int(k): float(v) for k, v in class_weight.items()}
    return np.array([lookup.get(int(c), 1.0) for c in labels.reshape(-1)], np.float32)


def with_class_weights(items: Iterable[Any], class_weight: Mapping[int, float]) -> Iterator[tuple]:
    """`(x, y)` batches of an iterable as `(x, y, class weights of y)`."""
    for item in items:
        x, y, weight = split_item(item)
        if weight is not None:
            raise ValueError("You cannot `class_weight` and `sample_weight` at the same time: the batches "
                             "already carry sample weights.")
        if y is None:
            raise ValueError("class_weight needs (x, y) batches: got a batch without targets.")
        yield x, y, class_weights_for(y, class_weight)


def train_validation_split(arrays: Any, fraction: float) -> tuple[Any, Any]:
    """Keras's `validation_split`: the last `fraction` of the examples (before any shuffling)
    become the validation arrays."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"validation_split must be in [0, 1), got {fraction}.")
    n = leading_size(arrays, "the training arrays")
    split_at = int(math.floor(n * (1.0 - fraction)))
    if split_at in (0, n):
        raise ValueError(
            f"Training data contains {n} samples, which is not sufficient to split it into a validation and "
            f"training set as specified by `validation_split={fraction}`. Either provide more data, or a "
            "different value for the `validation_split` argument.")
    head = jax.tree.map(lambda a: np.asarray(a)[:split_at], arrays)
    tail = jax.tree.map(lambda a: np.asarray(a)[split_at:], arrays)
    return head, tail
