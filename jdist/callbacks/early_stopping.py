"""`EarlyStopping`: stop `fit` when a monitored metric stops improving (Keras semantics)."""
from __future__ import annotations

from typing import Any

from jdist.callbacks.base import Callback, Logs


class EarlyStopping(Callback):
    """Stops training after `patience` epochs without an improvement larger than `min_delta`.

    `mode` "min" / "max" / "auto" ("max" for names containing "acc", else "min").
    `baseline`: training stops if the metric never beats it within `patience` epochs.
    `restore_best_weights`: on stopping, the trainer's state goes back to the best epoch's.
    `start_from_epoch`: epochs of warm-up before improvements are tracked.

    An epoch that was not validated (`validation_freq`) has no `val_*` logs; like Keras,
    such an epoch is skipped (neither an improvement nor a wait). A monitor that this fit
    never logs (a misspelt name, or `val_*` without validation data) is an error.
    """

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0.0, patience: int = 0,
                 verbose: int = 0, mode: str = "auto", baseline: float | None = None,
                 restore_best_weights: bool = False, start_from_epoch: int = 0):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"EarlyStopping mode must be 'auto', 'min' or 'max', got {mode!r}.")
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        self.monitor = monitor
        self.min_delta = abs(min_delta)
        self.patience = patience
        self.verbose = verbose
        self.mode = mode
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.stopped_epoch = 0

    def _better(self, value: float, reference: float | None) -> bool:
        if reference is None:
            return True
        if self.mode == "min":
            return value < reference - self.min_delta
        return value > reference + self.min_delta

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self.wait = 0
        self.stopped_epoch = 0
        self.best: float | None = None
        self.best_epoch = 0
        self.best_state: Any = None

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        logs = logs or {}
        if self.monitor not in logs and self._not_validated(logs):
            return  # Keras: no monitor value this epoch, nothing to compare
        if self.monitor not in logs:
            raise ValueError(
                f"EarlyStopping monitors {self.monitor!r}, which is not among this fit's metrics "
                f"{sorted(logs)}. Pick one of those (val_* needs validation_data)."
            )
        if epoch < self.start_from_epoch:
            return
        value = float(logs[self.monitor])
        self.wait += 1
        if self._better(value, self.best):
            self.best, self.best_epoch = value, epoch
            if self.restore_best_weights:
                self.best_state = self._running_trainer().state_on_host()
            if self.baseline is None or self._better(value, self.baseline):
                self.wait = 0
                return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            trainer = self._running_trainer()
            trainer.stop_training = True
            if self.restore_best_weights and self.best_state is not None:
                trainer.state = self.best_state

    def _not_validated(self, logs: Logs) -> bool:
        """Whether this fit validates, but not after this epoch (so `val_*` are absent)."""
        return (self.monitor.startswith("val_") and bool(self.params.get("do_validation"))
                and not any(k.startswith("val_") for k in logs))

    def on_train_end(self, logs: Logs | None = None) -> None:
        if self.stopped_epoch and self.verbose:
            print(f"epoch {self.stopped_epoch + 1}: early stopping (best {self.monitor} "
                  f"{self.best:.4f} at epoch {self.best_epoch + 1})")
