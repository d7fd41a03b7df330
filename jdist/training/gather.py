"""One all-gather for all the parameters a weight-update-sharded step gathers back.

After weight-update sharding each replica holds the new values of its slice of
every split parameter, and the stored layout wants them whole again. Left to
XLA that is one all-gather per parameter: XLA:CPU does not combine all-gathers
(it does combine all-reduces), and on 8 devices sharing 2 cores each collective
is a rendezvous of all device threads, so a Transformer with 15 split leaves
paid 15 rendezvous per step. `gather_split` packs every replica's slices of
one dtype into one buffer, all-gathers it once, and cuts the whole arrays back
out: the same bytes moved, bitwise the same values, one collective per bucket.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from jdist.typing import PyTree

# Leaves are packed into buckets of at most this many bytes per replica, so the packing
# buffers stay small next to the model (a leaf larger than this gets a bucket of its own).
BUCKET_BYTES = 32 << 20


def _entries(spec: P, rank: int) -> list:
    return list(spec) + [None] * (rank - len(spec))


def _gathered_dim(split: Any, stored: Any, shape: tuple, axis: str) -> int | None:
    """The dimension `split` adds the data `axis` on, where that is its only difference from `stored`."""
    if not (isinstance(split, NamedSharding) and isinstance(stored, NamedSharding)) or split.mesh != stored.mesh:
        return None
    if split.memory_kind != stored.memory_kind:
        return None
    a, b = _entries(split.spec, len(shape)), _entries(stored.spec, len(shape))
    differ = [d for d in range(len(shape)) if a[d] != b[d]]
    if len(differ) != 1 or a[differ[0]] != axis or b[differ[0]] is not None:
        return None
    return differ[0]


def gather_split(tree: PyTree, split: Any, stored: Any, mesh: Any, axis: str) -> PyTree:
    """`tree` (laid out as `split`) laid out as `stored`, where the two differ only by the data `axis`
    on one dimension, with one all-gather per dtype bucket. Other leaves are returned as they are
    (the step's output shardings place them)."""
    leaves, treedef = jax.tree.flatten(tree)
    split_leaves = treedef.flatten_up_to(split)
    stored_leaves = treedef.flatten_up_to(stored)
    out = list(leaves)
    buckets: dict[Any, list[list[tuple[int, int]]]] = {}  # dtype -> groups of (leaf index, gathered dim)
    sizes: dict[int, int] = {}
    for i, (leaf, s, t) in enumerate(zip(leaves, split_leaves, stored_leaves)):
        dim = _gathered_dim(s, t, jnp.shape(leaf), axis)
        if dim is None:
            continue
        dtype = jnp.result_type(leaf)
        per_replica = leaf.size * dtype.itemsize // int(mesh.shape[axis])
        groups = buckets.setdefault(dtype, [[]])
        if groups[-1] and sizes[id(groups[-1])] + per_replica > BUCKET_BYTES:
            groups.append([])
        groups[-1].append((i, dim))
        sizes[id(groups[-1])] = sizes.get(id(groups[-1]), 0) + per_replica
    for groups in buckets.values():
        for group in groups:
            gathered = _gather_bucket([leaves[i] for i, _ in group], [split_leaves[i] for i, _ in group],
                                      [stored_leaves[i] for i, _ in group], [d for _, d in group], mesh, axis)
            for (i, _), value in zip(group, gathered):
                out[i] = value
    return jax.tree.unflatten(treedef, out)


def _gather_bucket(leaves: list, split: list, stored: list, dims: list[int], mesh: Any, axis: str) -> list:
    n = int(mesh.shape[axis])

    def body(*local):
        packed = jnp.concatenate([x.reshape(-1) for x in local])
        everyone = jax.lax.all_gather(packed, axis)  # (n, packed): replica j's slices in row j
        whole, offset = [], 0
        for x, dim in zip(local, dims):
            piece = everyone[:, offset:offset + x.size].reshape((n,) + x.shape)
            piece = jnp.moveaxis(piece, 0, dim)  # replica j's slice is the j-th block along `dim`
            whole.append(piece.reshape(x.shape[:dim] + (n * x.shape[dim],) + x.shape[dim + 1:]))
            offset += x.size
        return tuple(whole)

    gathered = jax.shard_map(body, mesh=mesh, in_specs=tuple(s.spec for s in split),
                             out_specs=tuple(t.spec for t in stored), check_vma=False)(*leaves)
    return list(gathered)
