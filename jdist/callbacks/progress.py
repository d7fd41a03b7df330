"""`ProgressBar`: a tqdm bar per epoch with live loss and metrics (what `verbose=1` shows)."""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from jdist.callbacks.base import Callback, Logs


def format_logs(logs: Logs) -> str:
    """`loss: 0.1234 - accuracy: 0.9876`, Keras's epoch-line format."""
    return " - ".join(f"{key}: {float(value):.4f}" for key, value in logs.items())


class ProgressBar(Callback):
    """verbose=1: a bar per epoch (and for evaluate / predict) whose postfix shows the running
    metrics, refreshed at most every `interval` seconds (each refresh reads the metrics back
    from the devices); verbose=2: one line per epoch."""

    def __init__(self, verbose: int = 1, interval: float = 0.5, file: TextIO | None = None):
        super().__init__()
        self.verbose = verbose
        self.interval = interval
        self.file = file
        self._bar: Any = None
        self._last = 0.0
        self._epoch_start = 0.0
        self._in_fit = False

    @property
    def _stream(self) -> TextIO:
        return self.file or sys.stdout

    def _open(self, desc: str, total: int | None, unit: str) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, desc=desc, unit=unit, file=self._stream, dynamic_ncols=True,
                         mininterval=self.interval, leave=True)
        self._last = time.perf_counter()

    def _advance(self, batch: int, logs: Logs | None) -> None:
        if self._bar is None:
            return
        done = batch + 1 if self._bar.total is None else min(batch + 1, self._bar.total)  # Keras's k-step numbering
        self._bar.update(done - self._bar.n)
        now = time.perf_counter()
        if logs is not None and now - self._last >= self.interval:
            self._last = now
            self._bar.set_postfix({k: f"{float(v):.4f}" for k, v in logs.items()}, refresh=False)

    def _close(self, logs: Logs | None) -> None:
        if self._bar is None:
            return
        if logs:
            self._bar.set_postfix({k: f"{float(v):.4f}" for k, v in logs.items()}, refresh=False)
        self._bar.close()
        self._bar = None

    # ------------------------------------------------------------------ fit
    def on_train_begin(self, logs: Logs | None = None) -> None:
        self._in_fit = True

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._in_fit = False

    def on_epoch_begin(self, epoch: int, logs: Logs | None = None) -> None:
        self._epoch_start = time.perf_counter()
        if self.verbose == 1:
            self._open(f"epoch {epoch + 1}/{self.params.get('epochs')}", self.params.get("steps"), "step")

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        if self.verbose == 1:
            self._advance(batch, logs)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self.verbose == 1:
            self._close(logs)
        elif self.verbose == 2:
            seconds = time.perf_counter() - self._epoch_start
            print(f"epoch {epoch + 1}/{self.params.get('epochs')} - {seconds:.1f}s - {format_logs(logs or {})}",
                  file=self._stream, flush=True)

    # ------------------------------------------------------ evaluate / predict
    def on_test_begin(self, logs: Logs | None = None) -> None:
        if self.verbose == 1 and not self._in_fit:
            self._open("evaluate", self.params.get("steps"), "step")

    def on_test_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        if not self._in_fit:
            self._advance(batch, logs)

    def on_test_end(self, logs: Logs | None = None) -> None:
        if not self._in_fit:
            self._close(logs)

    def on_predict_begin(self, logs: Logs | None = None) -> None:
        if self.verbose == 1:
            self._open("predict", self.params.get("steps"), "step")

    def on_predict_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        self._advance(batch, None)

    def on_predict_end(self, logs: Logs | None = None) -> None:
        self._close(None)
