"""Device memory: what is in use per device, and a useful message when a step runs out.

`memory_report()` reads `device.memory_stats()` where the platform has them
(GPU, TPU) and otherwise counts the bytes of live `jax.Array` shards on each
device (CPU returns no stats). `out_of_memory_error` turns XLA's
RESOURCE_EXHAUSTED into a message naming the largest buffers and the levers
that shrink them.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import jax
import numpy as np

from jdist.diagnostics.tables import format_bytes, format_table
from jdist.layout import path_str
from jdist.strategy import extensions

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy
    from jdist.strategy.devices import Device


@dataclasses.dataclass(frozen=True)
class DeviceMemory:
    """One device's memory. `bytes_in_use` / `peak_bytes_in_use` / `bytes_limit` are
    None where the platform reports no statistics."""

    device: str
    live_array_bytes: int
    bytes_in_use: int | None = None
    peak_bytes_in_use: int | None = None
    bytes_limit: int | None = None

    @property
    def source(self) -> str:
        return "memory_stats" if self.bytes_in_use is not None else "live arrays"


@dataclasses.dataclass(frozen=True)
class MemoryReport:
    """Per-device memory; `str()` is a table."""

    devices: tuple[DeviceMemory, ...]

    def __str__(self) -> str:
        rows = [
            (d.device, format_bytes(d.bytes_in_use), format_bytes(d.peak_bytes_in_use),
             format_bytes(d.bytes_limit), format_bytes(d.live_array_bytes), d.source)
            for d in self.devices
        ]
        table = format_table(("device", "in use", "peak", "limit", "live arrays", "source"), rows)
        if all(d.bytes_in_use is None for d in self.devices):
            table += ("\n(this platform reports no memory statistics: 'live arrays' counts the "
                      "jax.Array shards held on each device; no peak is available)")
        return table


def live_array_bytes(devices: Iterable[Device] | None = None) -> dict[Device, int]:
    """Bytes of live `jax.Array` shards held on each device."""
    totals: dict[Device, int] = collections.Counter()
    for array in jax.live_arrays():
        try:
            shard_shape = array.sharding.shard_shape(array.shape)
            per_shard = math.prod(shard_shape) * array.dtype.itemsize
            for device in array.sharding.addressable_devices:
                totals[device] += per_shard
        except Exception:  # deleted or exotic arrays: count nothing rather than fail a report
            continue
    if devices is not None:
        return {d: totals.get(d, 0) for d in devices}
    return dict(totals)


def memory_report(devices: Sequence[Device] | None = None) -> MemoryReport:
    """Memory of `devices` (default: this process's devices)."""
    devices = list(devices) if devices is not None else jax.local_devices()
    devices = [d for d in devices if d.process_index == jax.process_index()]
    live = live_array_bytes(devices)
    rows = []
    for device in devices:
        stats = _stats(device)
        rows.append(DeviceMemory(
            device=f"{device.platform}:{device.id}",
            live_array_bytes=live.get(device, 0),
            bytes_in_use=stats.get("bytes_in_use"),
            peak_bytes_in_use=stats.get("peak_bytes_in_use"),
            bytes_limit=stats.get("bytes_limit"),
        ))
    return MemoryReport(tuple(rows))


def _stats(device: Device) -> dict:
    try:
        return dict(device.memory_stats() or {})
    except Exception:  # some backends raise instead of returning None
        return {}


def device_memory_limit(device: Device) -> int | None:
    """The device's memory capacity in bytes, where the platform reports it."""
    return _stats(device).get("bytes_limit")


# ------------------------------------------------------------ out of memory
class DeviceOutOfMemoryError(jax.errors.JaxRuntimeError):
    """XLA ran out of device memory compiling or running a step; the message says what to change."""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is XLA's RESOURCE_EXHAUSTED (an out-of-memory error)."""
    return isinstance(error, RuntimeError) and "RESOURCE_EXHAUSTED" in str(error)


@dataclasses.dataclass(frozen=True)
class Buffer:
    path: str
    shape: tuple
    dtype: str
    bytes_per_device: int
    sharding: str


def buffers(tree: Any, prefix: str = "") -> list[Buffer]:
    """Every array leaf of `tree` with its bytes per device (largest first)."""
    out = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
            continue
        sharding = getattr(leaf, "sharding", None)
        shard_shape = sharding.shard_shape(leaf.shape) if sharding is not None else leaf.shape
        spec = getattr(sharding, "spec", None)
        out.append(Buffer(
            path=prefix + path_str(path),
            shape=tuple(leaf.shape),
            dtype=str(leaf.dtype),
            bytes_per_device=int(math.prod(shard_shape) * np.dtype(leaf.dtype).itemsize),
            sharding="replicated" if spec is not None and all(s is None for s in spec) else str(spec or "-"),
        ))
    return sorted(out, key=lambda b: -b.bytes_per_device)


def out_of_memory_error(error: BaseException, state: Any, batch: Any, strategy: Strategy,
                        *, top: int = 5) -> DeviceOutOfMemoryError:
    """A `DeviceOutOfMemoryError` explaining `error` for a step over `state` and `batch`."""
    params = getattr(state, "params", state)
    opt_state = getattr(state, "opt_state", None)
    param_buffers = buffers(params)
    opt_bytes = sum(b.bytes_per_device for b in buffers(opt_state)) if opt_state is not None else 0
    batch_buffers = buffers(batch)
    param_bytes = sum(b.bytes_per_device for b in param_buffers)
    batch_bytes = sum(b.bytes_per_device for b in batch_buffers)
    devices = getattr(strategy, "worker_devices", ()) or tuple(jax.local_devices())
    limit = device_memory_limit(devices[0]) if devices else None
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    lines = [
        f"Out of device memory compiling or running the train step under {strategy!r} "
        f"({len(devices)} devices, {devices[0].platform if devices else '?'}).",
        f"XLA said: {first_line}",
        f"Per device: parameters {format_bytes(param_bytes)}, optimizer state {format_bytes(opt_bytes)}, "
        f"gradients about {format_bytes(param_bytes)}, input batch {format_bytes(batch_bytes)}, "
        f"plus activations; device limit {format_bytes(limit)}.",
        "Largest parameters (bytes per device):",
    ]
    lines += [f"  {b.path}  {b.shape} {b.dtype}  {format_bytes(b.bytes_per_device)}  {b.sharding}"
              for b in param_buffers[:top]]
    if batch_buffers:
        lines.append("Largest batch entries (bytes per device):")
        lines += [f"  {b.path or '<batch>'}  {b.shape} {b.dtype}  {format_bytes(b.bytes_per_device)}"
                  for b in batch_buffers[:top]]
    lines += [
        "To fit, any of:",
        "  - shard parameters, gradients and optimizer state over the replicas (FSDP) instead of copying them;",
        "  - split the largest layers over a 'model' mesh axis (model parallel: "
        "jdist.Strategy(mesh_shape={'data': -1, 'model': 2}, layout=rules));",
        "  - gradient accumulation: make_train_step(..., accumulation_steps=k) keeps the global batch "
        "with 1/k of the activations;",
        "  - a smaller global batch, or mixed precision: make_train_step(..., policy='mixed_bfloat16');",
        "  - jdist.recommend_strategy(params, optimizer, global_batch_size) estimates which layout fits.",
    ]
    return DeviceOutOfMemoryError("\n".join(lines))


extensions.register_method("memory_report", memory_report)
