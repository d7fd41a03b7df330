"""Cross-replica operations: `reduce`, `gather`, `experimental_local_results` and per-replica values made
from a function. Padding rows of a short batch never count, and a plain value counts once per replica, as
observed in TF 2.21 (`tests/tf_observed_values.py`). `Strategy` inherits this as `CrossReplicaOps`.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence, cast

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding

from jdist.strategy import context, dispatch
from jdist.strategy.distributed_batch import is_distributed_batch, local_examples
from jdist.strategy.reduce_op import ReduceOp
from jdist.strategy.run import StrategyFields
from jdist.strategy.values import (
    PerReplica,
    is_mirrored,
    local_components,
    local_row_counts,
    outside_mesh,
    split_mark,
    stack_on_devices,
)
from jdist.typing import PyTree


class ValueContext:
    """What `experimental_distribute_values_from_function` tells `value_fn` (TF's ValueContext)."""

    def __init__(self, replica_id_in_sync_group: int = 0, num_replicas_in_sync: int = 1):
        self.replica_id_in_sync_group = replica_id_in_sync_group
        self.num_replicas_in_sync = num_replicas_in_sync

    def __repr__(self) -> str:
        return (
            f"ValueContext(replica_id_in_sync_group={self.replica_id_in_sync_group}, "
            f"num_replicas_in_sync={self.num_replicas_in_sync})"
        )


class CrossReplicaOps(StrategyFields):
    """What code outside `run` does with per-replica values: the cross-replica half of a `Strategy`."""

    # A plain value given to `reduce`/`gather` stands for one copy per replica (jdist's `run` returns results
    # that agree on every replica as one replicated array). Strategies whose `run` returns TF's PerReplica for
    # every result set this False: a plain value is then TF's non-distributed value (`_plain_leaf`).
    plain_values_per_replica: bool = True

    def _require_cross_replica(self, method: str, alternative: str) -> None:
        if context.in_replica_context():
            raise RuntimeError(
                f"strategy.{method}() requires being in cross-replica context; inside run() use "
                f"{alternative} instead."
            )

    def _split_view(self, value: Any) -> Any:
        """`(stacked, mask)` of a per-replica value: its `(replicas, rows, ...)` view and
        its `(replicas, rows)` mask of real rows (None: all real); None for a plain value."""
        n = self.num_replicas_in_sync
        if isinstance(value, PerReplica):
            if not value.is_stacked:
                return None
            stacked, mask = value.stacked, value.mask
            return stacked, None if mask is None else mask.reshape(stacked.shape[:2])
        if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer) and self._is_split_batch(value):
            mask = split_mark(value).mask
            rows = value.shape[0] // n
            return (value.reshape((n, rows) + value.shape[1:]),
                    None if mask is None else mask.reshape(n, rows))
        return None

    def _row_counts(self, mask: Any) -> np.ndarray:
        """Real rows of every replica (all processes'), from a `(replicas, rows)` mask."""
        return np.asarray(_row_count_fn(self.replicated_sharding())(mask))

    def _equal_rows(self, stacked: Any, mask: Any, what: str) -> Any:
        """`stacked` cut to its replicas' real rows when they all hold the same number."""
        counts = self._row_counts(mask)
        if len(set(counts.tolist())) > 1:
            shapes = [(int(c),) + tuple(stacked.shape[2:]) for c in counts]
            raise ValueError(
                f"{what}: the replicas hold different numbers of real examples (shapes {shapes}; a short "
                "last batch leaves some replicas with fewer or none), so their values cannot be combined "
                "element by element. Reduce over the examples too, e.g. strategy.reduce(op, value, axis=0), "
                "or gather along axis 0."
            )
        return stacked[:, : int(counts[0])]

    @staticmethod
    def _batch_values(value: Any) -> Any:
        """A `DistributedBatch` stands for its element (TF's nest of per-replica values)."""
        return jax.tree.map(lambda v: v.value if is_distributed_batch(v) else v, value, is_leaf=is_distributed_batch)

    def reduce(self, reduce_op: ReduceOp | str, value: PyTree, axis: int | Sequence[int] | None = None) -> PyTree:
        """Combines per-replica values into one (TF's `Strategy.reduce`).

        `axis=None` reduces across replicas only; with `axis`, each replica's value is
        first reduced along it, and MEAN divides by the true element count. Padding
        rows of a short batch (and of results with one row per example) never count.
        """
        op = ReduceOp.from_value(reduce_op)
        self._require_cross_replica(
            "reduce", "get_replica_context().all_reduce(), or get_replica_context().merge_call()"
        )
        return dispatch.dispatched_each(jax.tree.map(
            lambda v: self._reduce_leaf(op, v, axis), self._batch_values(value),
            is_leaf=lambda x: isinstance(x, PerReplica)
        ))

    def _reduce_leaf(self, op: ReduceOp, value: Any, axis: Any) -> Any:
        n = self.num_replicas_in_sync
        copies = _variable_copies(value)
        if copies is not None and axis is not None:  # each replica's own copy, as TF reduces them
            return _reduce_ragged(op, copies, axis)
        if copies is not None and op is ReduceOp.SUM and not getattr(value, "_jdist_on_read", False):
            raise AssertionError(
                "strategy.reduce(SUM, <mirrored variable>, axis=None): TensorFlow 2.21 fails this with a bare "
                "AssertionError (a mirrored variable is one value, not one per replica). Use ReduceOp.MEAN (the "
                "variable's value), reduce along an axis (each replica's copy), or read "
                "strategy.experimental_local_results(variable)."
            )
        if isinstance(value, PerReplica) and not value.is_stacked:
            return _reduce_ragged(op, value.values, axis)
        view = self._split_view(value)
        if view is None and axis is None and not self._copies_per_replica(value):
            return self._plain_leaf(value, "reduce", op)
        if view is None and axis is None and n == 1:
            return jnp.asarray(value)  # one replica: its value itself, dtype kept (TF 2.21's int32 [3, 4], observed)
        if view is None:
            # A plain value counts once per replica (TF 2.21 returns run's replica-invariant
            # results as a PerReplica of N equal values), so SUM counts each copy.
            value = jnp.asarray(value)
            axes = () if axis is None else _normalize_axis(axis, value.ndim)
            total = jnp.sum(value, axis=axes) if axes else value
            return total * n if op is ReduceOp.SUM else total / _count(value.shape, axes)
        stacked, mask = view
        axes = () if axis is None else _normalize_axis(axis, stacked.ndim - 1)
        if mask is not None and 0 not in axes:
            stacked, mask = self._equal_rows(stacked, mask, f"reduce(axis={axis!r})"), None
        inner = tuple(a + 1 for a in axes)
        if mask is None:
            total = jnp.sum(stacked, axis=(0,) + inner)
            count = n * _count(stacked.shape[1:], axes)
        else:  # rows are reduced: padding rows are left out of the sum and the count
            keep = mask.reshape(mask.shape + (1,) * (stacked.ndim - 2))
            total = jnp.sum(jnp.where(keep, stacked, jnp.zeros((), stacked.dtype)), axis=(0,) + inner)
            count = jnp.sum(mask) * _count(stacked.shape[1:], tuple(a for a in axes if a != 0))
        return total if op is ReduceOp.SUM else total / count

    def _copies_per_replica(self, value: Any) -> bool:
        """Whether a plain `value` stands for one copy per replica (see `plain_values_per_replica`); a
        distributed `tf.Variable` does."""
        if self.plain_values_per_replica or is_mirrored(value) or self.num_replicas_in_sync == 1:
            return True
        local = getattr(value, "_jdist_local_results", None)
        return callable(local) and local() is not None

    def _plain_leaf(self, value: Any, method: str, op: ReduceOp | None) -> Any:
        """TF 2.21's non-distributed value (observed, 4 replicas): `gather` and `reduce(MEAN, axis=None)` return
        it as it is; `reduce(SUM, axis=None)` is a ValueError. (With an axis, `reduce` counts it once per
        replica, as TF does.)"""
        if op is ReduceOp.SUM:
            raise ValueError(
                f"A non-DistributedValues value {value} cannot be reduced with the given reduce op {op}. "
                f"strategy.{method}(SUM, ..., axis=None) adds the replicas' values: pass the PerReplica value that "
                "strategy.run returned, or reduce along an axis (axis=0)."
            )
        return jnp.asarray(value)

    def gather(self, value: PyTree, axis: int) -> PyTree:
        """Concatenates the replicas' values along `axis` (TF's `Strategy.gather`);
        only real rows of a short batch (and of per-example results) are gathered."""
        self._require_cross_replica("gather", "get_replica_context().all_gather()")
        return dispatch.dispatched_each(jax.tree.map(
            lambda v: self._gather_leaf(v, axis), self._batch_values(value),
            is_leaf=lambda x: isinstance(x, PerReplica)
        ))

    def _gather_leaf(self, value: Any, axis: int) -> Any:
        if isinstance(value, PerReplica) and not value.is_stacked:
            parts = [jnp.asarray(v) for v in value.values]
            _check_rank(parts[0].ndim)
            ax = axis % parts[0].ndim
            for p in parts:
                if p.shape[:ax] + p.shape[ax + 1:] != parts[0].shape[:ax] + parts[0].shape[ax + 1:]:
                    raise ValueError(
                        f"gather: per-replica shapes {[q.shape for q in parts]} differ outside axis {axis}."
                    )
            target = self.worker_devices[0]
            return jnp.concatenate([jax.device_put(p, target) for p in parts], axis=ax)
        view = self._split_view(value)
        if view is None and not self._copies_per_replica(value):
            return self._plain_leaf(value, "gather", None)
        if view is None:
            value = jnp.asarray(value)
            if value.ndim == 0 and self.num_replicas_in_sync == 1:
                return value  # TF 2.21 with one replica returns the value itself (tests/tf_observed_padding.py)
            _check_rank(value.ndim)
            return jnp.concatenate([value] * self.num_replicas_in_sync, axis=axis)
        stacked, mask = view
        _check_rank(stacked.ndim - 1)
        ax = axis % (stacked.ndim - 1)
        if mask is not None and ax == 0:  # the real rows of each replica, in replica order
            counts = self._row_counts(mask)
            rows = stacked.shape[1]
            index = np.concatenate([np.arange(i * rows, i * rows + c) for i, c in enumerate(counts)])
            return jnp.take(stacked.reshape((-1,) + stacked.shape[2:]), index, axis=0)
        if mask is not None:
            stacked = self._equal_rows(stacked, mask, f"gather(axis={axis!r})")
        moved = jnp.moveaxis(stacked, 0, ax)
        shape = stacked.shape[1:]
        return moved.reshape(shape[:ax] + (shape[ax] * stacked.shape[0],) + shape[ax + 1:])

    def experimental_local_results(self, value: PyTree) -> tuple:
        """This process's per-replica components, as a tuple in replica order.

        Per-replica values give their components (only the real rows of a short batch
        and of per-example results); results of `run` identical on every replica give
        one copy per replica, each on its replica's device, as TF 2.21 does; any other
        value is returned alone, `(value,)`.
        """
        def components(v: Any) -> tuple | None:
            local = getattr(v, "_jdist_local_results", None)  # a tf.Variable of TF's distributed kinds
            own: Any = local() if callable(local) else None
            if own is not None:
                own = tuple(own)
                if len(own) > 1 and isinstance(own[0], jax.Array) and all(o is own[0] for o in own):
                    return self._mirrored_components(own[0])  # a mirrored variable: each replica's device copy
                return own
            if isinstance(v, PerReplica):
                return v.values
            if is_distributed_batch(v):  # only each replica's real examples, as TF's
                return local_examples(v)
            if is_mirrored(v):
                return self._mirrored_components(v)
            view = self._split_view(v)
            if view is None:
                return None
            stacked, mask = view
            parts = local_components(stacked)
            if mask is None:
                return parts
            return tuple(p[:c] for p, c in zip(parts, local_row_counts(split_mark(v).mask)))

        leaves, treedef = jax.tree.flatten(
            value, is_leaf=lambda x: isinstance(x, PerReplica) or is_distributed_batch(x))
        with outside_mesh(value):  # host-side reads inside strategy.scope()
            split = [components(leaf) for leaf in leaves]
        if all(s is None for s in split):
            return (value,)
        count = max(len(s) for s in split if s is not None)
        return tuple(
            jax.tree.unflatten(treedef, [leaf if s is None else s[i] for leaf, s in zip(leaves, split)])
            for i in range(count)
        )

    def _mirrored_components(self, value: jax.Array) -> tuple:
        """One copy per local replica of a replicated result, each the copy already on that
        replica's device (no transfer)."""
        local = [d for d in self._replica_devices() if d.process_index == jax.process_index()]
        on_device = {shard.device: shard.data for shard in value.addressable_shards}
        if not all(d in on_device for d in local):
            return (value,) * len(local)
        return tuple(on_device[d] for d in local)

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ValueContext], PyTree]) -> PyTree:
        """Calls `value_fn` once per local replica and returns the results as `PerReplica`."""
        n = self.num_replicas_in_sync
        local = [
            (replica, device)
            for replica, device in enumerate(self._replica_devices())
            if device.process_index == jax.process_index()
        ]
        results = [value_fn(ValueContext(replica, n)) for replica, _ in local]
        devices = [device for _, device in local]
        return jax.tree.map(
            lambda *vs: stack_on_devices(list(zip(devices, vs)), self._replica_mesh(), self._data_axis),
            *results,
        )

    def _replica_devices(self) -> list:
        """One device per replica: the first device of each slice of the data axis."""
        grid = np.moveaxis(self._mesh.devices, self._mesh.axis_names.index(self._data_axis), 0)
        return list(grid.reshape(grid.shape[0], -1)[:, 0])

    def _replica_mesh(self) -> Mesh:
        if len(self._mesh.axis_names) == 1:
            return self._mesh
        return Mesh(np.array(self._replica_devices(), dtype=object), (self._data_axis,),
                    axis_types=(AxisType.Auto,))


@functools.cache
def _row_count_fn(out_sharding: NamedSharding) -> Callable:
    return jax.jit(lambda mask: jnp.sum(mask, axis=1, dtype=jnp.int32), out_shardings=out_sharding)


def _check_rank(rank: int) -> None:
    if rank < 1:
        raise ValueError("gather needs per-replica values of rank >= 1; add an axis first, e.g. x[None].")


def _normalize_axis(axis: Any, rank: int) -> tuple:
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"`axis` must be an int or a sequence of ints, got {axis!r}.")
        if not -rank <= a < rank:
            raise ValueError(f"`axis` = {axis!r} out of range for `value` with rank {rank}")
        out.append(int(a) % rank)
    return tuple(sorted(set(out)))


def _count(shape: Sequence[int], axes: tuple) -> int:
    return math.prod(shape[a] for a in axes)


def _variable_copies(value: Any) -> list | None:
    """The replicas' copies of a distributed `tf.Variable` (TF 2.21 reduces them, observed on 2 CPUs after
    assigning one copy: `reduce(SUM, v, axis=0)` of copies [1, 2] and [3, 10] is 16., MEAN 4.), else None."""
    local = getattr(value, "_jdist_local_results", None)
    copies = cast("Sequence[Any] | None", local() if callable(local) else None)
    return None if copies is None or len(copies) < 2 else [np.asarray(c) for c in copies]


def _reduce_ragged(op: ReduceOp, parts: Sequence[Any], axis: Any) -> Any:
    parts = [np.asarray(p) for p in parts]
    if axis is None:
        if len({p.shape for p in parts}) > 1:
            raise ValueError(
                f"Cannot reduce per-replica values of different shapes {[p.shape for p in parts]} "
                "with axis=None; pass `axis=` to reduce inside each replica first."
            )
        total = np.sum(np.stack(parts), axis=0)
        return jnp.asarray(total if op is ReduceOp.SUM else total / len(parts))
    sums, counts = [], 0
    for p in parts:
        axes = _normalize_axis(axis, p.ndim)
        sums.append(np.sum(p, axis=axes))
        counts += _count(p.shape, axes)
    total = np.sum(np.stack(sums), axis=0)
    return jnp.asarray(total if op is ReduceOp.SUM else total / counts)

