"""`BackupAndRestore`: a Trainer that is stopped resumes where it stopped (TF/Keras semantics)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from jdist.callbacks.base import Callback, Logs

if TYPE_CHECKING:
    from jdist.checkpoint.backup import Backup


class BackupAndRestore(Callback):
    """Backs up training so that rerunning the same `fit` resumes at the exact step.

    At train begin the newest intact backup in `backup_dir` (weights, optimizer
    state, RNG, step, epoch and the step inside the epoch) is restored into the
    trainer, laid out by the trainer's strategy; the trainer then skips what was
    already done. A backup is written at each epoch end (`save_freq="epoch"`) or
    every `save_freq` steps, in the background; once training completes the
    backups are deleted (`delete_checkpoint=True`). A damaged newest backup is
    reported and an older one used. Use a directory of its own.

    Resuming is exact for array inputs and for re-iterable inputs (each epoch
    starts them over). The resumed epoch's logged metrics cover only its
    remaining steps, as in Keras.

    Args:
      backup_dir: directory for the backups, shared by all processes.
      save_freq: "epoch", or a number of steps.
      delete_checkpoint: delete the backups when training completes.
      async_save: write backups in the background.
    """

    def __init__(self, backup_dir: str | os.PathLike, save_freq: str | int = "epoch",
                 delete_checkpoint: bool = True, *, async_save: bool = True):
        super().__init__()
        from jdist.checkpoint.backup import check_save_freq

        check_save_freq(save_freq)
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = delete_checkpoint
        self.async_save = async_save
        self._backup: Backup | None = None

    def on_train_begin(self, logs: Logs | None = None) -> None:
        from jdist.checkpoint.backup import Backup

        trainer = self._running_trainer()
        backup = self._backup = Backup(self.backup_dir, self.save_freq, self.delete_checkpoint,
                                       async_save=self.async_save)
        if backup.manager.latest_step() is None:
            backup.start_at(trainer.epoch, trainer.step)
            return
        try:
            state = trainer.state
        except RuntimeError:
            raise RuntimeError(
                f"BackupAndRestore found a backup in {self.backup_dir} but the model has no variables yet to "
                "restore into (iterable input without params=). Pass params= (e.g. model.init(...)) to the "
                "Trainer, or train on arrays."
            ) from None
        trainer.state = backup.restore(state, strategy=trainer.strategy)
        trainer.epoch = backup.epoch
        trainer.resume_step = backup.step_in_epoch

    def _running_backup(self) -> Backup:
        if self._backup is None:
            raise RuntimeError(
                "BackupAndRestore's hooks ran before on_train_begin; pass it to Trainer.fit(callbacks=...).")
        return self._backup

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        trainer = self._running_trainer()
        self._running_backup().step_end(trainer.state, step=trainer.step)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        self._running_backup().epoch_end(self._running_trainer().state)

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._running_backup().finish()
        self._backup = None
