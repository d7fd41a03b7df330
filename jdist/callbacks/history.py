"""`History`: the per-epoch logs of a `fit` call, which `fit` returns."""
from __future__ import annotations

from jdist.callbacks.base import Callback, Logs


class History(Callback):
    """`history.history["loss"]` is the list of epoch losses; `history.epoch` the epoch indices.

    As in Keras, `val_*` lists hold only the validated epochs (`validation_freq`);
    `history.epochs_of["val_loss"]` says which (0-based), for plotting.
    """

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []
        self.epochs_of: dict[str, list[int]] = {}

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
            self.epochs_of.setdefault(key, []).append(epoch)
