"""The logical devices of a replica: where a value lives inside a step, on a given strategy.

The strategy-explicit half of `jdist.strategy.constraints` (see its docs for the mapping of
TF's `partition_dimensions` onto mesh axes); `Strategy.experimental_split_to_logical_devices`
and friends call it with themselves, `jdist.split` with the current strategy.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import jax
import jax.core
from jax.sharding import NamedSharding, PartitionSpec as P

from jdist.typing import ArrayLike

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


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


def _constrain(x: ArrayLike, spec: P, strategy: Strategy) -> jax.Array:
    if isinstance(x, jax.core.Tracer):
        if _in_replica(strategy):
            # Inside strategy.run the data axis is manual; the spec covers the other axes.
            return jax.lax.with_sharding_constraint(x, spec)
        return jax.lax.with_sharding_constraint(x, NamedSharding(strategy.mesh, spec))
    eager = P(*(None if entry is P.UNCONSTRAINED else entry for entry in spec))
    return jax.device_put(x, NamedSharding(strategy.mesh, eager))


def split_on(strategy: Strategy, x: ArrayLike, partition_dimensions: Sequence[int] | P) -> jax.Array:
    """`x` split over the logical devices of each replica of `strategy` (see `jdist.strategy.constraints`)."""
    if isinstance(partition_dimensions, P):
        spec = partition_dimensions
    else:
        unsplit = P.UNCONSTRAINED if isinstance(x, jax.core.Tracer) and not _in_replica(strategy) else None
        spec = spec_from_partition_dimensions(
            x.shape, partition_dimensions, dict(strategy.mesh.shape), logical_axes(strategy), unsplit
        )
    return _constrain(x, spec, strategy)


def replicate_on(strategy: Strategy, x: ArrayLike) -> jax.Array:
    """`x` whole on every logical device of each replica of `strategy`."""
    return _constrain(x, P(), strategy)
