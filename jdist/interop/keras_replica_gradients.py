"""Keras's `fit` and `train_on_batch` under a strategy take each replica's gradients where their sum is not the
whole batch's gradient: the optimizer clips, the model computes in float16, or the loss is the user's own.

TF's Keras 3 step runs the model and the compiled loss once per replica, on the replica's rows (TF's chunks of
ceil(rows / replicas); every replica the whole batch in `train_on_batch`), and its optimizer, in that replica
context, unscales and clips (`clipnorm`, `clipvalue`, `global_clipnorm`) each replica's own gradients and sums
them right before the update step. jdist's Keras step is one program over the whole batch. Three cases differ,
all observed with TF 2.21 and Keras 3.15 on 2 and 4 logical CPUs:

* clipping does not commute with the sum: `SGD(0.1, clipvalue=0.5)` moves a weight by up to 0.1 * 4 * 0.5 per
  step on 4 replicas, in `fit` and in `train_on_batch` (replicas * clip(gradient / replicas));
* under `mixed_float16` a layer's weight gradient is a float16 sum over the rows, over each replica's rows on TF,
  summed over the replicas in float32: 8 rows whose float16 sum overflows train on TF (2 or 4 replicas) where
  the whole batch's sum made `LossScaleOptimizer` skip the step and halve its scale;
* Keras scales a loss by 1 / replicas only where it reduces it: a loss function that returns a scalar
  (`lambda y, p: tf.reduce_mean(...)`) is each replica's own unscaled, its gradients summed, its logged loss
  replicas times the rows-weighted mean of theirs (with a `sample_weight` Keras reduces it, and scales it).

Here, in such a step, each replica's loss and gradients are computed on its rows (the model and loss called on
each chunk, `jax.vmap` over the replicas where the chunks are equal) in a jdist replica context, where Keras's
loss scaling is TF's (`keras_replica_rules.install_loss_scaling`), and the optimizer is applied to them under
`jax.vmap` over the replicas with `keras_replica_rules`' rule: Keras's own clipping per replica, then the sum
before the update step (the rule `strategy.run`'s custom loops use). The logged loss is TF's loss tracker's:
the replicas' unscaled losses weighed by their rows. The model runs once per replica's rows in such a step (its
outputs feed the metrics, its state is the first replica's): Keras's own whole-batch pass is not run as well.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, NamedTuple

from jdist.input.split import chunk_sizes, chunk_starts
from jdist.interop import keras_replica_means, keras_replica_rules


def install(is_strategy_distribution: Callable[[Any], bool]) -> None:
    """Wraps Keras's JAX trainer's `train_step` once (a no-op outside a strategy's distribution and where the
    whole batch's gradient is the replicas' sum)."""
    import keras
    from keras.src.backend.jax.trainer import JAXTrainer

    original = JAXTrainer.train_step
    if getattr(original, "_jdist_replica_gradients", False):
        return
    keras_replica_rules.install_loss_scaling(keras)

    @functools.wraps(original)
    def train_step(self: Any, state: Any, data: Any) -> Any:
        strategy = _strategy(is_strategy_distribution)
        if strategy is None or not (clips(self.optimizer) or computes_below_variables(self)
                                    or own_loss_is_scalar(self, state, data)):
            return original(self, state, data)
        return per_replica_train_step(self, strategy, state, data)

    train_step._jdist_replica_gradients = True  # pyright: ignore[reportAttributeAccessIssue]
    JAXTrainer.train_step = train_step


def clips(optimizer: Any) -> bool:
    """Whether the optimizer (or one it wraps) clips its gradients."""
    while optimizer is not None:
        if any((getattr(optimizer, name, None) or 0) > 0 for name in ("clipnorm", "clipvalue", "global_clipnorm")):
            return True
        optimizer = getattr(optimizer, "inner_optimizer", None)
    return False


def computes_below_variables(model: Any) -> bool:
    """Whether a layer with weights computes in another dtype than theirs (`mixed_float16`, `mixed_bfloat16`)."""
    for layer in model._flatten_layers(include_self=True):
        policy = getattr(layer, "dtype_policy", None)
        if policy is not None and getattr(layer, "weights", None) and policy.compute_dtype != policy.variable_dtype:
            return True
    return False


def own_loss_is_scalar(model: Any, state: Any, data: Any) -> bool:
    """Whether a compiled loss is the user's own function or `Loss` class and returns a scalar where Keras's own
    reduce per row (a loss per row is reduced, and scaled, by Keras: the whole batch's step is then TF's). The
    loss's output shape is found abstractly (`jax.eval_shape`, no computation); where it cannot be (several
    outputs, a loss that fails on abstract values), the step takes each replica's gradients, which is right for
    either kind."""
    import jax
    from keras.src import tree
    from keras.src.trainers.data_adapters import data_adapter_utils

    def users(loss: Any) -> Any:
        """The callable that computes the user's loss before Keras reduces it, or None for Keras's own."""
        if loss is None or isinstance(loss, str):
            return None
        target = getattr(loss, "fn", None) or loss  # a LossFunctionWrapper: the function it wraps
        if str(getattr(target, "__module__", None) or "").startswith("keras."):
            return None
        return target if target is not loss else getattr(loss, "call", loss)

    own = [fn for fn in map(users, tree.flatten(getattr(model, "loss", None))) if fn is not None]
    if not own:
        return False
    if len(own) != 1 or len(tree.flatten(getattr(model, "loss", None))) != 1:
        return True
    trainable, non_trainable = state[0], state[1]
    x, y, _ = data_adapter_utils.unpack_x_y_sample_weight(data)
    try:
        predicted = jax.eval_shape(lambda t, n: model.stateless_call(t, n, x, training=True)[0],
                                   trainable, non_trainable)
        out = jax.eval_shape(own[0], y, predicted)
    except Exception:  # noqa: BLE001 - unknown shape: the per-replica step is right either way
        return True
    return not (hasattr(out, "shape") and len(out.shape) >= 1)


def _strategy(is_strategy_distribution: Callable[[Any], bool]) -> Any:
    """The strategy of the distribution the step runs under, where TF's step has several replicas, else None."""
    import jax
    from keras.src.distribution import distribution_lib

    current = distribution_lib.distribution()
    if not is_strategy_distribution(current) or jax.process_count() != 1:
        return None
    strategy = getattr(current, "strategy", None)
    if strategy is None or strategy.num_replicas_in_sync < 2 or not isinstance(strategy.data_axis, str):
        return None
    return strategy


@contextlib.contextmanager
def in_replica(strategy: Any, axis: str | None) -> Iterator[None]:
    """A jdist replica context of `strategy` on the mapped axis `axis` (None: one replica traced alone), as TF's
    replica function runs in."""
    from jdist.strategy import context
    from jdist.strategy.replica_context import ReplicaContext

    with context.push(strategy, ReplicaContext(strategy, axis)):
        yield


def per_replica_train_step(model: Any, strategy: Any, state: Any, data: Any) -> tuple[Any, Any]:
    """Keras's JAX `train_step` with each replica's loss and gradients (one forward pass per replica's rows, whose
    outputs the metrics get), the optimizer applied per replica, and TF's logged loss."""
    from keras.src.trainers.data_adapters import data_adapter_utils

    trainable, non_trainable, optimizer_variables, metrics_variables = state
    x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
    step = replica_step(model, strategy, trainable, non_trainable, metrics_variables, optimizer_variables,
                        x, y, sample_weight)
    trainable, optimizer_variables = apply_per_replica(model.optimizer, strategy, optimizer_variables, step.grads,
                                                       trainable)
    logs, metrics_variables = model._update_metrics_variables(step.metrics_variables, step.logged, x, y,
                                                              step.y_pred, sample_weight)
    return logs, (trainable, step.non_trainable, optimizer_variables, metrics_variables)


class ReplicaStep(NamedTuple):
    """One step's replicas' results: `grads`, each variable's gradients stacked on a leading replica axis;
    `logged`, the loss TF logs; `y_pred`, the outputs of the batch's rows in order (the first replica's in
    `train_on_batch`, where each has the whole batch); `non_trainable`, the first replica's updated state (TF's
    mirrored variables without aggregation keep it: Keras's moving statistics); `metrics_variables`, with every
    replica's updates (Keras's per-output loss trackers) added in, as TF's summed metric variables."""

    grads: list
    logged: Any
    y_pred: Any
    non_trainable: Any
    metrics_variables: Any


def replica_step(model: Any, strategy: Any, trainable: Any, non_trainable: Any, metrics_variables: Any,
                 optimizer_variables: Any, x: Any, y: Any, sample_weight: Any) -> ReplicaStep:
    """Each replica's loss, gradients and outputs, as Keras computes them in TF's replica context: of its chunk of
    rows in `fit`'s step, of the whole batch in `train_on_batch`'s. The logged loss is the replicas' unscaled
    losses (times replicas) weighed by their rows."""
    import jax
    import jax.numpy as jnp
    from keras.src import tree

    replicas, axis = strategy.num_replicas_in_sync, strategy.data_axis

    def step_of(rows_x: Any, rows_y: Any, rows_weight: Any, metrics: Any, vmapped: bool = True) -> tuple:
        def loss_of(values: Any) -> Any:
            loss, aux = model.compute_loss_and_updates(values, non_trainable, metrics, rows_x, rows_y,
                                                       rows_weight, training=True,
                                                       optimizer_variables=optimizer_variables)
            return loss, aux
        with keras_replica_means.one_replica(), in_replica(strategy, axis if vmapped else None):
            grads, (unscaled, y_pred, state, metrics) = jax.grad(loss_of, has_aux=True)(list(trainable))
        return list(grads), unscaled * replicas, y_pred, state, metrics  # `unscale_loss_for_distribution` on TF

    leaves = [leaf for leaf in tree.flatten(x) if leaf is not None and getattr(leaf, "ndim", 0)]
    if not keras_replica_means.split_over_replicas() or not leaves:  # every replica the whole batch
        whole, logged, y_pred, state, metrics = step_of(x, y, sample_weight, metrics_variables, vmapped=False)
        return ReplicaStep([jnp.broadcast_to(g, (replicas,) + g.shape) for g in whole], logged, y_pred, state,
                           metrics)
    rows = int(leaves[0].shape[0])
    sizes = chunk_sizes(rows, replicas)

    if len(set(sizes)) == 1:  # one traced call for all replicas
        def chunked(value: Any) -> Any:
            return tree.map_structure(
                lambda v: None if v is None else jnp.reshape(v, (replicas, sizes[0]) + tuple(v.shape[1:])), value)

        def merged(value: Any) -> Any:
            return tree.map_structure(lambda v: jnp.reshape(v, (rows,) + tuple(v.shape[2:])), value)

        stacked, losses, y_pred, state, metrics = jax.vmap(step_of, in_axes=(0, 0, 0, None), axis_name=axis)(
            chunked(x), chunked(y), chunked(sample_weight), metrics_variables)
        added = jax.tree.map(lambda before, after: before + jnp.sum(after - before, axis=0).astype(before.dtype),
                             metrics_variables, metrics)
        return ReplicaStep(list(stacked), jnp.mean(losses), merged(y_pred), jax.tree.map(lambda v: v[0], state),
                           added)

    def rows_of(value: Any, start: int, size: int) -> Any:
        return tree.map_structure(lambda v: None if v is None else v[start:start + size], value)

    each, outputs, first, logged, metrics = [], [], None, 0.0, metrics_variables
    for start, size in zip(chunk_starts(rows, replicas), sizes):
        if size == 0:  # an empty replica's gradients are 0, and its loss weighs nothing
            each.append([jnp.zeros_like(v) for v in trainable])
            continue
        grads, loss, y_pred, state, metrics = step_of(rows_of(x, start, size), rows_of(y, start, size),
                                                      rows_of(sample_weight, start, size), metrics, vmapped=False)
        first = state if first is None else first
        each.append(grads)
        outputs.append(y_pred)
        logged = logged + loss * (size / rows)
    y_pred = tree.map_structure(lambda *parts: jnp.concatenate(parts, axis=0), *outputs)
    return ReplicaStep([jnp.stack(per_variable) for per_variable in zip(*each)], logged, y_pred, first, metrics)


def apply_per_replica(optimizer: Any, strategy: Any, optimizer_variables: Any, grads: list,
                      trainable_variables: Any) -> Any:
    """`optimizer.stateless_apply` of the replicas' stacked gradients as TF applies them in a replica context:
    each replica's clipped, then summed (`keras_replica_rules.patched`), under `jax.vmap` over the replicas."""
    import jax
    import keras

    axis = strategy.data_axis
    # The class's method: `patched`'s own `stateless_apply` leaves the sum to functional code, which here is
    # Keras's `apply` inside it, as in a replica function's `optimizer.apply`.
    stateless_apply = type(optimizer).stateless_apply

    def replica(own_grads: list) -> Any:
        with in_replica(strategy, axis), keras_replica_rules.patched([optimizer], keras):
            return stateless_apply(optimizer, optimizer_variables, own_grads, trainable_variables)

    out = jax.vmap(replica, axis_name=axis)(grads)
    return jax.tree.map(lambda value: value[0], out)
