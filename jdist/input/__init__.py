"""The input pipeline: global batches split over replicas, padded, masked, checked and prefetched onto the mesh.

`dataset` (DistributedDataset / DistributedIterator) drives it; `options` holds what a user tells it (TF's
`InputOptions`, `InputContext`), `sources` where batches come from, `split` how a batch is cut per replica,
`checks` / `label_checks` what is refused at the host boundary, `prefetch` the background copies. What a step
receives (`DistributedBatch`) and the multi-process rule (`process_local`) are the strategy runtime's.
"""
from jdist.errors import InputError, NonFiniteInputError
from jdist.input.dataset import DistributedDataset, DistributedIterator
from jdist.input.options import AutoShardPolicy, InputContext, InputOptions, InputReplicationMode
from jdist.input.sources import ArrayDataset, FileSource
from jdist.strategy.distributed_batch import DistributedBatch

__all__ = [
    "ArrayDataset",
    "AutoShardPolicy",
    "DistributedBatch",
    "DistributedDataset",
    "DistributedIterator",
    "FileSource",
    "InputContext",
    "InputError",
    "InputOptions",
    "InputReplicationMode",
    "NonFiniteInputError",
]
