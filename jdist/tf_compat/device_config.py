"""`tf.config`: devices as TF lists them, and TF's way of splitting the CPU into logical devices.

`set_logical_device_configuration(cpu, [LogicalDeviceConfiguration()] * n)` is TF's recipe for n
CPU devices; here it sets JAX's CPU device count (`jax_num_cpu_devices`), which can only take effect
before JAX's backend starts (before the first array is made). TF 2.21 has the same rule ("Virtual
devices cannot be modified after being initialized"); a later call asking for the count JAX
already has is accepted.
"""
from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple, Sequence

import jax


class PhysicalDevice(NamedTuple):
    name: str
    device_type: str


class LogicalDevice(NamedTuple):
    name: str
    device_type: str


class LogicalDeviceConfiguration(NamedTuple):
    """TF's configuration of one logical device; only the count of CPU configurations takes effect."""

    memory_limit: int | None = None  # MB, as in TF
    experimental_priority: int | None = None
    experimental_device_ordinal: int | None = None


_PLATFORM = {"CPU": "cpu", "GPU": "gpu", "TPU": "tpu"}
_ACCELERATOR_PLUGINS = {"GPU": ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm_plugin", "jax_plugins"),
                        "TPU": ("libtpu",)}
_CPU_CONFIGURATION: list[Sequence[LogicalDeviceConfiguration]] = []


def _jax_devices(device_type: str) -> list:
    try:
        return jax.devices(_PLATFORM[device_type])
    except RuntimeError:  # no such backend
        return []


def _types(device_type: str | None) -> list[str]:
    if device_type is None:
        return list(_PLATFORM)
    kind = device_type.upper()
    if kind not in _PLATFORM:
        raise ValueError(f"tf.config: device_type must be one of {list(_PLATFORM)}, got {device_type!r}")
    return [kind]


def list_physical_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    """TF's physical devices: one CPU (listed without starting JAX, so the CPU can still be split), and
    JAX's GPUs / TPUs (listing those starts JAX when their plugin is installed)."""
    found = []
    for kind in _types(device_type):
        if kind == "CPU":
            found.append(PhysicalDevice("/physical_device:CPU:0", "CPU"))
        elif _may_have(kind):
            found += [PhysicalDevice(f"/physical_device:{kind}:{i}", kind) for i, _ in enumerate(_jax_devices(kind))]
    return found


def _may_have(kind: str) -> bool:
    """Whether JAX could have `kind` devices: allowed by JAX_PLATFORMS and its plugin installed (known
    without starting JAX, which would fix the CPU device count)."""
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if platforms and not any(p.strip() in (_PLATFORM[kind], "cuda", "rocm") for p in platforms.split(",")):
        return False
    return any(importlib.util.find_spec(p) is not None for p in _ACCELERATOR_PLUGINS[kind])


def list_logical_devices(device_type: str | None = None) -> list[LogicalDevice]:
    """JAX's devices under TF's names (`/device:CPU:0`, ...); starts JAX, as TF's listing starts its runtime."""
    return [LogicalDevice(f"/device:{kind}:{i}", kind) for kind in _types(device_type)
            for i, _ in enumerate(_jax_devices(kind))]


def set_logical_device_configuration(device: PhysicalDevice,
                                     logical_devices: Sequence[LogicalDeviceConfiguration] | None) -> None:
    """Splits the CPU into `len(logical_devices)` JAX CPU devices (see the module docstring)."""
    if getattr(device, "device_type", None) != "CPU":
        raise ValueError(
            "jdist's tf.config.set_logical_device_configuration splits the CPU only (one JAX device per "
            "logical device); GPUs and TPUs are used whole, one JAX device each. To limit GPU memory set "
            "XLA_PYTHON_CLIENT_MEM_FRACTION before starting Python.")
    if logical_devices is None or isinstance(logical_devices, (str, bytes)):
        raise TypeError(f"'{type(logical_devices).__name__}' object is not iterable: "
                        "tf.config.set_logical_device_configuration takes a list of LogicalDeviceConfiguration.")
    logical_devices = list(logical_devices)
    _check_cpu_configuration(logical_devices)
    count = len(logical_devices)
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        have = len(_jax_devices("CPU"))
        if have != count:
            raise RuntimeError(
                f"Virtual devices cannot be modified after being initialized: JAX already runs with {have} CPU "
                f"device(s), so {count} cannot take effect. Call tf.config.set_logical_device_configuration "
                "before the first array is made (as in TF), or set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={count} before starting Python.") from None
    _CPU_CONFIGURATION[:] = [logical_devices]


def get_logical_device_configuration(device: PhysicalDevice) -> list | None:
    if getattr(device, "device_type", None) == "CPU" and _CPU_CONFIGURATION:
        return list(_CPU_CONFIGURATION[0])
    return None


def _check_cpu_configuration(logical_devices: list) -> None:
    """TF 2.21's rules for CPU logical devices (observed): no memory limit, priority or ordinal (ValueError);
    an empty list, TF's process without a CPU device, is refused here, as jdist always runs on a CPU."""
    if not logical_devices:
        raise ValueError("jdist cannot hide the CPU: tf.config.set_logical_device_configuration(cpu, []) leaves "
                         "no CPU device (TF then fails every op: 'No CPU devices are available in this "
                         "process'). Pass at least one LogicalDeviceConfiguration().")
    for config in logical_devices:
        if getattr(config, "memory_limit", None) is not None:
            raise ValueError("Setting memory limit on CPU virtual devices is currently not supported")
        for field in ("experimental_priority", "experimental_device_ordinal"):
            if getattr(config, field, None) is not None:
                raise ValueError(f"Setting {field} on CPU virtual  devices is currently not supported")


_MEMORY_GROWTH: dict[str, bool] = {}


def set_memory_growth(device: PhysicalDevice, enable: bool) -> None:
    """Kept for a GPU: XLA's allocator reserves GPU memory up front (set XLA_PYTHON_CLIENT_PREALLOCATE=false
    before starting Python to allocate on demand, TF's memory growth). The CPU is TF's ValueError."""
    if getattr(device, "device_type", None) == "CPU":
        if _CPU_CONFIGURATION:
            raise ValueError("Cannot set memory growth on device when virtual devices configured")
        raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
    _MEMORY_GROWTH[device.name] = bool(enable)


def get_memory_growth(device: PhysicalDevice) -> bool:
    """What `set_memory_growth` was given (False at first); the CPU is TF's KeyError naming the device."""
    if getattr(device, "device_type", None) == "CPU":
        raise KeyError(device)
    return _MEMORY_GROWTH.get(device.name, False)
