"""`TPUStrategy`: synchronous data parallelism over all TPU cores of a slice.

Every core (on every host) is one replica on the mesh's `data` axis and the
parameters are replicated, as in TF. With `num_logical_devices_per_replica=m`
the mesh is `data x model` (m cores per replica) and the three TF model-parallel
annotations map onto the `model` axis with sharding constraints. jdist compiles
with XLA's SPMD partitioner, like TF's `experimental_spmd_xla_partitioning=True`.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import jax
from jax.sharding import PartitionSpec as P

from jdist.strategy import context
from jdist.strategy.base import Strategy
from jdist.strategy.devices import DeviceLike
from jdist.strategy.tpu_system import TPUTopology, initialize_tpu_system
from jdist.typing import ArrayLike

MODEL_AXIS = "model"


def _topology_order(devices: list, shape: tuple[int, ...]) -> list:
    """Real TPU cores in an order where neighbours on the mesh are neighbours on the chip grid."""
    if devices[0].platform != "tpu":
        return devices
    from jax.experimental import mesh_utils

    try:
        return list(mesh_utils.create_device_mesh(shape, devices).flat)
    except (ValueError, NotImplementedError, AssertionError):  # unusual slices: keep JAX's order
        return devices


class TPUStrategy(Strategy):
    """`jdist.TPUStrategy()` on a TPU VM or pod; `TPUStrategy(devices=jax.devices("cpu"))` anywhere.

    Args:
      tpu_cluster_resolver: accepted for TF compatibility (`strategy.cluster_resolver`);
        JAX's TPU detection finds the slice (see `jdist.strategy.tpu_system`).
      devices: run on these devices instead of the TPUs (e.g. simulated CPU devices in tests).
      num_logical_devices_per_replica: cores per replica for model parallelism (mesh `data x model`).
    """

    _require_static_shapes = True  # a TPU program is compiled for one batch shape

    def __init__(self, tpu_cluster_resolver: object = None, *, devices: Sequence[DeviceLike] | None = None,
                 num_logical_devices_per_replica: int = 1):
        topology = initialize_tpu_system(tpu_cluster_resolver, devices=devices)
        found = list(topology.devices)
        m = num_logical_devices_per_replica
        if isinstance(m, bool) or not isinstance(m, int) or m < 1 or len(found) % m:
            raise ValueError(
                f"num_logical_devices_per_replica={m!r} must be a positive divisor of the {len(found)} devices."
            )
        shape = {"data": len(found) // m} if m == 1 else {"data": len(found) // m, MODEL_AXIS: m}
        super().__init__(mesh_shape=shape, devices=_topology_order(found, tuple(shape.values())))
        self._resolver = tpu_cluster_resolver
        self._topology = topology
        self._logical = m

    @property
    def cluster_resolver(self) -> Any:
        return self._resolver

    @property
    def topology(self) -> TPUTopology:
        return self._topology

    @property
    def num_logical_devices_per_replica(self) -> int:
        return self._logical

    def __repr__(self) -> str:
        shape = ", ".join(f"{k}={v}" for k, v in self.mesh.shape.items())
        return f"TPUStrategy(platform={self._topology.platform!r}, mesh=({shape}))"

    # ------------------------------------------------- logical devices (in run)
    def _require_replica_context(self, method: str) -> None:
        if not context.in_replica_context():
            raise RuntimeError(
                f"strategy.{method}() annotates a value inside the replica function: call it within "
                "strategy.run(fn, ...)."
            )

    def _check_logical_id(self, logical_device_id: int) -> None:
        if not 0 <= logical_device_id < self._logical:
            raise ValueError(
                f"logical_device_id={logical_device_id} is out of range: this strategy has "
                f"{self._logical} logical device(s) per replica (num_logical_devices_per_replica)."
            )

    def experimental_split_to_logical_devices(self, tensor: ArrayLike,
                                              partition_dimensions: Sequence[int]) -> jax.Array:
        """Splits `tensor` over the replica's logical devices: `partition_dimensions[i]` parts along dim i.

        The parts must multiply to `num_logical_devices_per_replica`; one dimension can be
        split (the `model` axis is one mesh axis). Other dimensions are left to the compiler.
        """
        self._require_replica_context("experimental_split_to_logical_devices")
        tensor = jax.numpy.asarray(tensor)
        dims = [int(d) for d in partition_dimensions]
        if len(dims) != tensor.ndim:
            raise ValueError(f"partition_dimensions {dims} needs one entry per dimension of a "
                             f"rank-{tensor.ndim} tensor.")
        if math.prod(dims) != self._logical:
            raise ValueError(
                f"partition_dimensions {dims} multiply to {math.prod(dims)}, but each replica has "
                f"{self._logical} logical devices (num_logical_devices_per_replica)."
            )
        split = [i for i, d in enumerate(dims) if d > 1]
        if len(split) > 1:
            raise NotImplementedError(
                f"partition_dimensions {dims} split {len(split)} dimensions; jdist's TPUStrategy has one model "
                "axis, so split one dimension, or use jdist.Strategy(mesh_shape=...) with several model axes."
            )
        for i in split:
            if tensor.shape[i] % dims[i]:
                raise ValueError(f"Dimension {i} of size {tensor.shape[i]} does not split into {dims[i]} parts.")
        spec = P(*[MODEL_AXIS if d > 1 else P.UNCONSTRAINED for d in dims])
        return jax.lax.with_sharding_constraint(tensor, spec)

    def experimental_replicate_to_logical_devices(self, tensor: ArrayLike) -> jax.Array:
        """Keeps a whole copy of `tensor` on every logical device of the replica."""
        self._require_replica_context("experimental_replicate_to_logical_devices")
        return jax.lax.with_sharding_constraint(jax.numpy.asarray(tensor), P())

    def experimental_assign_to_logical_device(self, tensor: ArrayLike, logical_device_id: int) -> jax.Array:
        """TF places `tensor` on one logical device. Under SPMD partitioning (which jdist always
        uses; TF raises here in that mode) a value cannot live on one core only, so jdist checks
        `logical_device_id` and keeps the value whole on the replica's logical devices: the same
        numbers, replicated rather than pinned."""
        self._require_replica_context("experimental_assign_to_logical_device")
        self._check_logical_id(logical_device_id)
        return self.experimental_replicate_to_logical_devices(tensor)
