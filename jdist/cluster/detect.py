"""`resolve_cluster()`: which cluster this process belongs to, from its environment.

Order: `TF_CONFIG` (what TF launchers and Kubernetes operators set), then a
SLURM job step (`srun`), then a JAX distributed runtime the program already
started itself (e.g. `jax.distributed.initialize()` on a TPU pod), else a
single worker.
"""
from __future__ import annotations

import os
from typing import Mapping

from jdist.cluster.resolver import ClusterResolver, SimpleClusterResolver
from jdist.cluster.slurm import SlurmClusterResolver
from jdist.cluster.spec import ClusterSpec
from jdist.cluster.tf_config import TF_CONFIG, TFConfigClusterResolver


def in_slurm_step(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return "SLURM_PROCID" in env and ("SLURM_STEP_NODELIST" in env or "SLURM_JOB_NODELIST" in env)


def resolve_cluster() -> ClusterResolver:
    """The resolver for this process's environment (see the module docstring for the order)."""
    if os.environ.get(TF_CONFIG, "").strip():
        return TFConfigClusterResolver()
    if in_slurm_step():
        return SlurmClusterResolver()
    runtime = RuntimeClusterResolver.from_running_runtime()
    if runtime is not None:
        return runtime
    return SimpleClusterResolver(ClusterSpec({}))


class RuntimeClusterResolver(ClusterResolver):
    """The cluster of a JAX distributed runtime that is already running in this process."""

    def __init__(self, coordinator_address: str, num_processes: int, process_id: int):
        self._address = coordinator_address
        self._num = num_processes
        self._pid = process_id

    @classmethod
    def from_running_runtime(cls) -> "RuntimeClusterResolver | None":
        import jax
        from jax._src import distributed

        if not jax.distributed.is_initialized():
            return None
        state = distributed.global_state
        assert state.coordinator_address is not None, "an initialized runtime knows its coordinator"
        return cls(state.coordinator_address, state.num_processes, state.process_id)

    def cluster_spec(self) -> ClusterSpec:
        """Only the coordinator's address is known; the other entries are placeholders."""
        return ClusterSpec({"worker": [self._address] + [f"process-{i}:0" for i in range(1, self._num)]})

    @property
    def task_type(self) -> str:
        return "worker"

    @property
    def task_id(self) -> int:
        return self._pid

    @property
    def num_workers(self) -> int:
        return self._num

    @property
    def process_id(self) -> int:
        return self._pid

    @property
    def is_chief(self) -> bool:
        return self._pid == 0

    @property
    def coordinator_address(self) -> str | None:
        return self._address if self._num > 1 else None

    def _checked(self):
        return self.cluster_spec(), "worker", self._pid
