"""jdist: TensorFlow's `tf.distribute` strategies on JAX meshes.

    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    per_replica = strategy.run(step_fn, args=(state, batch))
    loss = strategy.reduce("sum", per_replica, axis=None)
"""
from typing import TYPE_CHECKING

from jdist import (
    callbacks,
    cluster,
    data,
    losses,
    metrics,
    mixed_precision,
    optimizers,
    partitioners,
    pipeline,
    tpu,
    train,
)
from jdist.accumulation import accumulate_gradients, split_microbatches
from jdist.advisor import Recommendation, recommend_strategy
from jdist.aggregation import MirroredState, VariableAggregation, aggregate_update
from jdist.communication import CollectiveCommunication, CommunicationImplementation, CommunicationOptions
from jdist.constraints import replicate, split
from jdist.context import (
    experimental_set_strategy,
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from jdist.devices import resolve_device, resolve_devices
from jdist.dispatch import InFlightLimiter
from jdist.distributed_batch import DistributedBatch
from jdist.gradient_tape import GradientTape
from jdist.input import DistributedDataset, DistributedIterator
from jdist.input_checks import check_numerics_enabled, disable_check_numerics, enable_check_numerics
from jdist.input_errors import InputError, NonFiniteInputError
from jdist.input_options import AutoShardPolicy, InputContext, InputOptions, InputReplicationMode
from jdist.input_sources import ArrayDataset, FileSource
from jdist.layers import SyncBatchNorm
from jdist.layout import Layout, LayoutError
from jdist.losses import compute_average_loss, scale_regularization_loss
from jdist.memory import DeviceOutOfMemoryError, MemoryReport, memory_report
from jdist.parameter_server import (
    CancelledError,
    ClusterCoordinator,
    ParameterServerCluster,
    ParameterServerStrategy,
    PerWorkerValues,
    PSUnavailableError,
    RemoteParameters,
    RemoteTrainState,
    RemoteValue,
    UnavailableError,
    get_current_worker_index,
)
from jdist.pipeline import Pipeline
from jdist.profiler import StepBreakdown, profile, step_breakdown
from jdist.reduce_op import ReduceOp
from jdist.replica_context import ReplicaContext
from jdist.steps import make_eval_step, make_train_step
from jdist.strategy import (
    CentralStorageStrategy,
    DefaultStrategy,
    FSDPStrategy,
    MirroredStrategy,
    ModelParallelStrategy,
    MultiWorkerMirroredStrategy,
    OneDeviceStrategy,
    Strategy,
    TPUStrategy,
    ValueContext,
)
from jdist.tf_function import function
from jdist.train_state import TrainState
from jdist.trainer import Trainer
from jdist.values import PerReplica

__version__ = "0.1.0"

# Checkpointing pulls in orbax/tensorstore; load it on first use (type checkers see it here).
if TYPE_CHECKING:
    from jdist import checkpoint as checkpoint, preemption as preemption
    from jdist.preemption import PreemptionCheckpointHandler, TerminationConfig

_LAZY = {
    "checkpoint": ("jdist.checkpoint", None),
    "preemption": ("jdist.preemption", None),
    "PreemptionCheckpointHandler": ("jdist.preemption", "PreemptionCheckpointHandler"),
    "TerminationConfig": ("jdist.preemption", "TerminationConfig"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'jdist' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


__all__ = [  # sorted (tests/test_architecture.py checks)
    "ArrayDataset",
    "AutoShardPolicy",
    "CancelledError",
    "CentralStorageStrategy",
    "ClusterCoordinator",
    "CollectiveCommunication",
    "CommunicationImplementation",
    "CommunicationOptions",
    "DefaultStrategy",
    "DeviceOutOfMemoryError",
    "DistributedBatch",
    "DistributedDataset",
    "DistributedIterator",
    "FSDPStrategy",
    "FileSource",
    "GradientTape",
    "InFlightLimiter",
    "InputContext",
    "InputError",
    "InputOptions",
    "InputReplicationMode",
    "Layout",
    "LayoutError",
    "MemoryReport",
    "MirroredState",
    "MirroredStrategy",
    "ModelParallelStrategy",
    "MultiWorkerMirroredStrategy",
    "NonFiniteInputError",
    "OneDeviceStrategy",
    "PSUnavailableError",
    "ParameterServerCluster",
    "ParameterServerStrategy",
    "PerReplica",
    "PerWorkerValues",
    "Pipeline",
    "PreemptionCheckpointHandler",
    "Recommendation",
    "ReduceOp",
    "RemoteParameters",
    "RemoteTrainState",
    "RemoteValue",
    "ReplicaContext",
    "StepBreakdown",
    "Strategy",
    "SyncBatchNorm",
    "TPUStrategy",
    "TerminationConfig",
    "TrainState",
    "Trainer",
    "UnavailableError",
    "ValueContext",
    "VariableAggregation",
    "accumulate_gradients",
    "aggregate_update",
    "callbacks",
    "check_numerics_enabled",
    "checkpoint",
    "cluster",
    "compute_average_loss",
    "data",
    "disable_check_numerics",
    "enable_check_numerics",
    "experimental_set_strategy",
    "function",
    "get_current_worker_index",
    "get_replica_context",
    "get_strategy",
    "has_strategy",
    "in_cross_replica_context",
    "losses",
    "make_eval_step",
    "make_train_step",
    "memory_report",
    "metrics",
    "mixed_precision",
    "optimizers",
    "partitioners",
    "pipeline",
    "profile",
    "recommend_strategy",
    "replicate",
    "resolve_device",
    "resolve_devices",
    "scale_regularization_loss",
    "split",
    "split_microbatches",
    "step_breakdown",
    "tpu",
    "train",
]
