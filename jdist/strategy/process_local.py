"""Global batches built from each process's share: the multi-process input rule.

With several processes, every process loads only the rows of each global batch
that its own devices hold, and `jdist.strategy.batch.place_rows` joins the shares into one
global `jax.Array` (JAX's `make_array_from_process_local_data`). In a single
process the share is the whole batch. `process_batch_slice` says which rows a
process holds, so data loaders (and `distribute_batch`) agree on the split.
"""
from __future__ import annotations

import math
from typing import Any

import jax
from jax.sharding import NamedSharding


def row_blocks(sharding: NamedSharding) -> tuple[int, list[int]]:
    """(how many blocks dim 0 is cut into, the blocks this process's devices hold)."""
    first = sharding.spec[0] if len(sharding.spec) else None
    axes = () if first is None else (first if isinstance(first, tuple) else (first,))
    blocks = math.prod(sharding.mesh.shape[a] for a in axes)
    index_map = sharding.addressable_devices_indices_map((blocks,))
    local = sorted({(index[0].start or 0) if index else 0 for index in index_map.values()})
    if local != list(range(local[0], local[-1] + 1)):
        raise ValueError(
            f"This process holds non-adjacent blocks {local} of the batch dimension, so its share is not one "
            "slice. Order the mesh so each process's devices are contiguous along the data axis "
            "(MultiWorkerMirroredStrategy does)."
        )
    return blocks, local


def check_divisible(global_batch_size: int, num_replicas: int) -> None:
    """The clear error for a global batch that does not split evenly over replicas."""
    if global_batch_size % num_replicas:
        lower = global_batch_size - global_batch_size % num_replicas
        raise ValueError(
            f"The global batch size {global_batch_size} does not divide among "
            f"{num_replicas} replicas ({global_batch_size} % {num_replicas} = "
            f"{global_batch_size % num_replicas}). Use a multiple of {num_replicas} "
            f"(e.g. {lower or num_replicas} or {lower + num_replicas}), drop the remainder, or use "
            "strategy.experimental_distribute_dataset(), which pads the short batch and masks the padding."
        )


def process_batch_slice(sharding: NamedSharding, global_batch_size: int) -> slice:
    """The rows of a global batch of `global_batch_size` that this process feeds."""
    blocks, local = row_blocks(sharding)
    check_divisible(global_batch_size, blocks)
    per_block = global_batch_size // blocks
    return slice(local[0] * per_block, (local[-1] + 1) * per_block)


def to_host(tree: Any) -> Any:
    """Numpy copies of `tree`'s arrays, whole on every process (with several processes every
    process must call this: a leaf sharded over processes is gathered)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        def fetch(leaf: Any) -> Any:
            if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
                return multihost_utils.process_allgather(leaf, tiled=True)
            return jax.device_get(leaf)

        return jax.tree.map(fetch, tree)
    return jax.device_get(tree)
