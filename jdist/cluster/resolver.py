"""`ClusterResolver`: where this process sits in a cluster of training processes.

TF's interface (`cluster_spec()`, `master()`, `task_type`, `task_id`) plus what
`jax.distributed.initialize` needs: the coordinator address, the number of
processes and this process's id. Everything is validated on access, so a bad
config fails here, before any collective can wait for a process that will never
come.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping, Sequence

from jdist.cluster import spec as spec_lib
from jdist.cluster.spec import ClusterSpec


class ClusterResolver(abc.ABC):
    """Base class; subclasses provide `cluster_spec()`, `task_type` and `task_id`."""

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """The cluster's jobs and task addresses."""

    @property
    @abc.abstractmethod
    def task_type(self) -> str | None:
        """This process's job name, e.g. "worker"; None outside a cluster."""

    @property
    @abc.abstractmethod
    def task_id(self) -> int | None:
        """This process's index within its job; None outside a cluster."""

    @property
    def rpc_layer(self) -> str | None:
        return None

    @property
    def environment(self) -> str:
        return ""

    @property
    def local_device_ids(self) -> Sequence[int] | None:
        """Which local accelerators this process uses (None: all of them)."""
        return None

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """Accelerators the resolver was told about ({} when it was told nothing).

        jdist does not use this to pick devices: it asks JAX once the runtime is up.
        """
        return {}

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        """TF's master address ("grpc://host:port"); "" for a one-task cluster."""
        cluster = self.cluster_spec()
        if not cluster.jobs or (len(cluster.jobs) == 1 and cluster.num_tasks(cluster.jobs[0]) == 1):
            return ""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        address = cluster.task_address(task_type, task_id)
        layer = rpc_layer if rpc_layer is not None else self.rpc_layer
        return f"{layer}://{address}" if layer else address

    # ------------------------------------------------------- what JAX needs
    def validate(self) -> None:
        """Raises `ValueError` naming the problem if the cluster config is unusable."""
        self._checked()

    @property
    def num_workers(self) -> int:
        """Training processes: chief + workers (TF's `worker_count`); 1 outside a cluster."""
        cluster, task_type, _ = self._checked()
        return 1 if task_type is None else spec_lib.worker_count(cluster, task_type)

    @property
    def process_id(self) -> int:
        """This process's rank: the chief is 0, worker `i` is `i + #chiefs` (TF's `id_in_cluster`)."""
        cluster, task_type, task_id = self._checked()
        return 0 if task_type is None or task_id is None else spec_lib.id_in_cluster(cluster, task_type, task_id)

    @property
    def is_chief(self) -> bool:
        """True for `chief:0`, or `worker:0` when the cluster has no chief (and outside a cluster)."""
        cluster, task_type, task_id = self._checked()
        return True if task_type is None or task_id is None else spec_lib.is_chief(cluster, task_type, task_id)

    @property
    def coordinator_address(self) -> str | None:
        """"host:port" of the task that hosts JAX's coordination service; None for one process."""
        cluster, task_type, _ = self._checked()
        if task_type is None or task_type == "evaluator" or self.num_workers == 1:
            return None
        return cluster.task_address(*spec_lib.coordinator_task(cluster))

    def task_name(self, process_id: int) -> str:
        """The TF task name ("chief:0", "worker:1") of a training process, for messages."""
        cluster, task_type, task_id = self._checked()
        if task_type is None:
            return "worker:0"
        if task_type == "evaluator":
            return f"evaluator:{process_id}"
        chiefs = len(cluster.as_dict().get("chief", []))
        return "chief:0" if process_id < chiefs else f"worker:{process_id - chiefs}"

    def _checked(self) -> tuple[ClusterSpec, str | None, int | None]:
        cluster = self.cluster_spec()
        task_type, task_id = self.task_type, self.task_id
        if not cluster.jobs:
            if task_type is not None and task_type != "evaluator":
                raise ValueError(
                    f"The task is {task_type}:{task_id} but the cluster spec is empty; give the cluster's "
                    "jobs and addresses too (TF_CONFIG's 'cluster')."
                )
            return cluster, None, None
        if task_type is None or task_id is None:
            raise ValueError(
                f"The cluster spec {cluster.as_dict()} names no task for this process "
                f"(task type {task_type!r}, index {task_id!r}). Say which one it is, e.g. "
                "TF_CONFIG's \"task\": {\"type\": \"worker\", \"index\": 0}."
            )
        spec_lib.validate(cluster, task_type, task_id)
        return cluster, task_type, task_id

    def __repr__(self) -> str:
        try:
            if self.task_type is None:
                where = "single worker"
            else:
                where = f"{self.task_type}:{self.task_id}, process {self.process_id} of {self.num_workers}"
        except ValueError as err:
            where = f"invalid: {err}"
        return f"{type(self).__name__}({where})"


class SimpleClusterResolver(ClusterResolver):
    """Everything given explicitly (TF's `SimpleClusterResolver`).

    `SimpleClusterResolver({"worker": ["h0:2222", "h1:2222"]}, task_type="worker", task_id=1)`
    """

    def __init__(
        self,
        cluster_spec: "ClusterSpec | Mapping[str, Any]",
        master: str = "",
        task_type: str | None = None,
        task_id: int | None = None,
        environment: str = "",
        num_accelerators: Mapping[str, int] | None = None,
        rpc_layer: str | None = None,
        local_device_ids: Sequence[int] | None = None,
    ):
        self._cluster = ClusterSpec(cluster_spec)
        self._master = master
        self._task_type = task_type
        self._task_id = task_id
        self._environment = environment
        self._num_accelerators = dict(num_accelerators or {})
        self._rpc_layer = rpc_layer
        self._local_device_ids = None if local_device_ids is None else list(local_device_ids)

    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        if task_type is not None or task_id is not None or not self._master:
            return super().master(task_type, task_id, rpc_layer)
        layer = rpc_layer if rpc_layer is not None else self._rpc_layer
        return f"{layer}://{self._master}" if layer and "://" not in self._master else self._master

    @property
    def task_type(self) -> str | None:
        return self._task_type

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        return self._task_id

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = value

    @property
    def environment(self) -> str:
        return self._environment

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer

    @property
    def local_device_ids(self) -> Sequence[int] | None:
        return self._local_device_ids

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """What the constructor was told (TF's behaviour); jdist itself asks JAX instead."""
        return dict(self._num_accelerators)
