"""`tf.config`'s runtime switches: eager functions, soft placement, threads, TF32, determinism, visible
devices and memory info, each mapped to what JAX has or accepted where XLA already does it.

Behaviour observed in TF 2.21 (tests/test_tf_compat_config.py): the switches' defaults (functions eagerly
False, soft placement True, threads 0 and 0, TF32 True, `optimizer.get_jit()` ""), the thread counts
refused after the runtime starts ("Inter op parallelism cannot be modified after initialization."), visible
devices refused after it starts only when they change, `get_device_details(cpu)` `{}`, and the CPU's
memory statistics refused (tests/test_tf_parity_guide_devices.py).
"""
from __future__ import annotations

import re
from typing import Any, Sequence

import jax

from jdist.interop import tf_function
from jdist.tf_compat import device_config as _config
from jdist.tf_compat.device_config import PhysicalDevice, _jax_devices, _types, list_physical_devices
from jdist.tf_compat.namespace import Namespace

_STATE: dict[str, Any] = {"eager": False, "soft": True, "inter": 0, "intra": 0, "jit": "",
                          "options": {"disable_model_pruning": False, "disable_meta_optimizer": False},
                          "tf32": True, "visible": {}}


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge._backends)
    except (ImportError, AttributeError):  # a JAX that moved it: assume started (the strict answer)
        return True


# --- tf.function eagerly ---
def run_functions_eagerly(run_eagerly: bool) -> None:
    """TF's debugging switch: a `tf.function` then runs its Python body on every call, not its traced program,
    and `tf.executing_eagerly()` is True inside it. `strategy.run` stays compiled (JAX has no eager
    collectives), so a breakpoint in a replica function still sees traced values."""
    _STATE["eager"] = bool(run_eagerly)
    tf_function.run_eagerly(run_eagerly)


def functions_run_eagerly() -> bool:
    return _STATE["eager"]


# --- placement and threads ---
def set_soft_device_placement(enabled: bool) -> None:
    """Accepted: JAX places by sharding, so there is no op without a kernel on its device to move."""
    _STATE["soft"] = bool(enabled)


def get_soft_device_placement() -> bool:
    return _STATE["soft"]


def _set_threads(key: str, label: str, num_threads: int) -> None:
    if _backend_started() and num_threads != _STATE[key]:
        raise RuntimeError(f"{label} parallelism cannot be modified after initialization.")
    _STATE[key] = int(num_threads)


def set_inter_op_parallelism_threads(num_threads: int) -> None:
    """Kept, with TF's rule (before the runtime starts); XLA:CPU sizes its own thread pools."""
    _set_threads("inter", "Inter op", num_threads)


def set_intra_op_parallelism_threads(num_threads: int) -> None:
    """Kept, with TF's rule (before the runtime starts); XLA:CPU sizes its own thread pools."""
    _set_threads("intra", "Intra op", num_threads)


def get_inter_op_parallelism_threads() -> int:
    return _STATE["inter"]


def get_intra_op_parallelism_threads() -> int:
    return _STATE["intra"]


# --- graph optimizer (everything jdist compiles goes through XLA already) ---
# Grappler's options in the order TF 2.21 lists them (observed); other names are ignored, as TF ignores them.
_OPTION_NAMES = ("layout_optimizer", "constant_folding", "shape_optimization", "remapping",
                 "arithmetic_optimization", "dependency_optimization", "loop_optimization", "function_optimization",
                 "debug_stripper", "disable_model_pruning", "scoped_allocator_optimization",
                 "pin_to_host_optimization", "implementation_selector", "auto_mixed_precision",
                 "use_plugin_optimizers", "disable_meta_optimizer", "auto_mixed_precision_onednn_bfloat16",
                 "min_graph_nodes")


def set_jit(enabled: bool | str) -> None:
    """Kept: TF's XLA auto-clustering switch (on for True or "autoclustering", off for anything else, as TF
    2.21); every jdist program is compiled by XLA."""
    _STATE["jit"] = "autoclustering" if enabled in (True, "autoclustering") else ""


def get_jit() -> str:
    return _STATE["jit"]


def set_experimental_options(options: dict) -> None:
    """Kept with TF's rules: known options only, a value stored as a bool (`min_graph_nodes` an int), None
    unsets an option; XLA, not Grappler, optimizes jdist's programs, so they change nothing else."""
    if not isinstance(options, dict):
        raise TypeError(f"'{type(options).__name__}' object is not iterable: tf.config.optimizer."
                        "set_experimental_options takes a dict such as {'constant_folding': False}.")
    kept = _STATE["options"]
    for name, value in options.items():
        if name not in _OPTION_NAMES:
            continue
        if value is None:
            kept.pop(name, None)
        elif name == "min_graph_nodes":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Field tensorflow.RewriterConfig.min_graph_nodes: Expected an int, got "
                                f"{'a boolean' if isinstance(value, bool) else type(value).__name__}.")
            kept[name] = value
        else:
            kept[name] = bool(value)


def get_experimental_options() -> dict:
    """The options set, in TF's order; `disable_model_pruning` and `disable_meta_optimizer` always (False)."""
    kept = {"disable_model_pruning": False, "disable_meta_optimizer": False, **_STATE["options"]}
    return {name: kept[name] for name in _OPTION_NAMES if name in kept}


# --- numerics ---
def enable_tensor_float_32_execution(enabled: bool) -> None:
    """TF32 on GPUs: off makes float32 matrix products full precision (JAX's default matmul precision
    "highest"); on is JAX's default."""
    _STATE["tf32"] = bool(enabled)
    jax.config.update("jax_default_matmul_precision", None if enabled else "highest")


def tensor_float_32_execution_enabled() -> bool:
    return _STATE["tf32"]


def enable_op_determinism() -> None:
    """Accepted: XLA:CPU and TPU programs are deterministic; on GPUs start Python with
    XLA_FLAGS=--xla_gpu_deterministic_ops=true (XLA reads its flags once)."""


# --- visible devices ---
def set_visible_devices(devices: PhysicalDevice | Sequence[PhysicalDevice], device_type: str | None = None) -> None:
    """TF's rule: the devices must be of `device_type`, and the choice cannot change once the runtime has
    started. Hiding every GPU or TPU before that runs JAX on the CPU (`jax_platforms`); the CPU is always
    used, and a subset of GPUs is chosen with CUDA_VISIBLE_DEVICES before starting Python."""
    chosen = [devices] if isinstance(devices, PhysicalDevice) else list(devices)
    kinds = _types(device_type)
    for device in chosen:
        if device.device_type not in kinds:
            raise ValueError(f"Unrecognized device: {device!r}")
    for kind in kinds:
        present = list_physical_devices(kind)
        wanted = [d for d in present if d in chosen]
        if wanted == _STATE["visible"].get(kind, present):
            continue
        if _backend_started():
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        if kind != "CPU" and wanted:
            raise ValueError(f"jdist uses every {kind} device JAX finds; choose GPUs with CUDA_VISIBLE_DEVICES "
                             "(TPU chips with TPU_VISIBLE_CHIPS) before starting Python.")
        _STATE["visible"][kind] = wanted
        if kind != "CPU":
            jax.config.update("jax_platforms", "cpu")


def get_visible_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    return [d for kind in _types(device_type)
            for d in _STATE["visible"].get(kind, list_physical_devices(kind))]


# --- device details and memory ---
_MEMORY_DEVICE = re.compile(r"(?:/job:[^/]+)?(?:/replica:\d+)?(?:/task:\d+)?(?:/device:|/)?([A-Za-z_]+):(\d+)")


def _memory_device(device: str, refusal: str):
    """The JAX device of TF's name ("GPU:0", "/device:GPU:0"), with TF 2.21's errors (observed): a name without
    type and index is not parsed, a type is matched case-sensitively, and the CPU has no allocator statistics."""
    found = _MEMORY_DEVICE.fullmatch(str(device))
    if found is None:
        raise ValueError(f"Failed parsing device name: '{device}'. Note a valid device string should at least "
                         'contain a device type and a device index, like "GPU:0".')
    kind, index = found.group(1), int(found.group(2))
    devices = _jax_devices(kind) if kind in ("CPU", "GPU", "TPU") else []
    if index >= len(devices):
        raise ValueError(f"No matching devices found for '{device}'")
    if kind == "CPU":
        raise ValueError(f"{refusal} for device '{device}'")
    return devices[index]


def get_memory_info(device: str) -> dict[str, int]:
    """`{'current': bytes, 'peak': bytes}` from a GPU's or TPU's allocator; the CPU is TF's ValueError
    "Allocator stats not available for device 'CPU:0'" (TF 2.21 has no CPU allocator statistics either)."""
    stats = _memory_device(device, "Allocator stats not available").memory_stats() or {}
    return {"current": int(stats.get("bytes_in_use", 0)), "peak": int(stats.get("peak_bytes_in_use", 0))}


def reset_memory_stats(device: str) -> None:
    """Accepted for a GPU or TPU (JAX's allocators keep their peak, which `get_memory_info` reports); the CPU is
    TF's ValueError "Cannot reset memory stats for device 'CPU:0'"."""
    _memory_device(device, "Cannot reset memory stats")


def get_memory_usage(device: str) -> int:
    return get_memory_info(device)["current"]


def get_device_details(device: PhysicalDevice) -> dict[str, Any]:
    """TF's details: `{}` for a CPU; a GPU's name and compute capability from JAX."""
    if device.device_type == "CPU":
        return {}
    index = int(device.name.rpartition(":")[2])
    found = _jax_devices(device.device_type)[index]
    details: dict[str, Any] = {"device_name": getattr(found, "device_kind", "")}
    capability = getattr(found, "compute_capability", None)
    if capability:
        details["compute_capability"] = tuple(int(p) for p in str(capability).split("."))
    return details


def get_synchronous_execution() -> bool:
    return True


def set_synchronous_execution(enable: bool) -> None:
    """Accepted: JAX dispatches asynchronously and its results wait for their values when read."""


def get_device_policy() -> str:
    return "silent"


def set_device_policy(device_policy: str | None) -> None:
    """Accepted: JAX copies arrays between devices as needed (TF's "silent")."""


THREADING = dict(set_inter_op_parallelism_threads=set_inter_op_parallelism_threads,
                 set_intra_op_parallelism_threads=set_intra_op_parallelism_threads,
                 get_inter_op_parallelism_threads=get_inter_op_parallelism_threads,
                 get_intra_op_parallelism_threads=get_intra_op_parallelism_threads)
OPTIMIZER = dict(set_jit=set_jit, get_jit=get_jit, set_experimental_options=set_experimental_options,
                 get_experimental_options=get_experimental_options)
CONFIG = dict(run_functions_eagerly=run_functions_eagerly, functions_run_eagerly=functions_run_eagerly,
              experimental_run_functions_eagerly=run_functions_eagerly,
              experimental_functions_run_eagerly=functions_run_eagerly,
              set_soft_device_placement=set_soft_device_placement,
              get_soft_device_placement=get_soft_device_placement,
              set_visible_devices=set_visible_devices, get_visible_devices=get_visible_devices)
EXPERIMENTAL = dict(enable_tensor_float_32_execution=enable_tensor_float_32_execution,
                    tensor_float_32_execution_enabled=tensor_float_32_execution_enabled,
                    enable_op_determinism=enable_op_determinism, get_memory_info=get_memory_info,
                    reset_memory_stats=reset_memory_stats, get_memory_usage=get_memory_usage,
                    get_device_details=get_device_details, set_visible_devices=set_visible_devices,
                    get_visible_devices=get_visible_devices, get_synchronous_execution=get_synchronous_execution,
                    set_synchronous_execution=set_synchronous_execution, get_device_policy=get_device_policy,
                    set_device_policy=set_device_policy)


def config_namespace(**more: Any) -> Namespace:
    """`tf.config`: the device listing and logical-device split (device_config.py), these switches, and `more`."""
    return Namespace(
        "tf.config",
        list_physical_devices=_config.list_physical_devices, list_logical_devices=_config.list_logical_devices,
        set_logical_device_configuration=_config.set_logical_device_configuration,
        get_logical_device_configuration=_config.get_logical_device_configuration,
        LogicalDeviceConfiguration=_config.LogicalDeviceConfiguration, LogicalDevice=_config.LogicalDevice,
        PhysicalDevice=_config.PhysicalDevice, threading=Namespace("tf.config.threading", **THREADING),
        optimizer=Namespace("tf.config.optimizer", **OPTIMIZER), **CONFIG, **more,
        experimental=Namespace("tf.config.experimental", set_memory_growth=_config.set_memory_growth,
                               get_memory_growth=_config.get_memory_growth,
                               list_physical_devices=_config.list_physical_devices,
                               list_logical_devices=_config.list_logical_devices,
                               set_virtual_device_configuration=_config.set_logical_device_configuration,
                               get_virtual_device_configuration=_config.get_logical_device_configuration,
                               VirtualDeviceConfiguration=_config.LogicalDeviceConfiguration,
                               **EXPERIMENTAL),
    )
