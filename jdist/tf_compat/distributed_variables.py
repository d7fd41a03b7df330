"""TF's distributed `tf.Variable`s: `synchronization` and `aggregation` under a mirroring strategy.

Made in the scope of `MirroredStrategy`, `TPUStrategy` or `MultiWorkerMirroredStrategy`, a `tf.Variable` is
TF's `MirroredVariable` (synchronization AUTO or ON_WRITE) or `SyncOnReadVariable` (ON_READ), with TF 2.21's
rules (observed, 4 logical CPUs; `tests/test_tf_compat_distributed_variables.py`):

* MirroredVariable: an assignment inside `strategy.run` combines the replicas' values at the assignment, as
  `aggregation` says. `assign(x)` stores the SUM / MEAN of the replicas' `x` or replica 0's (ONLY_FIRST_REPLICA);
  `assign_add(d)` adds the combined `d`. Every replica then reads, and `assign` returns, the combined value.
  SUM with one Python number for every replica is TF's ValueError (`jdist.tf_compat.replica_updates`). With
  NONE, replicas that assign different values keep their own copies, as TF's do: each replica reads its own in
  the next `run`, `experimental_local_results` and the text list them, and outside `run` the first replica's
  is read (`numpy()`, checkpoints); an assignment outside `run` makes them one value again.
* SyncOnReadVariable: each replica keeps its own copy. Inside `run` a replica reads and assigns its copy; outside,
  a read combines the copies (SUM, MEAN, ONLY_FIRST_REPLICA; NONE: TF's ValueError). Every copy starts at the
  initial value, so a SUM variable reads `replicas x initial` (as TF's). Assigned outside `run`, each copy takes
  the value (SUM: the value / replicas, so the read is the value); `assign_add` outside `run` of a SUM one is
  TF's ValueError. Its `trainable` defaults to False. A checkpoint saves the read value.
"""
from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.strategy import context
from jdist.strategy.aggregation import VariableAggregation, VariableSynchronization, combine
from jdist.strategy.devices import tf_device_name
from jdist.strategy.values import PerReplica
from jdist.tf_compat import replica_updates
from jdist.tf_compat.replica_variables import ReplicaVariable


def _member(enum_type: type[enum.Enum], value: Any, what: str) -> Any:
    """TF's enum members only; TF 2.21 refuses strings ("Invalid variable aggregation mode: mean ...")."""
    if value is None:
        return list(enum_type)[0]
    if isinstance(value, enum_type):
        return value
    raise ValueError(f"Invalid variable {what} mode: {value} for variable: None. Use "
                     f"tf.{enum_type.__name__}.{'|'.join(m.name for m in enum_type)}.")


def parse(synchronization: Any, aggregation: Any) -> tuple[VariableSynchronization, VariableAggregation]:
    return (_member(VariableSynchronization, synchronization, "synchronization"),
            _member(VariableAggregation, aggregation, "aggregation"))


def mirroring_strategy() -> Any:
    """The open scope's strategy when it mirrors variables over replicas (TF's MirroredVariable), else None."""
    if not context.has_strategy():
        return None
    import jdist

    strategy = context.get_strategy()
    kinds = (jdist.MirroredStrategy, jdist.TPUStrategy, jdist.MultiWorkerMirroredStrategy)
    return strategy if isinstance(strategy, kinds) else None


def check(synchronization: VariableSynchronization, aggregation: VariableAggregation, dtype: Any) -> None:
    """TF 2.21's refusals for a variable made in a mirroring strategy's scope (observed texts)."""
    if synchronization is VariableSynchronization.NONE:
        raise ValueError("`NONE` variable synchronization mode is not supported with tf.distribute strategy. "
                         "Please change the `synchronization` for variable: None")
    if aggregation is VariableAggregation.MEAN and not np.issubdtype(np.dtype(dtype), np.floating):
        raise ValueError("creating distributed tf.Variable with aggregation=MEAN and a non-floating dtype is not "
                         "supported, please use a different aggregation or dtype")


class Distribution:
    """How one variable is distributed: its strategy, synchronization and aggregation (set at creation)."""

    def __init__(self, strategy: Any, synchronization: VariableSynchronization, aggregation: VariableAggregation):
        self.strategy = strategy
        self.on_read = synchronization is VariableSynchronization.ON_READ
        self.synchronization = synchronization if self.on_read else VariableSynchronization.ON_WRITE
        self.aggregation = aggregation
        self.locals: Any = None  # ON_READ: the replicas' copies, stacked (PerReplica)
        self.drifted: Any = None  # aggregation NONE: (the value held, the replicas' copies) after `run`
        self.replica_variables: tuple | None = None  # ON_WRITE: `experimental_local_results(v)`'s variables

    @property
    def class_name(self) -> str:
        return "SyncOnReadVariable" if self.on_read else "MirroredVariable"

    def in_replica(self) -> bool:
        """Inside a replica of this variable's strategy's `run` (compiled over the replicas, or one replica run
        alone on a short batch's real rows)."""
        ctx = context.get_replica_context()
        return ctx is not None and getattr(ctx, "strategy", None) is self.strategy

    # --- MirroredVariable: assignments in a replica combine the replicas' values ---
    def combined(self, value: Any) -> Any:
        """`value` as every replica should hold it after an assignment in a replica (unchanged elsewhere)."""
        if self.on_read or self.aggregation is VariableAggregation.NONE or not self.in_replica():
            return value
        return combine(jnp.asarray(value), self.aggregation)

    def refuse_same_sum(self, value: Any) -> None:
        """TF's ValueError for one Python value that a SUM MirroredVariable would add up over the replicas."""
        if not self.on_read and self.aggregation is VariableAggregation.SUM and self.in_replica():
            replica_updates.refuse_same_sum(value)

    def drifted_copies(self, variable: Any) -> Any:
        """The replicas' own copies of a NONE MirroredVariable, while it still holds what `run` left (None after
        an assignment outside `run`)."""
        if self.drifted is not None and self.drifted[0] is variable.value:
            return self.drifted[1]
        self.drifted = None
        return None

    # --- SyncOnReadVariable: per-replica copies ---
    def start(self, value: Any) -> None:
        """Every replica's copy starts at `value` (TF's)."""
        self.locals = self.strategy.experimental_distribute_values_from_function(lambda ctx: jnp.asarray(value))

    def read(self) -> Any:
        """The copies combined as the aggregation says (a read outside `run`)."""
        stacked = jnp.asarray(self.locals.stacked)
        if self.aggregation is VariableAggregation.SUM:
            return stacked.sum(axis=0, dtype=stacked.dtype)
        if self.aggregation is VariableAggregation.MEAN:
            return stacked.mean(axis=0, dtype=stacked.dtype)
        if self.aggregation is VariableAggregation.ONLY_FIRST_REPLICA:
            return stacked[0]
        raise ValueError(f"Could not convert from `tf.VariableAggregation` {self.aggregation} to`tf.distribute."
                         "ReduceOp` type (a SyncOnReadVariable with aggregation NONE cannot be read outside "
                         "strategy.run: give it SUM, MEAN or ONLY_FIRST_REPLICA)")

    def cross_replica_assign(self, value: Any) -> None:
        """Each copy takes `value` (SUM: `value / replicas`, so that the read is `value`), as TF's."""
        value = jnp.asarray(value)
        if self.aggregation is VariableAggregation.SUM:
            value = (value / self.strategy.num_replicas_in_sync).astype(value.dtype)
        self.start(value)

    def cross_replica_add(self, delta: Any) -> None:
        if self.aggregation is VariableAggregation.SUM:
            raise ValueError("SyncOnReadVariable does not support `assign_add` in cross-replica context when "
                             "aggregation is set to `tf.VariableAggregation.SUM`.")
        stacked = jnp.asarray(self.locals.stacked)
        copies = stacked + jnp.asarray(delta, stacked.dtype)
        self.locals = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: copies[ctx.replica_id_in_sync_group])

    def copies(self, variable: Any) -> tuple:
        """The replicas' values (arrays), in replica order."""
        if self.on_read:
            return tuple(self.locals.values)
        copies = self.drifted_copies(variable)
        if copies is not None:
            return tuple(copies.values)
        value, names = variable.value, self.strategy.extended.worker_devices
        if not isinstance(value, jax.Array) or isinstance(value, jax.core.Tracer):  # pyright: ignore
            return tuple(value for _ in names)
        on_device = {tf_device_name(shard.device): shard.data for shard in value.addressable_shards}
        if all(name in on_device for name in names):  # each replica's copy, already on its device
            return tuple(on_device[name] for name in names)
        return tuple(value for _ in names)

    def components(self, variable: Any) -> tuple:
        """`experimental_local_results(v)` and `v.values`: a MirroredVariable's per-replica variables
        (`jdist.tf_compat.replica_variables`), a SyncOnReadVariable's copies (arrays)."""
        if self.on_read:
            return self.copies(variable)
        if self.replica_variables is None:  # the same objects each time, as TF's
            self.replica_variables = tuple(ReplicaVariable(variable, i)
                                           for i in range(self.strategy.num_replicas_in_sync))
        return self.replica_variables

    def set_copy(self, variable: Any, index: int, value: Any) -> None:
        """Replica `index`'s copy becomes `value` and the others stay (TF's assignment to one of
        `experimental_local_results(v)`); replica 0's copy is the value `v` reads outside `run`."""
        current = [np.asarray(c) for c in self.copies(variable)]
        current[index] = np.asarray(value)
        if index == 0:
            variable._jdist_hold(current[0])
        if all(np.array_equal(c, current[0]) for c in current[1:]):
            self.drifted = None
            return
        copies = self.strategy.experimental_distribute_values_from_function(
            lambda ctx: jnp.asarray(current[ctx.replica_id_in_sync_group]))
        self.drifted = (variable.value, copies)


def show(variable: Any, distribution: Distribution, show_one: Any) -> str:
    """TF's text: `MirroredVariable:{\\n  0: <tf.Variable 'Variable:0' ...>,\\n  1: <... 'Variable/replica_1:0'
    ...>\\n}` (observed, TF 2.21)."""
    parts = []
    base = variable.name.removesuffix(":0")
    for i, value in enumerate(distribution.copies(variable)):
        name = base if i == 0 else f"{base}/replica_{i}"
        parts.append(f"  {i}: {show_one(name, np.asarray(value).astype(variable.dtype))}")
    return f"{distribution.class_name}:{{\n" + ",\n".join(parts) + "\n}"


def run_value(variable: Any, strategy: Any) -> Any:
    """What `strategy.run` hands the replica function for this variable: the copies, for an ON_READ one of
    `strategy` (each replica its own); None for any other."""
    distribution = getattr(variable, "_jdist_replication", None)
    if distribution is None or distribution.strategy is not strategy:
        return None
    return distribution.locals if distribution.on_read else distribution.drifted_copies(variable)


def receive(variable: Any, new: Any) -> bool:
    """Takes the copies `strategy.run` returns for an ON_READ variable; False for any other variable."""
    distribution = getattr(variable, "_jdist_replication", None)
    if distribution is None:
        return False
    if not distribution.on_read:  # a NONE MirroredVariable whose replicas assigned different values
        if not (variable._jdist_drifts and isinstance(new, PerReplica) and new.is_stacked):
            return False
        variable._jdist_hold(jax.device_put(new.stacked[0], variable.value.sharding))
        distribution.drifted = (variable.value, new)
        return True
    if isinstance(new, PerReplica):
        distribution.locals = new
    else:  # every replica's copy came back the same
        distribution.start(new)
    if distribution.aggregation is not VariableAggregation.NONE:  # NONE has no read outside run (TF's error)
        variable._jdist_write_read_value()
    return True
