"""Turning TF-style device names ("cpu:0", "/gpu:1") into `jax.Device`s."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import jax

if TYPE_CHECKING:
    # jax exports its device class as a variable (`jax.Device = _xc.Device`), which a type checker will not
    # read as a type; the class itself lives in jaxlib's compiled `_jax` module, which ships no stub.
    from jaxlib._jax import Device
else:
    Device = jax.Device

DeviceLike = str | Device

# Accepts "cpu:0", "/cpu:0", "CPU:0", "/device:GPU:1", "/job:localhost/replica:0/task:0/device:GPU:1", "gpu".
_DEVICE_RE = re.compile(r"(?:.*/)?(?:device:)?(?P<platform>[A-Za-z_]+)(?::(?P<index>\d+))?$")


def default_devices() -> list[Device]:
    """All local devices of the default backend: accelerators if present, else CPU (TF's rule)."""
    return list(jax.local_devices())


def _available() -> str:
    names = []
    for backend in ("cpu", "gpu", "tpu"):
        try:
            names += [f"{backend}:{i}" for i in range(len(jax.local_devices(backend=backend)))]
        except RuntimeError:
            continue
    return ", ".join(names)


def resolve_device(device: DeviceLike) -> Device:
    """One device from a `jax.Device` or a TF-style string; `ValueError` names what exists."""
    if isinstance(device, jax.Device):
        return device
    name = getattr(device, "name", None)
    if isinstance(name, str) and hasattr(device, "device_type"):
        device = name  # TF's LogicalDevice (tf.config.list_logical_devices())
    if not isinstance(device, str):
        raise ValueError(f"A device must be a jax.Device or a string like 'cpu:0', got {device!r}.")
    match = _DEVICE_RE.match(device.strip())
    if not match:
        raise ValueError(f"Cannot parse device {device!r}: use a name like 'cpu:0' or 'gpu:1'.")
    platform = match.group("platform").lower()
    index = int(match.group("index") or 0)
    try:
        local = jax.local_devices(backend=platform)
    except RuntimeError:
        raise ValueError(
            f"Unknown device {device!r}: this machine has no {platform.upper()} backend. "
            f"Available devices: {_available()}."
        ) from None
    if index >= len(local):
        raise ValueError(
            f"Unknown device {device!r}: only {len(local)} {platform.upper()} device(s) exist. "
            f"Available devices: {_available()}."
        )
    return local[index]


def resolve_devices(devices: Sequence[DeviceLike] | None) -> list[Device]:
    """A list of distinct devices; duplicates are an error as in TF."""
    if devices is None:
        return default_devices()
    if isinstance(devices, (str, jax.Device)):
        devices = [devices]
    resolved = [resolve_device(d) for d in devices]
    if not resolved:
        raise ValueError("`devices` must name at least one device.")
    seen: dict[Device, DeviceLike] = {}
    for spec, dev in zip(devices, resolved):
        if dev in seen:
            raise ValueError(
                f"No duplicates allowed in `devices` argument: {seen[dev]!r} and {spec!r} "
                f"are both {dev}. List each device once."
            )
        seen[dev] = spec
    return resolved


def tf_device_name(device: Device) -> str:
    """TF's full name of `device`: '/job:localhost/replica:0/task:0/device:CPU:0' in one process, and
    '/job:worker/replica:0/task:{process}/device:CPU:{i}' when several processes share the work."""
    same_kind = [d for d in jax.devices(device.platform) if d.process_index == device.process_index]
    index = sorted(same_kind, key=lambda d: d.id).index(device)
    job, task = ("worker", device.process_index) if jax.process_count() > 1 else ("localhost", 0)
    return f"/job:{job}/replica:0/task:{task}/device:{device.platform.upper()}:{index}"
