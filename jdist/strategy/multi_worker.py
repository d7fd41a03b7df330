"""`MultiWorkerMirroredStrategy`: synchronous data parallelism over every device of every worker.

The same program runs in every worker process. The strategy joins JAX's
distributed runtime (NCCL between GPUs, ICI/DCN on TPU pods, gloo on CPU) when
it is created, however late that is: if JAX's CPU runtime is already up it is
restarted; an accelerator runtime that is already up is a clear error. The mesh
has one `data` axis over processes x local devices, each process's devices
contiguous, so replica `i` of worker `w` is global replica `w * local + i`
(TF's numbering) and a worker's share of a batch is one contiguous slice.

Input: `distribute_batch` takes this worker's share of the global batch (rows
`local_batch_slice(global_batch_size)`), never the whole batch.
"""
from __future__ import annotations

from collections import Counter

import jax
import numpy as np

from jdist.cluster import runtime
from jdist.cluster.communication import CommunicationOptions
from jdist.cluster.detect import resolve_cluster
from jdist.cluster.resolver import ClusterResolver
from jdist.strategy.base import Strategy
from jdist.strategy.batch import leading_size, place_rows
from jdist.strategy.values import mark_split
from jdist.typing import PyTree


class MultiWorkerMirroredStrategy(Strategy):
    """TF's `tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=None, communication_options=None)`.

    `cluster_resolver=None` detects the cluster (TF_CONFIG, then SLURM, else a
    single worker over the local devices).
    """

    _between_graph = True

    def __init__(
        self,
        cluster_resolver: ClusterResolver | None = None,
        communication_options: CommunicationOptions | None = None,
        *,
        shard_optimizer_state: bool = False,
    ):
        if communication_options is None:
            communication_options = CommunicationOptions()
        if not isinstance(communication_options, CommunicationOptions):
            raise ValueError(
                "communication_options must be an instance of jdist.CommunicationOptions, got "
                f"{type(communication_options).__name__}."
            )
        resolver = cluster_resolver if cluster_resolver is not None else resolve_cluster()
        if resolver.task_type == "ps":
            raise ValueError(
                f"This process is task ps:{resolver.task_id}; MultiWorkerMirroredStrategy runs on chief and worker "
                "tasks only (parameter servers belong to ParameterServerStrategy)."
            )
        runtime.initialize(resolver, communication_options)
        self._resolver = resolver
        self._communication_options = communication_options
        self._is_chief = resolver.is_chief
        self._worker_index = resolver.process_id if jax.process_count() > 1 else 0
        super().__init__(devices=_process_major_devices(), shard_optimizer_state=shard_optimizer_state)

    # ----------------------------------------------------------------- cluster
    @property
    def cluster_resolver(self) -> ClusterResolver:
        return self._resolver

    @property
    def num_workers(self) -> int:
        return jax.process_count()

    @property
    def worker_index(self) -> int:
        """This worker's rank: the chief is 0 (TF's `id_in_cluster`, JAX's `process_index()`)."""
        return self._worker_index

    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def should_checkpoint(self) -> bool:
        """Only the chief writes checkpoint files (every worker still takes part in a save)."""
        return self._is_chief

    @property
    def should_save_summary(self) -> bool:
        """Only the chief writes logs and summaries."""
        return self._is_chief

    # ------------------------------------------------------------------ update
    def update_shardings(self, state: PyTree) -> PyTree:
        """None across CPU processes: every replica applies the whole update to the all-reduced
        gradients, as TF's MultiWorkerMirroredStrategy does. Splitting the update would add, per
        step, gloo all-gathers of the new parameters and of every optimizer slot over the network
        (3x the bytes of the gradient all-reduce with Adam, see docs/benchmarks.md). ZeRO-1
        (`shard_optimizer_state=True`) keeps its split: its optimizer state is stored that way."""
        if self.num_workers > 1 and not self.shard_optimizer_state and all(
                d.platform == "cpu" for d in self.worker_devices):
            return None
        return super().update_shardings(state)

    # ------------------------------------------------------------------- input
    def distribute_batch(self, batch: PyTree) -> PyTree:
        """This worker's share of a global batch -> the global batch, split over every replica.

        With one worker the share is the whole batch, as for `MirroredStrategy`.
        """
        if self.num_workers == 1:
            return super().distribute_batch(batch)
        if jax.tree.leaves(batch):
            leading_size(batch, "a batch")
        return mark_split(place_rows(batch, self.data_sharding(), rows="local"))

    def __repr__(self) -> str:
        return (f"MultiWorkerMirroredStrategy(num_workers={self.num_workers}, worker_index={self.worker_index}, "
                f"num_replicas_in_sync={self.num_replicas_in_sync})")


def _process_major_devices() -> list:
    """Every device, grouped by process in process order (the hybrid mesh's DCN x ICI layout)."""
    if jax.process_count() == 1:
        return list(jax.local_devices())
    counts = Counter(d.process_index for d in jax.devices())
    if len(set(counts.values())) > 1:
        detail = ", ".join(f"worker {p}: {n}" for p, n in sorted(counts.items()))
        raise ValueError(f"All workers must have the same number of devices; got {detail}.")
    from jax.experimental import mesh_utils

    local = counts[jax.process_index()]
    grid = mesh_utils.create_hybrid_device_mesh((local,), (jax.process_count(),), jax.devices(),
                                                process_is_granule=True)
    return list(np.asarray(grid).flat)
