"""`jdist.train`: what TF scripts reach as `tf.train` (object checkpoints, their manager, `ClusterSpec`).

    checkpoint = jdist.train.Checkpoint(model=model, epoch=epoch)
    manager = jdist.train.CheckpointManager(checkpoint, directory, max_to_keep=1)
    checkpoint.restore(jdist.train.latest_checkpoint(directory))
    manager.save()
"""
from jdist.cluster.spec import ClusterSpec
from jdist.train.checkpoint import Checkpoint, CheckpointLoadStatus, latest_checkpoint
from jdist.train.manager import CheckpointManager
from jdist.train.preemption import PreemptionCheckpointHandler
from jdist.train.reader import CheckpointReader, list_variables, load_checkpoint
from jdist.train.waiting import checkpoints_iterator, wait_for_new_checkpoint

__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointManager", "CheckpointReader", "ClusterSpec",
           "PreemptionCheckpointHandler", "checkpoints_iterator", "latest_checkpoint", "list_variables",
           "load_checkpoint", "wait_for_new_checkpoint"]
