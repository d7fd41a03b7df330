"""`tf.distribute.Server` and `tf.compat.v1.ConfigProto`: records, because jdist starts its own processes.

TF's parameter-server tutorial starts an in-process gRPC server per task
(`tf.distribute.Server(cluster_spec, job_name="worker", task_index=i, config=..., protocol="grpc")`)
and hands the `ClusterSpec` to `ParameterServerStrategy` through a resolver. Under jdist the
parameter servers and the workers are Ray actor processes that `ParameterServerStrategy` and
`ClusterCoordinator` start themselves, counting the cluster's tasks; nothing listens on the
addresses. So a `Server` here records its task and address (`target` is TF's
"grpc://host:port"), and `join()`, which in TF serves forever, refuses with the way forward.
`ConfigProto` keeps the thread settings a script sets on it; jdist leaves threads to XLA.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jdist.cluster.spec import ClusterSpec


class ConfigProto:
    """TF1's session config: any field can be set and read back; none changes what jdist runs."""

    def __init__(self, **fields: Any):
        self.inter_op_parallelism_threads = 0
        self.intra_op_parallelism_threads = 0
        self.allow_soft_placement = False
        self.log_device_placement = False
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"ConfigProto({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class Server:
    """`tf.distribute.Server(server_or_cluster_def, job_name, task_index, protocol, config, start)`: a record
    of one task of the cluster; jdist's parameter-server processes are Ray actors it starts itself."""

    def __init__(self, server_or_cluster_def: Mapping[str, Any] | ClusterSpec, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None, config: ConfigProto | None = None,
                 start: bool = True):
        cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError(f"Server: job_name must be given: the cluster has jobs {cluster.jobs}.")
            job_name = cluster.jobs[0]
        if task_index is None:
            indices = cluster.task_indices(job_name)
            if len(indices) != 1:
                raise ValueError(f"Server: task_index must be given: job {job_name!r} has tasks {indices}.")
            task_index = indices[0]
        self.cluster_spec = cluster
        self.job_name = job_name
        self.task_index = int(task_index)
        self.address = cluster.task_address(job_name, self.task_index)
        self.protocol = protocol or "grpc"
        self.config = config
        self.started = bool(start)

    @property
    def target(self) -> str:
        return f"{self.protocol}://{self.address}"

    def start(self) -> None:
        self.started = True

    def join(self) -> None:
        raise RuntimeError(
            f"Server({self.job_name}:{self.task_index}).join(): jdist serves no task from this process. The "
            "parameter servers and workers are processes that jdist.ParameterServerStrategy and "
            "ClusterCoordinator start (Ray actors); run the coordinator's script only.")

    @staticmethod
    def create_local_server(config: ConfigProto | None = None, start: bool = True) -> "Server":
        return Server({"localhost": ["localhost:0"]}, "localhost", 0, config=config, start=start)

    def __repr__(self) -> str:
        return f"Server({self.job_name}:{self.task_index} at {self.address}, not serving: jdist starts its own)"
