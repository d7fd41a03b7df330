"""The input pipeline: global batches split over replicas, padded, masked, checked and prefetched onto the mesh.

`dataset` (DistributedDataset / DistributedIterator) drives it; `options` holds what a user tells it (TF's
`InputOptions`, `InputContext`), `sources` where batches come from, `split` how a batch is cut per replica,
`distributed_batch` what a step receives, `checks` / `label_checks` / `errors` what is refused at the host boundary,
`prefetch` the background copies, `process_local` the multi-process rule.
"""
from typing import TYPE_CHECKING

from jdist._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and editors see; at run time `__getattr__` imports them
    from jdist.input.dataset import DistributedDataset, DistributedIterator
    from jdist.input.distributed_batch import DistributedBatch
    from jdist.input.errors import InputError, NonFiniteInputError
    from jdist.input.options import AutoShardPolicy, InputContext, InputOptions, InputReplicationMode
    from jdist.input.sources import ArrayDataset, FileSource

# Imported on first use, so importing one module of this package does not import all of them.
_NAMES = {
    "ArrayDataset": ("jdist.input.sources", "ArrayDataset"),
    "AutoShardPolicy": ("jdist.input.options", "AutoShardPolicy"),
    "DistributedBatch": ("jdist.input.distributed_batch", "DistributedBatch"),
    "DistributedDataset": ("jdist.input.dataset", "DistributedDataset"),
    "DistributedIterator": ("jdist.input.dataset", "DistributedIterator"),
    "FileSource": ("jdist.input.sources", "FileSource"),
    "InputContext": ("jdist.input.options", "InputContext"),
    "InputError": ("jdist.input.errors", "InputError"),
    "InputOptions": ("jdist.input.options", "InputOptions"),
    "InputReplicationMode": ("jdist.input.options", "InputReplicationMode"),
    "NonFiniteInputError": ("jdist.input.errors", "NonFiniteInputError"),
}
__getattr__ = lazy_getattr(__name__, _NAMES)
__all__ = [  # the keys of _NAMES
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
