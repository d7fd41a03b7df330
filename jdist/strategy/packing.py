"""One all-reduce per dtype for a pytree summed across processes (TF's gradient packing, `bytes_per_pack`).

XLA combines a step's gradient all-reduces into one tuple all-reduce, but XLA:CPU's gloo collectives run a
tuple as one ring all-reduce per array, one after the other, each a round of sends and waits between the
processes: 7 rings for a 3-layer MLP's kernels, biases and loss sums. `packed_psum` writes the arrays of one
dtype into one flat buffer, sums it with one all-reduce and cuts the arrays back out, as TF's
MultiWorkerMirroredStrategy packs its gradients before its ring all-reduce. The same sums, fewer rounds
(docs/benchmarks.md, "Several processes").

The buffer is filled with `dynamic_update_slice` into zeros, not `concatenate`: XLA:CPU (JAX 0.10) compiles a
concatenate of several operands into a loop far slower than a copy (25 ms for the MLP's 2.7 MB, measured on
one CPU device), which cost more than the packing saved.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def packs(leaves: list, bytes_per_pack: int = 0) -> list[list[int]]:
    """Indices of `leaves` grouped into packs: one per dtype (leaf order kept), or with `bytes_per_pack` > 0
    split so that a pack holds at most that many bytes (a larger leaf is a pack of its own)."""
    by_dtype: dict[Any, list[list[int]]] = {}
    sizes: dict[int, int] = {}
    for i, leaf in enumerate(leaves):
        dtype = jnp.result_type(leaf)
        nbytes = int(jnp.size(leaf)) * dtype.itemsize
        groups = by_dtype.setdefault(dtype, [[]])
        if bytes_per_pack and groups[-1] and sizes[id(groups[-1])] + nbytes > bytes_per_pack:
            groups.append([])
        groups[-1].append(i)
        sizes[id(groups[-1])] = sizes.get(id(groups[-1]), 0) + nbytes
    return [group for groups in by_dtype.values() for group in groups]


def packed_psum(tree: Any, axis_name: Any, bytes_per_pack: int = 0) -> Any:
    """`jax.lax.psum(tree, axis_name)` (inside `shard_map`) with one all-reduce per pack (see `packs`)."""
    leaves, treedef = jax.tree.flatten(tree)
    leaves = [jnp.asarray(leaf) for leaf in leaves]
    out = list(leaves)
    for group in packs(leaves, bytes_per_pack):
        if len(group) == 1:
            out[group[0]] = jax.lax.psum(leaves[group[0]], axis_name)
            continue
        total = sum(leaves[i].size for i in group)
        buffer = jnp.zeros((total,), leaves[group[0]].dtype)
        offset = 0
        for i in group:
            buffer = jax.lax.dynamic_update_slice(buffer, leaves[i].reshape(-1), (offset,))
            offset += leaves[i].size
        buffer = jax.lax.psum(buffer, axis_name)
        offset = 0
        for i in group:
            out[i] = buffer[offset:offset + leaves[i].size].reshape(leaves[i].shape)
            offset += leaves[i].size
    return jax.tree.unflatten(treedef, out)


def bytes_per_pack(strategy: Any) -> int:
    """The strategy's `CommunicationOptions(bytes_per_pack=...)` (0 without options: one pack per dtype)."""
    return int(getattr(getattr(strategy, "_communication_options", None), "bytes_per_pack", 0) or 0)


def spans_cpu_processes(mesh: Any, axis: str) -> bool:
    """Whether collectives over `axis` of `mesh` go between CPU processes (through gloo)."""
    devices = list(mesh.devices.flat)
    return (int(mesh.shape[axis]) > 1 and len({d.process_index for d in devices}) > 1
            and all(d.platform == "cpu" for d in devices))
