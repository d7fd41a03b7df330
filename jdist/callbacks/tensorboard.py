"""`TensorBoard`: per-epoch (and optionally per-step) scalars as TensorBoard event files.

Layout as Keras writes it: training scalars under `<log_dir>/train`, validation
scalars under `<log_dir>/validation`, tags `epoch_<metric>` (and `batch_<metric>`),
so `tensorboard --logdir <log_dir>` overlays the train and validation curves. As
Keras 3 does, each epoch also writes `epoch_learning_rate` (train; when the optimizer
exposes it) and each validation `evaluation_<metric>_vs_iterations` (validation, x-axis:
optimizer step); an epoch that was not validated (`validation_freq`) writes no
validation point, so the validation curve has points only where validation ran.
The event files are written by `jdist.callbacks.event_file` (no TensorFlow needed).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

import numpy as np

from jdist.callbacks.base import Callback, Logs
from jdist.callbacks.event_file import (
    EventFileWriter,
    encode_tensor_value,
    histogram_buckets,
    next_file_suffix,
    scalar_value,
)

if TYPE_CHECKING:
    from jdist.trainer.trainer import Trainer


class SummaryLog:
    """Keras's TensorBoard layout, shared by jdist's callback and `tf.keras.callbacks.TensorBoard`: `train/` and
    `validation/` event files, `epoch_<metric>` at the epoch, `batch_<metric>` and
    `evaluation_<metric>_vs_iterations` at the optimizer step; weight histograms and the model's config in
    `train/` (Keras 3's tags, observed in TF 2.21: `<weight path>/histogram` at the epoch, `keras` at step 0)."""

    def __init__(self, log_dir: str | os.PathLike, tf_form: bool = False):
        """`tf_form`: as `tf.keras.callbacks.TensorBoard` writes through `tf.summary` (observed in TF 2.21, Keras
        3.15): scalars as float32 "scalars" tensors, one event each, in files named `...<pid>.<n>.v2`; otherwise
        TF 1's `simple_value` scalars, one event per step."""
        self.log_dir = os.fspath(log_dir)
        self.tf_form = tf_form
        self._writers: dict[str, EventFileWriter] = {}

    def _writer(self, kind: str) -> EventFileWriter:
        if kind not in self._writers:
            suffix = next_file_suffix() if self.tf_form else ""
            self._writers[kind] = EventFileWriter(os.path.join(self.log_dir, kind), suffix)
        return self._writers[kind]

    def _scalars(self, kind: str, step: int, scalars: Logs) -> None:
        writer = self._writer(kind)
        if not self.tf_form:
            writer.add_scalars(step, scalars)
            return
        for tag, value in scalars.items():
            writer.add_values(step, [scalar_value(tag, value)])

    def batch(self, step: int, logs: Logs) -> None:
        self._scalars("train", step, {f"batch_{k}": v for k, v in logs.items()})

    def evaluation(self, step: int, val_logs: Logs) -> None:
        """Validation results (names without `val_`) at the optimizer step, as Keras writes on test end."""
        if val_logs:
            self._scalars("validation", step, {f"evaluation_{k}_vs_iterations": v for k, v in val_logs.items()})

    def epoch(self, epoch: int, logs: Logs, learning_rate: float | None) -> None:
        train = {f"epoch_{k}": v for k, v in logs.items() if not k.startswith("val_")}
        if learning_rate is not None:
            train["epoch_learning_rate"] = learning_rate
        val = {f"epoch_{k[4:]}": v for k, v in logs.items() if k.startswith("val_")}
        if train:
            self._scalars("train", epoch, train)
        if val:
            self._scalars("validation", epoch, val)
        for writer in self._writers.values():
            writer.flush()

    def histograms(self, epoch: int, weights: Sequence[tuple[str, np.ndarray]]) -> None:
        """Each weight's 30-bucket histogram, tagged `<path>/histogram` (its path: `sequential/dense/kernel`)."""
        writer = self._writer("train")
        for path, value in weights:
            writer.add_values(epoch, [encode_tensor_value(f"{path}/histogram", histogram_buckets(value),
                                                          "histograms")])
        writer.flush()

    def values(self, step: int, encoded: Sequence[bytes]) -> None:
        """Summary values already encoded (`tf.summary`'s images of the weights) into `train/` at `step`."""
        writer = self._writer("train")
        writer.add_values(step, list(encoded))
        writer.flush()

    def keras_model(self, config_json: str) -> None:
        """The model's config (`model.to_json()`), which TensorBoard's graph tab draws (Keras's `keras` tag)."""
        value = np.asarray(config_json.encode(), dtype=object)
        self._writer("train").add_values(0, [encode_tensor_value("keras", value, "graph_keras_model",
                                                                 plugin_content=b"1")])

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}


def is_chief() -> bool:
    """Process 0 writes the event files (TF's and Keras's rule)."""
    import jax

    return jax.process_index() == 0


class TensorBoard(Callback):
    """Writes epoch metrics (x-axis: epoch) and, with `update_freq=N`, step metrics every N steps
    (x-axis: optimizer step; each write reads the metrics back from the devices). Process 0 only."""

    def __init__(self, log_dir: str | os.PathLike = "logs", update_freq: str | int = "epoch"):
        super().__init__()
        if update_freq != "epoch" and not (isinstance(update_freq, int) and update_freq > 0):
            raise ValueError(f"update_freq must be 'epoch' or a positive number of steps, got {update_freq!r}.")
        self.log_dir = os.fspath(log_dir)
        self.update_freq = update_freq
        self._log = SummaryLog(self.log_dir)
        self._last_logged_step = 0

    def on_train_batch_end(self, batch: int, logs: Logs | None = None) -> None:
        if isinstance(self.update_freq, str) or not is_chief() or logs is None:  # str: "epoch"
            return
        step = self._running_trainer().step
        if step - self._last_logged_step >= self.update_freq:
            self._last_logged_step = step
            self._log.batch(step, logs)

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        if not is_chief():
            return
        logs = logs or {}
        # Keras writes the validation's evaluation when it ends, then the epoch's scalars.
        self._log.evaluation(self._running_trainer().step, {k[4:]: v for k, v in logs.items() if k.startswith("val_")})
        self._log.epoch(epoch, logs, current_learning_rate(self.trainer))

    def on_train_end(self, logs: Logs | None = None) -> None:
        self._log.close()


def current_learning_rate(trainer: Trainer | None) -> float | None:
    """The learning rate the optimizer uses now, where it can be read: a Keras optimizer's
    `learning_rate`, or the `learning_rate` hyperparameter of an `optax.inject_hyperparams`
    optimizer's state. A plain `optax.adam(1e-3)` keeps its rate in a closure: None."""
    import jax

    optimizer = getattr(trainer, "optimizer", None)
    rate = getattr(optimizer, "learning_rate", None)
    if rate is not None and not callable(rate):
        return float(np.asarray(rate))
    opt_state = getattr(getattr(trainer, "_state", None), "opt_state", None)
    if opt_state is None:
        return None
    for node in jax.tree.leaves(opt_state, is_leaf=lambda n: hasattr(n, "hyperparams")):
        hyperparams = getattr(node, "hyperparams", None)
        if isinstance(hyperparams, dict) and "learning_rate" in hyperparams:
            return float(np.asarray(jax.device_get(hyperparams["learning_rate"])))
    return None
