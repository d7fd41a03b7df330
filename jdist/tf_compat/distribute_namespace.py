"""`tf.distribute`: jdist's strategies under TF's names, and TF's `cross_device_ops` classes.

The strategies with several replicas return TF's `run` results (`jdist.tf_compat.run_results`).

`MirroredStrategy(cross_device_ops=...)` accepts these and ignores them: XLA picks the all-reduce
(NCCL on GPUs, ICI on TPUs, in-process on CPUs). They take TF 2.21's constructor arguments
(observed: `HierarchicalCopyAllReduce(num_packs=1)`, `NcclAllReduce(num_packs=1)`,
`ReductionToOneDevice(reduce_to_device=None, accumulation_fn=None)`) and keep them, unused.
"""
from __future__ import annotations

import warnings
from typing import Any

import jdist
from jdist.tf_compat import default_strategy, run_results
from jdist.tf_compat.namespace import Namespace
from jdist.tf_compat.servers import Server
from jdist.tf_compat.tpu_setup import TPUClusterResolver


class CrossDeviceOps:
    """TF's base of the all-reduce choices; jdist keeps the choice for inspection and lets XLA pick."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"tf.distribute.{type(self).__name__}({args})"


class _AllReduce(CrossDeviceOps):
    def __init__(self, num_packs: int = 1):
        if not isinstance(num_packs, int) or num_packs < 0:
            raise ValueError(f"num_packs must be a non-negative int, got {num_packs!r}")
        self.num_packs = num_packs


class HierarchicalCopyAllReduce(_AllReduce):
    """Accepted, unused: XLA picks the all-reduce."""


class NcclAllReduce(_AllReduce):
    """Accepted, unused: XLA uses NCCL on GPUs by itself."""


class ReductionToOneDevice(CrossDeviceOps):
    """Accepted, unused: XLA picks the all-reduce."""

    def __init__(self, reduce_to_device: Any = None, accumulation_fn: Any = None):
        self.reduce_to_device = reduce_to_device
        self.accumulation_fn = accumulation_fn


class UnavailableStrategy:
    """A strategy over devices this machine lacks: every use raises the error that names them.

    TF 2.21 constructs `MirroredStrategy(devices=["/gpu:0", "/gpu:1"])` on a machine without GPUs and then
    runs both replicas on the CPU (soft placement; observed). jdist never moves replicas silently, but it
    defers the refusal from construction to use, so a script that only builds such a strategy (the
    distributed-training guide does, to show the argument) runs on, with a warning."""

    def __init__(self, error: ValueError):
        self._error = error

    def __getattr__(self, name: str) -> Any:
        raise ValueError(f"This strategy cannot be used: {self._error}") from self._error

    def __repr__(self) -> str:
        return f"<unavailable strategy: {self._error}>"


class MirroredStrategy(run_results.MirroredStrategy):
    """`tf.distribute.MirroredStrategy`: jdist's, except that devices this machine lacks give an
    `UnavailableStrategy` (with a warning) instead of an error at construction, and `run` returns TF's
    `PerReplica` results (`jdist.tf_compat.run_results`)."""

    def __new__(cls, devices: Any = None, *args: Any, **kwargs: Any) -> Any:
        if devices is not None and len(list(devices)) > 0:
            try:
                jdist.resolve_devices(devices)
            except ValueError as error:
                warnings.warn(f"MirroredStrategy(devices={list(devices)!r}): {error} TensorFlow would run these "
                              "replicas on other devices; jdist refuses when this strategy is used.", stacklevel=2)
                return UnavailableStrategy(error)
        return super().__new__(cls)

    def __init__(self, devices: Any = None, *args: Any, **kwargs: Any) -> None:
        """TF 2.21 takes an empty `devices` list as none given: every local device (observed: TF's GPU guide
        passes the empty list of GPUs on a machine without them and gets one replica on its CPU)."""
        if devices is not None and len(list(devices)) == 0:
            devices = None
        super().__init__(devices, *args, **kwargs)


distribute = Namespace(
    "tf.distribute",
    MirroredStrategy=MirroredStrategy,
    OneDeviceStrategy=jdist.OneDeviceStrategy,
    MultiWorkerMirroredStrategy=run_results.MultiWorkerMirroredStrategy,
    TPUStrategy=run_results.TPUStrategy,
    ParameterServerStrategy=jdist.ParameterServerStrategy,
    Strategy=jdist.Strategy,
    StrategyExtended=jdist.StrategyExtended,
    RunOptions=jdist.RunOptions,
    ReduceOp=jdist.ReduceOp,
    ReplicaContext=jdist.ReplicaContext,
    InputContext=jdist.InputContext,
    InputOptions=jdist.InputOptions,
    InputReplicationMode=jdist.InputReplicationMode,
    DistributedDataset=jdist.DistributedDataset,
    DistributedIterator=jdist.DistributedIterator,
    DistributedValues=run_results.DistributedValues,
    CrossDeviceOps=CrossDeviceOps,
    HierarchicalCopyAllReduce=HierarchicalCopyAllReduce,
    NcclAllReduce=NcclAllReduce,
    ReductionToOneDevice=ReductionToOneDevice,
    Server=Server,
    cluster_resolver=Namespace(
        "tf.distribute.cluster_resolver",
        ClusterResolver=jdist.cluster.ClusterResolver,
        SimpleClusterResolver=jdist.cluster.SimpleClusterResolver,
        SlurmClusterResolver=jdist.cluster.SlurmClusterResolver,
        TFConfigClusterResolver=jdist.cluster.TFConfigClusterResolver,
        TPUClusterResolver=TPUClusterResolver,
    ),
    coordinator=Namespace(
        "tf.distribute.coordinator",
        ClusterCoordinator=jdist.ClusterCoordinator,
        RemoteValue=jdist.RemoteValue,
        PerWorkerValue=jdist.PerWorkerValues,
        experimental_get_current_worker_index=jdist.get_current_worker_index,
    ),
    get_strategy=default_strategy.get_strategy,
    has_strategy=jdist.has_strategy,
    get_replica_context=jdist.get_replica_context,
    in_cross_replica_context=jdist.in_cross_replica_context,
    experimental_set_strategy=jdist.experimental_set_strategy,
    experimental=Namespace(
        "tf.distribute.experimental",
        CentralStorageStrategy=run_results.CentralStorageStrategy,
        MultiWorkerMirroredStrategy=run_results.MultiWorkerMirroredStrategy,
        ParameterServerStrategy=jdist.ParameterServerStrategy,
        TPUStrategy=run_results.TPUStrategy,
        CommunicationImplementation=jdist.CommunicationImplementation,
        CollectiveCommunication=jdist.CollectiveCommunication,
        CommunicationOptions=jdist.CommunicationOptions,
        ValueContext=jdist.ValueContext,
        PreemptionCheckpointHandler=jdist.train.PreemptionCheckpointHandler,
        TerminationConfig=jdist.TerminationConfig,
        partitioners=Namespace(
            "tf.distribute.experimental.partitioners",
            Partitioner=jdist.partitioners.Partitioner,
            FixedShardsPartitioner=jdist.partitioners.FixedShardsPartitioner,
            MinSizePartitioner=jdist.partitioners.MinSizePartitioner,
            MaxSizePartitioner=jdist.partitioners.MaxSizePartitioner,
        ),
        coordinator=Namespace(
            "tf.distribute.experimental.coordinator",
            ClusterCoordinator=jdist.ClusterCoordinator,
            RemoteValue=jdist.RemoteValue,
            PerWorkerValues=jdist.PerWorkerValues,
        ),
    ),
)
