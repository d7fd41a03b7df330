"""`CSVLogger`: one CSV row of metrics per epoch."""
from __future__ import annotations

import csv
import os

from jdist.callbacks.base import Callback, Logs


class CSVLogger(Callback):
    """Writes `epoch,<metric>,...` rows to `filename` (only on process 0), flushed every epoch.

    Columns as Keras 3 writes them: the first epoch's metric names, sorted, plus a `val_`
    column for each when that epoch had no validation (validation may start later, with
    `validation_freq`); an epoch without a column's value (not validated) writes `NA`.
    `append=True` continues an existing file (for resumed training) with its columns.
    """

    def __init__(self, filename: str | os.PathLike, separator: str = ",", append: bool = False):
        super().__init__()
        self.filename = os.fspath(filename)
        self.separator = separator
        self.append = append
        self._file = None
        self._writer = None
        self._keys: list[str] | None = None

    def on_train_begin(self, logs: Logs | None = None) -> None:
        import jax

        if jax.process_index() != 0:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.filename)), exist_ok=True)
        has_header = self.append and os.path.exists(self.filename) and os.path.getsize(self.filename) > 0
        if has_header:
            with open(self.filename, newline="") as f:
                self._keys = next(csv.reader(f, delimiter=self.separator))[1:]
        self._file = open(self.filename, "a" if self.append else "w", newline="")
        self._writer = csv.writer(self._file, delimiter=self.separator)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if self._writer is None or self._file is None:  # not the chief process
            return
        logs = dict(logs or {})
        if self._keys is None:
            self._keys = sorted(logs)
            if not any(k.startswith("val_") for k in self._keys):
                self._keys += [f"val_{k}" for k in self._keys]
            self._writer.writerow(["epoch"] + self._keys)
        self._writer.writerow([epoch] + [repr(float(logs[k])) if k in logs else "NA" for k in self._keys])
        self._file.flush()

    def on_train_end(self, logs: Logs | None = None) -> None:
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None
