"""TPU system setup: `initialize_tpu_system()` and the topology it reports.

TF's ritual (`TPUClusterResolver` -> `experimental_connect_to_cluster` ->
`tf.tpu.experimental.initialize_tpu_system`) becomes one call. On a single-host
TPU VM (a Colab TPU runtime) all cores are local and nothing needs connecting.
On a multi-host pod slice every host runs the same program, and the hosts join
through JAX's distributed runtime: when a pod environment is detected
(`TPU_WORKER_HOSTNAMES` naming several hosts, or `MEGASCALE_COORDINATOR_ADDRESS`
for multi-slice), `jax.distributed.initialize()` is called once, before JAX
touches the devices, and its TPU auto-detection finds the coordinator. Anywhere
else, call `jax.distributed.initialize(...)` yourself before creating the strategy.

Unlike TF, initializing twice is harmless: the second call returns the same
topology and TPU memory is never wiped.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Sequence

import jax

from jdist.strategy.devices import DeviceLike, resolve_devices

_NO_TPU_HINT = (
    "To run the same code path without a TPU (tests, CPU-only machines), pass the devices "
    'explicitly: jdist.TPUStrategy(devices=jax.devices("cpu")) (with '
    "XLA_FLAGS=--xla_force_host_platform_device_count=8 for 8 simulated cores)."
)


class TPUNotFoundError(RuntimeError):
    """No TPU backend is available (raised by `initialize_tpu_system` and `TPUStrategy`)."""


@dataclasses.dataclass(frozen=True)
class TPUTopology:
    """What `initialize_tpu_system` found (TF's `tf.tpu.experimental.Topology`, in spirit).

    `num_tasks`: hosts (JAX processes); `num_tpus_per_task`: cores per host;
    `mesh_shape`: the physical grid of chips (x, y, z) from device coordinates, `()` when
    the devices have none (CPU); `device_coordinates`: each device's coordinates.
    """

    platform: str
    device_kind: str
    num_tasks: int
    num_tpus_per_task: int
    num_devices: int
    mesh_shape: tuple[int, ...]
    device_coordinates: tuple[tuple[int, ...], ...]
    devices: tuple[Any, ...]


_TOPOLOGIES: dict[Any, TPUTopology] = {}


def tpu_pod_env_detected(environ: dict | None = None) -> bool:
    """Whether this process is one host of a multi-host TPU slice (or a multi-slice job)."""
    env = os.environ if environ is None else environ
    hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    return len(hosts) > 1 or bool(env.get("MEGASCALE_COORDINATOR_ADDRESS"))


def _connect_pod() -> None:
    if jax.distributed.is_initialized():
        return
    try:
        jax.distributed.initialize()
    except RuntimeError as err:
        raise RuntimeError(
            "This host is part of a multi-host TPU slice, but JAX's distributed runtime could not be "
            "started. Create the TPUStrategy (or call jdist.tpu.initialize_tpu_system()) before any other "
            f"JAX computation, on every host. JAX said: {err}"
        ) from err


def tpu_devices() -> list:
    """All TPU cores of the slice (every host's), or `TPUNotFoundError`."""
    try:
        devices = jax.devices("tpu")
    except RuntimeError:
        devices = []
    if not devices:
        raise TPUNotFoundError(f"No TPU found: JAX's backend is {jax.default_backend()!r}. {_NO_TPU_HINT}")
    return devices


def _topology(devices: Sequence[Any]) -> TPUTopology:
    coords = tuple(tuple(getattr(d, "coords", ())) for d in devices)
    mesh_shape = tuple(max(c[i] for c in coords) + 1 for i in range(len(coords[0]))) if coords and coords[0] else ()
    processes = sorted({d.process_index for d in devices})
    return TPUTopology(
        platform=devices[0].platform,
        device_kind=devices[0].device_kind,
        num_tasks=len(processes),
        num_tpus_per_task=len(devices) // len(processes),
        num_devices=len(devices),
        mesh_shape=mesh_shape,
        device_coordinates=coords,
        devices=tuple(devices),
    )


def initialize_tpu_system(cluster_resolver: object = None, *,
                          devices: Sequence[DeviceLike] | None = None) -> TPUTopology:
    """Connects the TPU hosts (once) and returns the topology; safe to call again.

    `cluster_resolver` is accepted for TF compatibility; JAX's own TPU detection
    finds the slice. `devices=` describes those devices instead of the TPUs (the
    escape hatch that runs TPU code paths on CPU devices); without it and without
    a TPU this raises `TPUNotFoundError`.
    """
    if devices is None:
        if tpu_pod_env_detected():
            _connect_pod()
        resolved = tpu_devices()
    else:
        resolved = resolve_devices(devices)
    key = tuple(resolved)
    if key not in _TOPOLOGIES:
        _TOPOLOGIES[key] = _topology(resolved)
    return _TOPOLOGIES[key]
