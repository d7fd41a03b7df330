"""A Keras model whose `train_step(self, data)` (or `test_step`, `predict_step`) is written as for TensorFlow,
run by Keras's own `fit`, `evaluate` and `predict`.

TF's Keras guide "Customizing what happens in fit()" overrides `train_step(self, data)`: it calls the model
under a `tf.GradientTape`, applies the gradients with `self.optimizer` and updates metrics, all statefully.
Keras 3 on JAX calls `train_step(state, data)` instead (a pure function of the variables' values), so such a
model failed on its first batch ("train_step() takes 2 positional arguments but 3 were given"). Here each batch
goes through `strategy.run(model.train_step, args=(batch,))`, as TF's `fit` runs the step: the model's, its
optimizer's and its metrics' variables are threaded through the compiled step (`jdist.interop.keras_run`), the
tape differentiates it, and `apply_gradients` in a replica sums the replicas' gradients, as TF's does. Under a
strategy with several replicas the batch is split by TF's rule (a short batch padded and masked:
`jdist.input.split`); without one the step is one compiled program (TF's default strategy).

The step's returned logs are read as TF's Keras 3 `fit` reads them: the mean over the replicas (the first
replica's under `TPUStrategy`). `predict_step` outputs are gathered over the replicas' real rows. With several
processes this is not supported yet: the error names the custom loop instead.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import jax
import numpy as np

from jdist.input.split import chunk_sizes, chunk_starts, gather_slots
from jdist.interop import keras_checks, keras_run
from jdist.interop.keras_objects import keras_objects
from jdist.strategy import context
from jdist.strategy.batch import place_rows
from jdist.strategy.distributed_batch import DistributedBatch
from jdist.strategy.values import PerReplica


def tf_style(model: Any, step: str) -> bool:
    """Whether the model's class overrides `step` with TF's signature `(self, data)` (Keras's JAX one takes
    `(self, state, data)`)."""
    method = getattr(type(model), step, None)
    if method is None or (getattr(method, "__module__", None) or "").startswith("keras."):
        return False
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2 and not any(p.kind is p.VAR_POSITIONAL for p in parameters)


def install() -> None:
    """Wraps Keras's JAX trainer's `make_*_function`s, once: a TF-style step gets the function below."""
    from keras.src.backend.jax.trainer import JAXTrainer

    keras_checks.wrap_makers("_jdist_tf_steps", _making)
    if not getattr(JAXTrainer._symbolic_build, "_jdist_tf_steps", False):
        JAXTrainer._symbolic_build = _building(JAXTrainer._symbolic_build)
    keras_checks.install()  # a failed tf.debugging check of a step raises after it, as TF's fit does


def _building(original: Callable) -> Callable:
    """Keras builds a model symbolically before `fit` by calling it on the batch's shapes. A model without a
    `call` of its own that only steps its sub-models (the guide's GAN, whose train_step calls its generator and
    discriminator) cannot be called; TF's `fit` without a strategy builds nothing up front and runs it. Such a
    model counts as built once its layers are."""
    @functools.wraps(original)
    def build(self: Any, *args: Any, **kwargs: Any) -> Any:
        import keras

        if (not self.built and any(tf_style(self, step) for step in keras_checks.STATE)
                and type(self).call is keras.Model.call
                and all(layer.built for layer in self._flatten_layers(include_self=False))):
            self.built = True
        return original(self, *args, **kwargs)

    build._jdist_tf_steps = True  # pyright: ignore[reportAttributeAccessIssue]
    return build


def _making(step: str, original: Callable) -> Callable:
    @functools.wraps(original)
    def make(self: Any, force: bool = False) -> Any:
        if not tf_style(self, step):
            return original(self, force)
        if getattr(self, keras_checks.SLOTS[step]) is None or force:
            setattr(self, keras_checks.SLOTS[step], _function(self, step))
        return getattr(self, keras_checks.SLOTS[step])

    make._jdist_tf_steps = True  # pyright: ignore[reportAttributeAccessIssue]
    return make


def _state_variables(model: Any, step: str) -> list[list]:
    parts = []
    for name in keras_checks.STATE[step]:
        if name == "optimizer_variables":
            parts.append(list(model.optimizer.variables) if getattr(model, "optimizer", None) is not None else [])
        else:
            parts.append(list(getattr(model, name)))
    return parts


def _function(model: Any, step: str) -> Callable:
    """Keras's `(state, iterator) -> (outputs, state)` for a TF-style step (see the module docstring): Keras's
    own `_make_function` over a `(state, data)` step, so `steps_per_execution` and `predict`'s concatenation are
    Keras's."""
    def step_function(state: Any, data: Any) -> Any:
        for part, values in zip(_state_variables(model, step), state):  # Keras handed the values over (it purges
            for variable, value in zip(part, values):  # the variables during fit)
                variable.assign(value)
        out = _one_step(model, step, data)
        return out, tuple(tuple(v.value for v in part) for part in _state_variables(model, step))

    return model._make_function(step_function, concatenate_outputs=step == "predict_step")


def _strategy(model: Any) -> Any:
    """The jdist strategy the model runs under (the one it was made in), else None (TF's default strategy)."""
    from keras.src.distribution import distribution_lib

    distribution = distribution_lib.distribution() or getattr(model, "_jdist_model_distribution", None)
    strategy = getattr(distribution, "strategy", None)
    if strategy is None and context.has_strategy():
        strategy = context.get_strategy()
    return strategy


def _one_step(model: Any, step: str, data: Any) -> Any:
    fn = getattr(model, step)
    strategy = _strategy(model)
    if strategy is None:  # one compiled program, as a tf.function outside any strategy
        from jdist.strategy.default import default_strategy

        out = keras_run.run(default_strategy(), fn, (data,), {}, keras_objects(fn), compiled=True)
        return out if step != "predict_step" else jax.tree.map(np.asarray, out)
    if jax.process_count() > 1:
        raise NotImplementedError(
            f"{type(model).__name__}.{step}(self, data) is TensorFlow's signature; with several processes Keras's "
            "fit does not run it yet. Write the loop with strategy.run(model.train_step, args=(batch,)) over "
            "strategy.experimental_distribute_dataset(...), or write the step as Keras 3's "
            f"{step}(self, state, data).")
    batch = _distributed(strategy, data)
    out = strategy.run(fn, args=(batch,))
    if step == "predict_step":
        return jax.tree.map(lambda v: np.asarray(strategy.gather(v, axis=0)), out,
                            is_leaf=lambda v: isinstance(v, PerReplica))
    first = type(strategy).__name__ == "TPUStrategy"
    return jax.tree.map(lambda v: _reduced(v, first), out, is_leaf=lambda v: isinstance(v, PerReplica))


def _reduced(value: Any, first: bool) -> Any:
    """TF's Keras 3 `fit` reads a per-replica log as the mean over the replicas (the first replica's under
    `TPUStrategy`: `reduce_per_replica(..., reduction="auto")`)."""
    if not isinstance(value, PerReplica):
        return value
    return value.values[0] if first else np.mean([np.asarray(v) for v in value.values], axis=0)


def _distributed(strategy: Any, data: Any) -> DistributedBatch:
    """A batch from Keras's iterator split over the replicas by TF's rule (a short batch padded and masked)."""
    leaves, treedef = jax.tree.flatten(data)
    host = [np.asarray(x) for x in leaves]
    rows = host[0].shape[0] if host and host[0].ndim else 0
    replicas = strategy.num_replicas_in_sync
    per_replica = max(1, -(-rows // replicas))
    slots = list(zip(chunk_starts(rows, replicas), chunk_sizes(rows, replicas)))
    padded, mask = gather_slots(host, slots, per_replica)
    placed = place_rows([*padded, mask], strategy.data_sharding(), rows="local", global_rows=replicas * per_replica)
    shown_as = getattr(strategy, "per_replica_display", None)
    return DistributedBatch(jax.tree.unflatten(treedef, placed[:-1]), placed[-1], host_mask=mask,
                            shown_as=shown_as)
