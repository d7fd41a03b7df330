"""Keras 3 models in `jdist.Trainer` (the optional `jdist[keras]` extra, `KERAS_BACKEND=jax`).

    model = keras.Sequential([...]); model.compile(optimizer="adam", loss=..., metrics=["accuracy"])
    trainer = jdist.Trainer(model, strategy=jdist.MirroredStrategy())
    trainer.fit(x, y, batch_size=64)      # then model.predict / evaluate / save / get_weights see the result

The Trainer keeps the model's variables as plain arrays keyed by each variable's
Keras path (`sequential/dense/kernel`), so layouts and Keras `LayoutMap` rules
match them, and calls the model through `stateless_call(trainable,
non_trainable, x, training=...)`: batch statistics and dropout seed states are
the non-trainable values it carries from step to step. What the Trainer is not
given comes from the model's `compile(...)`: the loss as Keras's own loss object
(its unreduced per-example values), `metrics` and `weighted_metrics` through
`jdist.metrics` (Keras's names and values; Keras metric objects through their
stateless API), and the optimizer through `stateless_apply` (its variables the
optimizer state), so the update is Keras's. Trained values are written back
into the model's variables after `fit`, `load_weights` and `load`.

Padding: a short last batch is padded and masked. `BatchNormalization` is given
that mask, so its statistics are those of the real examples (and, in the
Trainer's global view, of the whole global batch, as TF's synchronized batch
normalization).
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jdist import losses as losses_lib
from jdist.typing import PyTree


def is_keras_model(obj: object) -> bool:
    """Whether `obj` is a Keras 3 layer or model (without importing Keras when it is not loaded)."""
    if "keras" not in sys.modules:
        return False
    try:
        import keras
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, keras.layers.Layer)


def _check_backend() -> None:
    import keras

    if keras.backend.backend() != "jax":
        raise ValueError(
            f"jdist trains Keras models on the JAX backend, but Keras runs on {keras.backend.backend()!r}. "
            "Set KERAS_BACKEND=jax before importing keras.")


def _keys(variables: Sequence[Any], what: str) -> list[str]:
    keys = [v.path for v in variables]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"The model's {what} variables share paths {dup}; give their layers unique names.")
    return keys


class KerasModel:
    """Adapter: the Trainer's `init` / `apply` for a Keras model, through `stateless_call`."""

    def __init__(self, model: Any):
        _check_backend()
        self.model = model
        self._batch_norms: list = []

    # ---------------------------------------------------------------- values
    def _build(self, x: Any) -> None:
        if not self.model.built:
            self.model(x)  # builds every layer, as Keras's fit does on its first batch
        import keras

        self._batch_norms = [layer for layer in self.model._flatten_layers(include_self=False)
                             if isinstance(layer, keras.layers.BatchNormalization)]
        check_batch_norm_axes(self._batch_norms)
        self.trainable_keys = _keys(self.model.trainable_variables, "trainable")
        self.non_trainable_keys = _keys(self.model.non_trainable_variables, "non-trainable")

    def init(self, rng: jax.Array, x: Any, mask: Any) -> tuple[dict, dict]:
        """The model's current values (built on `x` first if it is not built)."""
        del rng, mask  # Keras initialises its own variables, from its own seeds
        self._build(x)
        return self.values()

    def values(self) -> tuple[dict, dict]:
        params = {k: jnp.asarray(v.value) for k, v in zip(self.trainable_keys, self.model.trainable_variables)}
        state = {k: jnp.asarray(v.value) for k, v in zip(self.non_trainable_keys,
                                                          self.model.non_trainable_variables)}
        return params, state

    def apply_fn(self, params: dict, x: Any) -> Any:
        """Inference with `params` and the model's current non-trainable values."""
        _, state = self.values()
        return self.apply(params, state, x, train=False, mask=None, rng=None)[0]

    def apply(self, params: dict, model_state: dict, x: Any, *, train: bool, mask: Any, rng: Any) -> tuple:
        del rng  # dropout draws from the model's own seed-generator states, carried in model_state
        trainable = [params[k] for k in self.trainable_keys]
        non_trainable = [model_state[k] for k in self.non_trainable_keys]
        with _masked_batch_norm(self._batch_norms if train else [], mask):
            y_pred, non_trainable, losses = self.model.stateless_call(
                trainable, non_trainable, x, training=train, return_losses=True)
        if losses:
            raise NotImplementedError(
                "This model adds losses of its own (kernel_regularizer=, activity_regularizer= or add_loss), "
                "which jdist.Trainer does not add to the compiled loss yet. Train it with model.fit inside "
                "strategy.scope(), or drop the regularizers.")
        return y_pred, dict(zip(self.non_trainable_keys, non_trainable)) if self.non_trainable_keys else model_state

    def write_back(self, host_state: Any, optimizer: "KerasOptimizer | None") -> None:
        """Assigns trained values (a host copy of the Trainer's state) to the Keras variables."""
        for key, var in zip(self.trainable_keys, self.model.trainable_variables):
            var.assign(np.asarray(host_state.params[key]))
        for key, var in zip(self.non_trainable_keys, self.model.non_trainable_variables):
            var.assign(np.asarray(host_state.model_state[key]))
        if optimizer is not None and isinstance(host_state.opt_state, dict) and set(host_state.opt_state) == set(
                optimizer.keys):
            for key, var in zip(optimizer.keys, optimizer.optimizer.variables):
                var.assign(np.asarray(host_state.opt_state[key]))


@contextlib.contextmanager
def _masked_batch_norm(layers: list, example_mask: Any):
    """Hands each BatchNormalization the real-example mask, so padding rows stay out of its statistics.

    Keras's BatchNormalization takes `mask` (one dimension less than its inputs) and computes its
    moments over the unmasked elements only; the layer's `call` is wrapped while the model is traced."""
    if not layers or example_mask is None:
        yield
        return
    real_rows = jnp.asarray(example_mask) > 0
    for layer in layers:
        def call(inputs, training=None, mask=None, _layer=layer, _original=type(layer).call):  # noqa: B008
            real = real_rows.reshape(real_rows.shape + (1,) * (inputs.ndim - 2))
            real = jnp.broadcast_to(real, inputs.shape[:-1])
            if mask is not None:  # a sequence mask of the layer's own input
                real = jnp.logical_and(real, jnp.asarray(mask, bool))
            return _original(_layer, inputs, training=training, mask=real)

        object.__setattr__(layer, "call", call)  # past Keras's attribute tracking; undone below
    try:
        yield
    finally:
        for layer in layers:
            object.__delattr__(layer, "call")


def check_batch_norm_axes(layers: list) -> None:
    """BatchNormalization over a non-last axis cannot take the padding mask: say so up front."""
    for layer in layers:
        axes = getattr(layer, "_reduction_axes", None)
        if axes is not None and list(axes) != list(range(len(axes))):  # the last axis is not the one kept
            raise ValueError(
                f"{layer.name}: jdist.Trainer supports BatchNormalization over the last axis only "
                f"(got axis={layer.axis!r}); padded batches could not be masked otherwise. Use "
                "channels-last data, or model.fit inside strategy.scope().")


# ------------------------------------------------------------------ optimizer
class KerasOptimizer:
    """A Keras optimizer as an optax transformation: the update is Keras's `stateless_apply`.

    The optimizer state is a dict of the optimizer's variables keyed by their Keras
    path; a slot variable of a parameter is keyed `<slot>/<parameter path>` so that
    layouts put it where its parameter is. It starts from the optimizer's current
    values (a model already trained by Keras continues with its moments).
    """

    def __init__(self, optimizer: Any, model: KerasModel):
        self.optimizer = optimizer
        self.model = model
        self.keys: list[str] = []

    def _build(self) -> None:
        if not self.optimizer.built:
            self.optimizer.build(self.model.model.trainable_variables)
        built_with = [v.path for v in self.optimizer._trainable_variables]
        if built_with != self.model.trainable_keys:
            raise ValueError("The model's optimizer was built for other variables than the model's trainable ones; "
                             "compile the model again (or pass an optimizer to the Trainer).")
        by_flat_name = {key.replace("/", "_"): key for key in self.model.trainable_keys}
        keys = []
        for var in self.optimizer.variables:
            owner = max((f for f in by_flat_name if var.name.startswith(f + "_")), key=len, default=None)
            keys.append(f"{var.name[len(owner) + 1:]}/{by_flat_name[owner]}" if owner else var.path)
        self.keys = keys

    def init(self, params: PyTree) -> dict:
        del params
        self._build()
        return {k: jnp.asarray(v.value) for k, v in zip(self.keys, self.optimizer.variables)}

    def update(self, updates: Any, state: PyTree, params: PyTree = None) -> tuple[dict, dict]:
        """optax's `update`; `updates` and `params` are dicts keyed by variable path, `state` the one `init` made."""
        if params is None:
            raise ValueError("A Keras optimizer needs the parameters: call update(grads, state, params).")
        order = self.model.trainable_keys
        new_params, new_vars = self.optimizer.stateless_apply(
            [state[k] for k in self.keys], [updates[k] for k in order], [params[k] for k in order])
        # optax adds updates to the parameters: new - old is exact where they are within 2x of each other.
        deltas = {k: new - params[k] for k, new in zip(order, new_params)}
        return deltas, dict(zip(self.keys, new_vars))

    def transformation(self) -> optax.GradientTransformation:
        return optax.GradientTransformation(self.init, self.update)


# ----------------------------------------------------------------- loss, metrics
def loss_from(identifier: Any) -> Callable[[Any, Any], Any]:
    """Keras's loss for `compile(loss=...)`, returning its unreduced per-example values (Keras's own
    loss object, resolved by Keras from the identifier and the shapes, run by `jdist.losses.KerasLoss`)."""
    from keras.src.trainers import compile_utils

    if isinstance(identifier, (dict, list, tuple)):
        raise NotImplementedError(
            "jdist.Trainer takes one loss for one output; this model was compiled with several. Pass "
            "loss=fn(y_true, y_pred) to the Trainer, or train with model.fit inside strategy.scope().")
    resolved: dict = {}

    def per_example(y_true: Any, y_pred: Any) -> Any:
        loss = resolved.get("loss")
        if loss is None:  # "crossentropy" is resolved from the label shapes, as Keras does
            loss = resolved["loss"] = losses_lib.KerasLoss(compile_utils.get_loss(identifier, y_true, y_pred))
        return loss(y_true, y_pred)

    per_example.__name__ = getattr(identifier, "name", None) or str(identifier)
    return per_example


# ------------------------------------------------------------------ the hook
class KerasTraining:
    """What the Trainer takes from a Keras model: adapter, optimizer, loss and metrics."""

    def __init__(self, model: Any, optimizer: Any, loss: Any, metrics: Sequence[Any] | None,
                 weighted_metrics: Sequence[Any] | None):
        self.adapter = KerasModel(model)
        self.keras_optimizer: KerasOptimizer | None = None
        compiled = getattr(model, "compiled", False)
        if optimizer is None:
            if not compiled or model.optimizer is None:
                raise ValueError("Compile the Keras model first (model.compile(optimizer=..., loss=...)), or pass "
                                 "the Trainer an optimizer and a loss.")
            self.keras_optimizer = KerasOptimizer(model.optimizer, self.adapter)
            optimizer = self.keras_optimizer.transformation()
        elif _is_keras_optimizer(optimizer):  # its own update, through stateless_apply
            self.keras_optimizer = KerasOptimizer(optimizer, self.adapter)
            optimizer = self.keras_optimizer.transformation()
        if loss is None:
            if not compiled or model.loss is None:
                raise ValueError("The Keras model was compiled without a loss: compile it with loss=..., or pass "
                                 "the Trainer loss=.")
            loss = loss_from(model.loss)
        if metrics is None and weighted_metrics is None and compiled:  # compile()'s, resolved as Keras does
            metrics, weighted_metrics = _compiled_metrics(model)
        self.optimizer, self.loss = optimizer, loss
        self.metrics, self.weighted_metrics = metrics, weighted_metrics

    def write_back(self, host_state: Any) -> None:
        self.adapter.write_back(host_state, self.keras_optimizer)


def _compiled_metrics(model: Any) -> tuple[list, list]:
    config = getattr(model, "_compile_config", None)
    config = getattr(config, "config", None) or {}
    metrics, weighted = config.get("metrics"), config.get("weighted_metrics")
    if isinstance(metrics, dict) or isinstance(weighted, dict):
        raise NotImplementedError("Per-output metrics (a dict) are not taken by jdist.Trainer; pass metrics=.")
    return list(metrics or []), list(weighted or [])


def _is_keras_optimizer(optimizer: Any) -> bool:
    import keras

    return isinstance(optimizer, keras.optimizers.Optimizer)
