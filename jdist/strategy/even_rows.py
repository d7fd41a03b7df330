"""`run` on a short batch whose replicas hold equally many real rows: the program on those rows alone.

A short last batch reaches the replicas padded to the full batch's shards. A replica function that
communicates (`all_gather`, `all_reduce`, `merge_call`) cannot run replica by replica on its real rows
(`padded_run`), and a result computed from the padding rows is an error. When every replica holds the same
number `c >= 1` of real rows, nothing needs padding: each split input is cut to its replicas' first `c` rows
(its real ones, which come first) and the function runs compiled over the replicas on those, as TF runs it
(TF 2.21, observed, 2 logical CPUs: `range(10).batch(4)`'s last batch gives each replica one row, and
`all_gather(x, axis=0)` in `run` returns the two real rows `[8., 9.]` on every replica). The short shape is
compiled once, as TF retraces for it. Replicas with different real row counts still need the padded program.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from jdist.strategy.padded_run import alone
from jdist.strategy.values import PerReplica, mark_split, note_row_counts, split_mark


def trimmed_leaves(leaves: Sequence[Any], kinds: Sequence[str], replicas: int,
                   count: Callable[[Any], np.ndarray]) -> list | None:
    """`leaves` with every padded split input (and its mask) cut to its `c` real rows per replica, when all
    padded inputs hold the same `c >= 1` real rows on every replica; None otherwise (or with several processes,
    or a per-replica value that has padding rows of its own)."""
    if jax.process_count() != 1:
        return None
    masks: dict[int, Any] = {}
    for leaf, kind in zip(leaves, kinds):
        if kind == "stacked" and isinstance(leaf, PerReplica) and leaf.mask is not None:
            return None
        if kind == "batch":
            mask = split_mark(leaf).mask
            if mask is not None:
                masks[id(mask)] = mask
    if not masks:
        return None
    rows = {int(c) for mask in masks.values() for c in np.asarray(count(mask)).ravel()}
    if len(rows) != 1 or min(rows) < 1:
        return None
    keep = rows.pop()
    new_masks: dict[int, Any] = {}
    for key, mask in masks.items():
        if mask.shape[0] % replicas or len(mask.addressable_shards) != replicas:
            return None  # one device per replica only
        new_masks[key] = _cut(mask, replicas, keep)
        note_row_counts(new_masks[key], [keep] * replicas)
    out = list(leaves)
    for i, (leaf, kind) in enumerate(zip(leaves, kinds)):
        if kind != "batch":
            continue
        if id(leaf) in new_masks:  # a mask passed as an input of its own
            out[i] = mark_split(new_masks[id(leaf)], new_masks[id(leaf)])
            continue
        mask = split_mark(leaf).mask
        if mask is None or leaf.shape[0] != mask.shape[0]:
            return None  # a split input not aligned with the padded rows: the padded program decides
        out[i] = mark_split(_cut(leaf, replicas, keep), new_masks[id(mask)])
    return out


def _cut(x: jax.Array, replicas: int, keep: int) -> jax.Array:
    """The first `keep` rows of each replica's block of `x` (split along dim 0), with `x`'s sharding."""
    per = x.shape[0] // replicas
    by_start = {(s.index[0].start or 0): s.data for s in x.addressable_shards}
    blocks = []
    for r in range(replicas):
        block = by_start[r * per]
        with alone(next(iter(block.devices()))):
            blocks.append(block[:keep])
    return jax.make_array_from_single_device_arrays((replicas * keep,) + x.shape[1:], x.sharding, blocks)
