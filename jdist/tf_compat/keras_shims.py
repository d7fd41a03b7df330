"""`self.compiled_loss(...)` and `self.compiled_metrics.update_state(...)` in a TF-style `train_step`.

TF's guide "Customizing what happens in fit()" (for tf_keras) writes a custom `train_step` with
`self.compiled_loss(y, y_pred, regularization_losses=self.losses)` and
`self.compiled_metrics.update_state(y, y_pred)`. TF 2.21's Keras 3 keeps both, on its TensorFlow backend only, as
deprecated shims (observed, TF 2.21 with Keras 3.15: each warns once per trace, "`model.compiled_loss()` is
deprecated..."), which Keras 3 on JAX lacks ("'M' object has no attribute 'compiled_loss'"). Their behaviour,
as observed under `MirroredStrategy` on 4 replicas:

- `compiled_loss(y, y_pred, sample_weight=None, regularization_losses=None)` is
  `compute_loss(x=None, y=y, y_pred=y_pred, sample_weight=sample_weight)`: `regularization_losses` is ignored
  (the model's own losses are added by `compute_loss`), and the value is scaled for summing over the replicas.
- `compiled_metrics.update_state(y, y_pred, sample_weight=None)` updates every metric of `self.metrics`,
  a `Mean` one (the "loss" tracker) with `y_pred` itself: the logged "loss" is then the mean prediction
  (0.333333 for a 3-class softmax), not the loss, as TF's Keras 3 logs it.
"""
from __future__ import annotations

import warnings
from typing import Any

_INSTALLED: list[bool] = []


class _CompiledMetrics:
    """What `model.compiled_metrics` is: an object with TF's deprecated `update_state`."""

    def __init__(self, model: Any):
        self._model = model

    def update_state(self, y: Any, y_pred: Any, sample_weight: Any = None) -> None:
        from keras import metrics as metrics_module

        warnings.warn("`model.compiled_metrics()` is deprecated. Instead, use e.g.:\n```\n"
                      "for metric in self.metrics:\n    metric.update_state(y, y_pred)\n```\n", stacklevel=2)
        for metric in self._model.metrics:
            if isinstance(metric, metrics_module.Mean):
                metric.update_state(y_pred, sample_weight=sample_weight)
            else:
                metric.update_state(y, y_pred, sample_weight=sample_weight)


def _compiled_metrics(self: Any) -> _CompiledMetrics:
    return _CompiledMetrics(self)


def _compiled_loss(self: Any, y: Any, y_pred: Any, sample_weight: Any = None,
                   regularization_losses: Any = None) -> Any:
    """TF's Keras 3 shim: `compute_loss(x=None, y=y, y_pred=y_pred, sample_weight=sample_weight)`."""
    warnings.warn("`model.compiled_loss()` is deprecated. Instead, use "
                  "`model.compute_loss(x, y, y_pred, sample_weight, training)`.", stacklevel=2)
    return self.compute_loss(x=None, y=y, y_pred=y_pred, sample_weight=sample_weight)


def install() -> None:
    """Adds the two shims to Keras's `Model` where its backend lacks them (JAX's)."""
    if _INSTALLED:
        return
    from keras.src.models.model import Model

    if not hasattr(Model, "compiled_metrics"):
        Model.compiled_metrics = property(_compiled_metrics)  # type: ignore[attr-defined]
    if not hasattr(Model, "compiled_loss"):
        Model.compiled_loss = _compiled_loss  # type: ignore[attr-defined]
    _INSTALLED.append(True)
