"""`ModelCheckpoint`: save the Trainer's weights or state during `fit` (Keras semantics)."""
from __future__ import annotations

import os
import warnings
from typing import Any

from jdist.callbacks.base import Callback, Logs


class ModelCheckpoint(Callback):
    """Saves at the end of every epoch (`save_freq="epoch"`) or every `save_freq` training steps.

    `filepath` is a checkpoint directory and may hold Keras's placeholders, filled from the
    1-based `epoch`, the 1-based `batch` (batch-level saves) and the logs: for example
    `"ckpt/epoch{epoch:02d}-{val_loss:.3f}"`. A constant path keeps the newest `max_to_keep`
    checkpoints in that one directory (default 1: each save replaces the last, as Keras
    overwrites its file). Saves are written in the background (orbax async checkpointing);
    `fit` waits for the last one before returning. Load with `trainer.load_weights(path)` or
    `trainer.load(path)`.

    With `save_best_only`, only a value of `monitor` better than every earlier one saves (a
    missing monitor warns and saves, as in Keras). `mode` "min" / "max" / "auto" ("max" for
    names containing "acc", else "min"). `save_weights_only` writes the weights; otherwise the
    whole training state (optimizer state and step too, enough to resume).
    """

    def __init__(self, filepath: str | os.PathLike, monitor: str = "val_loss", verbose: int = 0,
                 save_best_only: bool = False, save_weights_only: bool = False, mode: str = "auto",
                 save_freq: str | int = "epoch", initial_value_threshold: float | None = None,
                 max_to_keep: int = 1):
        super().__init__()
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int)
                                     or save_freq < 1):
            raise ValueError(f"Unrecognized save_freq: {save_freq!r}. Expected save_freq are 'epoch' or "
                             "positive integer values.")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"ModelCheckpoint mode must be 'auto', 'min' or 'max', got {mode!r}.")
        self.filepath = os.fspath(filepath)
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.mode = ("max" if "acc" in monitor else "min") if mode == "auto" else mode
        self.save_freq = save_freq
        self.best = initial_value_threshold
        self.max_to_keep = max_to_keep
        self._managers: dict[str, Any] = {}
        self._steps_since_save = 0

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, logs: Logs | None = None) -> None:
        self._steps_since_save = 0
        self._last_step = self._running_trainer().step

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        if isinstance(self.save_freq, str):  # "epoch"
            return
        trainer = self._running_trainer()
        step = trainer.step  # counts every step, also with steps_per_execution > 1
        self._steps_since_save += step - self._last_step
        self._last_step = step
        if self._steps_since_save >= self.save_freq:
            self._steps_since_save = 0
            self._save(trainer.epoch, batch, dict(logs or {}))  # the epoch under way

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self.save_freq == "epoch":
            self._save(epoch, None, dict(logs or {}))

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._close_managers()

    def _close_managers(self) -> None:
        for manager in self._managers.values():
            manager.close()  # waits for the background writes
        self._managers = {}

    # ---------------------------------------------------------------- saving
    def _path(self, epoch: int, batch: int | None, logs: dict) -> str:
        fields = dict(logs)
        if batch is not None and "batch" not in fields:
            fields["batch"] = batch + 1
        try:
            return self.filepath.format(epoch=epoch + 1, **fields)
        except KeyError as e:
            raise KeyError(f'Failed to format this callback filepath: "{self.filepath}". Reason: {e}') from None

    def _improved(self, logs: dict, epoch: int, path: str) -> bool:
        if not self.save_best_only:
            return True
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Can save best model only with {self.monitor} available.", stacklevel=3)
            return True
        current = float(current)
        better = self.best is None or (current < self.best if self.mode == "min" else current > self.best)
        if self.verbose:
            best = "None" if self.best is None else f"{self.best:.5f}"
            verdict = f"improved from {best} to {current:.5f}, saving to {path}" if better else \
                f"did not improve from {best}"
            print(f"epoch {epoch + 1}: {self.monitor} {verdict}")
        if better:
            self.best = current
        return better

    def _save(self, epoch: int, batch: int | None, logs: dict) -> None:
        from jdist.checkpoint import CheckpointManager, model_io as trainer_io

        path = self._path(epoch, batch, logs)
        if not self._improved(logs, epoch, path):
            return
        if path not in self._managers:
            self._close_managers()  # a new directory: finish the writes to the earlier ones
            self._managers[path] = CheckpointManager(path, max_to_keep=self.max_to_keep)
        what = trainer_io.WEIGHTS if self.save_weights_only else trainer_io.STATE
        info: dict[str, float] = {"epoch": epoch + 1 if batch is None else epoch}  # epochs done when saved
        if self.monitor in logs:
            info[self.monitor] = float(logs[self.monitor])
        trainer_io.save(self._running_trainer(), self._managers[path], what, metadata=info)
        if self.verbose and not self.save_best_only:
            print(f"epoch {epoch + 1}: saving to {path}")
