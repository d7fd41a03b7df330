"""Strategy advisor: which layout fits a model in device memory, and the numbers behind the choice.

    advice = jdist.recommend_strategy(model, optax.adam(1e-3), global_batch_size=256,
                                      sample_input=jnp.zeros((1, 28, 28, 1)))
    print(advice)

Per-device memory is estimated for parameters, gradients, optimizer state and
activations under data parallelism (everything replicated), FSDP (parameters,
gradients and optimizer state split over the replicas), model parallelism
(tensor parallel over a `model` axis, data parallel over the rest) and the
mix of both (FSDP over `data` and tensor parallel over `model`). The simplest
layout that fits wins, in that order. Estimates, not measurements: parameter
and optimizer sizes are exact (`jax.eval_shape`), activations are measured from
XLA's memory analysis of forward + backward when a model and sample input are
given, and their split under tensor parallelism is assumed ideal.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import TYPE_CHECKING, Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jdist.diagnostics.tables import format_bytes, format_table
from jdist.layout import path_str

if TYPE_CHECKING:
    from jdist.strategy.devices import Device

LAYOUTS = ("data_parallel", "fsdp", "model_parallel", "mixed")
_TITLES = {"data_parallel": "data parallel", "fsdp": "FSDP", "model_parallel": "model parallel",
           "mixed": "FSDP + model parallel"}


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device of one layout."""

    layout: str
    mesh_shape: dict
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    fits: bool
    accumulation_steps: int | None = None  # smallest k that fits when the whole batch does not

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations

    @property
    def mesh(self) -> str:
        return " x ".join(f"{k}={v}" for k, v in self.mesh_shape.items())


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The advisor's answer: `strategy` (one of `LAYOUTS`), its `mesh_shape`, whether it `fits`
    (with `accumulation_steps` > 1 when only gradient accumulation makes it fit), and every
    estimate considered. `str()` is a readable table."""

    strategy: str
    mesh_shape: dict
    fits: bool
    accumulation_steps: int
    num_devices: int
    global_batch_size: int
    device_memory_bytes: int
    usable_bytes: int
    memory_source: str
    parameter_count: int
    parameter_bytes: int
    optimizer_bytes: int
    activation_bytes_per_example: int | None
    activation_source: str
    estimates: tuple[MemoryEstimate, ...]
    notes: tuple[str, ...] = ()

    @property
    def chosen(self) -> MemoryEstimate:
        return next(e for e in self.estimates if e.layout == self.strategy and e.mesh_shape == self.mesh_shape)

    def __str__(self) -> str:
        per_example = ("not estimated" if self.activation_bytes_per_example is None
                       else f"{format_bytes(self.activation_bytes_per_example)} per example")
        head = [
            f"Strategy advice: {self.num_devices} devices, global batch {self.global_batch_size}, "
            f"{format_bytes(self.usable_bytes)} usable per device "
            f"({format_bytes(self.device_memory_bytes)}, {self.memory_source})",
            f"parameters: {self.parameter_count:,} ({format_bytes(self.parameter_bytes)}); optimizer state: "
            f"{format_bytes(self.optimizer_bytes)}; activations: {per_example} ({self.activation_source})",
            "",
        ]
        rows = [
            (_TITLES[e.layout], e.mesh, format_bytes(e.parameters), format_bytes(e.gradients),
             format_bytes(e.optimizer_state), format_bytes(e.activations), format_bytes(e.total),
             "yes" if e.fits else (f"accumulate x{e.accumulation_steps}" if e.accumulation_steps else "no"))
            for e in self.estimates
        ]
        table = format_table(("layout", "mesh", "params", "grads", "opt state", "activations", "total/device",
                              "fits"), rows)
        if not self.fits:
            verdict = f"Nothing fits; closest: {_TITLES[self.strategy]} on mesh {self.chosen.mesh}."
        elif self.accumulation_steps > 1:
            verdict = (f"Recommended: {_TITLES[self.strategy]} on mesh {self.chosen.mesh} with gradient "
                       f"accumulation (make_train_step(..., accumulation_steps={self.accumulation_steps})): "
                       "no layout fits the whole batch's activations at once.")
        else:
            verdict = (f"Recommended: {_TITLES[self.strategy]} on mesh {self.chosen.mesh}, "
                       "the simplest layout that fits.")
        return "\n".join(head + [table, "", verdict] + [f"- {n}" for n in self.notes])


def recommend_strategy(
    model_or_params: Any,
    optimizer: Any,
    global_batch_size: int,
    devices: Sequence[Device] | int | None = None,
    *,
    device_memory_bytes: int | None = None,
    activation_bytes_per_example: int | None = None,
    sample_input: Any = None,
    model_parallel_rules: Sequence[tuple[str, Any]] | None = None,
    usable_fraction: float = 0.9,
) -> Recommendation:
    """Estimates per-device memory under each layout and returns the simplest that fits.

    `model_or_params`: a flax module (needs `sample_input`, a batch of inputs)
    or a parameter pytree (arrays or `jax.ShapeDtypeStruct`s). `optimizer`: an
    optax transformation (or None). `devices`: devices or a device count
    (default: all). `device_memory_bytes` overrides what the devices report
    (CPU devices report nothing: host RAM is split among them).
    `model_parallel_rules`: `(regex, PartitionSpec)` pairs over '/'-joined
    parameter paths naming the "model" axis (e.g. `jdist.models.MEGATRON_RULES`);
    without them each parameter is assumed split on its largest divisible
    dimension. A layout fits when its total is at most `usable_fraction` of
    device memory (XLA needs some workspace).
    """
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size < 1:
        raise ValueError(f"global_batch_size must be a positive integer, got {global_batch_size!r}.")
    if not 0 < usable_fraction <= 1:
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction}.")
    device_list = _devices(devices)
    n = len(device_list)
    is_module = hasattr(model_or_params, "init") and hasattr(model_or_params, "apply")
    if is_module:
        if sample_input is None:
            raise ValueError("recommend_strategy got a model: pass sample_input= (a batch of inputs) so its "
                             "parameters can be shaped, or pass the parameters instead of the model.")
        params = jax.eval_shape(model_or_params.init, jax.random.key(0), sample_input)
    else:
        params = model_or_params
    opt_state = jax.eval_shape(optimizer.init, params) if optimizer is not None else None

    memory, memory_source = _device_memory(device_list, device_memory_bytes)
    usable = int(memory * usable_fraction)
    if activation_bytes_per_example is not None:
        per_example, act_source = int(activation_bytes_per_example), "given"
    elif is_module:
        per_example, act_source = _measure_activations(model_or_params, params, sample_input)
    else:
        per_example, act_source = None, "pass sample_input with a model, or activation_bytes_per_example"

    param_leaves = _leaves(params)
    opt_leaves = _leaves(opt_state) if opt_state is not None else []
    rules = [(re.compile(pattern), spec) for pattern, spec in (model_parallel_rules or ())]
    estimates = []
    notes = []
    for layout, d, m in _candidates(n):
        est = _estimate(layout, d, m, param_leaves, opt_leaves, rules, per_example or 0, global_batch_size, usable)
        estimates.append(est)
    if global_batch_size % n:
        notes.append(f"the global batch {global_batch_size} does not divide among {n} replicas; "
                     f"use a multiple of {n}.")
    chosen = next((e for e in estimates if e.fits), None)
    accumulation = 1
    if chosen is None:  # gradient accumulation keeps the global batch with a k-times smaller micro-batch
        chosen = next((e for e in estimates if e.accumulation_steps), None)
        accumulation = chosen.accumulation_steps if chosen else 1
    fits = chosen is not None
    if chosen is None:
        chosen = min(estimates, key=lambda e: e.total)
    if per_example is None:
        notes.append("activations not included: totals are a lower bound.")
    if not fits:
        notes.append("try a smaller global batch, gradient accumulation, mixed precision, or more devices.")
    if any(e.layout in ("model_parallel", "mixed") for e in estimates) and per_example:
        notes.append("model-parallel activations assume an even split over the model axis (an optimistic bound).")
    return Recommendation(
        strategy=chosen.layout, mesh_shape=chosen.mesh_shape, fits=fits, accumulation_steps=accumulation,
        num_devices=n,
        global_batch_size=global_batch_size, device_memory_bytes=memory, usable_bytes=usable,
        memory_source=memory_source,
        parameter_count=sum(math.prod(s) for _, s, _ in param_leaves),
        parameter_bytes=sum(math.prod(s) * b for _, s, b in param_leaves),
        optimizer_bytes=sum(math.prod(s) * b for _, s, b in opt_leaves),
        activation_bytes_per_example=per_example, activation_source=act_source,
        estimates=tuple(estimates), notes=tuple(notes),
    )


# -------------------------------------------------------------------- inputs
def _devices(devices: Any) -> list:
    if devices is None:
        return list(jax.devices())
    if isinstance(devices, int):
        if devices < 1:
            raise ValueError(f"devices must be positive, got {devices}.")
        return [jax.devices()[0]] * devices
    devices = list(devices)
    if not devices:
        raise ValueError("devices is empty.")
    return devices


def _device_memory(devices: list, given: int | None) -> tuple[int, str]:
    if given is not None:
        if given <= 0:
            raise ValueError(f"device_memory_bytes must be positive, got {given}.")
        return int(given), "given"
    try:
        limit = (devices[0].memory_stats() or {}).get("bytes_limit")
    except Exception:
        limit = None
    if limit:
        return int(limit), "reported by the device"
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    local = max(sum(1 for d in jax.local_devices() if d.platform == devices[0].platform), 1)
    return host // local, f"host RAM / {local} {devices[0].platform} devices"


def _leaves(tree: Any) -> list[tuple[str, tuple, int]]:
    out = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            name = path_str(path)
            out.append((name, tuple(leaf.shape), np.dtype(leaf.dtype).itemsize))
    return out


def _measure_activations(model: Any, params: Any, sample_input: Any) -> tuple[int | None, str]:
    """Bytes per example XLA keeps for backward: temp memory of forward+backward at batch b and 2b."""
    leaves = jax.tree.leaves(sample_input)
    b = int(np.shape(leaves[0])[0]) if leaves and np.ndim(leaves[0]) else 1

    def loss(p, x):
        return sum(jnp.sum(jnp.asarray(y, jnp.float32)) for y in jax.tree.leaves(model.apply(p, x)))

    def temp(batch):
        x = jax.tree.map(lambda a: jax.ShapeDtypeStruct((batch,) + tuple(np.shape(a))[1:], jnp.asarray(a).dtype),
                         sample_input)
        analysis = jax.jit(jax.grad(loss)).lower(params, x).compile().memory_analysis()
        return analysis.temp_size_in_bytes if analysis is not None else None

    try:
        t1, t2 = temp(b), temp(2 * b)
    except Exception as error:  # the model may need rngs or flags: say so rather than guess
        return None, f"could not compile forward+backward ({type(error).__name__}); pass activation_bytes_per_example"
    if t1 is None or t2 is None:
        return None, "no memory analysis on this platform; pass activation_bytes_per_example"
    platform = jax.devices()[0].platform
    return max(t2 - t1, 0) // b, f"XLA memory analysis of forward+backward on {platform}"


# ----------------------------------------------------------------- estimates
def _candidates(n: int) -> list[tuple[str, int, int]]:
    model_sizes = [m for m in range(2, n + 1) if n % m == 0]
    return ([("data_parallel", n, 1), ("fsdp", n, 1)]
            + [("model_parallel", n // m, m) for m in model_sizes]
            + [("mixed", n // m, m) for m in model_sizes if n // m > 1])


def _largest_divisible(shape: tuple, k: int, skip: int | None = None) -> int | None:
    dims = [i for i in range(len(shape)) if i != skip and shape[i] % k == 0 and shape[i] >= k]
    return max(dims, key=lambda i: shape[i]) if dims else None


def _model_dim(path: str, shape: tuple, m: int, rules: list) -> int | None:
    """The dimension split over the model axis: from the first matching rule, else the largest divisible."""
    if m == 1:
        return None
    for pattern, spec in rules:
        if pattern.fullmatch(path):
            for i, entry in enumerate(tuple(spec)[: len(shape)]):
                names = entry if isinstance(entry, tuple) else (entry,)
                if "model" in names and shape[i] % m == 0:
                    return i
            return None
    if rules:
        return None  # unmatched parameters are replicated, as a layout would leave them
    return _largest_divisible(shape, m)


def _per_device(path: str, shape: tuple, itemsize: int, layout: str, d: int, m: int, rules: list) -> int:
    size = math.prod(shape) * itemsize
    if layout == "data_parallel":
        return size
    if layout == "fsdp":
        return size // d if _largest_divisible(shape, d) is not None else size
    model_dim = _model_dim(path, shape, m, rules)
    factor = m if model_dim is not None else 1
    if layout == "mixed" and d > 1 and _largest_divisible(shape, d, skip=model_dim) is not None:
        factor *= d
    return size // factor


def _param_path_for(opt_path: str, param_paths: list[str]) -> str | None:
    matches = [p for p in param_paths if opt_path == p or opt_path.endswith("/" + p)]
    return max(matches, key=len) if matches else None


def _estimate(layout, d, m, param_leaves, opt_leaves, rules, per_example, batch, usable) -> MemoryEstimate:
    params = sum(_per_device(p, s, b, layout, d, m, rules) for p, s, b in param_leaves)
    paths = [p for p, _, _ in param_leaves]
    opt = 0
    for path, shape, itemsize in opt_leaves:
        param_path = _param_path_for(path, paths)
        opt += _per_device(param_path or path, shape, itemsize, layout, d, m, rules if param_path else [])
    grads = params
    if layout in ("fsdp", "mixed") and param_leaves:
        # One parameter is gathered over the data axis for compute, and its gradient exists
        # unsharded over data before the reduce-scatter.
        gathered_layout = "model_parallel" if layout == "mixed" else "data_parallel"
        largest = max(_per_device(p, s, b, gathered_layout, d, m, rules) for p, s, b in param_leaves)
        params += largest
        grads += largest
    per_replica = math.ceil(batch / d)
    activations = per_example * per_replica // m
    fixed = params + grads + opt
    mesh = {"data": d} if m == 1 else {"data": d, "model": m}
    fits = fixed + activations <= usable
    k = None if fits else _accumulation_needed(fixed, activations, usable, per_replica)
    return MemoryEstimate(layout, mesh, params, grads, opt, activations, fits, k)


def _accumulation_needed(fixed: int, activations: int, usable: int, per_replica_batch: int) -> int | None:
    """The smallest k dividing the per-replica batch with which 1/k of the activations fit."""
    if fixed >= usable or activations == 0:
        return None
    for k in range(2, per_replica_batch + 1):
        if per_replica_batch % k == 0 and fixed + activations / k <= usable:
            return k
    return None
