"""How a replicated value combines updates made on several replicas (TF's `VariableAggregation`).

In TF a `MirroredVariable` updated inside `strategy.run` aggregates the replicas'
updates as its `aggregation` says. JAX has no variables: state is returned, so the
same choice is made explicitly where the new value is computed:

    counter = jdist.MirroredState(5.0, aggregation=jdist.VariableAggregation.SUM)
    counter = strategy.run(lambda c: c.assign_add(1.0), args=(counter,))
    counter.value            # 7.0 with 2 replicas (MEAN: 6.0, ONLY_FIRST_REPLICA: 6.0)

or, for any pytree, `jdist.aggregate_update(old, new, aggregation)` inside `run`.
"""
from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp

from jdist.strategy import context
from jdist.strategy.reduce_op import ReduceOp
from jdist.typing import PyTree


class VariableAggregation(enum.Enum):
    """TF's `tf.VariableAggregation`, with TF's meaning for updates made inside `run`.

    NONE: each replica keeps its own update (the copies may diverge; `run` returns
    them as `PerReplica`). SUM: the replicas' updates are added. MEAN: averaged.
    ONLY_FIRST_REPLICA: replica 0's update is applied everywhere.
    """

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3

    @classmethod
    def from_value(cls, value: "VariableAggregation | str") -> "VariableAggregation":
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        raise ValueError(
            f"Unknown aggregation {value!r}: use jdist.VariableAggregation.NONE, SUM, MEAN or "
            "ONLY_FIRST_REPLICA (or those names as strings)."
        )


class VariableSynchronization(enum.Enum):
    """TF's `tf.VariableSynchronization`: when a variable's replicas agree. ON_WRITE (what AUTO means under a
    strategy): every assignment leaves one value on all replicas. ON_READ: each replica keeps its own copy, and
    a read outside `run` combines the copies by the variable's aggregation. NONE is refused under a strategy."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


def _replica_axis() -> tuple[Any, str | None]:
    """The replica context and its mesh axis; axis None outside a compiled `run`."""
    ctx = context.get_replica_context()
    if ctx is None:
        return None, None
    return ctx, getattr(ctx, "axis_name", None)


def combine(values: Any, aggregation: VariableAggregation) -> Any:
    """Combines each replica's `values` (a pytree) into the value every replica should hold."""
    ctx, axis = _replica_axis()
    if axis is None:  # one replica, or cross-replica context: nothing to combine
        return values
    if aggregation is VariableAggregation.SUM:
        return ctx.all_reduce(ReduceOp.SUM, values)
    if aggregation is VariableAggregation.MEAN:
        for leaf in jax.tree.leaves(values):
            if not jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.inexact):
                raise ValueError(
                    "Cannot update non-float values with VariableAggregation.MEAN inside run(): "
                    f"got dtype {jnp.asarray(leaf).dtype}. Use SUM or ONLY_FIRST_REPLICA, or a float dtype."
                )
        return ctx.all_reduce(ReduceOp.MEAN, values)
    if aggregation is VariableAggregation.ONLY_FIRST_REPLICA:
        first = ctx.replica_id_in_sync_group == 0
        return ctx.all_reduce(
            ReduceOp.SUM, jax.tree.map(lambda v: jnp.where(first, v, jnp.zeros_like(v)), values)
        )
    return mark_per_replica(values)  # NONE: each replica keeps its own value


def mark_per_replica(values: PyTree) -> PyTree:
    """Declares a pytree per-replica inside `run`, so `run` returns it as `PerReplica` even when
    every replica happens to hold the same number (TF's SyncOnRead / unaggregated copies).

    The values are made to depend on the replica id through a select that XLA folds away.
    Outside a compiled `run` it returns `values` unchanged.
    """
    ctx, axis = _replica_axis()
    if axis is None or getattr(ctx, "runs_alone", False):  # a replica thread's value is its own (uneven_rows)
        return values
    index = jax.lax.axis_index(axis)
    return jax.tree.map(lambda v: jnp.where(index >= 0, v, v), values)


def aggregate_update(old: PyTree, new: PyTree, aggregation: VariableAggregation | str) -> PyTree:
    """The value a mirrored pytree takes after every replica moved it from `old` to `new`.

    Call inside `run`. The change `new - old` made by each replica is combined as
    `aggregation` says (TF's `assign_add` semantics): SUM adds all replicas' changes,
    MEAN averages them, ONLY_FIRST_REPLICA applies replica 0's, NONE keeps each
    replica's own. Outside `run` (or with one replica) it returns `new`.
    """
    aggregation = VariableAggregation.from_value(aggregation)
    delta = jax.tree.map(lambda n, o: jnp.asarray(n) - jnp.asarray(o), new, old)
    return jax.tree.map(lambda o, d: jnp.asarray(o) + d, old, combine(delta, aggregation))


@jax.tree_util.register_pytree_node_class
class MirroredState:
    """A replicated value with a declared aggregation: TF's `MirroredVariable`, made functional.

    `assign`, `assign_add` and `assign_sub` return a new `MirroredState`. Inside
    `run` they aggregate across replicas with TF's rules: `assign(v)` with SUM
    stores the sum of the replicas' `v`, with MEAN their mean, ONLY_FIRST_REPLICA
    replica 0's `v`, NONE each replica's own (returned as `PerReplica`).
    `assign_add(d)` combines the increments the same way. Outside `run` the
    value is simply written, as a cross-replica assign in TF.
    """

    __slots__ = ("value", "aggregation")

    def __init__(self, value: Any, aggregation: VariableAggregation | str = VariableAggregation.NONE):
        self.value = value
        self.aggregation = VariableAggregation.from_value(aggregation)

    def assign(self, value: PyTree) -> "MirroredState":
        return MirroredState(combine(value, self.aggregation), self.aggregation)

    def assign_add(self, delta: PyTree) -> "MirroredState":
        combined = combine(delta, self.aggregation)
        return MirroredState(jax.tree.map(jnp.add, self.value, combined), self.aggregation)

    def assign_sub(self, delta: PyTree) -> "MirroredState":
        return self.assign_add(jax.tree.map(jnp.negative, delta))

    def tree_flatten(self):
        return (self.value,), self.aggregation

    @classmethod
    def tree_unflatten(cls, aggregation, children):
        obj = object.__new__(cls)
        obj.value = children[0]
        obj.aggregation = aggregation
        return obj

    def __repr__(self) -> str:
        return f"MirroredState({self.value!r}, aggregation={self.aggregation.name})"
