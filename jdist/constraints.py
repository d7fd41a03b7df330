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

import math
from typing import TYPE_CHECKING, Any, Sequence

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

from jdist import context

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

__all__ = ["split", "replicate", "spec_from_partition_dimensions"]


def _strategy(strategy: Strategy | None) -> Strategy:
    return strategy if strategy is not None else context.get_strategy()


def logical_axes(strategy: Strategy) -> tuple[str, ...]:
    """The mesh axes that form one replica's logical devices (all but the data axis)."""
    return tuple(a for a in strategy.mesh.axis_names if a != strategy.data_axis)


def spec_from_partition_dimensions(shape: Sequence[int], partition_dimensions: Sequence[int], mesh_shape: dict,
                                   axes: Sequence[str], unsplit: Any = None) -> P:
    """Maps TF-style per-dimension split counts onto mesh `axes` (see the module docs)."""
    counts = list(partition_dimensions)
    if len(counts) != len(shape):
        raise ValueError(
            f"Length of `partition_dimensions` must equal the rank of the tensor ({len(shape)}); "
            f"received partition_dimensions={counts} for shape {tuple(shape)}."
        )
    for dim, (size, n) in enumerate(zip(shape, counts)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"partition_dimensions[{dim}] must be a positive int, got {n!r}.")
        if size % n:
            raise ValueError(
                f"Tensor shape at `partition_dimensions[{dim}]` must be divisible by {n}; the dimension has "
                f"size {size} (shape {tuple(shape)})."
            )
    total = math.prod(mesh_shape[a] for a in axes)
    if math.prod(counts) != total:
        raise ValueError(
            f"The product of `partition_dimensions` {counts} is {math.prod(counts)}, but each replica has "
            f"{total} logical devices (mesh axes {dict((a, mesh_shape[a]) for a in axes)}). Make the counts "
            "multiply to that number, or pass a PartitionSpec naming mesh axes."
        )
    remaining = [a for a in axes if mesh_shape[a] > 1]
    entries: list[Any] = []
    for dim, n in enumerate(counts):
        if n == 1:
            entries.append(unsplit)
            continue
        taken, product = [], 1
        while remaining and product < n:
            axis = remaining.pop(0)
            taken.append(axis)
            product *= mesh_shape[axis]
        if product != n:
            raise ValueError(
                f"partition_dimensions[{dim}] = {n} cannot be formed from consecutive mesh axes "
                f"{dict((a, mesh_shape[a]) for a in axes)} (got {product} from {taken}). Reshape the mesh "
                "so the split counts are products of consecutive axes, or pass a PartitionSpec."
            )
        entries.append(taken[0] if len(taken) == 1 else tuple(taken))
    return P(*entries)


def _in_replica(strategy: Strategy) -> bool:
    mesh = jax.sharding.get_abstract_mesh()
    return (not mesh.empty and strategy.data_axis in getattr(mesh, "manual_axes", ())
            and set(mesh.axis_names) == set(strategy.mesh.axis_names))


def _constrain(x: Any, spec: P, strategy: Strategy) -> Any:
    if isinstance(x, jax.core.Tracer):
        if _in_replica(strategy):
            # Inside strategy.run the data axis is manual; the spec covers the other axes.
            return jax.lax.with_sharding_constraint(x, spec)
        return jax.lax.with_sharding_constraint(x, NamedSharding(strategy.mesh, spec))
    eager = P(*(None if entry is P.UNCONSTRAINED else entry for entry in spec))
    return jax.device_put(x, NamedSharding(strategy.mesh, eager))


def split(x: Any, partition_dimensions: Sequence[int] | P, *, strategy: Strategy | None = None) -> Any:
    """Splits `x` over the logical devices of each replica (TF's
    `experimental_split_to_logical_devices`); see the module docs for the mapping.

        h = jdist.split(h, [1, 1, 4])          # (batch, seq, hidden/4) on model=4
        h = jdist.split(h, P("data", None, "model"))
    """
    strategy = _strategy(strategy)
    if isinstance(partition_dimensions, P):
        spec = partition_dimensions
    else:
        unsplit = P.UNCONSTRAINED if isinstance(x, jax.core.Tracer) and not _in_replica(strategy) else None
        spec = spec_from_partition_dimensions(
            x.shape, partition_dimensions, dict(strategy.mesh.shape), logical_axes(strategy), unsplit
        )
    return _constrain(x, spec, strategy)


def replicate(x: Any, *, strategy: Strategy | None = None) -> Any:
    """Gives every logical device of a replica the whole of `x` (TF's
    `experimental_replicate_to_logical_devices`). In a global-view step or
    eagerly, `x` becomes fully replicated."""
    return _constrain(x, P(), _strategy(strategy))
