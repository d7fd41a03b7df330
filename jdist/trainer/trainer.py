"""`Trainer`: Keras's `compile` / `fit` / `evaluate` / `predict`, under any jdist strategy.

    strategy = jdist.MirroredStrategy()
    trainer = jdist.Trainer(CNN(), "adam", loss=jdist.losses.SparseCategoricalCrossentropy(from_logits=True),
                            metrics=["accuracy"], strategy=strategy, steps_per_execution=8)
    history = trainer.fit(x, y, batch_size=64, epochs=5, validation_data=(x_val, y_val))
    trainer.evaluate(x_test, y_test, return_dict=True)      # {"loss": ..., "accuracy": ...}
    trainer.predict(x_test)                                 # (n, 10), in example order

`batch_size` is the global batch. Each step is one compiled program over the whole
global batch sharded over the strategy's data axis (the global view): the loss is
the mean over the batch's real examples, so training under N replicas gives the
single-device weights. Short last batches are padded to a fixed size and masked,
so nothing recompiles and no example is dropped or counted twice; a batch size that
does not divide among the replicas is padded up to a multiple too.

The step is compiled through `strategy.compile_step`, so strategies that keep the
parameters apart from the compute devices train too: central storage (compute on
the mesh, update on the parameter device) and parameter servers (steps scheduled
on the workers, see `jdist.trainer._remote`).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeAlias

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding

from jdist import losses as losses_lib, metrics as metrics_lib, mixed_precision, optimizers as optimizers_lib
from jdist.callbacks import Callback, CallbackList, History, LazyLogs, ProgressBar
from jdist.checkpoint import model_io as trainer_io
from jdist.input import checks as input_checks
from jdist.interop import keras_model
from jdist.strategy import context, host_checks, initial_values
from jdist.strategy.batch import Batch
from jdist.trainer import _batching as batching
from jdist.trainer._hooks import batch_hooks, begin_hook, check_validation_freq, fit_data, validates_after
from jdist.trainer._input import EVAL, PREDICT, TRAIN, Pass, TrainerInput, is_arrays
from jdist.trainer._model_fn import TrainerState, adapt_model
from jdist.trainer._remote import RemoteEpoch, RemoteTrainSteps
from jdist.trainer._runners import CompiledRunner, PredictRunner, Runner
from jdist.trainer._steps import StepBuilder, scan_predict, scan_steps
from jdist.trainer.checks import TrainerChecks
from jdist.training.accumulation import check_accumulation_steps
from jdist.typing import ArrayLike, PyTree

if TYPE_CHECKING:
    import flax.linen as nn
    import keras

    from jdist.strategy.base import Strategy
    from jdist.training.train_state import TrainState

# What fit / evaluate / predict read: arrays or a pytree of arrays, an iterable of `(x, y[, sample_weight])`
# batches, or a distributed dataset of the strategy.
TrainerData: TypeAlias = "PyTree | Iterable[PyTree]"


class Trainer:
    """Trains a model with an optimizer, a per-example loss and metrics, under a strategy.

    Args:
      model: a `flax.linen.Module` (variables made on the first batch, or pass
        `params=`: the "params" collection or `model.init`'s whole output), a `jdist.TrainState`
        (e.g. `TrainState.from_nnx(module, tx)`; then leave `optimizer` out), a function
        `apply_fn(params, x)` with `params=`, or a Keras 3 model (JAX backend; optimizer, loss,
        metrics and weighted_metrics default to its `compile(...)`'s, and trained values are
        written back into it: see `jdist.interop.keras_model`).
      optimizer: an `optax.GradientTransformation`, a Keras optimizer name ("adam", "sgd",
        "rmsprop", "adamw", ...: `jdist.optimizers`, Keras's defaults and maths) or a Keras optimizer.
      loss: `loss(y_true, y_pred) -> (batch,)` per-example losses, a Keras loss name ("mse",
        "sparse_categorical_crossentropy", ...: as in Keras, cross-entropies named by a string take
        probabilities) or loss object (`jdist.losses.X` / `keras.losses.X`). Default: integer labels
        and logits, `jdist.losses.SparseCategoricalCrossentropy(from_logits=True)`.
      metrics: `jdist.metrics.Metric`s, Keras names ("accuracy", "mae", "auc", ...), Keras metric
        objects or per-example functions; as in Keras 3 they ignore sample and class weights.
      weighted_metrics: the same, each example weighted by its `sample_weight` / `class_weight`.
      strategy: defaults to the current strategy (`jdist.get_strategy()`).
      steps_per_execution: steps compiled into one XLA call (k batches moved in one transfer).
      accumulation_steps: each global batch's gradient computed as this many micro-batches
        in one compiled loop (one optimizer update per batch, 1/k of the activation memory);
        batches are padded (and masked) to a multiple of replicas x accumulation_steps.
      policy: a `jdist.mixed_precision.Policy` or its name ("mixed_bfloat16", "mixed_float16");
        default: the global policy. Under "mixed_float16" the optimizer is wrapped in a
        `LossScaleOptimizer` unless it already is one, as Keras's `compile` does.
      max_in_flight: executions dispatched ahead of the host before it waits (over several CPU
        devices also bounded process-wide, see `jdist.strategy.dispatch`).
      seed: parameter initialisation, shuffling and dropout keys.
    """

    def __init__(self, model: nn.Module | TrainState | Callable[..., PyTree] | keras.Model,
                 optimizer: optax.GradientTransformation | str | keras.optimizers.Optimizer | None = None,
                 loss: str | Callable[[jax.Array, jax.Array], jax.Array] | None = None,
                 metrics: Sequence[metrics_lib.MetricLike] | None = None, *,
                 weighted_metrics: Sequence[metrics_lib.MetricLike] | None = None,
                 params: PyTree = None, strategy: Strategy | None = None,
                 steps_per_execution: int = 1, accumulation_steps: int = 1,
                 policy: mixed_precision.Policy | str | None = None, max_in_flight: int = 4, seed: int = 0):
        if isinstance(steps_per_execution, bool) or not isinstance(steps_per_execution, int) or steps_per_execution < 1:
            raise ValueError(f"steps_per_execution must be a positive integer, got {steps_per_execution!r}.")
        self.strategy = strategy if strategy is not None else context.get_strategy()
        self.steps_per_execution = steps_per_execution
        self.accumulation_steps = check_accumulation_steps(accumulation_steps)
        self.policy = mixed_precision.as_policy(policy)
        self.seed = seed = initial_values.chief_int(seed)  # one shuffle order and key per job, the chief's
        self._max_in_flight = max_in_flight
        # A Keras model: its adapter, and what its compile() says where the Trainer is not told.
        self._keras = keras_model.KerasTraining(model, optimizer, loss, metrics, weighted_metrics) if (
            keras_model.is_keras_model(model)) else None
        if self._keras is not None:
            if params is not None:
                raise ValueError("A Keras model holds its own weights: set them with model.set_weights(...) "
                                 "and leave params= out.")
            optimizer, loss = self._keras.optimizer, self._keras.loss
            metrics, weighted_metrics = self._keras.metrics, self._keras.weighted_metrics
        self._loss_fn = losses_lib.get(losses_lib.SparseCategoricalCrossentropy(from_logits=True)
                                       if loss is None else loss)
        # (log name, metric, weighted)
        self._metrics = metrics_lib.compile_metrics(metrics or (), weighted_metrics or ())
        self._state: TrainerState | None = None
        adapted = adapt_model(model if self._keras is None else self._keras.adapter, optimizer, params)
        self._model = adapted.model
        if adapted.handle is not None:  # made in the scope of a strategy that keeps it elsewhere (parameter servers)
            if not self.strategy.keeps_remotely(adapted.handle):
                raise ValueError(f"{adapted.handle!r} lives outside this process, kept by the strategy whose scope "
                                 f"made it: train it under that strategy, not {self.strategy!r}.")
            self._state = self.strategy.place_state(adapted.handle)
        elif adapted.train_state is not None:
            given = adapted.train_state
            self._state = self._place(TrainerState(step=given.step, apply_fn=given.apply_fn, params=given.params,
                                                   tx=given.tx, opt_state=given.opt_state, model_state=None,
                                                   rng=jax.random.PRNGKey(seed)))
        else:
            self._optimizer = optimizers_lib.get(optimizer)
            if adapted.params is not None:
                self._state = self._create_state(adapted.params, model_state=adapted.model_state)
        self._checks = TrainerChecks(self._loss_fn, self._model, lambda: self._state)  # label checks, shapes
        self._steps = StepBuilder(self._model, self._loss_fn, self._metrics, self.strategy.data_sharding(),
                                  self.strategy.num_replicas_in_sync,
                                  policy=self.policy, accumulation_steps=self.accumulation_steps, seed=seed)
        self._compiled: dict[Any, Callable] = {}
        self._remote_steps: RemoteTrainSteps | None = None
        self._input = TrainerInput(self.strategy, steps_per_execution=steps_per_execution,
                                   accumulation_steps=self.accumulation_steps, seed=seed,
                                   check=self._checks.batches)
        self.history: History | None = None
        self.stop_training = False
        self.epoch = 0
        self.resume_step = 0
        self.step = int(self._state.step) if self._state is not None else 0

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> TrainerState:
        """The training state (params, optimizer state, step, model collections)."""
        if self._state is None:
            raise RuntimeError("The model has no parameters yet: call fit() (or pass params=) first.")
        return self._state

    @state.setter
    def state(self, new_state: TrainerState) -> None:
        """Replaces the state (e.g. restored weights), placed where the strategy keeps it."""
        placed = self._state = self._place(new_state)
        self.step = int(jax.device_get(placed.step))

    def state_on_host(self) -> TrainerState:
        """A host (numpy) copy of the training state; `trainer.state = copy` puts it back. With
        several processes every process must call it (a sharded leaf is gathered)."""
        return self.strategy.host_copy(self.state)

    def save_weights(self, path: str | os.PathLike) -> None:
        """Writes the weights (parameters and other model collections) to the checkpoint directory
        `path`; `load_weights` reads them back under any strategy or device count."""
        self._write(path, trainer_io.WEIGHTS)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the whole training state (weights, optimizer state, step, dropout key) to `path`."""
        self._write(path, trainer_io.STATE)

    def _write(self, path: str | os.PathLike, what: str) -> None:
        trainer_io.write(self, path, what)

    def load_weights(self, path: str | os.PathLike) -> None:
        """Loads the weights of the newest checkpoint in `path` (written by `save_weights`, `save`
        or `jdist.callbacks.ModelCheckpoint`), laid out for this Trainer's strategy."""
        trainer_io.load(self, path, weights_only=True)
        self._write_back()

    def load(self, path: str | os.PathLike) -> dict:
        """Loads everything the newest checkpoint in `path` holds (the whole state after `save`);
        returns its metadata (`step`, `epoch`, ...)."""
        meta = trainer_io.load(self, path)
        self._write_back()
        return meta

    @property
    def params(self) -> PyTree:
        return self.state.params

    @property
    def metrics_names(self) -> list[str]:
        return ["loss"] + [name for name, _, _ in self._metrics]

    def _place(self, state: Any) -> Any:
        """Where the strategy keeps the state, in buffers of its own (the train step donates them)."""
        return self.strategy.place_state(state, into=self._state)

    def _create_state(self, params: Any, model_state: Any) -> TrainerState:
        tx = self._optimizer
        if self.policy.needs_loss_scaling and mixed_precision.find_loss_scale(jax.eval_shape(tx.init, params)) is None:
            tx = self._optimizer = mixed_precision.LossScaleOptimizer(tx)  # as Keras's compile() does
        state = TrainerState(step=jnp.zeros((), jnp.int32), apply_fn=self._model.apply_fn, params=params, tx=tx,
                             opt_state=(), model_state=model_state, rng=jax.random.PRNGKey(self.seed))
        # The optimizer state made where it will live (a Keras optimizer's init builds Keras variables: not traced).
        placed = None if self._keras is not None else self.strategy.init_in_place(
            state.replace(opt_state=jax.eval_shape(tx.init, params)))
        return placed if placed is not None else self._place(state.replace(opt_state=tx.init(params)))

    def _build_state(self, data: Pass) -> None:
        """Makes the variables from the pass's first batch (peeked, left in the pass), once, before
        the loop, as Keras's fit does; the pass yielding nothing is an error."""
        first = data.peek()
        if first is None:
            raise ValueError("The input yielded no batches.")
        if self._state is None:
            self._checks.build_from(first, self._init_from)

    def _init_from(self, first: Batch) -> None:
        x1 = jax.tree.map(lambda a: a[:1], first.x)
        params, model_state = self._model.init(jax.random.key(self.seed), x1, first.mask[:1])
        self._state = self._create_state(params, model_state or None)

    # -------------------------------------------------------------- compiling
    def _executor(self, kind: str, k: int) -> Callable:
        key = (kind, k)
        if key in self._compiled:
            return self._compiled[key]
        steps = self._steps
        metric_sharding = self.strategy.data_sharding()
        fused = self.strategy.single_program_step
        # Inside the compiled step the parameters sit on the mesh: in their layout, or replicated
        # where the strategy stores them elsewhere and hands the step a copy.
        steps.param_shardings = self.strategy.parameter_shardings(self.state).params if fused else None
        if kind == "predict":
            fn = steps.predict_step if k == 1 else scan_predict(steps.predict_step)
            compiled = jax.jit(fn)
        elif kind == "train":
            compiled = self._train_executor(k, metric_sharding)
        else:
            fn = steps.eval_step if k == 1 else scan_steps(steps.eval_step)
            compiled = jax.jit(lambda s, m, *b: fn(s, m, *b)[1], out_shardings=metric_sharding)
        self._compiled[key] = compiled = host_checks.lazily_checked(compiled)  # checks raise after the step
        return compiled

    def _train_executor(self, k: int, metric_sharding: NamedSharding) -> Callable:
        """k train steps through `strategy.compile_step` (one program, or the strategy's own composition)."""
        train_step = self._steps.train_step

        def program(state, inputs, update_shardings):
            states, *args = inputs
            step = lambda st, ms, batch: train_step(st, ms, batch, update_shardings)  # noqa: E731
            return step(state, states, *args) if k == 1 else scan_steps(step)(state, states, *args)

        if k == 1:
            batch_sharding = metric_sharding  # metric states and the batch: both split over the data axis
        else:
            batch_sharding = (metric_sharding, self.strategy.data_sharding(stacked=True),
                              self.strategy.replicated_sharding())
        compiled = self.strategy.compile_step(program, self.state, donate=True, batch_sharding=batch_sharding,
                                              out_sharding=metric_sharding)
        return lambda state, states, *args: compiled(state, (states, *args))

    def _reader(self) -> Callable:
        if "read" not in self._compiled:
            self._compiled["read"] = jax.jit(self._steps.read_metrics)
        return self._compiled["read"]

    def _read_logs(self, states: Any) -> dict[str, float]:
        values = jax.device_get(self._reader()(states))
        return {name: float(values[name]) for name in self.metrics_names}

    # ------------------------------------------------------------------ the loop
    def _runner(self, kind: str) -> Runner:
        """What runs this pass's blocks, as the strategy runs steps: scheduled on remote workers, or
        compiled executions on this process's mesh."""
        per_call = self._input.steps_per_call(kind)
        if self._input.scheduled_remotely(kind):
            coordinator = self.strategy.cluster_coordinator()
            if self._remote_steps is None:
                self._remote_steps = RemoteTrainSteps(self._model, self._loss_fn, self._metrics, policy=self.policy,
                                                      seed=self.seed, accumulation_steps=self.accumulation_steps)
            # The coordinator knows how many workers run the steps (not every strategy has `num_workers`).
            return RemoteEpoch(coordinator, self._remote_steps, self._steps, self.metrics_names,
                               max_pending=self._max_in_flight * coordinator.num_workers)
        if kind == PREDICT:
            return PredictRunner(self._executor(kind, per_call), self.strategy, stacked=per_call > 1,
                                 max_in_flight=self._max_in_flight)
        return CompiledRunner(self._executor(kind, per_call), self._fresh_states(), self._read_logs, self.strategy,
                              train=kind == TRAIN, max_in_flight=self._max_in_flight)

    def _run_pass(self, kind: str, data: Pass, callbacks: CallbackList | None, hook: str,
                  first_index: int = 0) -> Runner:
        """Runs a pass's blocks (train, eval or predict); returns its runner, whose `logs()` are
        read next (the last executions may still run). `first_index`: batches of this pass already
        done (left out)."""
        self._build_state(data)
        runner = self._runner(kind)
        logging_to, begin_to, k = batch_hooks(callbacks, hook, self._input.steps_per_call(kind))
        index = first_index - 1
        for block in data.blocks(skip=first_index, first_step=self.step if kind == TRAIN else None):
            if begin_to is not None:
                begin_to.call(begin_hook(hook), index + 1, {})
            self._state, read = runner.run(self._state, block)
            if kind == TRAIN:
                self.step += len(block.batches)
            if logging_to is not None:  # Keras numbers an execution's end as its first step + k - 1
                logging_to.call(hook, index + k, LazyLogs(read))
            index += len(block.batches)
        runner.finish()
        if index < 0:
            raise ValueError("The input yielded no batches.")
        return runner

    def fit(self, x: TrainerData, y: PyTree = None, *, batch_size: int | None = None, epochs: int = 1,
            verbose: int = 1, callbacks: Sequence[Callback] | None = None, validation_data: TrainerData = None,
            shuffle: bool = True, steps_per_epoch: int | None = None, initial_epoch: int = 0,
            sample_weight: ArrayLike | None = None, class_weight: Mapping[int, float] | None = None,
            validation_split: float = 0.0, validation_freq: int | Sequence[int] = 1,
            validation_batch_size: int | None = None, validation_steps: int | None = None) -> History:
        """Trains for `epochs` epochs; returns a `History` (`history.history["loss"]`, one value per epoch).

        `x`, `y`: arrays (or pytrees of arrays) and `batch_size` (global, default 32), an iterable
        of `(x, y)` global batches (re-iterated each epoch; a one-shot iterator needs `steps_per_epoch`
        for several epochs), or a distributed dataset of this strategy
        (`strategy.experimental_distribute_dataset`, `distribute_datasets_from_function`).
        `sample_weight`: one weight per example of `x` (or `(x, y, sample_weight)` batches): the loss
        is Keras's, the weighted losses summed over the batch's real examples divided by their number.
        `class_weight`: `{class: weight}` turned into per-example weights from the labels (not with
        `sample_weight`). `validation_data`: `(x_val, y_val[, w_val])` arrays or an iterable of
        batches, evaluated after each epoch (every `validation_freq` epochs, or the 1-based epochs it
        lists) into `val_*` logs; `validation_split` instead holds out the last fraction of the
        arrays (before shuffling), as Keras does.
        """
        input_checks.check_call("fit", x, y, sample_weight, batch_size=batch_size, epochs=epochs,
                                steps_per_epoch=steps_per_epoch, initial_epoch=initial_epoch,
                                validation_split=validation_split, validation_batch_size=validation_batch_size,
                                validation_steps=validation_steps)
        x, y, sample_weight, validation_data = fit_data(
            x, y, sample_weight, class_weight, validation_data, validation_split)
        check_validation_freq(validation_freq)
        self.history = History()
        cbs = self._callbacks(callbacks, verbose, {"epochs": epochs, "verbose": verbose,
                                                  "do_validation": validation_data is not None}, self.history)
        self.stop_training = False
        self.epoch = initial_epoch
        self.resume_step = 0
        persistent: dict = {}
        logs: dict[str, float] = {}
        with self.strategy.scope():
            if self._state is None and is_arrays(x):
                # Make the variables before on_train_begin, so a callback can restore into them.
                self._build_state(self._input.pass_over(x, y, kind=TRAIN, batch_size=batch_size, steps=1,
                                                        sample_weight=sample_weight))
            cbs.call("on_train_begin", {})
            for epoch in range(self.epoch, epochs):
                self.epoch = epoch
                data = self._input.pass_over(x, y, kind=TRAIN, batch_size=batch_size, steps=steps_per_epoch,
                                             shuffle=shuffle, epoch=epoch, persistent=persistent,
                                             sample_weight=sample_weight, class_weight=class_weight)
                for cb in cbs.callbacks:
                    cb.params["steps"] = data.steps
                cbs.call("on_epoch_begin", epoch, {})
                # Steps of this epoch done before an interruption (set by BackupAndRestore) are skipped.
                skip, self.resume_step = self.resume_step, 0
                logs = self._run_pass(TRAIN, data, cbs, "on_train_batch_end", first_index=skip).logs()
                if validation_data is not None and validates_after(epoch, validation_freq):
                    val = self._evaluate(validation_data, validation_batch_size or batch_size, validation_steps,
                                         cbs)
                    logs.update({f"val_{k}": v for k, v in val.items()})
                cbs.call("on_epoch_end", epoch, logs)
                self.epoch = epoch + 1  # epochs done (a later fit with initial_epoch=trainer.epoch continues)
                if self.stop_training:
                    break
            cbs.call("on_train_end", logs)
        self._write_back()
        return self.history

    def _write_back(self) -> None:
        """A Keras model gets the trained values, so its predict / evaluate / save / get_weights see them."""
        if self._keras is not None and self._state is not None:
            self._keras.write_back(self.state_on_host())

    def _fresh_states(self) -> dict:
        return self._steps.init_metric_states()

    def _evaluate(self, data: Any, batch_size: int | None, steps: int | None, cbs: CallbackList | None) -> dict:
        weight = None
        if isinstance(data, tuple) and len(data) in (2, 3) and is_arrays(data[0]):
            x, y, weight = batching.split_item(data)
        else:  # an iterable of (x, y) batches or a distributed dataset: its own batch size
            x, y, batch_size = data, None, None
        data = self._input.pass_over(x, y, kind=EVAL, batch_size=batch_size, steps=steps, sample_weight=weight)
        if cbs is not None:  # fit's validation: the test hooks fire, as in Keras
            cbs.call("on_test_begin", {})
        logs = self._run_pass(EVAL, data, cbs, "on_test_batch_end").logs()
        if cbs is not None:
            cbs.call("on_test_end", dict(logs))
        return logs

    def evaluate(self, x: TrainerData, y: PyTree = None, *, batch_size: int | None = None, steps: int | None = None,
                 verbose: int = 1, callbacks: Sequence[Callback] | None = None, return_dict: bool = False,
                 sample_weight: ArrayLike | None = None) -> float | list[float] | dict[str, float]:
        """Loss and metrics over all examples of `x` (exact: padding excluded, replicas combined),
        each example weighted by `sample_weight` if given.

        Returns `[loss, *metrics]` (the loss alone without metrics), or a dict with `return_dict=True`.
        """
        input_checks.check_call("evaluate", x, y, sample_weight, batch_size=batch_size, steps=steps)
        cbs = self._callbacks(callbacks, verbose, {"verbose": verbose, "steps": None})
        with self.strategy.scope():
            data = self._input.pass_over(x, y, kind=EVAL, batch_size=batch_size, steps=steps,
                                         sample_weight=sample_weight)
            for cb in cbs.callbacks:
                cb.params["steps"] = data.steps
            cbs.call("on_test_begin", {})
            logs = self._run_pass(EVAL, data, cbs, "on_test_batch_end").logs()
            cbs.call("on_test_end", logs)
        if return_dict:
            return logs
        values = [logs[name] for name in self.metrics_names]
        return values[0] if len(values) == 1 else values

    def predict(self, x: TrainerData, *, batch_size: int | None = None, steps: int | None = None, verbose: int = 1,
                callbacks: Sequence[Callback] | None = None) -> PyTree:
        """Model outputs for every example of `x`, concatenated in example order, padding removed."""
        input_checks.check_call("predict", x, None, None, batch_size=batch_size, steps=steps)
        cbs = self._callbacks(callbacks, verbose, {"verbose": verbose, "steps": None})
        with self.strategy.scope():
            data = self._input.pass_over(x, kind=PREDICT, batch_size=batch_size, steps=steps)
            for cb in cbs.callbacks:
                cb.params["steps"] = data.steps
            cbs.call("on_predict_begin", {})
            outputs = self._run_pass(PREDICT, data, cbs, "on_predict_batch_end").logs()["outputs"]
            cbs.call("on_predict_end", {})
        return outputs

    def _callbacks(self, callbacks: Sequence[Callback] | None, verbose: int, params: dict,
                   history: History | None = None) -> CallbackList:
        # Keras's order: progress bar first, History last (it records what callbacks added to logs).
        items: list[Callback] = [ProgressBar(verbose=verbose)] if verbose else []
        items += list(callbacks or [])
        if history is not None:
            items.append(history)
        return CallbackList(items, self, dict(params))


# ------------------------------------------------------------------ helpers
