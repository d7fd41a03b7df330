"""TF's rules for a `tf.Variable` assigned by the replicas of `strategy.run`, where JAX traces one program.

TF runs the replica function once per replica, each on its own Python values; jdist traces it once for all
replicas. Two of TF 2.21's rules depend on that difference (observed, MirroredStrategy over 2 logical CPUs,
eagerly and in `tf.function`), and are kept here:

* A variable made OUTSIDE the strategy's scope is one variable that every replica updates in turn:
  `v.assign_add(d)` adds every replica's `d` (from 0.0, `assign_add(1.0)` leaves 2.0; replica i adding i + 1
  leaves 3.0), `assign_sub` subtracts them all, `assign(x)` leaves the last replica's `x`, and every replica
  reads the value after all the updates. (Updates made by Keras's own code, an optimizer's, are left as
  they are: TF 2.21 refuses an optimizer step on such a variable in a replica, AssertionError.)
* A MirroredVariable with aggregation SUM assigned the same Python number on every replica (`w.assign(1.0)`,
  `w.assign_add([1.0, 2.0])`) is TF's ValueError "A non-DistributedValues value 1.0 cannot be reduced with the
  given reduce op ReduceOp.SUM.": TF sees one value, not one per replica. A numpy value or a tensor made in
  the replica is summed (observed: `np.float32(1.0)` and `tf.constant(1.0)` on 2 replicas add 2.0).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jdist.strategy import context
from jdist.strategy.reduce_op import ReduceOp


def shared_replicas() -> Any:
    """The replica context of a compiled `run` over several replicas (None elsewhere)."""
    if not context.in_replica_context():
        return None
    ctx = context.get_replica_context()
    if ctx is None or getattr(ctx, "axis_name", None) is None or ctx.num_replicas_in_sync < 2:
        return None
    return ctx


def every_replicas(ctx: Any, delta: Any) -> Any:
    """The sum of every replica's `delta` (what the replicas' `assign_add`s add to one variable)."""
    delta = jnp.asarray(delta)
    if delta.dtype == jnp.bool_:
        return ctx.all_reduce(ReduceOp.SUM, delta.astype(jnp.int32)).astype(jnp.bool_)
    return ctx.all_reduce(ReduceOp.SUM, delta)


def last_replicas(ctx: Any, value: Any) -> Any:
    """The last replica's `value` (what the replicas' `assign`s leave in one variable)."""
    gathered = jax.lax.all_gather(jnp.asarray(value), ctx.axis_name)
    return gathered[ctx.num_replicas_in_sync - 1]


def _python_numbers(value: Any) -> list | None:
    """The numbers of a Python number or a (nested) list / tuple of them; None for anything else."""
    if isinstance(value, (bool, int, float)):
        return [value]
    if isinstance(value, (list, tuple)) and value:
        found: list = []
        for item in value:
            inner = _python_numbers(item)
            if inner is None:
                return None
            found.extend(inner)
        return found
    return None


def refuse_same_sum(value: Any) -> None:
    """TF's ValueError for one Python value summed over the replicas (see the module docstring)."""
    numbers = _python_numbers(value)
    if numbers is None or shared_replicas() is None:
        return
    raise ValueError(
        f"A non-DistributedValues value {numbers[0]} cannot be reduced with the given reduce op ReduceOp.SUM. "
        "(A variable with aggregation SUM was assigned the same Python value on every replica; pass a tensor "
        "computed in the replica, or give the variable aggregation MEAN or ONLY_FIRST_REPLICA.)")
