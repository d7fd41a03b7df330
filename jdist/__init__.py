"""jdist: TensorFlow's `tf.distribute` strategies on JAX meshes.

    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    per_replica = strategy.run(step_fn, args=(state, batch))
    loss = strategy.reduce("sum", per_replica, axis=None)
"""
from typing import TYPE_CHECKING

from jdist import (
    _numpy_rng,  # noqa: F401  (first: numpy's global random state kept through importing jax)
    callbacks,
    cluster,
    losses,
    metrics,
    mixed_precision,
    optimizers,
    partitioners,
    pipeline,
    tpu,
    train,
)
from jdist.cluster.communication import CollectiveCommunication, CommunicationImplementation, CommunicationOptions

# The layers that extend the strategy runtime register their part when imported (jdist.strategy.extensions):
from jdist.diagnostics import memory as _memory, summary as _summary  # noqa: F401  strategy.memory_report, .summary
from jdist.diagnostics.advisor import Recommendation, recommend_strategy
from jdist.diagnostics.memory import DeviceOutOfMemoryError, MemoryReport, memory_report
from jdist.diagnostics.profiler import StepBreakdown, profile, step_breakdown
from jdist.errors import InputError, NonFiniteInputError
from jdist.input import dataset as _dataset  # noqa: F401  experimental_distribute_dataset
from jdist.input.checks import check_numerics_enabled, disable_check_numerics, enable_check_numerics
from jdist.input.dataset import DistributedDataset, DistributedIterator
from jdist.input.options import AutoShardPolicy, InputContext, InputOptions, InputReplicationMode
from jdist.input.sources import ArrayDataset, FileSource
from jdist.interop import keras_distribution as _keras_distribution, keras_run as _keras_run  # noqa: F401  Keras
from jdist.interop.gradient_tape import GradientTape
from jdist.interop.tf_function import function
from jdist.layers import SyncBatchNorm
from jdist.layout import Layout, LayoutError
from jdist.lazy import lazy_getattr
from jdist.losses import compute_average_loss, scale_regularization_loss
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
from jdist.strategy.aggregation import MirroredState, VariableAggregation, aggregate_update
from jdist.strategy.constraints import replicate, split
from jdist.strategy.context import (
    experimental_set_strategy,
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from jdist.strategy.devices import resolve_device, resolve_devices
from jdist.strategy.dispatch import InFlightLimiter
from jdist.strategy.distributed_batch import DistributedBatch
from jdist.strategy.extended import StrategyExtended
from jdist.strategy.reduce_op import ReduceOp
from jdist.strategy.replica_context import ReplicaContext
from jdist.strategy.run_options import RunOptions
from jdist.strategy.values import PerReplica
from jdist.trainer.trainer import Trainer
from jdist.training.accumulation import accumulate_gradients, split_microbatches
from jdist.training.steps import make_eval_step, make_train_step
from jdist.training.train_state import TrainState

__version__ = "0.1.0"

# Checkpointing pulls in orbax/tensorstore; load it on first use (type checkers see it here).
if TYPE_CHECKING:
    from jdist import checkpoint as checkpoint, data as data
    from jdist.checkpoint import preemption as preemption
    from jdist.checkpoint.preemption import PreemptionCheckpointHandler, TerminationConfig

_LAZY = {
    "checkpoint": ("jdist.checkpoint", None),
    "data": ("jdist.data", None),  # tf.data on grain, which imports orbax: loaded on first use
    "preemption": ("jdist.checkpoint.preemption", None),
    "PreemptionCheckpointHandler": ("jdist.checkpoint.preemption", "PreemptionCheckpointHandler"),
    "TerminationConfig": ("jdist.checkpoint.preemption", "TerminationConfig"),
}
__getattr__ = lazy_getattr(__name__, _LAZY)

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
    "RunOptions",
    "StepBreakdown",
    "Strategy",
    "StrategyExtended",
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
