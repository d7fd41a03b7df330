"""The Trainer's compiled steps (global view): one program per execution of k steps.

Each step is `jdist.training.step_core`'s (as `jdist.make_train_step`'s): the loss is the
masked mean over the real examples of the whole padded global batch, with
gradient accumulation, mixed precision and weight-update sharding there. This
module gives it the model call (Keras's weighted per-example losses) and keeps
the metric states around it. Metric states carry a leading replica
axis sharded over the data axis: each replica adds its own slice of the batch
to its own state (no collective per step), and states are combined only when
read (TF's SyncOnRead). `steps_per_execution=k` runs k steps in one `lax.scan`
over a `(k, batch, ...)` block; fully masked steps (the tail of an epoch) are
skipped by `lax.cond` on a host-made replicated flag (a flag computed from the
sharded mask would cost a collective per step), so the weights equal those of k = 1.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence, cast

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding

from jdist import layout, mixed_precision
from jdist.metrics import Mean, Metric
from jdist.strategy.batch import Batch, per_replica
from jdist.strategy.values import PerReplica
from jdist.training import step_core

LossFn = Callable[[Any, Any], Any]


def per_example(loss_fn: LossFn, y_true: Any, y_pred: Any, batch: int) -> jax.Array:
    """The loss per example, shape (batch,); extra trailing axes are averaged (as Keras does)."""
    values = jnp.asarray(loss_fn(y_true, y_pred))
    if not jnp.issubdtype(values.dtype, jnp.floating) or jnp.finfo(values.dtype).bits < 32:
        values = values.astype(jnp.float32)  # a float64 model's losses stay float64
    if values.ndim == 0 or values.shape[0] != batch:
        raise ValueError(
            f"The loss must return one value per example, shape ({batch},); got shape {values.shape}. "
            "Return the per-example loss (no mean over the batch): the Trainer averages over the real "
            "examples of the global batch itself."
        )
    return values.reshape(batch, -1).mean(axis=1) if values.ndim > 1 else values


class StepBuilder:
    """Builds train / eval / predict step functions for one model, loss and metric set."""

    def __init__(self, model: Any, loss_fn: LossFn, metrics: Sequence[Metric | tuple[str, Metric, bool]],
                 data_sharding: NamedSharding, num_replicas: int, *, policy: Any = "float32",
                 accumulation_steps: int = 1, seed: int = 0):
        self.seed = seed
        self.param_shardings: Any = None  # set by the Trainer: the parameters' layout on the mesh
        self.policy = mixed_precision.Policy(policy)
        self.accumulation_steps = accumulation_steps
        self.model = model
        self.loss_fn = loss_fn
        # (log name, metric, weighted) entries, from `jdist.metrics.compile_metrics`; a bare Metric is unweighted.
        self.metrics = [m if isinstance(m, tuple) else (m.name, m, False) for m in metrics]
        self.loss_metric = Mean(name="loss")
        # The strategy's split of dim 0 over its data axis: the metric states' replica axis too.
        self.by_replica = data_sharding
        self.mesh = cast(Mesh, data_sharding.mesh)  # a strategy's sharding is on its concrete mesh
        self.data_axis = data_sharding.spec[0]
        self.n = num_replicas

    # ------------------------------------------------------------ metric state
    def init_metric_states(self) -> dict:
        """Fresh per-replica states, `(replicas, ...)` leaves sharded over the data axis.

        Made once (one compiled program) and handed to every pass: the steps take metric states
        as inputs without donating them, so the same arrays start each pass with no program,
        transfer or eager op per pass."""
        return self._initial_metric_states

    @functools.cached_property
    def _initial_metric_states(self) -> dict:
        return jax.jit(self._stacked_inits, out_shardings=self.by_replica)()

    def fresh_metric_states(self) -> dict:
        """Fresh per-replica states made inside a compiled step (`(replicas, ...)` leaves)."""
        return jax.tree.map(lambda a: jax.lax.with_sharding_constraint(a, self.by_replica), self._stacked_inits())

    def _stacked_inits(self) -> dict:
        states = {name: m.init() for name, m, _ in [("loss", self.loss_metric, False)] + self.metrics}
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (self.n,) + a.shape), states)

    def update_metrics(self, states: dict, y_true: Any, y_pred: Any, losses: jax.Array, mask: jax.Array,
                       weight: jax.Array | None = None) -> dict:
        """Each replica adds its slice of the batch to its own state. As in Keras 3, with per-example
        `weight`s the loss metric averages the weighted losses over the real examples (Keras's reported
        loss), weighted metrics weigh each example by its weight and the others ignore the weights."""
        if weight is not None:
            losses, weighted_mask = losses * weight, mask * weight
        else:
            weighted_mask = mask
        split = lambda tree: jax.tree.map(lambda a: per_replica(a, self.n, self.by_replica), tree)  # noqa: E731
        y_true, y_pred, losses, mask, weighted_mask = (
            split(y_true), split(y_pred), split(losses), split(mask), split(weighted_mask))
        new = dict(states)
        new["loss"] = jax.vmap(lambda s, v, w: self.loss_metric.update(s, v, sample_weight=w))(
            states["loss"], losses, mask)
        for name, metric, weighted in self.metrics:
            new[name] = jax.vmap(lambda s, t, p, w, m=metric: m.update(s, t, p, sample_weight=w))(
                states[name], y_true, y_pred, weighted_mask if weighted else mask)
        return new

    def read_metrics(self, states: dict) -> dict:
        """Combines the replicas' states (SUM unless a metric says otherwise) and computes each value."""
        out = {}
        for name, metric, _ in [("loss", self.loss_metric, False)] + self.metrics:
            stacked = jax.tree.map(lambda a: PerReplica(stacked=a), states[name])
            out[name] = metric.result(stacked)
        return out

    # ------------------------------------------------------------------ steps
    def _forward(self, params: Any, model_state: Any, x: Any, *, train: bool, mask: Any, rng: Any) -> tuple:
        """The model's outputs for parameters already in the policy's compute dtype, returned in float32."""
        if self.policy.name == "float32":
            return self.model.apply(params, model_state, x, train=train, mask=mask, rng=rng)
        y_pred, model_state = self.model.apply(params, model_state, self.policy.cast_to_compute(x), train=train,
                                               mask=mask, rng=rng)
        return mixed_precision.Policy("float32").cast_to_compute(y_pred), model_state

    def _loss_forward(self, params: Any, model_state: Any, inputs: Batch, mask: Any, rng: Any,
                      train: bool) -> tuple:
        """The step core's `Forward`: Keras's (weighted) per-example losses; the predictions and the
        unweighted losses go to the metrics."""
        y_pred, model_state = self._forward(params, model_state, inputs.x, train=train, mask=mask, rng=rng)
        losses = per_example(self.loss_fn, inputs.y, y_pred, mask.shape[0])
        weighted = losses if inputs.weight is None else losses * inputs.weight
        return weighted, (y_pred, losses), model_state

    def _fold(self, states: dict, weighted: Any, aux: tuple, inputs: Batch, mask: Any) -> dict:
        """The step core's `Fold`: each replica adds its slice of the batch to its metric states."""
        y_pred, losses = aux
        return self.update_metrics(states, inputs.y, y_pred, losses, inputs.mask, inputs.weight)

    @functools.cached_property
    def _core(self) -> step_core.StepCore:
        return step_core.build(
            self._loss_forward, self._fold, policy=self.policy, accumulation_steps=self.accumulation_steps,
            mesh=lambda: self.mesh, data_axis=lambda: self.data_axis,
            param_shardings=lambda params: self.param_shardings if self.param_shardings is not None
            else layout.replicated_shardings(self.mesh, params),
            loss_scale_remedy="give the Trainer an optimizer (it wraps it in jdist.mixed_precision."
                              "LossScaleOptimizer) or a TrainState whose tx is one")

    def train_step(self, state: Any, states: dict, batch: Batch, update_shardings: Any = None) -> tuple[Any, dict]:
        """One optimizer step on a padded global batch of `(x, y)` (`jdist.training.step_core`);
        `update_shardings` (from `strategy.compile_step`) says where each replica's share of the
        optimizer update runs, None for no constraint. The loss is Keras's: the (weighted)
        per-example losses summed over the real examples, divided by their number."""
        batch = _unpack(batch)
        # A parameter-server worker's state has no key of its own: derive one from the step.
        base_rng = getattr(state, "rng", None)
        base_rng = jax.random.PRNGKey(self.seed) if base_rng is None else base_rng
        rng = jax.random.fold_in(base_rng, state.step)
        model_state = getattr(state, "model_state", None)
        return self._core.train(state, batch, batch.mask, states, update_shardings, model_state=model_state,
                                rng=rng)

    def eval_step(self, state: Any, states: dict, batch: Batch) -> tuple[Any, dict]:
        batch = _unpack(batch)
        return state, self._core.evaluate(state, batch, batch.mask, states,
                                          model_state=getattr(state, "model_state", None))

    def predict_step(self, state: Any, batch: Batch) -> Any:
        batch = _unpack(batch)
        x, mask = batch.x, batch.mask
        params = state.params if self.policy.name == "float32" else self.policy.cast_to_compute(state.params)
        y_pred, _ = self._forward(params, getattr(state, "model_state", None), x, train=False, mask=mask, rng=None)
        return y_pred


def _unpack(batch: Batch) -> Batch:
    """`batch` with a float32 mask (a distributed dataset's mask is boolean)."""
    return batch.replace(mask=jnp.asarray(batch.mask, jnp.float32))


def scan_steps(step: Callable[[Any, dict, Batch], tuple[Any, dict]]) -> Callable:
    """k steps in one program: `lax.scan` over a `(k, batch, ...)` block, skipping empty steps."""

    def run(state, states, block, active):
        def body(carry, xs):
            batch, has_data = xs
            return jax.lax.cond(has_data, lambda c: step(c[0], c[1], batch), lambda c: c, carry), None

        (state, states), _ = jax.lax.scan(body, (state, states), (block, active))
        return state, states

    return run


def scan_predict(step: Callable[[Any, Batch], Any]) -> Callable:
    def run(state, block):
        return jax.lax.map(lambda batch: step(state, batch), block)

    return run
