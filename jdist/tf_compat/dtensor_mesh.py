"""TF's DTensor `Mesh` and `Layout`, held as a `jax.sharding.Mesh` and a `PartitionSpec` on it.

A DTensor is a JAX array with a `NamedSharding` on a mesh made here. Its mesh axes are Auto, so XLA
propagates shardings through every op (`tf.matmul` of two laid-out arrays is laid out too), as DTensor's
SPMD expansion does. The texts (`Mesh.from_string(...)`, `Layout.from_string(...)`) and the errors are
TF 2.21's, observed (tests/test_tf_compat_dtensor.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec

from jdist.strategy.devices import resolve_device, tf_device_name

UNSHARDED = "unsharded"
MATCH = "match"

# The DTensor mesh each JAX mesh was made for, so that a result's layout names the mesh the script made (held
# for the process's life: arrays keep their JAX mesh after the script drops its Mesh object).
_MESHES: dict[JaxMesh, Mesh] = {}


class MeshDimension(NamedTuple):
    name: str
    size: int


class Mesh:
    """TF's `dtensor.Mesh`: named dimensions over devices, with global ids laid out in the mesh's shape."""

    def __init__(self, dim_names: Sequence[str], global_device_ids: Any, local_device_ids: Sequence[int],
                 local_devices: Sequence[Any], mesh_name: str = "", global_devices: Sequence[Any] | None = None,
                 use_xla_spmd: bool = False):
        ids = np.asarray(global_device_ids, dtype=np.int64)
        if ids.ndim != len(dim_names):
            raise ValueError(f"Mesh: {len(dim_names)} dimension names {list(dim_names)} for global_device_ids of "
                             f"shape {list(ids.shape)}; give one name per axis of global_device_ids")
        if len(set(dim_names)) != len(dim_names):
            raise ValueError(f"Mesh: dimension names must be unique, got {list(dim_names)}")
        if len(local_device_ids) != len(local_devices):
            raise ValueError(f"Mesh: {len(local_device_ids)} local_device_ids for {len(local_devices)} "
                             "local_devices; give one id per local device")
        self._dim_names, self._ids, self._name = list(dim_names), ids, mesh_name
        self._local_ids = [int(i) for i in local_device_ids]
        self._local = [_device(d) for d in local_devices]
        by_id = dict(zip(self._local_ids, self._local))
        if global_devices is not None:
            by_id.update(zip(ids.ravel().tolist(), (_device(d) for d in global_devices)))
        everywhere = jax.devices(self._local[0].platform if self._local else None)
        devices = np.vectorize(lambda i: by_id.get(int(i)) or everywhere[int(i)], otypes=[object])(ids)
        self._jax = JaxMesh(devices, tuple(self._dim_names),
                            axis_types=(jax.sharding.AxisType.Auto,) * len(self._dim_names))
        self._use_xla_spmd = use_xla_spmd
        _MESHES[self._jax] = self

    # --- TF's accessors ---
    @property
    def dim_names(self) -> list[str]:
        return list(self._dim_names)

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        return int(self._ids.size)

    def shape(self) -> list[int]:
        return list(self._ids.shape)

    def __getitem__(self, dim_name: str) -> MeshDimension:
        return MeshDimension(dim_name, self.dim_size(dim_name))

    def dim_size(self, dim_name: str) -> int:
        if dim_name not in self._dim_names:
            raise ValueError(f"{dim_name!r} is not a dimension of the mesh (its dimensions: {self._dim_names})")
        return self.shape()[self._dim_names.index(dim_name)]

    def contains_dim(self, dim_name: str) -> bool:
        return dim_name in self._dim_names

    def global_device_ids(self) -> np.ndarray:
        return self._ids.copy()

    def local_device_ids(self) -> list[int]:
        return list(self._local_ids)

    def num_local_devices(self) -> int:
        return len(self._local)

    def local_devices(self) -> list[str]:
        """TF's full names: '/job:localhost/replica:0/task:0/device:CPU:0'."""
        return [tf_device_name(d) for d in self._local]

    def local_device_locations(self) -> list[dict[str, int]]:
        """Each local device's coordinate along every dimension, in local-device order."""
        return [dict(zip(self._dim_names, map(int, np.unravel_index(self._ids.ravel().tolist().index(i),
                                                                     self._ids.shape))))
                for i in self._local_ids]

    def device_type(self) -> str:
        return (self._local[0] if self._local else self._jax.devices.flat[0]).platform.upper()

    def is_single_device(self) -> bool:
        return False

    def use_xla_spmd(self) -> bool:
        return self._use_xla_spmd

    def host_mesh(self) -> Mesh:
        """This mesh on the host's CPUs (itself when it is a CPU mesh)."""
        if self.device_type() == "CPU":
            return self
        cpus = [f"CPU:{i}" for i in range(len(self._local))]
        return Mesh(self._dim_names, self._ids, self._local_ids, cpus, self._name)

    # --- the JAX side ---
    @property
    def jax_mesh(self) -> JaxMesh:
        return self._jax

    def local_jax_devices(self) -> list:
        return list(self._local)

    # --- text and identity (TF's format) ---
    def to_string(self) -> str:
        dims = ",".join(f"{n}={s}" for n, s in zip(self._dim_names, self.shape()))
        ids = ",".join(str(i) for i in self._ids.ravel())
        return f"{self._name}|{dims}|{ids}|{','.join(map(str, self._local_ids))}|{','.join(self.local_devices())}"

    @staticmethod
    def from_string(text: str) -> Mesh:
        name, dims, ids, local_ids, devices = text.split("|")[:5]
        pairs = [d.split("=") for d in dims.split(",") if d]
        shape = [int(s) for _, s in pairs]
        return Mesh([n for n, _ in pairs], np.asarray([int(i) for i in ids.split(",")]).reshape(shape),
                    [int(i) for i in local_ids.split(",")], devices.split(","), name)

    def __repr__(self) -> str:
        return f"Mesh.from_string({self.to_string()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and other.to_string() == self.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())


def _device(device: Any) -> Any:
    """A `jax.Device` from itself, TF's name ('CPU:0', '/job:.../device:CPU:0') or a DeviceSpec."""
    return device if isinstance(device, jax.Device) else resolve_device(_device_part(device))


def _device_part(device: Any) -> Any:
    """'CPU:0' from '/job:localhost/replica:0/task:0/device:CPU:0' or a DeviceSpec (jdist resolves both)."""
    text = device if isinstance(device, str) else getattr(device, "name", None) or str(device)
    return text.split("device:")[-1] if "device:" in text else text


def mesh_of(jax_mesh: Any) -> Mesh:
    """The DTensor mesh of a JAX mesh: the one made for it, else one over its devices (global ids in order)."""
    known = _MESHES.get(jax_mesh)
    if known is not None:
        return known
    devices = list(jax_mesh.devices.flat)
    local = [d for d in devices if d.process_index == jax.process_index()]
    ids = np.arange(len(devices)).reshape(jax_mesh.devices.shape)
    return Mesh(list(jax_mesh.axis_names), ids, [devices.index(d) for d in local], local,
                global_devices=devices)


def is_dtensor_mesh(jax_mesh: Any) -> bool:
    return _MESHES.get(jax_mesh) is not None


def create_mesh(mesh_dims: Sequence[tuple[str, int]] | dict[str, int] | None = None, mesh_name: str = "",
                devices: Sequence[Any] | None = None, device_type: str | None = None,
                use_xla_spmd: bool = False) -> Mesh:
    """TF's `dtensor.create_mesh`: a single-client mesh over `devices` ('CPU:0', ...; default: every local
    device of `device_type`, or of JAX's default backend). One dimension of size -1 takes every device."""
    if devices is None:
        kind = (device_type or jax.default_backend()).lower()
        devices = [f"{kind}:{i}" for i in range(len(jax.local_devices(backend=kind)))]
    dims = list(mesh_dims.items()) if isinstance(mesh_dims, dict) else list(mesh_dims or [("x", len(devices))])
    if len(dims) == 1 and dims[0][1] == -1:
        dims = [(dims[0][0], len(devices))]
    shape = [int(size) for _, size in dims]
    if int(np.prod(shape)) != len(devices):
        raise ValueError(f"length of devices ({len(devices)}) must be equal to total size of the mesh of "
                         f"shape {shape}")
    ids = np.arange(len(devices)).reshape(shape)
    return Mesh([name for name, _ in dims], ids, ids.ravel().tolist(), list(devices), mesh_name,
                use_xla_spmd=use_xla_spmd)


def create_distributed_mesh(mesh_dims: Sequence[tuple[str, int]] | dict[str, int], mesh_name: str = "",
                            local_devices: Sequence[Any] | None = None, device_type: str | None = None,
                            use_xla_spmd: bool = False) -> Mesh:
    """TF's `dtensor.create_distributed_mesh`: a mesh over every process's devices (the processes joined by
    `jax.distributed.initialize`); global ids run over processes in order, each process listing its own."""
    kind = (device_type or jax.default_backend()).lower()
    everywhere = jax.devices(kind)
    mine = [d for d in everywhere if d.process_index == jax.process_index()]
    if local_devices is not None:
        mine = [_device(d) for d in local_devices]
    dims = list(mesh_dims.items()) if isinstance(mesh_dims, dict) else list(mesh_dims)
    shape = [int(size) for _, size in dims]
    if int(np.prod(shape)) != len(everywhere):
        raise ValueError(f"The mesh's shape {shape} holds {int(np.prod(shape))} devices, but the processes have "
                         f"{len(everywhere)} {kind.upper()} devices in all; make the sizes multiply to that")
    ids = np.arange(len(everywhere)).reshape(shape)
    return Mesh([n for n, _ in dims], ids, [everywhere.index(d) for d in mine], mine, mesh_name,
                global_devices=everywhere, use_xla_spmd=use_xla_spmd)


class Layout:
    """TF's `dtensor.Layout`: for each tensor axis, the mesh dimension it is split over, or UNSHARDED."""

    def __init__(self, sharding_specs: Sequence[str], mesh: Mesh):
        if not isinstance(mesh, Mesh):
            raise ValueError(f"Layout: mesh must be a dtensor.Mesh (dtensor.create_mesh), got {type(mesh).__name__}")
        specs = list(sharding_specs)
        for spec in specs:
            if spec not in (UNSHARDED, MATCH) and not mesh.contains_dim(spec):
                raise ValueError(f"{spec}: A dimension sharding must either be a valid mesh dimension or "
                                 "UNSHARDED.")
        named = [s for s in specs if s not in (UNSHARDED, MATCH)]
        repeated = next((s for s in named if named.count(s) > 1), None)
        if repeated is not None:
            raise ValueError(f"Mesh dimension {repeated} was repeated in sharding specification {specs}. Mesh "
                             "dimensions must be unique in a layout.")
        self._specs, self._mesh = specs, mesh

    @staticmethod
    def replicated(mesh: Mesh, rank: int) -> Layout:
        return Layout([UNSHARDED] * rank, mesh)

    @staticmethod
    def batch_sharded(mesh: Mesh, batch_dim: str, rank: int, axis: int = 0) -> Layout:
        specs = [UNSHARDED] * rank
        specs[axis] = batch_dim
        return Layout(specs, mesh)

    @staticmethod
    def inner_sharded(mesh: Mesh, inner_dim: str, rank: int) -> Layout:
        return Layout.batch_sharded(mesh, inner_dim, rank, axis=rank - 1)

    @staticmethod
    def from_string(text: str) -> Layout:
        specs, _, mesh = text.partition(" mesh:")
        return Layout([n for n in specs[len("sharding_specs:"):].split(",") if n], Mesh.from_string(mesh))

    @property
    def sharding_specs(self) -> list[str]:
        return list(self._specs)

    @property
    def mesh(self) -> Mesh:
        return self._mesh

    @property
    def rank(self) -> int:
        return len(self._specs)

    @property
    def shape(self) -> list[int]:
        """How many pieces each tensor axis is cut into."""
        return [self.num_shards(i) for i in range(self.rank)]

    def num_shards(self, idx: int) -> int:
        spec = self._specs[idx]
        return 1 if spec in (UNSHARDED, MATCH) else self._mesh.dim_size(spec)

    def is_fully_replicated(self) -> bool:
        return all(s == UNSHARDED for s in self._specs)

    def is_single_device(self) -> bool:
        return False

    def delete(self, dims: Sequence[int]) -> Layout:
        """This layout without the tensor axes `dims` (a bias's layout from its kernel's)."""
        gone = {d % self.rank for d in dims}
        return Layout([s for i, s in enumerate(self._specs) if i not in gone], self._mesh)

    def offset_to_shard(self) -> list[tuple[int, ...]]:
        """Each local device's piece index along every tensor axis, in local-device order."""
        return [tuple(0 if s in (UNSHARDED, MATCH) else where[s] for s in self._specs)
                for where in self._mesh.local_device_locations()]

    # --- the JAX side ---
    def partition_spec(self) -> PartitionSpec:
        return PartitionSpec(*[None if s in (UNSHARDED, MATCH) else s for s in self._specs])

    def sharding(self) -> NamedSharding:
        return NamedSharding(self._mesh.jax_mesh, self.partition_spec())

    def place(self, value: Any) -> jax.Array:
        """`value` (an array of this layout's rank) laid out by this layout."""
        if np.ndim(value) != self.rank:
            raise ValueError(f"The layout has rank {self.rank} ({self.sharding_specs}) but the tensor has rank "
                             f"{np.ndim(value)} (shape {tuple(np.shape(value))}); give one sharding spec per axis")
        for axis, (size, pieces) in enumerate(zip(np.shape(value), self.shape)):
            if size % pieces:
                raise ValueError(f"Axis {axis} of the tensor (size {size}) is split over mesh dimension "
                                 f"{self.sharding_specs[axis]!r} of size {pieces}, which does not divide it: pad "
                                 "the tensor or choose a dimension whose size divides it")
        return jax.device_put(value, self.sharding())

    # --- text and identity (TF's format) ---
    def to_string(self) -> str:
        return f"sharding_specs:{''.join(s + ',' for s in self._specs)} mesh:{self._mesh.to_string()}"

    def __repr__(self) -> str:
        return f"Layout.from_string({self.to_string()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other.to_string() == self.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())


def layout_of(sharding: NamedSharding, rank: int) -> Layout:
    """The layout a `NamedSharding` gives an array of `rank` axes."""
    specs = []
    for axis in (*sharding.spec, *([None] * (rank - len(sharding.spec)))):
        if isinstance(axis, tuple):
            if len(axis) != 1:
                raise ValueError(f"This array is split along one axis over the mesh dimensions {axis}; a DTensor "
                                 "layout splits an axis over one mesh dimension. dtensor.relayout it first.")
            axis = axis[0]
        specs.append(UNSHARDED if axis is None else axis)
    return Layout(specs, mesh_of(sharding.mesh))
