"""`tf.data` for jdist, on grain: `Dataset`, `Options` and TF's constants (see `jdist.tfdata.dataset`)."""
from jdist.input.options import AutoShardPolicy
from jdist.input.tensor_spec import TensorSpec
from jdist.tfdata.dataset import Dataset
from jdist.tfdata.options import AUTOTUNE, INFINITE, UNKNOWN, DistributeOptions, Options
from jdist.tfdata.structure import HostTensor

INFINITE_CARDINALITY = INFINITE
UNKNOWN_CARDINALITY = UNKNOWN

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "AutoShardPolicy", "Dataset",
           "DistributeOptions", "HostTensor", "Options", "TensorSpec"]
