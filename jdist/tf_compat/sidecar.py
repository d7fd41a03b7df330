"""`tf.keras.utils.SidecarEvaluator`: a process that evaluates each checkpoint the training writes.

tf_keras has it (TF 2.21's Keras 3 does not: `tf.keras.utils.SidecarEvaluator` is missing there, observed), and
TF's guide/migrate/evaluator.ipynb uses it: training saves with `tf.train.Checkpoint` / `CheckpointManager`
or `tf.keras.callbacks.ModelCheckpoint(save_weights_only=True)` to an extension-less path; the evaluator
waits for the newest checkpoint named in the directory's `checkpoint` file, restores the model from it
(a checkpoint with a `model` child, else the model's own weights), runs `model.evaluate(data, steps=steps,
callbacks=callbacks, verbose=2)`, and stops after a checkpoint whose name ends in `-<k>` with
`k >= max_evaluations` (tf_keras's rule; without `max_evaluations` it runs until stopped).
"""
from __future__ import annotations

import logging
import os
from typing import Any

from jdist import train
from jdist.train.checkpoint import read_arrays

_LOG = logging.getLogger("tensorflow")  # tf_keras logs there
_TIMEOUT_SECONDS = 180  # tf_keras's _CHECKPOINT_TIMEOUT_SEC: how long it waits before saying it found none


def _timed_out(directory: str) -> bool:
    """tf_keras's timeout_fn: say that nothing came, and keep waiting."""
    _LOG.info("No checkpoints appear to be found after %s seconds in %s: save them with tf.train.Checkpoint / "
              "CheckpointManager or tf.keras.callbacks.ModelCheckpoint(save_weights_only=True).",
              _TIMEOUT_SECONDS, directory)
    return False


class SidecarEvaluator:
    """Evaluates `model` on `data` for each new checkpoint in `checkpoint_dir` (tf_keras's arguments)."""

    def __init__(self, model: Any, data: Any, checkpoint_dir: str, steps: int | None = None,
                 max_evaluations: int | None = None, callbacks: list | None = None):
        if not getattr(model, "compiled", False):
            raise ValueError("SidecarEvaluator evaluates a compiled model: call model.compile(loss=..., "
                             "metrics=[...]) before start(), as tf_keras requires metrics compiled.")
        self.model, self.data, self.checkpoint_dir = model, data, os.fspath(checkpoint_dir)
        self.steps, self.max_evaluations, self.callbacks = steps, max_evaluations, list(callbacks or [])

    def _restore(self, path: str) -> None:
        if any(key.startswith("model/") for key in read_arrays(path)):
            optimizer = getattr(self.model, "optimizer", None)
            objects = {"model": self.model} if optimizer is None else {"model": self.model, "optimizer": optimizer}
            train.Checkpoint(**objects).restore(path).expect_partial()
        else:
            self.model.load_weights(path)

    def start(self) -> None:
        """Runs the loop: restore, evaluate, log the metrics; returns after the `max_evaluations`-th checkpoint."""
        for path in train.checkpoints_iterator(self.checkpoint_dir, timeout=_TIMEOUT_SECONDS,
                                               timeout_fn=lambda: _timed_out(self.checkpoint_dir)):
            self._restore(path)
            _LOG.info("Evaluation starts: Model weights loaded from latest checkpoint file %s", path)
            self.model.evaluate(self.data, steps=self.steps, callbacks=self.callbacks, verbose=2)
            results = {}
            for metric in self.model.metrics:
                result = metric.result()
                results.update(result if isinstance(result, dict) else {metric.name: result})
            _LOG.info("End of evaluation. Metrics: %s", " ".join(f"{k}={float(v)}" for k, v in results.items()))
            suffix = path.rsplit("-", 1)[-1]
            if self.max_evaluations and suffix.isdigit() and self.max_evaluations <= int(suffix):
                _LOG.info("Last checkpoint evaluated. SidecarEvaluator stops.")
                return
