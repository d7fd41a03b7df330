"""Keras's `model.fit` under a strategy whose steps run on remote workers (`ParameterServerStrategy`).

TF (tf_keras) trains such a model through its `ClusterCoordinator`: the coordinator runs the
epoch loop and the callbacks, each execution of `steps_per_execution` train steps is scheduled on
whichever worker is free, the model's, optimizer's and metrics' variables live on the parameter
servers, and an epoch ends with `coordinator.join()` and the metrics read from the servers. Here
the same loop schedules Keras's own compiled train step (`model.train_function`) on the workers:
each worker's copy of the model loads the variables from the servers before each step, its
gradients go to the servers, which apply the optimizer to their current values (as a scheduled
function's `optimizer.apply_gradients`, `interop/keras_deferred.py`), and the metrics' and other
variables' changes are pushed after it (`parameter_server/keras_state.py`). A `LossScaleOptimizer`,
whose scale no single server can judge, is applied on the worker instead, its changes pushed with
the rest (exact for one worker).

As in TF: `steps_per_epoch` is required, `verbose=1` is refused ("auto" means 2, a line per
epoch), and callbacks of the user's own with batch-level hooks are refused; Keras's and jdist's
callbacks get their batch hooks once per scheduled execution, with empty logs (the step's results
are not known when it is scheduled).
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from jdist.strategy.base import Strategy


class TrainSteps:
    """Scheduled on a worker: `steps` of the model's compiled train step on batches from `iterator`. One per
    model, so a worker receives (and compiles) its copy of the model once."""

    def __init__(self, model: Any):
        from jdist.interop import keras_labels

        self.model = model
        self.tf_keras_labels = keras_labels.installed()  # the coordinator's script uses tf_compat's tf.keras
        self.build_batch: Any = None  # one row of the batch the coordinator built the model from

    def keras_variables(self) -> list:
        """The variables a worker loads and pushes: the same list, in the same order, on both sides. A worker's
        copy (rebuilt from Keras's pickle) builds its compiled metrics first, from the coordinator's batch."""
        model = self.model
        compiled = getattr(model, "_compile_metrics", None)
        if compiled is not None and not compiled.built and self.build_batch is not None:
            model._symbolic_build(data_batch=self.build_batch)
        return [*model.trainable_variables, *model.non_trainable_variables, *model.optimizer.variables,
                *model.metrics_variables]

    def keras_optimizers(self) -> list:
        """The optimizer whose updates the servers apply: the model's, unless it scales the loss."""
        import keras

        optimizer = self.model.optimizer
        return [] if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else [optimizer]

    def __call__(self, iterator: Any, steps: int) -> dict:
        from keras.src.backend.jax.trainer import _distribute_data
        from keras.src.trainers.data_adapters.data_adapter_utils import unpack_x_y_sample_weight
        from keras.src.utils.python_utils import pythonify_logs

        from jdist.interop import keras_deferred

        model = self.model
        if self.tf_keras_labels:
            from jdist.interop import keras_labels

            keras_labels.expand_compiled_labels()

        def batches():
            for _ in range(steps):
                yield _distribute_data(unpack_x_y_sample_weight(_as_tuple(next(iterator))))

        if keras_deferred.defers(model.optimizer):
            return pythonify_logs(self._steps_applied_on_servers(batches()))
        model.make_train_function()
        state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True,
                                     optimizer_variables=True, metrics_variables=True, purge_model_variables=False)
        model._jax_state_synced = False
        logs, state = model.train_function(state, batches())
        names = ("trainable_variables", "non_trainable_variables", "optimizer_variables", "metrics_variables")
        model._jax_state = dict(zip(names, state))
        model.jax_state_sync()
        return pythonify_logs(logs)


    def _steps_applied_on_servers(self, batches: Any) -> Any:
        """Keras's train step without its optimizer update, one step at a time: the gradients go to the
        servers, and the next step starts from their values (`keras_deferred.step_boundary`)."""
        from jdist.interop import keras_deferred

        model = self.model
        step = self.__dict__.get("_gradient_step")
        if step is None:
            step = self.__dict__["_gradient_step"] = _gradient_step(model)
        groups = (model.trainable_variables, model.non_trainable_variables, model.optimizer.variables,
                  model.metrics_variables)
        logs: Any = {}
        for index, data in enumerate(batches):
            if index:
                keras_deferred.step_boundary()
            logs, grads, non_trainable, metrics = step(_placed(tuple([v.value for v in g] for g in groups)), data)
            for variable, value in zip([*groups[1], *groups[3]], [*non_trainable, *metrics]):
                variable.assign(value)
            keras_deferred.deliver(model.optimizer, list(groups[0]), [np.asarray(g) for g in grads])
        return logs

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_gradient_step", None)  # compiled where it runs
        return state


def _placed(values: Any) -> Any:
    """The step's variable values replicated over the worker's devices, as its outputs are. Loaded values arrive
    uncommitted, while a variable the previous step assigned (a metric's total) holds a committed output:
    passed as they come, each new mix compiled the step again (3 compilations per worker instead of 1)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec
    from keras.src.distribution import distribution_lib

    mesh = getattr(getattr(distribution_lib.distribution(), "strategy", None), "mesh", None)
    return values if mesh is None else jax.device_put(values, NamedSharding(mesh, PartitionSpec()))


def _gradient_step(model: Any) -> Any:
    """Keras's JAX `train_step` up to the optimizer: (logs, gradients, non-trainable and metric values)."""
    import jax

    def step(state: tuple, data: Any) -> tuple:
        from keras.src.trainers.data_adapters.data_adapter_utils import unpack_x_y_sample_weight

        trainable, non_trainable, optimizer_variables, metrics = state
        x, y, sample_weight = unpack_x_y_sample_weight(data)
        grad_fn = jax.value_and_grad(model.compute_loss_and_updates, has_aux=True)
        (_, aux), grads = grad_fn(trainable, non_trainable, metrics, x, y, sample_weight, training=True,
                                  optimizer_variables=optimizer_variables)
        unscaled_loss, y_pred, non_trainable, metrics = aux
        logs, metrics = model._update_metrics_variables(metrics, unscaled_loss, x, y, y_pred, sample_weight)
        return logs, grads, non_trainable, metrics

    return jax.jit(step)


def _as_tuple(element: Any) -> Any:
    return tuple(element) if isinstance(element, list) else element


def _array_batches(x: Any, y: Any, sample_weight: Any, batch_size: int, shuffle: bool) -> Any:
    """On a worker: endless batches of in-memory arrays, reshuffled each pass (seeded by the worker index)."""
    import numpy as np

    from jdist.cluster.worker_context import get_current_worker_index

    rng = np.random.default_rng(get_current_worker_index())
    n = len(next(iter(_leaves(x))))
    while True:
        order = rng.permutation(n) if shuffle else np.arange(n)
        for start in range(0, n, batch_size):
            rows = order[start:start + batch_size]
            take = functools.partial(_take, rows=rows)
            yield tuple(take(v) for v in (x, y, sample_weight) if v is not None)


def _leaves(tree: Any) -> list:
    import jax

    return jax.tree.leaves(tree)


def _take(tree: Any, rows: Any) -> Any:
    import jax
    import numpy as np

    return jax.tree.map(lambda a: np.asarray(a)[rows], tree)


def _per_worker_source(x: Any, y: Any, sample_weight: Any, batch_size: int | None,
                       shuffle: bool) -> Any:
    """What `create_per_worker_dataset` builds on each worker: a copy of the dataset, or batches of the arrays."""
    if _is_array_tree(x):
        return functools.partial(_array_batches, x, y, sample_weight, int(batch_size or 32), bool(shuffle))
    if y is not None or sample_weight is not None:
        raise ValueError("fit: with a dataset, `y` and `sample_weight` come from the dataset; pass them as None.")
    if not hasattr(x, "__iter__") or isinstance(x, (str, bytes)):
        raise TypeError(
            f"fit under ParameterServerStrategy takes a dataset (tf.data.Dataset, any iterable of batches) or "
            f"in-memory arrays; got {type(x).__name__}.")
    return x


def _is_array_tree(x: Any) -> bool:
    import numpy as np

    leaves = _leaves(x)
    return bool(leaves) and all(isinstance(v, np.ndarray) or hasattr(v, "__array__") and hasattr(v, "shape")
                                for v in leaves)


def _check_callbacks(callbacks: Any) -> None:
    """TF's rule: batch-level hooks of the user's own callbacks cannot see a scheduled step's results."""
    import keras

    hooks = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")
    refused = [cb for cb in callbacks or () if not type(cb).__module__.startswith(("keras.", "jdist."))
               and any(getattr(type(cb), h) is not getattr(keras.callbacks.Callback, h) for h in hooks)]
    if refused:
        raise ValueError(f"Batch-level `Callback`s are not supported with `ParameterServerStrategy`. Found "
                         f"unsupported callbacks: {refused}. Use epoch-level hooks (on_epoch_end) instead.")


_UNSUPPORTED = ("validation_split", "class_weight")


def fit(model: Any, strategy: Strategy, x: Any = None, y: Any = None, batch_size: int | None = None,
        epochs: int = 1, verbose: Any = "auto", callbacks: Any = None, shuffle: bool = True,
        sample_weight: Any = None, initial_epoch: int = 0, steps_per_epoch: int | None = None,
        validation_data: Any = None, validation_steps: int | None = None, validation_batch_size: int | None = None,
        validation_freq: int = 1, **rest: Any) -> Any:
    """Keras's `fit`, each execution of train steps scheduled on the strategy's workers; returns the History.

    With `validation_data` (and `validation_steps`, which TF requires here), each validated epoch ends with
    `model.evaluate` of its first `validation_steps` batches on the servers' values: the `val_` logs."""
    import keras

    asked = sorted(k for k, v in rest.items() if k in _UNSUPPORTED and v not in (None, 0, 0.0))
    unknown = sorted(k for k in rest if k not in _UNSUPPORTED)
    if unknown:
        raise TypeError(f"fit() got unexpected keyword arguments {unknown}")
    if asked:
        raise NotImplementedError(
            f"fit under ParameterServerStrategy does not take {asked} yet: pass validation_data with "
            "validation_steps (or evaluate after fit with model.evaluate, which reads the servers' values); "
            "weight examples with sample_weight.")
    if validation_data is not None and (validation_steps is None or int(validation_steps) <= 0):
        raise ValueError(
            "fit under ParameterServerStrategy needs `validation_steps` (a positive int) with `validation_data`, "
            f"as TF's does: each validation reads that many batches. Got validation_steps={validation_steps}.")
    if steps_per_epoch is None or int(steps_per_epoch) <= 0:
        raise ValueError(
            "fit under ParameterServerStrategy needs `steps_per_epoch` (a positive int): the workers read "
            f"endless per-worker datasets, so an epoch is a number of steps. Got steps_per_epoch={steps_per_epoch}.")
    if verbose == 1:
        raise ValueError("`verbose=1` is not allowed with `ParameterServerStrategy` for performance reasons. "
                         f"Received: verbose={verbose}")
    verbose = 2 if verbose == "auto" else verbose
    _check_callbacks(callbacks if not isinstance(callbacks, keras.callbacks.CallbackList) else callbacks.callbacks)
    steps_per_epoch = int(steps_per_epoch)
    coordinator = strategy.cluster_coordinator()
    source = _per_worker_source(x, y, sample_weight, batch_size, shuffle)
    train_steps = _train_steps(model)
    with strategy.scope():
        train_steps.build_batch = _build(model, x, y, sample_weight)
    per_worker = coordinator.create_per_worker_dataset(source)
    iterator = iter(per_worker)

    if not isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks = keras.callbacks.CallbackList(callbacks, add_history=True, add_progbar=verbose != 0,
                                                 verbose=verbose, epochs=epochs, steps=steps_per_epoch, model=model)
    per_execution = max(1, int(model.steps_per_execution))
    model.stop_training = False
    callbacks.on_train_begin()
    epoch_logs: dict = {}
    for epoch in range(initial_epoch, epochs):
        model.reset_metrics()  # written through: the servers' metric variables start the epoch at zero
        callbacks.on_epoch_begin(epoch)
        last = None
        step = 0
        while step < steps_per_epoch:
            count = min(per_execution, steps_per_epoch - step)
            callbacks.on_train_batch_begin(step)
            last = coordinator.schedule(train_steps, args=(iterator, count))
            step += count
            callbacks.on_train_batch_end(step - 1, {})
            if model.stop_training:
                break
        coordinator.join()
        logs = last.fetch() if last is not None else {}
        epoch_logs = dict(model._get_metrics_result_or_logs(logs))  # the servers' values, as TF reads them
        if validation_data is not None and model._should_eval(epoch, validation_freq):
            epoch_logs.update(_validate(model, validation_data, int(validation_steps or 0),
                                        validation_batch_size or batch_size))
        callbacks.on_epoch_end(epoch, epoch_logs)
        if model.stop_training:
            break
    callbacks.on_train_end(logs=epoch_logs)
    return model.history


def _validate(model: Any, data: Any, steps: int, batch_size: int | None) -> dict:
    """`val_` logs: Keras's `evaluate` here, on the servers' values, of the first `steps` batches of `data`."""
    from keras.src.trainers.data_adapters.data_adapter_utils import unpack_x_y_sample_weight

    if _is_array_tree(data) or isinstance(data, (tuple, list)):
        x, y, weights = unpack_x_y_sample_weight(tuple(data))
    else:
        x, y, weights = data, None, None
    logs = model.evaluate(x, y, sample_weight=weights, batch_size=batch_size, steps=steps, verbose=0,
                          return_dict=True)
    # Evaluate resets the compiled metrics; the training logs were read before it.
    return {"val_" + name: value for name, value in logs.items()}


def _train_steps(model: Any) -> TrainSteps:
    """Kept on the model: the coordinator sends it to each worker once, whatever the number of fit calls."""
    steps = model.__dict__.get("_jdist_train_steps")
    if steps is None:
        steps = model.__dict__["_jdist_train_steps"] = TrainSteps(model)
    return steps


def _build(model: Any, x: Any, y: Any, sample_weight: Any) -> Any:
    """The model, its optimizer and its compiled metrics get their variables here, in the strategy's scope, so
    they are made on the servers (TF builds them on first use, there): from one batch of the data, read here.
    Returns one row of that batch (workers build their copies' compiled metrics from it)."""
    if _is_array_tree(x):
        take = functools.partial(_take, rows=slice(0, 1))
        batch = tuple(None if v is None else take(v) for v in (x, y, sample_weight))
    else:
        batch = _take(_unpacked(next(iter(x))), slice(0, 1))
    if not (model.built and model.optimizer.built and all(getattr(m, "built", True) for m in model.metrics)):
        model._symbolic_build(data_batch=batch)
    return batch


def _unpacked(batch: Any) -> Any:
    from keras.src.trainers.data_adapters.data_adapter_utils import unpack_x_y_sample_weight

    return unpack_x_y_sample_weight(_as_tuple(batch))
