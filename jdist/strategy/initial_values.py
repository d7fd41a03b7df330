"""One set of initial values per job: every copy of a value takes the first replica's (the chief's).

Each worker process runs the same program and initialises its own values,
often from its own seed. Placing such a value on a mesh that spans several
processes builds one global array from each process's local copy, so the
replicas silently hold different numbers and keep training apart. TF
broadcasts initial values from the chief; here every leaf placed on such a
mesh goes through one compiled program that gives each copy along the axes
the leaf is replicated on the value held at index 0 of those axes (process
0's devices come first on a multi-worker mesh). A leaf split over an axis
keeps its own share there: each element has one owner. With one process
nothing is done.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P


def spans_processes(sharding: Any) -> bool:
    """Whether a value with this sharding has copies in more than one process."""
    return (jax.process_count() > 1 and isinstance(sharding, jax.sharding.Sharding)
            and not sharding.is_fully_addressable)


def from_first_replica(tree: Any, shardings: Any) -> Any:
    """`tree` placed with `shardings` (a matching pytree), every replicated copy equal to the first one.

    Leaves may be host values or arrays; typed PRNG keys are carried by their key data. Every
    process must call this with trees of the same structure, shapes and shardings.
    """
    leaves, treedef = jax.tree.flatten(tree)
    shard_leaves = treedef.flatten_up_to(shardings)
    placed = [to_global(leaf, sharding) for leaf, sharding in zip(leaves, shard_leaves)]
    return jax.tree.unflatten(treedef, _program(tuple(shard_leaves))(placed))


def to_global(leaf: Any, sharding: Any) -> Any:
    """`leaf` as an array with `sharding`, built from this process's own copy where it is host-local.

    Unlike `jax.device_put`, which asserts (in a collective per leaf) that a host value is the
    same on every process, the copies may differ here: `from_first_replica` settles them.
    """
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        return leaf if leaf.sharding == sharding else jax.device_put(leaf, sharding)
    if not spans_processes(sharding):
        return jax.device_put(leaf, sharding)
    if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        data = to_global(jax.random.key_data(leaf), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
    value = np.asarray(jnp.asarray(leaf))  # the dtype JAX gives it (float32 for a float64 array without x64)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def chief_int(value: int) -> int:
    """The chief's `value` (a seed, say) on every process; `value` itself with one process.

    Every process must call it at the same point of its program (it is a collective)."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    bits = int(value) & (2**64 - 1)  # two 32-bit halves: without x64 JAX keeps 32-bit integers
    halves = multihost_utils.broadcast_one_to_all(np.array([bits >> 32, bits & 0xFFFFFFFF], np.uint32))
    bits = (int(halves[0]) << 32) | int(halves[1])
    return bits - 2**64 if bits >= 2**63 else bits


_PROGRAMS: dict[tuple, Any] = {}


def _program(shardings: tuple) -> Any:
    """One jitted copy-from-first-replica per tuple of shardings (retraced per shapes and dtypes)."""
    program = _PROGRAMS.get(shardings)
    if program is None:
        def run(leaves: list) -> list:
            return [_first_copy(x, s) for x, s in zip(leaves, shardings)]

        program = _PROGRAMS[shardings] = jax.jit(run, out_shardings=list(shardings))
    return program


def _first_copy(x: Any, sharding: Any) -> Any:
    if not (spans_processes(sharding) and isinstance(sharding, NamedSharding)):
        return jnp.copy(x)
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        impl = jax.random.key_impl(x)
        return jax.random.wrap_key_data(_first_copy(jax.random.key_data(x), sharding), impl=impl)
    mesh, spec = sharding.mesh, sharding.spec
    used = {a for entry in spec if entry is not None for a in (entry if isinstance(entry, tuple) else (entry,))}
    replicated = tuple(a for a in mesh.axis_names if a not in used and mesh.shape[a] > 1)
    if not replicated:
        return jnp.copy(x)

    def body(block):
        first = jnp.all(jnp.stack([jax.lax.axis_index(a) == 0 for a in replicated]))
        carried = block.astype(jnp.uint8) if block.dtype == jnp.bool_ else block
        summed = jax.lax.psum(jnp.where(first, carried, jnp.zeros_like(carried)), replicated)
        return summed.astype(block.dtype)

    spec = P(*spec) if len(spec) <= x.ndim else P(*spec[:x.ndim])
    return jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=spec)(x)
