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
import jax.core
import numpy as np

from jdist.strategy.batch import Batch, place_rows
from jdist.strategy.batch_components import as_components
from jdist.strategy.values import PerReplica, mark_split, note_row_counts, outside_mesh, replica_shards
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


class DistributedBatch(Batch):
    """A `Batch` whose rows are split over the replicas: `value` (its `examples`) is the dataset's
    element (any pytree), each leaf a global array whose dim 0 is split over the data axis; `mask`:
    bool `(rows,)`, False for padding rows."""

    def __init__(self, value: Any, mask: jax.Array | np.ndarray, host_mask: np.ndarray | None = None,
                 shown_as: type[PerReplica] | None = None):
        super().__init__(value, mask)
        self._shown_as = shown_as or PerReplica  # the PerReplica class its leaves print as (not in the pytree)
        # Its leaves stay per-replica values with this mask wherever they are passed alone.
        mark_split(value, mask)
        mark_split(mask)
        if host_mask is not None:  # the mask as built on the host: its replicas' real rows, known without a sync
            _note_host_counts(mask, np.asarray(host_mask))

    @property
    def value(self) -> PyTree:
        """The dataset's element (TF's distributed value), its leaves split over the replicas."""
        return self.examples

    @property
    def values(self) -> tuple:
        """TF's `PerReplica.values` of an element that is one tensor: each replica's real examples, in replica
        order. (TF's element of several components is their tuple or dict, which has no `values`.)"""
        leaves = jax.tree.leaves(self.value)
        if len(leaves) == 1 and leaves[0] is self.value:
            with outside_mesh(self):
                return local_examples(self)
        if isinstance(self.value, dict):  # a dict element: `batch.values()` is the dict's
            return self.value.values  # pyright: ignore[reportReturnType]
        raise AttributeError(f"'{type(self.value).__name__}' object has no attribute 'values': this distributed "
                             "element has several components; take one first (x, y = batch; x.values)")

    def __iter__(self):
        """`x, y = batch` (TF's `for x, y in dist_dataset`): the element's components, each still a
        per-replica value that carries this batch's mask (its leaves are marked), so padding stays out.
        A dict element's keys, as TF's dict element gives them."""
        if isinstance(self.value, (tuple, list)):
            return iter([self._component(part) for part in self.value])
        if isinstance(self.value, dict):
            return iter(self.value)
        raise TypeError(
            f"This distributed element is a {type(self.value).__name__}, not a tuple, so it cannot be unpacked. "
            "Pass the whole batch (strategy.run(fn, args=(batch,)) hands fn the plain element), or take "
            "batch.value and batch.mask explicitly."
        )

    def __getitem__(self, key: Any) -> Any:
        """`batch[0]`, `batch["x"]` (TF's distributed tuple or dict element): that component, its leaves still
        per-replica values that carry this batch's mask."""
        if isinstance(self.value, (tuple, list, dict)):
            return self._component(self.value[key])
        raise TypeError(f"This distributed element is a {type(self.value).__name__}, not a tuple or dict; pass the "
                        "whole batch to strategy.run, or take batch.value.")

    def element(self) -> Any:
        """The element as TF's nest sees it: its structure of components (each as `__iter__` gives it), no mask."""
        return self._component(self.value)

    def _component(self, part: Any) -> Any:
        """A component taken out of this batch: for TF's strategies (`shown_as` set) TF's per-replica value, which
        refuses computation outside `run` (`jdist.strategy.batch_components`); else its marked arrays."""
        if self._shown_as is PerReplica or isinstance(part, slice):
            return part
        return as_components(part, self._shown_as)

    def __len__(self) -> int:
        if isinstance(self.value, (tuple, list, dict)):
            return len(self.value)
        raise TypeError(f"len() of a distributed element that is a {type(self.value).__name__}, not a tuple")

    def __getattr__(self, name: str) -> Any:
        """A dict element's `keys`, `items` and `get` (TF's element is the dict itself, observed, TF 2.21), so
        `strategy.run(fn, kwargs=batch)` and `fn(**batch)` take its components."""
        value = self.__dict__.get("examples")
        if name in ("keys", "items", "get") and isinstance(value, dict):
            return getattr(value, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __contains__(self, key: Any) -> bool:
        if isinstance(self.value, (tuple, list, dict)):
            return key in self.value
        raise TypeError(f"'in' of a distributed element that is a {type(self.value).__name__}")

    def _show(self, show: Any) -> str:
        if self.on_host or any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(self)):
            shapes = jax.tree.map(lambda x: tuple(np.shape(x)), self.value)
            return f"DistributedBatch(value={shapes}, mask={tuple(np.shape(self.mask))})"
        with outside_mesh(self):
            parts = local_examples(self)
            if len(parts) == 1:  # one replica: TF shows the element itself (observed, TF 2.21)
                return show(parts[0])
            per_leaf = zip(*(jax.tree.leaves(part) for part in parts))
            shown = [self._shown_as(ragged=p) for p in per_leaf]
            return show(jax.tree.unflatten(jax.tree.structure(self.value), shown))

    def __repr__(self) -> str:
        """The element with each leaf shown as TF prints a distributed batch: a `PerReplica` of every
        replica's real examples (observed, TF 2.21: `(PerReplica:{0: <tf.Tensor ...>, ...}, ...)`)."""
        return self._show(repr)

    def __str__(self) -> str:
        """`print(batch)`: as TF prints the element, its structure of PerReplica values (one alone by its `str`)."""
        return self._show(str)


jax.tree_util.register_pytree_node(
    DistributedBatch,
    lambda b: ((b.value, b.mask), None),
    lambda _, children: DistributedBatch(*children),
)  # its own node (a subclass is not its parent's), unflattened with its marks


def _note_host_counts(mask: Any, host_mask: np.ndarray) -> None:
    """Records each replica's real rows of a placed `mask` from its host copy, when this
    process holds all of it (with several processes each sees only its own rows)."""
    if isinstance(mask, jax.Array) and mask.is_fully_addressable and host_mask.shape == mask.shape:
        replicas = len({s.index[0].start or 0 for s in mask.addressable_shards})
        note_row_counts(mask, np.count_nonzero(host_mask.reshape(replicas, -1), axis=1))


def is_distributed_batch(x: object) -> bool:
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


def place_host_batches(strategy: Strategy, tree: Any) -> Any:
    """Moves batches still in host memory onto `strategy`'s mesh, split over its data axis."""
    leaves, treedef = jax.tree.flatten(tree, is_leaf=is_distributed_batch)
    if not any(isinstance(x, DistributedBatch) and x.on_host for x in leaves):
        return tree
    sharding = strategy.data_sharding()

    def place(x):
        if isinstance(x, DistributedBatch) and x.on_host:
            value, mask = place_rows((x.value, np.asarray(x.mask)), sharding, rows="local")
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
