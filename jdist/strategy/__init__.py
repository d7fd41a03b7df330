"""The strategies: each a preset of mesh, layout and input plan."""
from jdist.strategy.base import Strategy
from jdist.strategy.central_storage import CentralStorageStrategy
from jdist.strategy.cross_replica import ValueContext
from jdist.strategy.default import DefaultStrategy
from jdist.strategy.fsdp import FSDPStrategy
from jdist.strategy.mirrored import MirroredStrategy
from jdist.strategy.model_parallel import ModelParallelStrategy
from jdist.strategy.multi_worker import MultiWorkerMirroredStrategy
from jdist.strategy.one_device import OneDeviceStrategy
from jdist.strategy.tpu import TPUStrategy

__all__ = [
    "CentralStorageStrategy",
    "DefaultStrategy",
    "FSDPStrategy",
    "MirroredStrategy",
    "ModelParallelStrategy",
    "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy",
    "Strategy",
    "TPUStrategy",
    "ValueContext",
]
