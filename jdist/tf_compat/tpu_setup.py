"""TF's TPU setup ritual under its names: `TPUClusterResolver`, `experimental_connect_to_cluster`, `tf.tpu`.

TF scripts start with

    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='local')   # or tpu=''
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)

In jdist the process runs on the TPU VM itself and JAX finds the cores (`jdist.tpu`), so the resolver
names this host's TPUs, connecting is nothing to do, and initializing is `jdist.tpu.initialize_tpu_system`.
Without TPUs each step fails where TF 2.21's does (observed on this CPU-only machine), with TF's error
class and text followed by the way to run the same code on CPU devices. A remote TPU (TF's gRPC master,
a TPU node's name) is refused: JAX runs on the TPU hosts, not against them.
"""
from __future__ import annotations

from typing import Any

import jax

import jdist.tpu
from jdist.cluster import ClusterResolver, ClusterSpec
from jdist.tf_compat.error_types import NotFoundError
from jdist.tf_compat.namespace import Namespace
from jdist.tf_compat.unsupported import alternative

_ON_CPU = ('To run TPU code on CPU devices, make the strategy on them: tf.distribute.TPUStrategy('
           'devices=jax.devices("cpu")) (with XLA_FLAGS=--xla_force_host_platform_device_count=8 for 8 '
           "simulated cores), without the resolver and initialization lines.")
# TF 2.21 on a machine without TPUs (observed): TPUClusterResolver(tpu=None) and (tpu='') raise ValueError with
# this text; tpu='local' constructs; initialize_tpu_system then raises NotFoundError starting with the second.
_NO_NAME = "Please provide a TPU Name to connect to."
_NOT_FOUND = "TPUs not found in the cluster."


def _local_tpus() -> list:
    try:
        return jax.local_devices(backend="tpu")
    except RuntimeError:  # no TPU backend
        return []


class TPUClusterResolver(ClusterResolver):
    """`tf.distribute.cluster_resolver.TPUClusterResolver`: this host's TPUs.

    `tpu='local'` always constructs (TF's too); `tpu=None` or `''` resolve to the local TPUs, and without any
    raise TF's ValueError. Any other `tpu` (a TPU node's name, `grpc://host:port`) is refused, since jdist
    cannot drive a remote TPU: run the script on the TPU VM (every host of a slice) with `tpu='local'`.
    """

    def __init__(self, tpu: str | list | None = None, zone: str | None = None, project: str | None = None,
                 job_name: str = "worker", coordinator_name: str | None = None,
                 coordinator_address: str | None = None, credentials: Any = "default", service: Any = None,
                 discovery_url: str | None = None):
        if tpu in (None, "") and not _local_tpus():
            raise ValueError(f"{_NO_NAME} jdist found no TPU on this machine (JAX's backend is "
                             f"{jax.default_backend()!r}). {_ON_CPU}")
        if tpu not in (None, "", "local"):
            raise ValueError(
                f"TPUClusterResolver(tpu={tpu!r}): jdist runs on the TPU VM itself and cannot connect to a remote "
                "TPU. Run this script on the TPU VM (on every host of a multi-host slice; jdist joins them "
                "through jax.distributed) with TPUClusterResolver(tpu='local'), or make jdist.TPUStrategy() there.")
        self.tpu, self.zone, self.project = "local", zone, project
        self._job_name = job_name

    def cluster_spec(self) -> ClusterSpec:
        """TF's for a local TPU: an empty cluster (observed `ClusterSpec({})`)."""
        return ClusterSpec({})

    @property
    def task_type(self) -> str:
        return self._job_name

    @property
    def task_id(self) -> int:
        return 0

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        return ""

    get_master = master

    def get_job_name(self) -> str:
        return self._job_name

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """This host's TPU cores (TF 2.21 on a machine without TPUs: `{'TPU': 0}`, observed)."""
        return {"TPU": len(_local_tpus())}

    @staticmethod
    def connect(tpu: str | None = None, zone: str | None = None, project: str | None = None) -> TPUClusterResolver:
        """TF's shorthand: the resolver, connected and with the TPU system initialized."""
        resolver = TPUClusterResolver(tpu, zone, project)
        experimental_connect_to_cluster(resolver)
        initialize_tpu_system(resolver)
        return resolver


def experimental_connect_to_cluster(cluster_spec_or_resolver: Any, job_name: str = "localhost",
                                    task_index: int = 0, protocol: str | None = None,
                                    make_master_device_default: bool = True,
                                    cluster_device_filters: Any = None) -> None:
    """Nothing to connect for a local TPU (TF 2.21 returns None for `tpu='local'`, observed); other clusters are
    refused with the way forward (multi-process JAX is `jax.distributed.initialize`)."""
    if isinstance(cluster_spec_or_resolver, TPUClusterResolver):
        return None
    message = alternative("tf.config.experimental_connect_to_cluster")
    raise NotImplementedError(message)


def initialize_tpu_system(cluster_resolver: TPUClusterResolver | None = None) -> jdist.tpu.TPUTopology:
    """`tf.tpu.experimental.initialize_tpu_system`: `jdist.tpu.initialize_tpu_system`, which returns the
    topology (`num_tasks`, `num_tpus_per_task`, `mesh_shape`, `device_coordinates`, as TF's `Topology`)
    and may be called again. Without TPUs: TF's `NotFoundError`."""
    try:
        return jdist.tpu.initialize_tpu_system(cluster_resolver)
    except jdist.tpu.TPUNotFoundError as error:
        raise NotFoundError(None, None, f"{_NOT_FOUND} {error}") from error


def shutdown_tpu_system(cluster_resolver: TPUClusterResolver | None = None) -> None:
    """Accepted: JAX keeps the TPUs for the process's life (TF frees them here)."""


tpu = Namespace(
    "tf.tpu",
    experimental=Namespace("tf.tpu.experimental", initialize_tpu_system=initialize_tpu_system,
                           shutdown_tpu_system=shutdown_tpu_system, Topology=jdist.tpu.TPUTopology),
)
