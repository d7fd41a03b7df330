"""Detecting checkpoints that are damaged, or that belong to a different model.

Orbax's atomic commit keeps half-written checkpoints invisible, but nothing in
the stored format notices a flipped byte or a swapped-in file: a zstd chunk can
decode to wrong numbers without an error. So every save records, per leaf, its
path, shape, dtype and a 64-bit checksum of its bytes (a manifest); a restore
checks the target against the manifest, the stored arrays against the
manifest, and the restored values against the checksums.

The checksum of a leaf is two sums of its 32-bit words w_i modulo 2**32: the
plain sum and the position-weighted sum of w_i * (2i + 1). Any single flipped
bit changes both (the weights are odd); moved blocks change the second. Sums
are order-independent, so they are computed on device under any sharding (no
gather) and equal the numpy computation on the host.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.checkpoint.tree import LeafSpec, key_data_shape

_MAX_LISTED = 20


class CheckpointError(RuntimeError):
    """Base class of jdist checkpoint errors."""


class CheckpointCorruptedError(CheckpointError):
    """A checkpoint on disk is damaged (missing, truncated or altered files)."""

    def __init__(self, step: int | None, problem: str):
        self.step = step
        self.problem = problem
        where = f"Checkpoint step {step}" if step is not None else "Checkpoint"
        super().__init__(f"{where} is corrupted: {problem}")


class CheckpointMismatchError(CheckpointError, ValueError):
    """A checkpoint does not fit the restore target (typically another model's)."""


# ------------------------------------------------------------------ checksums
def supports_checksum(dtype: Any) -> bool:
    dtype = np.dtype(dtype)
    return dtype == np.bool_ or dtype.itemsize in (1, 2, 4, 8) or np.issubdtype(dtype, np.complexfloating)


def _words_jax(x: jax.Array) -> jax.Array:
    dtype = np.dtype(x.dtype)
    if dtype == np.bool_:
        return x.astype(jnp.uint32)
    if np.issubdtype(dtype, np.complexfloating):
        return _words_jax(jnp.stack([x.real, x.imag], axis=-1))
    if dtype.itemsize == 4:
        return lax.bitcast_convert_type(x, jnp.uint32)
    if dtype.itemsize == 2:
        return lax.bitcast_convert_type(x, jnp.uint16).astype(jnp.uint32)
    if dtype.itemsize == 1:
        return lax.bitcast_convert_type(x, jnp.uint8).astype(jnp.uint32)
    return lax.bitcast_convert_type(x, jnp.uint32)  # 8 bytes -> trailing axis of 2 words


def _words_numpy(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype == np.bool_:
        return x.astype(np.uint32).ravel()
    if np.issubdtype(x.dtype, np.complexfloating):
        return _words_numpy(np.stack([np.real(x), np.imag(x)], axis=-1))
    if x.dtype.itemsize == 2:
        return x.view(np.uint16).astype(np.uint32).ravel()
    if x.dtype.itemsize == 1:
        return x.view(np.uint8).astype(np.uint32).ravel()
    return x.view(np.uint32).ravel()  # 4 bytes, or 8 bytes as two words (low word first)


def _linear_index(shape: tuple[int, ...]) -> jax.Array:
    """Each element's C-order position, modulo 2**32, built from per-axis iotas (no reshape)."""
    index = jnp.zeros(shape, jnp.uint32)
    stride = 1
    for axis in reversed(range(len(shape))):
        index = index + lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(stride % 2**32)
        stride *= shape[axis]
    return index


def _checksum_jax(x: jax.Array, use_dot: bool) -> jax.Array:
    """[sum(w), sum(w * (2i + 1))] mod 2**32 over the words w at positions i.

    Splitting i = r * d + k over the last axis (length d) gives
    sum_r (A_r + 2 d r B_r) with A = w @ (2k + 1) and B = w @ 1: two
    matrix-vector products, which XLA:CPU runs several times faster than an
    elementwise integer reduction. Other backends reduce elementwise (integer
    matmuls are not native there). Both are exact modulo 2**32.
    """
    words = _words_jax(x)
    if words.ndim == 0:
        words = words[None]
    d = words.shape[-1]
    k = lax.iota(jnp.uint32, d)
    if use_dot:
        a = jnp.dot(words, k * jnp.uint32(2) + jnp.uint32(1), preferred_element_type=jnp.uint32)
        b = jnp.dot(words, jnp.ones(d, jnp.uint32), preferred_element_type=jnp.uint32)
    else:
        a = jnp.sum(words * (k * jnp.uint32(2) + jnp.uint32(1)), axis=-1, dtype=jnp.uint32)
        b = jnp.sum(words, axis=-1, dtype=jnp.uint32)
    r = _linear_index(words.shape[:-1])
    weighted = a + r * jnp.uint32((2 * d) % 2**32) * b
    return jnp.stack([jnp.sum(b, dtype=jnp.uint32), jnp.sum(weighted, dtype=jnp.uint32)])


def checksum_numpy(x: Any) -> list[int]:
    """The host computation of the same checksum, for numpy values and Python numbers."""
    words = _words_numpy(np.asarray(x))
    odd = np.arange(words.size, dtype=np.uint64).astype(np.uint32) * np.uint32(2) + np.uint32(1)
    return [int(np.sum(words, dtype=np.uint32)), int(np.sum(words * odd, dtype=np.uint32))]


def _replicated_on(leaf: jax.Array) -> Any:
    sharding = leaf.sharding
    if isinstance(sharding, NamedSharding):
        return NamedSharding(sharding.mesh, P())
    if len(sharding.device_set) == 1:
        return sharding
    devices = sorted(sharding.device_set, key=lambda d: d.id)
    return NamedSharding(Mesh(np.array(devices), ("devices",)), P())


@functools.cache
def _checksum_fn(out_sharding: Any, use_dot: bool):
    return jax.jit(functools.partial(_checksum_jax, use_dot=use_dot), out_shardings=out_sharding)


def device_checksums(leaves: Sequence[jax.Array]) -> list[jax.Array]:
    """Dispatches the checksums of device arrays; returns (2,) uint32 arrays, not yet fetched.

    One compiled function per leaf shape, dtype and sharding (so a new model
    compiles a handful of small programs, not one per tree). A replicated leaf
    is summed once, from one local copy, with copies taken round-robin over the
    local devices so they work in parallel; a sharded leaf is summed where it
    lies (a cross-device reduction). Results are replicated so every process can
    read them.
    """
    out = []
    with jax.set_mesh(None):  # a strategy scope's mesh must not constrain these placements
        for i, leaf in enumerate(leaves):
            if leaf.is_fully_replicated and len(leaf.sharding.device_set) > 1:
                shards = leaf.addressable_shards
                leaf = shards[i % len(shards)].data
            device = next(iter(leaf.sharding.device_set))
            default_kind = device.default_memory().kind
            if leaf.sharding.memory_kind not in (None, default_kind):  # e.g. central storage's host memory
                leaf = jax.device_put(leaf, leaf.sharding.with_memory_kind(default_kind))
            use_dot = device.platform == "cpu"
            out.append(_checksum_fn(_replicated_on(leaf), use_dot)(leaf))
    return out


def fetch_checksums(pending: Iterable[Any]) -> list[list[int] | None]:
    """Resolves what `checksums_of` returned into JSON-able ints (waits for device results)."""
    out: list[list[int] | None] = []
    for item in pending:
        if item is None or isinstance(item, list):
            out.append(item)
        else:
            out.append([int(v) for v in np.asarray(item.addressable_shards[0].data)])
    return out


def checksums_of(values: Sequence[Any], kinds: Sequence[str]) -> list[Any]:
    """Pending checksums for stored values (device arrays on device, host values with numpy)."""
    device_index = [i for i, (v, k) in enumerate(zip(values, kinds))
                    if isinstance(v, jax.Array) and supports_checksum(v.dtype)]
    pending: list[Any] = [None] * len(values)
    for i, item in zip(device_index, device_checksums([values[i] for i in device_index])):
        pending[i] = item
    for i, v in enumerate(values):
        if i not in device_index and not isinstance(v, jax.Array) and supports_checksum(np.asarray(v).dtype):
            pending[i] = checksum_numpy(v)
    return pending


# ------------------------------------------------------------------ manifests
def _describe(spec: LeafSpec) -> str:
    return f"{spec.shape} {spec.dtype}" if spec.kind != "key" else f"{spec.shape} key<{spec.key_impl}>"


def target_problems(saved: Sequence[LeafSpec], expected: Sequence[LeafSpec]) -> list[str]:
    """How a checkpoint's leaves differ from the restore target's (empty when they fit)."""
    saved_by_path = {s.path: s for s in saved}
    expected_by_path = {s.path: s for s in expected}
    problems = []
    for path, want in expected_by_path.items():
        have = saved_by_path.get(path)
        if have is None:
            problems.append(f"{path}: in the target but not in the checkpoint")
            continue
        keyish = (have.kind == "key", want.kind == "key")
        if keyish[0] != keyish[1] or have.shape != want.shape or not _dtype_fits(have, want) \
                or have.key_impl != want.key_impl:
            problems.append(f"{path}: saved {_describe(have)}, expected {_describe(want)}")
    for path in saved_by_path:
        if path not in expected_by_path:
            problems.append(f"{path}: in the checkpoint but not in the target")
    return problems


def _dtype_fits(have: LeafSpec, want: LeafSpec) -> bool:
    """Same dtype; a scalar also fits another dtype of its kind (integers, floats), whether it
    is a Python number or a 0-d array: a step counter saved as a placed int32 array restores
    into a state built outside any scope, whose step is a Python int, and back. A 0-d array
    fits where the cast is lossless (int32 into int64, not float32 into bfloat16)."""
    if have.dtype == want.dtype:
        return True
    if "key" in (have.kind, want.kind):
        return False
    if have.kind != "scalar":
        return have.shape == want.shape == () and np.can_cast(np.dtype(have.dtype), np.dtype(want.dtype), "safe")
    return np.dtype(have.dtype).kind == np.dtype(want.dtype).kind or (
        {np.dtype(have.dtype).kind, np.dtype(want.dtype).kind} <= {"i", "u"}
    )


def mismatch_error(step: int, directory: Any, problems: list[str]) -> CheckpointMismatchError:
    listed = "\n  ".join(problems[:_MAX_LISTED])
    more = f"\n  ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
    return CheckpointMismatchError(
        f"Checkpoint step {step} in {directory} does not match the restore target "
        f"({len(problems)} leaf difference(s); is it from a different model?):\n  {listed}{more}\n"
        "Restore into a target built like the saved state (same model and optimizer), or use the "
        "directory that belongs to this model."
    )


def stored_problems(saved: Sequence[LeafSpec], stored: dict[str, Any]) -> list[str]:
    """How the arrays orbax holds on disk differ from the manifest written with them."""
    problems = []
    for spec in saved:
        node: Any = stored
        try:
            for part in spec.path.split("/"):
                node = node[part]
        except (KeyError, TypeError):
            problems.append(f"{spec.path}: listed in the manifest but not stored")
            continue
        shape = key_data_shape(spec) if spec.kind == "key" else spec.shape
        dtype = "uint32" if spec.kind == "key" else spec.dtype
        stored_shape = tuple(getattr(node, "shape", None) or ())
        stored_dtype = getattr(node, "dtype", None)
        if stored_shape != tuple(shape) or (stored_dtype is not None and str(np.dtype(stored_dtype)) != dtype):
            problems.append(f"{spec.path}: stored as {stored_shape} {stored_dtype}, manifest says {shape} {dtype}")
    return problems


def checksum_problems(saved: Sequence[LeafSpec], expected_sums: Sequence[Any], actual_sums: Sequence[Any]) -> list[str]:
    return [
        f"{spec.path}: checksum {got} differs from the saved {want}"
        for spec, want, got in zip(saved, expected_sums, actual_sums)
        if want is not None and got is not None and list(want) != list(got)
    ]
