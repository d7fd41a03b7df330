"""`DistributedBatch`: one step's global batch on the mesh, with the mask of its real examples.

Replicas get equal, padded shards (JAX needs equal shapes), so every batch carries a
boolean `mask` (`True` for real examples). The pieces of jdist that take batches read
it: `strategy.run` hands the replica function the plain `value` and puts the
replica's mask in its `ReplicaContext` (`compute_average_loss` applies it), the
global-view steps mask the mean loss, and `experimental_local_results` returns only
the real examples of each replica, as TensorFlow's would. Where a batch sits in
jdist's value model (per-replica, mask carried by its leaves): see `jdist.strategy.values`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jdist.strategy.values import mark_split, note_row_counts, replica_shards

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


class DistributedBatch:
    """`value`: the dataset's element (any pytree), each leaf a global array whose dim 0 is
    split over the data axis; `mask`: bool `(rows,)`, False for padding rows."""

    __slots__ = ("value", "mask")

    def __init__(self, value: Any, mask: Any, host_mask: Any = None):
        self.value = value
        self.mask = mask
        # Its leaves stay per-replica values with this mask wherever they are passed alone.
        mark_split(value, mask)
        mark_split(mask)
        if host_mask is not None:  # the mask as built on the host: its replicas' real rows, known without a sync
            _note_host_counts(mask, np.asarray(host_mask))

    @property
    def on_host(self) -> bool:
        """True when the batch is still numpy in host memory (`experimental_fetch_to_device=False`)."""
        return not isinstance(self.mask, jax.Array)

    def __iter__(self):
        raise TypeError(
            "A DistributedBatch keeps its examples together with the mask of real examples; unpacking it "
            "would drop the mask, and padding rows would be treated as data. Pass the whole batch "
            "(strategy.run(fn, args=(batch,)) hands fn the plain element; make_train_step takes it as is), "
            "or take batch.value and batch.mask explicitly."
        )

    def __repr__(self) -> str:
        shapes = jax.tree.map(lambda x: tuple(np.shape(x)), self.value)
        return f"DistributedBatch(value={shapes}, mask={tuple(np.shape(self.mask))})"


jax.tree_util.register_pytree_node(
    DistributedBatch,
    lambda b: ((b.value, b.mask), None),
    lambda _, children: DistributedBatch(*children),
)


def _note_host_counts(mask: Any, host_mask: np.ndarray) -> None:
    """Records each replica's real rows of a placed `mask` from its host copy, when this
    process holds all of it (with several processes each sees only its own rows)."""
    if isinstance(mask, jax.Array) and mask.is_fully_addressable and host_mask.shape == mask.shape:
        replicas = len({s.index[0].start or 0 for s in mask.addressable_shards})
        note_row_counts(mask, np.count_nonzero(host_mask.reshape(replicas, -1), axis=1))


def is_distributed_batch(x: Any) -> bool:
    return isinstance(x, DistributedBatch)


def unwrap_batches(tree: Any) -> tuple[Any, list]:
    """Replaces each `DistributedBatch` in `tree` by its value; returns the masks found, in order."""
    masks: list = []

    def unwrap(x):
        if isinstance(x, DistributedBatch):
            masks.append(x.mask)
            return x.value
        return x

    return jax.tree.map(unwrap, tree, is_leaf=is_distributed_batch), masks


def split_batch(batch: Any) -> tuple[Any, Any]:
    """(inputs, mask) of a batch: a `DistributedBatch`'s value and mask, a dict's `"mask"`
    entry (the dict itself stays the input), else `(batch, None)`."""
    if isinstance(batch, DistributedBatch):
        return batch.value, batch.mask
    if isinstance(batch, dict) and "mask" in batch:
        return batch, batch["mask"]
    return batch, None


def place_host_batches(strategy: Strategy, tree: Any) -> Any:
    """Moves batches still in host memory onto `strategy`'s mesh, split over its data axis."""
    leaves, treedef = jax.tree.flatten(tree, is_leaf=is_distributed_batch)
    if not any(isinstance(x, DistributedBatch) and x.on_host for x in leaves):
        return tree
    sharding = strategy.data_sharding()

    def place(x):
        if isinstance(x, DistributedBatch) and x.on_host:
            value, mask = jax.tree.map(lambda a: jax.make_array_from_process_local_data(sharding, np.asarray(a)),
                                       (x.value, x.mask))
            return DistributedBatch(value, mask, host_mask=x.mask)
        return x

    return jax.tree.unflatten(treedef, [place(x) for x in leaves])


def local_examples(batch: DistributedBatch) -> tuple:
    """The real examples each of this process's replicas holds, in replica order.

    Padding trails the real rows of every replica's shard, so each replica's value is
    its shard cut to its mask count; a replica without data gets arrays with 0 rows.
    """
    mask_parts = replica_shards(batch.mask)
    counts = [int(np.count_nonzero(np.asarray(m))) for m in mask_parts]
    leaves, treedef = jax.tree.flatten(batch.value)
    per_leaf = [replica_shards(leaf) for leaf in leaves]
    return tuple(
        jax.tree.unflatten(treedef, [parts[i][:count] for parts in per_leaf])
        for i, count in enumerate(counts)
    )
