"""Distributed checkpoints: async saves, restore onto any strategy, integrity checks, backups.

    manager = jdist.checkpoint.CheckpointManager(directory, max_to_keep=3)
    manager.save(step, state, iterator=it)
    state = manager.restore(target=state_like, iterator=it)
"""
from jdist.checkpoint.backup import Backup, backup_and_restore
from jdist.checkpoint.integrity import CheckpointCorruptedError, CheckpointError, CheckpointMismatchError
from jdist.checkpoint.manager import CheckpointManager, Restored

__all__ = [
    "Backup",
    "CheckpointCorruptedError",
    "CheckpointError",
    "CheckpointManager",
    "CheckpointMismatchError",
    "Restored",
    "backup_and_restore",
]
