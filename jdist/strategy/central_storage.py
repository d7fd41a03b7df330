"""`CentralStorageStrategy`: one copy of the parameters on the host, compute replicated.

TF's layout: every parameter and optimizer slot is stored once on a parameter
device (the CPU when there is more than one compute device), the step runs
replicated on the compute devices, and the gradients go to the parameter device
where the optimizer update runs. Here the parameter store is host memory: the
`pinned_host` memory kind of the first compute device where the platform has one
(accelerators, and XLA:CPU), else the CPU device.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, SingleDeviceSharding

from jdist.strategy.base import Strategy
from jdist.strategy.devices import Device, DeviceLike, resolve_device
from jdist.strategy.gradient_capture import captured_gradients, capturing_state, without_parameters
from jdist.typing import PyTree

if TYPE_CHECKING:  # annotations only
    import optax

HOST_MEMORY_KIND = "pinned_host"
_TRAIN_STATE_CORE_FIELDS = frozenset({"step", "apply_fn", "params", "tx", "opt_state"})


def _memory_kinds(device: Device) -> set[str]:
    try:
        return {memory.kind for memory in device.addressable_memories()}
    except Exception:  # backends without the memories API
        return set()


def default_parameter_store(compute_devices: Sequence[Device]) -> tuple[Device, str | None]:
    """TF's rule: one compute device keeps the parameters itself; several keep them on the host."""
    if len(compute_devices) == 1:
        return compute_devices[0], None
    first = compute_devices[0]
    if HOST_MEMORY_KIND in _memory_kinds(first):
        return first, HOST_MEMORY_KIND
    return jax.local_devices(backend="cpu")[0], None


def explicit_parameter_store(device: Device, compute_devices: Sequence[Device]) -> tuple[Device, str | None]:
    """Where an explicit `parameter_device` keeps the parameters.

    A host CPU named beside accelerator compute devices means host memory: the first compute
    device's `pinned_host` memory, so the optimizer update runs on the accelerator and only the
    storage is on the host (TF runs the update on the CPU; same values, several times slower).
    Otherwise the named device, in its `pinned_host` memory when there are several compute devices.
    """
    first = compute_devices[0]
    if device.platform == "cpu" and first.platform != "cpu" and HOST_MEMORY_KIND in _memory_kinds(first):
        return first, HOST_MEMORY_KIND
    several = len(compute_devices) > 1
    return device, HOST_MEMORY_KIND if several and HOST_MEMORY_KIND in _memory_kinds(device) else None


class CentralStorageStrategy(Strategy):
    """`jdist.CentralStorageStrategy(compute_devices=None, parameter_device=None)`.

    `compute_devices=None` takes all local accelerators, else the CPU devices.
    `parameter_device=None` follows TF: the single compute device when there is
    one (then this is `OneDeviceStrategy`), else host memory. An explicit
    `parameter_device` ("cpu:0", a `jax.Device`) stores the parameters in its
    `pinned_host` memory when it is one of several compute devices, else in its
    default memory; "cpu:0" beside GPUs means the first GPU's `pinned_host` memory.
    """

    def __init__(self, compute_devices: Sequence[DeviceLike] | None = None,
                 parameter_device: DeviceLike | None = None):
        super().__init__(devices=compute_devices)
        compute = list(self.worker_devices)
        if parameter_device is None:
            device, kind = default_parameter_store(compute)
        else:
            device, kind = explicit_parameter_store(resolve_device(parameter_device), compute)
        self._parameter_device = device
        self._memory_kind = kind
        self._parameter_sharding = SingleDeviceSharding(device, memory_kind=kind)
        self._parameter_mesh = Mesh(np.array([device], dtype=object), ("parameters",),
                                    axis_types=(AxisType.Auto,))
        # With one compute device that also stores the parameters, the plain jit path is exact.
        self._central = not (len(compute) == 1 and device == compute[0] and kind is None)

    # ---------------------------------------------------------------- properties
    _between_graph = True  # TF 2.21's CentralStorageStrategy says so (observed)

    def _parameter_device_names(self) -> tuple[str, ...]:
        return (f"/device:{self._parameter_device.platform.upper()}:0",)  # TF's text (observed: '/device:CPU:0')

    @property
    def compute_devices(self) -> tuple:
        return self.worker_devices

    @property
    def parameter_device(self) -> Device:
        return self._parameter_device

    @property
    def parameter_memory_kind(self) -> str:
        """The memory the parameters live in ("pinned_host", or the device's default)."""
        return self._memory_kind or self._parameter_device.default_memory().kind

    def __repr__(self) -> str:
        return (f"CentralStorageStrategy(compute_devices={[str(d) for d in self.compute_devices]}, "
                f"parameter_device={str(self._parameter_device)!r}, memory_kind={self.parameter_memory_kind!r})")

    # ----------------------------------------------------------------- placement
    def parameter_shardings(self, tree: PyTree) -> PyTree:
        """Every leaf once, on the parameter device (in host memory when there are several compute devices)."""
        if not self._central:
            return super().parameter_shardings(tree)
        return jax.tree.map(lambda _: self._parameter_sharding, tree)

    def place(self, tree: PyTree) -> PyTree:
        if not self._central:
            return super().place(tree)
        return jax.tree.map(lambda x: _put(x, self._parameter_sharding), tree)

    def create_train_state(self, state_cls: type, *, apply_fn: Callable, params: PyTree,
                           tx: optax.GradientTransformation, **kwargs: Any) -> PyTree:
        if not self._central:
            return super().create_train_state(state_cls, apply_fn=apply_fn, params=params, tx=tx, **kwargs)
        # The optimizer state is built in the parameter device's default memory, then
        # stored: jax cannot create arrays "like" a host-memory array directly.
        working = jax.tree.map(lambda x: _put(x, SingleDeviceSharding(self._parameter_device)), params)
        return state_cls(step=self.place(0), apply_fn=apply_fn, params=self.place(working), tx=tx,
                         opt_state=self.place(tx.init(working)), **kwargs)

    @property
    def single_program_step(self) -> bool:
        return not self._central

    def compute_view(self, tree: PyTree) -> PyTree:
        """A replicated copy of `tree` on the compute devices (the per-step pull from the store)."""
        if not self._central:
            return tree
        replicated = self.replicated_sharding()
        return jax.tree.map(lambda x: jax.device_put(x, replicated), tree)

    # ---------------------------------------------------------------- train step
    def compile_step(self, step_fn: Callable, state: PyTree, *, donate: bool, batch_sharding: PyTree = None,
                     out_sharding: PyTree = None) -> Callable:
        """Gradients on the compute devices, the optimizer update on the parameter device.

        The step runs unchanged on a proxy state (`jdist.strategy.gradient_capture`); XLA's
        all-reduce sums the gradients across compute devices, one copy goes to
        the parameter device, and `state.apply_gradients` runs there.
        """
        if not self._central:
            return super().compile_step(step_fn, state, donate=donate, batch_sharding=batch_sharding,
                                        out_sharding=out_sharding)

        def compute(proxy, batch):
            new_proxy, out = step_fn(proxy, batch, None)  # the real update runs on the parameter device
            return without_parameters(new_proxy), out

        compute_jit = jax.jit(
            compute,
            in_shardings=(self.replicated_sharding(),
                          self.data_sharding() if batch_sharding is None else batch_sharding),
            out_shardings=(self.replicated_sharding(),
                           self.replicated_sharding() if out_sharding is None else out_sharding))
        device_memory = SingleDeviceSharding(self._parameter_device)
        store = self._parameter_sharding

        def update(state, grads, rest):
            on_device = jax.device_put((state, grads), device_memory)
            state, grads = on_device
            new_state = state.apply_gradients(grads=grads) if grads is not None else state
            return rest.replace(params=new_state.params, opt_state=new_state.opt_state,
                                tx=new_state.tx, step=new_state.step)

        update_jit = jax.jit(update, out_shardings=store, donate_argnums=(0,) if donate else ())

        def step(state, batch):
            proxy = capturing_state(state, self.compute_view(state.params))
            proxy = proxy.replace(step=self.compute_view(state.step),
                                  **{f: self.compute_view(getattr(state, f)) for f in _extra_fields(state)})
            new_proxy, out = compute_jit(proxy, batch)
            grads = captured_gradients(new_proxy)
            rest = new_proxy.replace(opt_state=None, tx=state.tx)
            rest = jax.tree.map(lambda x: _put(x, store), rest)
            grads = None if grads is None else jax.tree.map(lambda x: _put(x, store), grads)
            with jax.set_mesh(self._parameter_mesh):  # the update runs off the compute mesh
                return update_jit(state, grads, rest), out

        return step


def _extra_fields(state: Any) -> list[str]:
    """Fields of a TrainState subclass beyond flax's (e.g. batch statistics)."""
    if not dataclasses.is_dataclass(state):
        return []
    return [f.name for f in dataclasses.fields(state)
            if f.name not in _TRAIN_STATE_CORE_FIELDS and f.metadata.get("pytree_node", True)]


def _put(x: Any, sharding: SingleDeviceSharding) -> Any:
    """Moves `x` into the parameter store.

    Arrays spread over several devices first collapse to one device's copy:
    jax cannot move a multi-device array straight into another memory kind.
    """
    if isinstance(x, jax.Array) and len(x.sharding.device_set) > 1:
        (target,) = sharding.device_set
        device = target if target in x.sharding.device_set else next(iter(x.sharding.device_set))
        x = jax.device_put(x, SingleDeviceSharding(device))
    return jax.device_put(x, sharding)
