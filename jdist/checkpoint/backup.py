"""Backups for fault tolerance: TF's `BackupAndRestore`, usable from any training loop.

`Backup` tracks progress (completed steps and epochs), saves the whole state
every `save_freq` steps or every epoch, restores the newest intact backup at
start, and deletes the backups once training completes. A rerun of the same
command after a crash resumes at the exact step and input position.

Plain loop:

    with jdist.checkpoint.backup_and_restore("/backup", state, iterator=it, save_freq=50) as backup:
        state = backup.state
        for epoch in range(backup.epoch, EPOCHS):
            for _ in range(backup.step_in_epoch, STEPS_PER_EPOCH):
                state, loss = train_step(state, next(it))
                backup.step_end(state)
            backup.epoch_end(state)
    # finished normally: backups deleted; after an exception they are kept for the rerun

`range(backup.step_in_epoch, ...)` is re-evaluated at each epoch start, so only
the resumed epoch starts mid-way (TF's `total_run_calls % STEPS_PER_EPOCH` idiom).
"""
from __future__ import annotations

import contextlib
import os
import shutil
from typing import TYPE_CHECKING, Any, Iterator

import jax

from jdist.checkpoint.manager import CheckpointManager, barrier
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


def check_save_freq(save_freq: Any) -> None:
    if save_freq != "epoch" and not (isinstance(save_freq, int) and not isinstance(save_freq, bool)
                                     and save_freq > 0):
        raise ValueError(f"save_freq must be 'epoch' or a positive integer number of steps, got {save_freq!r}.")


class Backup:
    """Periodic backups of one training run and where that run has got to.

    Args:
      backup_dir: directory for the backups (shared by all processes; not for other checkpoints).
      save_freq: "epoch" to back up at each `epoch_end`, or N to back up every N steps.
      delete_checkpoint: delete `backup_dir` once `finish()` is reached (training completed).
      iterator: the input iterator whose position is saved and restored (`get_state`/`set_state`).
      max_to_keep: backups kept; 2 lets a restore fall back if the newest is damaged.
      async_save: write backups in the background.
    """

    def __init__(
        self,
        backup_dir: str | os.PathLike,
        save_freq: str | int = "epoch",
        delete_checkpoint: bool = True,
        *,
        iterator: Any = None,
        max_to_keep: int = 2,
        async_save: bool = True,
    ):
        check_save_freq(save_freq)
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self.iterator = iterator
        self.manager = CheckpointManager(backup_dir, max_to_keep=max_to_keep, async_save=async_save)
        self.step = 0
        self.epoch = 0
        self._epoch_start_step = 0
        self.restored_step: int | None = None
        self.state: Any = None  # set by `backup_and_restore` to the restored (or initial) state

    @property
    def step_in_epoch(self) -> int:
        """Steps already done in the current epoch (non-zero only right after resuming mid-epoch)."""
        return self.step - self._epoch_start_step

    def restore(self, state: PyTree, *, strategy: Strategy | None = None) -> PyTree:
        """The newest intact backup restored into `state`'s structure, or `state` when there is none."""
        if self.manager.latest_step() is None:
            return state
        restored = self.manager.restore_with_info(target=state, iterator=self.iterator, strategy=strategy)
        progress = restored.metadata
        self.step = int(progress["step"])
        self.epoch = int(progress["epoch"])
        self._epoch_start_step = int(progress["epoch_start_step"])
        self.restored_step = restored.step
        return restored.state

    def start_at(self, epoch: int, step: int) -> None:
        """Where a run without a backup starts (e.g. a Trainer's `initial_epoch`)."""
        self.epoch, self.step, self._epoch_start_step = int(epoch), int(step), int(step)

    def step_end(self, state: PyTree, step: int | None = None) -> bool:
        """Records finished steps (`step` = steps done so far, default one more); backs up when due.

        With `save_freq=N` a backup is written whenever the count passes a multiple of N
        (so loops that report several steps at once still back up).
        """
        previous = self.step
        self.step = previous + 1 if step is None else int(step)
        if not isinstance(self.save_freq, str) and self.step // self.save_freq > previous // self.save_freq:
            return self._save(state)
        return False

    def epoch_end(self, state: PyTree) -> bool:
        """Records a finished epoch; backs up when `save_freq="epoch"`."""
        self.epoch += 1
        self._epoch_start_step = self.step
        if self.save_freq == "epoch":
            return self._save(state)
        return False

    def _save(self, state: Any) -> bool:
        if self.manager.latest_step() == self.step:
            return False
        progress = {"step": self.step, "epoch": self.epoch, "epoch_start_step": self._epoch_start_step}
        return self.manager.save(self.step, state, iterator=self.iterator, metadata=progress, force=True)

    def finish(self) -> None:
        """Training completed: waits for pending writes and deletes the backups if asked to."""
        self.close()
        if self.delete_checkpoint:
            if jax.process_index() == 0:
                shutil.rmtree(self.backup_dir, ignore_errors=True)
            barrier("backup_delete")

    def close(self) -> None:
        """Stops without finishing (e.g. on an error): pending writes complete, backups stay."""
        self.manager.close()


@contextlib.contextmanager
def backup_and_restore(
    backup_dir: str | os.PathLike,
    state: PyTree,
    *,
    iterator: Any = None,
    save_freq: str | int = "epoch",
    delete_checkpoint: bool = True,
    strategy: Strategy | None = None,
    max_to_keep: int = 2,
    async_save: bool = True,
) -> Iterator["Backup"]:
    """A `Backup` with `state` already restored (`backup.state`), finished when the block completes.

    On an exception the pending backup is completed and kept, and the exception propagates.
    """
    backup = Backup(backup_dir, save_freq, delete_checkpoint, iterator=iterator,
                    max_to_keep=max_to_keep, async_save=async_save)
    backup.state = backup.restore(state, strategy=strategy)
    try:
        yield backup
    except BaseException:
        backup.close()
        raise
    backup.finish()
