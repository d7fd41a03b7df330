"""`ReplicaContext`: what code running on one replica can ask for.

Inside `strategy.run` the replica function is traced once under `jax.shard_map`, so
`all_reduce` and friends lower to XLA collectives (`psum`, `all_gather`) over the
strategy's data axis: NCCL on GPU, ICI on TPU, gloo/in-process on CPU.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import jax
import jax.numpy as jnp

from jdist.strategy import context
from jdist.strategy.packing import bytes_per_pack, packed_psum, spans_cpu_processes
from jdist.strategy.reduce_op import ReduceOp
from jdist.strategy.values import PerReplica
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

R = TypeVar("R")  # what merge_fn returns


class ReplicaContext:
    """The context of one replica inside `strategy.run` (TF's `tf.distribute.ReplicaContext`)."""

    def __init__(self, strategy: "Strategy", axis_name: str | None, example_masks: Sequence[jax.Array] = (),
                 replica_id: int | jax.Array | None = None):
        self._strategy = strategy
        self._axis = axis_name
        self._example_masks = tuple(example_masks)
        self._replica_id = replica_id  # a replica run alone (a short batch's real rows): its id
        self.merged: list = []  # the values merge_call handed back as they are (`jdist.strategy.shared_results`)
        self.own_values: list = []  # broadcast values each replica holds as its own copy (variables' values)

    @property
    def example_mask(self) -> jax.Array | None:
        """This replica's mask of real examples (bool, one per row) when `run` was given a
        `jdist.DistributedBatch`, else None. `compute_average_loss` applies it by default."""
        if len(self._example_masks) > 1:
            raise ValueError(
                f"run() was given {len(self._example_masks)} distributed batches, so which mask applies is "
                "ambiguous. Pass the one you mean as an argument (args=(batch, batch.mask)) and give it to "
                "compute_average_loss(..., mask=...)."
            )
        return self._example_masks[0] if self._example_masks else None

    @property
    def strategy(self) -> "Strategy":
        return self._strategy

    @property
    def axis_name(self) -> str | None:
        """The mesh axis replicas run over inside a compiled `run`; None when there is none."""
        return self._axis

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self) -> jax.Array:
        """This replica's global id, 0..N-1, as an int32 scalar (a traced value inside `run`)."""
        if self._axis is None:
            return jnp.int32(0) if self._replica_id is None else jnp.asarray(self._replica_id, jnp.int32)
        return jax.lax.axis_index(self._axis).astype(jnp.int32)

    def all_reduce(self, reduce_op: ReduceOp | str, value: PyTree, options: Any = None) -> PyTree:
        """Sums (or averages) a pytree over all replicas; every replica gets the result. `options` is TF's
        `CommunicationOptions` (or `CollectiveHints`): its `bytes_per_pack` packs the all-reduces between CPU
        processes, over the strategy's own; XLA chooses the implementation and has no timeout to set."""
        op = ReduceOp.from_value(reduce_op)
        if self._axis is None:
            return jax.tree.map(jnp.asarray, value)  # one replica: the value itself, as a tensor (TF's identity)
        axis = self._axis
        values = jax.tree.map(jnp.asarray, value)
        if len(jax.tree.leaves(values)) > 1 and spans_cpu_processes(self._strategy.mesh, axis):
            # Across CPU processes one all-reduce per dtype, as TF packs gradients (jdist/strategy/packing.py).
            pack = int(getattr(options, "bytes_per_pack", 0) or 0) or bytes_per_pack(self._strategy)
            total = packed_psum(values, axis, pack)
        else:
            total = jax.tree.map(lambda x: jax.lax.psum(x, axis), values)
        if op is ReduceOp.MEAN:
            total = jax.tree.map(lambda t: t / self.num_replicas_in_sync, total)
        return total

    def all_gather(self, value: PyTree, axis: int, options: Any = None) -> PyTree:
        """Concatenates every replica's value along `axis` (rank >= 1), on every replica. `options` (TF's
        `CommunicationOptions`) is accepted: XLA chooses how to gather."""
        def gather_leaf(x):
            x = jnp.asarray(x)
            if x.ndim < 1:
                raise ValueError(
                    "all_gather needs values of rank >= 1; got a scalar. Add an axis first, "
                    "e.g. x[None]."
                )
            if self._axis is None:
                return x
            return jax.lax.all_gather(x, self._axis, axis=axis % x.ndim, tiled=True)

        return jax.tree.map(gather_leaf, value)

    def merge_call(self, merge_fn: Callable[..., R], args: tuple = (), kwargs: dict | None = None) -> R:
        """Runs `merge_fn(strategy, *args)` once in cross-replica context and returns its result
        to every replica. Array arguments arrive there as `PerReplica` values; Python numbers as they are."""
        kwargs = kwargs or {}
        if self._axis is None:
            with context.push(self._strategy, None):
                return merge_fn(self._strategy, *args, **kwargs)
        axis = self._axis
        index = jax.lax.axis_index(axis)

        def collect(x):
            # Python values are trace-time constants, the same on every replica: TF hands them over as they are
            # (TF 2.21: `merge_call(fn, kwargs={"scale": 2.0})` gives `scale=2.0`).
            if isinstance(x, (bool, int, float)) or (not isinstance(x, jax.Array) and not hasattr(x, "dtype")):
                return x
            # Every replica receives all values, so merge_fn computes the same result everywhere.
            return PerReplica(stacked=jax.lax.all_gather(jnp.asarray(x), axis))

        merged_args, merged_kwargs = jax.tree.map(collect, (args, kwargs))
        with context.push(self._strategy, None):
            result = merge_fn(self._strategy, *merged_args, **merged_kwargs)
        # A PerReplica handed back gives each replica its own component, as in TF; any other value is one object.
        self.merged.extend(jax.tree.leaves(result))
        return jax.tree.map(
            lambda v: v.stacked[index] if isinstance(v, PerReplica) else v,
            result,
            is_leaf=lambda v: isinstance(v, PerReplica),
        )

    def __repr__(self) -> str:
        return f"ReplicaContext(strategy={self._strategy!r}, axis={self._axis!r})"


class DefaultReplicaContext(ReplicaContext):
    """The replica context outside every strategy scope and `run` (TF's `_DefaultReplicaContext`): its replica
    id is the Python int 0 (observed, TF 2.21: `print(ctx.replica_id_in_sync_group)` shows `0`)."""

    @property
    def replica_id_in_sync_group(self) -> int:  # pyright: ignore[reportIncompatibleMethodOverride]
        return 0
