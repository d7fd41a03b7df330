"""Constraining where a value lives inside a step: TF's logical-device annotations.

TF's `TPUStrategy.experimental_split_to_logical_devices(tensor,
partition_dimensions)` splits a per-replica tensor over the logical devices of
its replica. Here the logical devices of a replica are the strategy mesh's
non-data axes (e.g. `model`), so `partition_dimensions` maps onto those axes:

- `partition_dimensions` has one int per dimension of `x`: how many pieces that
  dimension is cut into. As in TF, every dimension must be divisible by its
  count, and the counts must multiply to the number of logical devices per
  replica (the product of the non-data axis sizes).
- Dimensions with count > 1 take the non-data mesh axes in mesh order, as many
  consecutive axes as multiply to the count: on a `{"data": 2, "x": 2, "y": 2}`
  mesh, `[1, 2, 2]` is `P(_, "x", "y")` and `[1, 4, 1]` is `P(_, ("x", "y"), _)`.
  This is TF's tile assignment `arange(n).reshape(partition_dimensions)` when
  logical device ids run over the non-data axes in row-major order.
- Dimensions with count 1 are not split over logical devices. Inside
  `strategy.run` (per-replica code) they are replicated within the replica, as
  in TF. In a global-view step (plain `jax.jit` over the global batch) they are
  left to the compiler (`PartitionSpec.UNCONSTRAINED`), so a batch dimension
  keeps its split over the data axis.

A `PartitionSpec` may be passed instead of counts, naming mesh axes directly.
Outside any trace the value is moved with `jax.device_put` (count-1 dimensions
replicated).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import jax
from jax.sharding import PartitionSpec as P

from jdist.strategy import context
from jdist.strategy.logical_devices import replicate_on, spec_from_partition_dimensions, split_on
from jdist.typing import ArrayLike

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

__all__ = ["split", "replicate", "spec_from_partition_dimensions"]


def _strategy(strategy: Strategy | None) -> Strategy:
    return strategy if strategy is not None else context.get_strategy()


def split(x: ArrayLike, partition_dimensions: Sequence[int] | P, *, strategy: Strategy | None = None) -> jax.Array:
    """Splits `x` over the logical devices of each replica (TF's
    `experimental_split_to_logical_devices`); see the module docs for the mapping.

        h = jdist.split(h, [1, 1, 4])          # (batch, seq, hidden/4) on model=4
        h = jdist.split(h, P("data", None, "model"))
    """
    return split_on(_strategy(strategy), x, partition_dimensions)


def replicate(x: ArrayLike, *, strategy: Strategy | None = None) -> jax.Array:
    """Gives every logical device of a replica the whole of `x` (TF's
    `experimental_replicate_to_logical_devices`). In a global-view step or
    eagerly, `x` becomes fully replicated."""
    return replicate_on(_strategy(strategy), x)
