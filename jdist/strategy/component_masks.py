"""The mask of real rows for a distributed batch handed to `run` component by component.

`for x, y in dist_dataset: strategy.run(step, args=(x, y))` (TF's most common custom loop) gives `run` the
batch's components, not the batch. Each component still carries the batch's mask (`mark_split`), so `run`
knows which rows are padding, but the replica function saw no `example_mask`: on a short last batch a
metric's `update_state` or `compute_average_loss` could not drop the padding rows, and `run` refused their
results where TF computes them on each replica's real rows. When the split arguments share one mask and no
`DistributedBatch` is given whole, `run` passes that mask along as a batch with no components, so the replica
context holds it exactly as it holds a whole batch's.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax

from jdist.strategy.distributed_batch import DistributedBatch
from jdist.strategy.values import PerReplica, split_mark


def shared_mask(args: tuple, kwargs: dict) -> Any:
    """The one mask the split components among `args` and `kwargs` carry; None when a whole
    `DistributedBatch` is given, when no component carries a mask, or when they carry several."""
    leaves = jax.tree.leaves((args, kwargs), is_leaf=lambda x: isinstance(x, (PerReplica, DistributedBatch)))
    found: dict[int, Any] = {}
    for leaf in leaves:
        if isinstance(leaf, DistributedBatch):
            return None
        note = split_mark(leaf) if isinstance(leaf, jax.Array) else None
        if note is not None and note.mask is not None and note.mask is not leaf:
            found[id(note.mask)] = note.mask
    return next(iter(found.values())) if len(found) == 1 else None


def with_component_mask(cache: dict, fn: Callable, args: tuple, kwargs: dict) -> tuple[Callable, tuple]:
    """`fn` and `args` as `run` compiles them: with the components' shared mask appended as an empty
    `DistributedBatch` that `fn`'s wrapper (one per `fn`, kept in `cache`) drops again."""
    mask = shared_mask(args, kwargs)
    if mask is None:
        return fn, args
    key = ("component mask", fn)
    if key not in cache:
        @functools.wraps(fn)
        def without_mask(*a: Any, **k: Any) -> Any:
            return fn(*a[:-1], **k)  # the last argument: the empty batch, unwrapped to ()

        cache[key] = without_mask
    return cache[key], (*args, DistributedBatch((), mask))
