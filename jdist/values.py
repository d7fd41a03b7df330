"""Per-replica values: one value per replica, as TF's `PerReplica`.

Two storage forms:
- *stacked*: one global `jax.Array` of shape `(num_replicas, *value_shape)` sharded
  over the data axis, so replica i's value lives on replica i's device. This is what
  `run` returns and what it consumes without any copies.
- *ragged*: a tuple of per-device arrays whose shapes differ (TF allows this for
  values made by `experimental_distribute_values_from_function`); `reduce` and
  `gather` accept it, compiled `run` does not.
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np


class PerReplica:
    """A value that differs per replica. `.values` is the tuple of local components."""

    __slots__ = ("_stacked", "_ragged")

    def __init__(self, stacked: Any = None, ragged: Sequence[Any] | None = None):
        if (stacked is None) == (ragged is None):
            raise ValueError("PerReplica needs exactly one of `stacked` or `ragged`.")
        self._stacked = stacked
        self._ragged = tuple(ragged) if ragged is not None else None

    @property
    def is_stacked(self) -> bool:
        return self._stacked is not None

    @property
    def stacked(self) -> Any:
        """The `(num_replicas, ...)` array; `ValueError` when shapes differ per replica."""
        if self._stacked is None:
            shapes = [tuple(np.shape(v)) for v in self._ragged]
            raise ValueError(
                f"Per-replica values have different shapes {shapes}; compiled code needs "
                "equal shapes. Pad them to one shape (and carry a mask), or reduce with "
                "`axis=` so each replica is reduced first."
            )
        return self._stacked

    @property
    def num_replicas(self) -> int:
        return len(self._ragged) if self._ragged is not None else self._stacked.shape[0]

    @property
    def values(self) -> tuple:
        """The components held by this process, in replica order (TF's `.values`)."""
        if self._ragged is not None:
            return self._ragged
        return local_components(self._stacked)

    def __repr__(self) -> str:
        body = ",\n  ".join(f"{i}: {v!r}" for i, v in enumerate(self.values))
        return f"PerReplica:{{\n  {body}\n}}"


def local_components(stacked: Any) -> tuple:
    """Splits a stacked array into its local replica values, each left on its device."""
    if not isinstance(stacked, jax.Array) or isinstance(stacked, jax.core.Tracer):
        return tuple(stacked[i] for i in range(stacked.shape[0]))
    shards = sorted(stacked.addressable_shards, key=lambda s: s.index[0].start or 0)
    if any(tuple(s.data.shape[1:]) != tuple(stacked.shape[1:]) for s in shards):
        return _assemble_split_components(stacked, shards)
    seen, parts = set(), []
    for shard in shards:
        start = shard.index[0].start or 0
        if start in seen:  # replicated over another mesh axis: keep one copy
            continue
        seen.add(start)
        parts.extend(shard.data[i] for i in range(shard.data.shape[0]))
    return tuple(parts)


def _assemble_split_components(stacked: Any, shards: list) -> tuple:
    """Replica values that are themselves split over another mesh axis (model-parallel
    results of `run`): each is put together from its pieces, on its replica's first device."""
    rows: dict[int, tuple[np.ndarray, Any]] = {}
    for shard in shards:
        start = shard.index[0].start or 0
        if start not in rows:
            rows[start] = (np.empty(shard.data.shape[:1] + stacked.shape[1:], stacked.dtype), shard.device)
        rows[start][0][(slice(None),) + tuple(shard.index[1:])] = np.asarray(shard.data)
    return tuple(jax.device_put(block[i], device) for _, (block, device) in sorted(rows.items())
                 for i in range(block.shape[0]))


def _flatten(pr: PerReplica):
    if pr._stacked is not None:
        return (pr._stacked,), ("stacked", None)
    return tuple(pr._ragged), ("ragged", len(pr._ragged))


def _unflatten(aux, children):
    kind, _ = aux
    if kind == "stacked":
        return PerReplica(stacked=children[0])
    return PerReplica(ragged=children)


jax.tree_util.register_pytree_node(PerReplica, _flatten, _unflatten)


def is_per_replica(x: Any) -> bool:
    return isinstance(x, PerReplica)


def stack_on_devices(
    local_values: Sequence[tuple[jax.Device, Any]], mesh: jax.sharding.Mesh, axis: str
) -> PerReplica:
    """Builds a PerReplica from this process's (device, value) pairs, each placed on its device."""
    arrays = [(d, v if isinstance(v, jax.Array) else np.asarray(v)) for d, v in local_values]
    signatures = {(tuple(a.shape), np.dtype(a.dtype)) for _, a in arrays}
    if len(signatures) != 1:
        return PerReplica(ragged=[jax.device_put(a, d) for d, a in arrays])
    ((shape, _),) = signatures
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    pieces = [jax.device_put(np.expand_dims(np.asarray(a), 0), d) for d, a in arrays]
    global_shape = (mesh.shape[axis],) + shape
    return PerReplica(stacked=jax.make_array_from_single_device_arrays(global_shape, sharding, pieces))
