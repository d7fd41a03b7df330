"""`tf.experimental.dtensor`: TF's DTensor API on `jax.sharding`.

A DTensor here is a JAX array whose `NamedSharding` lies on a mesh made by `dtensor.create_mesh` (see
dtensor_mesh.py): `copy_to_mesh` / `relayout` / `pack` place one, every TF op then runs on it as JAX runs a
sharded array (XLA keeps it split and inserts the collectives), and `fetch_layout` reads the layout back
from the result's sharding. A `DVariable` is a `tf.Variable` whose assignments keep its layout.

Where TF 2.21 differs (observed; each in tests/test_tf_compat_dtensor.py):
- An op between a DTensor and a regular tensor runs here (the regular one is replicated); TF refuses any
  regular operand but a scalar ("Currently only scalars and small integer/string tensors are auto-broadcast").
- `pack` of pieces that differ where the layout replicates is an error here; TF packs them as given, and its
  `.numpy()` reads the first device's.
- A random op under `call_with_layout` draws the numbers it draws without a layout (TF's own numbers: see
  philox.py), then splits them; TF's DTensor draws each device's piece with numbers of its own when split.
- The layout XLA picks for an op's result can differ from DTensor's where both are valid (values agree).
As in TF, `.numpy()` of a tensor that is split is UnimplementedError (`unpack` gives its pieces).
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import jax
import jax.core
import numpy as np
from jax.sharding import NamedSharding

from jdist.errors import InvalidArgumentError, UnimplementedError
from jdist.strategy.devices import tf_device_name
from jdist.tf_compat import dtensor_text
from jdist.tf_compat.dtensor_mesh import (
    MATCH,
    UNSHARDED,
    Layout,
    Mesh,
    MeshDimension,
    create_distributed_mesh,
    create_mesh,
    is_dtensor_mesh,
    layout_of,
)
from jdist.tf_compat.dtensor_variable import make_dvariable
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tf_compat.variables import Variable
from jdist.tfdata.structure import HostTensor


class DeviceTensor(HostTensor):
    """One device's piece of a DTensor (`dtensor.unpack`): a host tensor that names its device, as TF's."""

    _device_name = "/job:localhost/replica:0/task:0/device:CPU:0"

    def __array_finalize__(self, obj: Any) -> None:
        self._device_name = getattr(obj, "_device_name", DeviceTensor._device_name)

    @property
    def device(self) -> str:  # pyright: ignore[reportIncompatibleMethodOverride]
        return self._device_name


def _array(tensor: Any) -> Any:
    """The value behind a tensor, variable or Python value: a JAX array when it is one, else numpy."""
    value = getattr(tensor, "value", None) if hasattr(tensor, "assign") else None
    if isinstance(value, jax.Array):
        return value
    if isinstance(tensor, jax.Array):
        return tensor
    return np.asarray(convert_to_tensor(tensor))


def is_dtensor(tensor: Any) -> bool:
    """Whether `tensor` is laid out on a DTensor mesh."""
    value = _array(tensor)
    if not isinstance(value, jax.Array) or isinstance(value, jax.core.Tracer):  # in compiled code: a value
        return False
    return isinstance(value.sharding, NamedSharding) and is_dtensor_mesh(value.sharding.mesh)


def fetch_layout(tensor: Any) -> Layout:
    """The layout of a DTensor (or a DVariable's value)."""
    if not is_dtensor(tensor):
        raise InvalidArgumentError(None, None, "FetchLayout expects a tensor placed on the layout device. "
                                   "(dtensor.copy_to_mesh or dtensor.relayout places a tensor on a mesh.)")
    value = _array(tensor)
    return layout_of(value.sharding, value.ndim)


def check_layout(tensor: Any, layout: Layout) -> None:
    actual = fetch_layout(tensor)
    if actual != layout:
        raise ValueError(f"Layout of tensor: {actual!r}, did not match expected layout: {layout!r}")


def copy_to_mesh(tensor: Any, layout: Layout, source_layout: Layout | None = None) -> Any:
    """`tensor` laid out by `layout` on its mesh."""
    return layout.place(_array(tensor))


def relayout(tensor: Any, layout: Layout, name: str | None = None) -> Any:
    """`tensor` laid out anew; a MATCH spec keeps the axis's current sharding."""
    if MATCH in layout.sharding_specs:
        current = fetch_layout(tensor).sharding_specs if is_dtensor(tensor) else [UNSHARDED] * layout.rank
        layout = Layout([c if s == MATCH else s for s, c in zip(layout.sharding_specs, current)], layout.mesh)
    return copy_to_mesh(tensor, layout)


def relayout_like(tensor: Any, layout_tensor: Any, name: str | None = None,
                  use_layout_tensor_mesh: bool = False) -> Any:
    return relayout(tensor, fetch_layout(layout_tensor))


def call_with_layout(fn: Callable[..., Any], layout: Layout | None, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` with its tensor results laid out by `layout` (the whole value is computed, then
    split: for a random op, the numbers are those `fn` gives without a layout)."""
    result = fn(*args, **kwargs)
    if layout is None:
        return result
    return jax.tree_util.tree_map(lambda leaf: relayout(leaf, layout), result)


def pack(tensors: Sequence[Any], layout: Layout) -> Any:
    """A DTensor from its pieces, one per local device of the layout's mesh, in the mesh's local order."""
    mesh = layout.mesh
    parts = [np.asarray(_array(t)) for t in tensors]
    if len(parts) != mesh.num_local_devices():
        raise InvalidArgumentError(None, None, f"expected {mesh.num_local_devices()} inputs to DTensorPack, but "
                                   f"got {len(parts)}: give one piece per local device of the mesh")
    if len({p.shape for p in parts}) > 1:
        raise UnimplementedError(None, None, "Components of a PackedTensor must currently all have the same "
                                 f"shape (got {sorted({p.shape for p in parts})})")
    shape = tuple(size * pieces for size, pieces in zip(parts[0].shape, layout.shape))
    if len(shape) != layout.rank:
        raise ValueError(f"The layout has rank {layout.rank} but the pieces have rank {parts[0].ndim}")
    sharding = layout.sharding()
    where = sharding.addressable_devices_indices_map(shape)
    devices = mesh.local_jax_devices()
    seen: dict[tuple, tuple[int, np.ndarray]] = {}
    for i, (device, part) in enumerate(zip(devices, parts)):
        key = tuple((s.start, s.stop) for s in where[device] or ())
        first = seen.setdefault(key, (i, part))
        if not np.array_equal(first[1], part, equal_nan=part.dtype.kind == "f"):
            raise ValueError(f"dtensor.pack: pieces {first[0]} and {i} hold the same part of the tensor (the layout "
                             f"{layout.sharding_specs} replicates it over the other mesh dimensions) but differ; "
                             "give every device of a replicated part the same piece")
    return jax.make_array_from_single_device_arrays(
        shape, sharding, [jax.device_put(p, d) for p, d in zip(parts, devices)])


def unpack(tensor: Any) -> list:
    """A DTensor's pieces, one per local device of its mesh, in the mesh's local order."""
    if getattr(tensor, "_dtensor_layout", None) is not None:  # TF 2.21 unpacks tensors only (observed)
        raise TypeError(f"Expecting a Tensor, got {type(tensor)}: dtensor.unpack(v.read_value()) unpacks a "
                        "DVariable's value")
    if not is_dtensor(tensor):
        raise InvalidArgumentError(None, None, "DTensorUnpack expects a tensor placed on the DTensor device "
                                   "(dtensor.copy_to_mesh, relayout or pack make one)")
    value = _array(tensor)
    pieces = {shard.device: shard.data for shard in value.addressable_shards}
    out = []
    for device in layout_of(value.sharding, value.ndim).mesh.local_jax_devices():
        piece = cast(DeviceTensor, np.asarray(pieces[device]).view(DeviceTensor))
        piece._device_name = tf_device_name(device)
        out.append(piece)
    return out


class _DVariableType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return getattr(obj, "_dtensor_layout", None) is not None

    def __call__(cls, initial_value: Any, *args: Any, dtype: Any = None, layout: Layout | None = None,
                 **kwargs: Any) -> Any:
        if callable(initial_value):
            initial_value = initial_value()
        if is_dtensor(initial_value):
            value_layout = fetch_layout(initial_value)
            if layout is not None and layout != value_layout:
                raise InvalidArgumentError(None, None, "Conflicting layout are provided for initial value layout "
                                           f"({value_layout}) and variable ({layout}).")
            layout = value_layout
        elif layout is not None:
            initial_value = relayout(initial_value, layout)
        else:
            raise InvalidArgumentError(None, None, "Neither layout nor DTensor initial value are provided. "
                                       "(Pass layout=, or an initial value made by dtensor.call_with_layout.)")
        variable = Variable(initial_value, *args, dtype=dtype, **kwargs)
        variable._layout = layout.sharding()  # Keras's JAX variable puts every assigned value on it
        variable._dtensor_layout = variable.layout = layout  # TF's attribute
        variable._jdist_check_assign = functools.partial(guard_assign, variable)
        variable.save_as_bf16 = False
        variable._direct_assign(variable.value)
        return make_dvariable(variable)  # TF's type, text and `.numpy()` rule


class DVariable(metaclass=_DVariableType):
    """`dtensor.DVariable(initial_value, layout=None)`: a `tf.Variable` that keeps its layout; the initial
    value is a DTensor or `layout` is given. Its `layout` attribute is that layout."""


def guard_assign(variable: Any, value: Any) -> None:
    """TF's rule that a variable's layout is immutable: a DTensor from another mesh is refused."""
    if is_dtensor(value) and fetch_layout(value).mesh != variable._dtensor_layout.mesh:
        raise ValueError(f"A DVariable's layout is fixed ({variable._dtensor_layout.sharding_specs} on its mesh); "
                         "the value is laid out on another mesh. dtensor.relayout it onto the variable's mesh.")


# --- tf.Tensor's printing and `.numpy()` for DTensors (installed with the first mesh) ---

def _is_split(array: Any) -> bool:
    return is_dtensor(array) and not layout_of(array.sharding, array.ndim).is_fully_replicated()


def _local_name(device: Any) -> str:
    return tf_device_name(device).rsplit("device:", 1)[-1]


def _printer(original: Callable[[Any], str], form: Callable[..., str]) -> Callable[[Any], str]:
    def text(self: Any) -> str:
        if not is_dtensor(self):
            return original(self)
        layout = layout_of(self.sharding, self.ndim)
        return form(self, layout, layout.mesh.local_jax_devices(), _local_name)

    return text


def _numpy_of(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def numpy(self: Any) -> Any:
        if _is_split(self):
            raise UnimplementedError(None, None, "Trying to copy a non-single-device and non-replicated DTensor is "
                                     "not supported. (dtensor.unpack gives its pieces; dtensor.relayout to "
                                     "Layout.replicated gives one value.)")
        return original(self)

    return numpy


def _local_copy_of(original: Callable[..., Any]) -> Callable[..., Any]:
    """A replicated DTensor on several processes' devices is read from this process's copy (as TF's clients
    read theirs); JAX would refuse an array that is not all in this process."""
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if is_dtensor(self) and not self.is_fully_addressable and not _is_split(self):
            return original(self.addressable_shards[0].data, *args, **kwargs)
        return original(self, *args, **kwargs)

    return read


_INSTALLED: list[bool] = []


def install_printing() -> None:
    """Makes a DTensor print as TF prints one and refuse `.numpy()` when split (TF's rule); other arrays are
    untouched. Runs once, when the first DTensor mesh is made."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    array_type = type(jax.numpy.zeros(()))
    array_type.__str__ = _printer(array_type.__str__, dtensor_text.tensor_str)  # type: ignore[method-assign]
    array_type.__repr__ = _printer(array_type.__repr__, dtensor_text.tensor_repr)  # type: ignore[method-assign]
    if hasattr(array_type, "numpy"):
        array_type.numpy = _numpy_of(array_type.numpy)  # type: ignore[attr-defined]
    for name in ("__array__", "__float__", "__int__", "__bool__", "item"):
        setattr(array_type, name, _local_copy_of(getattr(array_type, name)))


def _create_mesh(*args: Any, **kwargs: Any) -> Mesh:
    mesh = create_mesh(*args, **kwargs)
    install_printing()
    return mesh


def _create_distributed_mesh(*args: Any, **kwargs: Any) -> Mesh:
    mesh = create_distributed_mesh(*args, **kwargs)
    install_printing()
    return mesh


# --- the process's devices and clients (TF's dtensor.config) ---

_DEFAULT_MESH: list[Mesh] = []


@contextlib.contextmanager
def default_mesh(mesh: Mesh) -> Iterator[None]:
    """TF's default-mesh scope; `get_default_mesh()` reads it. Ops on regular tensors inside it stay regular
    tensors here (TF replicates them onto the mesh); `copy_to_mesh` places them."""
    if not isinstance(mesh, Mesh):
        raise ValueError(f"Expect `mesh` to be `Mesh`, got {type(mesh)}")
    _DEFAULT_MESH.append(mesh)
    try:
        yield
    finally:
        _DEFAULT_MESH.pop()


def get_default_mesh() -> Mesh | None:
    return _DEFAULT_MESH[-1] if _DEFAULT_MESH else None


def _devices(device_type: str | None) -> list:
    return jax.devices((device_type or jax.default_backend()).lower())


def num_local_devices(device_type: str) -> int:
    return len([d for d in _devices(device_type) if d.process_index == jax.process_index()])


def num_global_devices(device_type: str) -> int:
    return len(_devices(device_type))


def local_devices(device_type: str, for_client_id: int | None = None) -> list[str]:
    client = jax.process_index() if for_client_id is None else for_client_id
    return [tf_device_name(d) for d in _devices(device_type) if d.process_index == client]


def job_name() -> str:
    return "worker" if jax.process_count() > 1 else "localhost"


def full_job_name(task_id: int | None = None) -> str:
    return f"/job:{job_name()}/replica:0/task:{jax.process_index() if task_id is None else task_id}"


def initialize_accelerator_system(device_type: str | None = None, enable_coordination_service: bool = True,
                                  num_logical_cpu_devices: int | None = None,
                                  experimental_reset_context: bool = False,
                                  experimental_enable_megcore: bool = False) -> str:
    """Joins this process to its clients (TF's DTENSOR_CLIENT_ID / DTENSOR_NUM_CLIENTS / DTENSOR_JOBS, else
    TF_CONFIG or SLURM: `jdist.cluster.runtime.initialize`), once; returns the device type. One client: nothing
    to join (JAX starts its devices itself)."""
    from jdist.cluster import runtime

    runtime.initialize(_dtensor_clients())
    return (device_type or jax.default_backend()).upper()


def _dtensor_clients() -> Any:
    """TF's multi-client DTensor environment as a cluster resolver (None: jdist's own detection decides)."""
    import os

    from jdist.cluster.resolver import SimpleClusterResolver

    jobs = [j for j in os.environ.get("DTENSOR_JOBS", "").split(",") if j]
    if not jobs:
        return None
    client = int(os.environ.get("DTENSOR_CLIENT_ID", "0"))
    count = int(os.environ.get("DTENSOR_NUM_CLIENTS", str(len(jobs))))
    if count != len(jobs) or not 0 <= client < count:
        raise ValueError(f"DTENSOR_JOBS lists {len(jobs)} clients, DTENSOR_NUM_CLIENTS says {count} and "
                         f"DTENSOR_CLIENT_ID is {client}: give one host:port per client and an id below their count")
    return SimpleClusterResolver({"worker": jobs}, task_type="worker", task_id=client)


def barrier(mesh: Mesh, barrier_name: str | None = None, timeout_in_ms: int | None = None) -> None:
    """Waits until every process reaches this point (one process: at once)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(barrier_name or "dtensor.barrier")


NAMES: dict[str, Any] = dict(
    Mesh=Mesh, MeshDimension=MeshDimension, Layout=Layout, UNSHARDED=UNSHARDED, MATCH=MATCH, DVariable=DVariable,
    create_mesh=_create_mesh, create_distributed_mesh=_create_distributed_mesh, is_dtensor=is_dtensor,
    fetch_layout=fetch_layout, check_layout=check_layout, copy_to_mesh=copy_to_mesh, relayout=relayout,
    relayout_like=relayout_like, call_with_layout=call_with_layout, pack=pack, unpack=unpack,
    default_mesh=default_mesh, run_on=default_mesh, get_default_mesh=get_default_mesh,
    device_name=lambda: "/job:localhost/replica:0/task:0/device:CUSTOM:0",
    num_local_devices=num_local_devices, num_global_devices=num_global_devices, local_devices=local_devices,
    client_id=jax.process_index, num_clients=jax.process_count, job_name=job_name, full_job_name=full_job_name,
    jobs=lambda: [full_job_name(i) for i in range(jax.process_count())],
    heartbeat_enabled=lambda: False, preferred_device_type=lambda: jax.default_backend().upper(),
    initialize_accelerator_system=initialize_accelerator_system, initialize_multi_client=initialize_accelerator_system,
    initialize_tpu_system=initialize_accelerator_system, shutdown_accelerator_system=lambda: None,
    shutdown_tpu_system=lambda: None, barrier=barrier,
)
