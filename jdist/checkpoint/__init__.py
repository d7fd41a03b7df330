"""Distributed checkpoints: async saves, restore onto any strategy, integrity checks, backups.

    manager = jdist.checkpoint.CheckpointManager(directory, max_to_keep=3)
    manager.save(step, state, iterator=it)
    state = manager.restore(target=state_like, iterator=it)
"""
from typing import TYPE_CHECKING

from jdist.lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers see; at run time `__getattr__` imports them (orbax on first use only)
    from jdist.checkpoint.backup import Backup, backup_and_restore
    from jdist.checkpoint.integrity import CheckpointCorruptedError, CheckpointError, CheckpointMismatchError
    from jdist.checkpoint.manager import CheckpointManager, Restored

_NAMES = {
    "Backup": ("jdist.checkpoint.backup", "Backup"),
    "CheckpointCorruptedError": ("jdist.checkpoint.integrity", "CheckpointCorruptedError"),
    "CheckpointError": ("jdist.checkpoint.integrity", "CheckpointError"),
    "CheckpointManager": ("jdist.checkpoint.manager", "CheckpointManager"),
    "CheckpointMismatchError": ("jdist.checkpoint.integrity", "CheckpointMismatchError"),
    "Restored": ("jdist.checkpoint.manager", "Restored"),
    "backup_and_restore": ("jdist.checkpoint.backup", "backup_and_restore"),
}
__getattr__ = lazy_getattr(__name__, _NAMES)
__all__ = [
    "Backup",
    "CheckpointCorruptedError",
    "CheckpointError",
    "CheckpointManager",
    "CheckpointMismatchError",
    "Restored",
    "backup_and_restore",
]
