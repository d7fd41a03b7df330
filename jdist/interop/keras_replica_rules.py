"""TF's rules for Keras objects used inside `strategy.run`'s replica function (`jdist.interop.keras_run`).

In a replica context TF sums gradients before applying them, a metric counts only the replica's real examples,
and Keras 3 on TensorFlow scales a batch-reduced loss by 1 / replicas. Keras on JAX knows no replicas, so while
the replica function is traced these rules are put on the Keras objects it uses (`patched`) and on Keras's loss
reduction (`install_loss_scaling`).
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Sequence

import jax
import numpy as np

from jdist.strategy import context


@contextlib.contextmanager
def patched(objects: Sequence[Any], keras: Any):
    """Inside the replica function: apply_gradients sums over replicas; metrics honour the example mask."""
    patched = []
    try:
        for obj in objects:
            if isinstance(obj, keras.optimizers.Optimizer):
                patched.append((obj, "apply_gradients", obj.__dict__.get("apply_gradients")))
                patched.append((obj, "apply", obj.__dict__.get("apply")))
                patched.append((obj, "stateless_apply", obj.__dict__.get("stateless_apply")))
                obj.apply_gradients, obj.apply, obj.stateless_apply = _summing_apply(
                    obj.apply_gradients, obj.apply, obj.stateless_apply)
            elif isinstance(obj, keras.metrics.Metric):
                for metric in (obj, *_inner_metrics(obj, keras)):
                    patched.append((metric, "update_state", metric.__dict__.get("update_state")))
                    metric.update_state = _masked_update(metric.update_state)
        yield
    finally:
        for obj, name, before in patched:
            if before is None:
                delattr(obj, name)  # back to the class's method
            else:
                setattr(obj, name, before)  # back to the instance's own (keras_deferred's)


def _inner_metrics(metric: Any, keras: Any) -> list:
    """The metrics a metric updates itself (`compile(metrics=["mae"])`'s CompileMetrics updates its inner
    metrics without the sample weight it is given, so each gets the example mask on its own)."""
    inner = []
    for value in vars(metric).values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, keras.metrics.Metric) and item is not metric:
                inner.append(item)
    return inner


def _summing_apply(apply_gradients: Callable, apply: Callable, stateless_apply: Callable
                   ) -> tuple[Callable, Callable, Callable]:
    """TF's `apply_gradients` and Keras 3's `apply` in a replica context: the gradients are summed over the
    replicas first (TF 2.21 with Keras 3 sums in both: `optimizer.apply(grads, vars)` in a custom `train_step`
    under MirroredStrategy on 4 logical CPUs gave the same weights as `apply_gradients`, observed).

    `stateless_apply` (functional code that all-reduces itself) does not sum, although Keras's calls `apply`.
    `skip_gradients_aggregation=True` (Keras 2's opt-out, also `experimental_aggregate_gradients=False`) applies
    each replica's own gradients. `apply_gradients` sums once: Keras's calls `apply`, which then does not sum
    again.
    """
    summing = [True]

    def summed(grads: list) -> list:
        present = [i for i, g in enumerate(grads) if g is not None]
        total = replica_context().all_reduce("sum", [grads[i] for i in present])
        for i, g in zip(present, total):
            grads[i] = g
        return grads

    def apply_gradients_summed(grads_and_vars, skip_gradients_aggregation=False,
                               experimental_aggregate_gradients=True, **kwargs):
        grads_and_vars = list(grads_and_vars)
        if not skip_gradients_aggregation and experimental_aggregate_gradients:
            grads = summed([g for g, _ in grads_and_vars])
            grads_and_vars = [(g, v) for g, (_, v) in zip(grads, grads_and_vars)]
        summing[0] = False
        try:
            return apply_gradients(grads_and_vars, **kwargs)
        finally:
            summing[0] = True

    def apply_summed(grads, trainable_variables=None, **kwargs):
        if summing[0]:
            grads = summed(list(grads))
        return apply(grads, trainable_variables, **kwargs)

    def stateless_apply_as_given(*args, **kwargs):
        summing[0] = False
        try:
            return stateless_apply(*args, **kwargs)
        finally:
            summing[0] = True

    return apply_gradients_summed, apply_summed, stateless_apply_as_given


def _masked_update(update_state: Callable) -> Callable:
    """`update_state` with the replica's example mask folded into `sample_weight` (padding rows weigh 0)."""
    signature = inspect.signature(update_state)
    if "sample_weight" not in signature.parameters:
        return update_state

    def update_masked(*args, **kwargs):
        ctx = context.get_replica_context()
        mask = None if ctx is None else ctx.example_mask
        bound = signature.bind(*args, **kwargs)
        first = next(iter(bound.arguments.values()), None)
        shape = getattr(first, "shape", ())
        if mask is None or not shape or shape[0] != mask.shape[0]:
            return update_state(*args, **kwargs)  # not one row per example of the replica's batch
        weight = bound.arguments.get("sample_weight")
        mask = mask.astype("float32")
        if weight is not None:
            weight = jax.numpy.asarray(weight)
            mask = weight * mask.reshape(mask.shape + (1,) * (weight.ndim - 1)) if weight.ndim else weight * mask
        bound.arguments["sample_weight"] = mask
        return update_state(*bound.args, **bound.kwargs)

    return update_masked


def replica_context() -> Any:
    """The replica context these patched calls run in (they are installed only inside `run`'s replica function)."""
    ctx = context.get_replica_context()
    assert ctx is not None, "called inside strategy.run's replica function, which has a replica context"
    return ctx


def install_loss_scaling(keras: Any) -> None:
    """TF's Keras 3 scales a loss reduced over a batch by 1 / replicas in a strategy with several replicas, and
    its loss trackers by replicas again (`keras.src.losses.loss.scale_loss_for_distribution`: effective with
    TensorFlow only), so that the replicas' summed gradients average them. Inside `run`'s replica function
    jdist does the same (TF 2.21 observed: a custom `train_step` with `compute_loss` under MirroredStrategy on 4
    logical CPUs reports a quarter of the loss that one device reports, and trains as the averaged gradients
    say; and a loss object called in a plain `strategy.run` replica function reports a quarter of its
    per-replica mean). Keras's own JAX `fit` computes the global batch's loss in one program, outside any
    replica context, and is left alone."""
    from keras.src.losses import loss as loss_module

    if getattr(loss_module.scale_loss_for_distribution, "_jdist", False):
        return
    scale, unscale = loss_module.scale_loss_for_distribution, loss_module.unscale_loss_for_distribution

    def active_context() -> Any:
        return context.get_replica_context() if context.in_replica_context() else None

    def replicas() -> int:
        ctx = active_context()
        return 1 if ctx is None else ctx.num_replicas_in_sync

    def scaled(value: Any) -> Any:
        n = replicas()
        return scale(value) if n == 1 else value * keras.ops.cast(1.0 / n, value.dtype)

    def unscaled(value: Any) -> Any:
        n = replicas()
        return unscale(value) if n == 1 else value * keras.ops.cast(n, value.dtype)

    scaled._jdist = unscaled._jdist = True  # pyright: ignore[reportFunctionMemberAccess]
    loss_module.scale_loss_for_distribution = scaled
    loss_module.unscale_loss_for_distribution = unscaled
    loss_module.reduce_values = _masked_reduce(keras, loss_module.reduce_values, active_context, scaled)


def _masked_reduce(keras: Any, reduce_values: Callable, active_context: Callable[[], Any],
                   scaled: Callable[[Any], Any]) -> Callable:
    """Keras's loss reduction over a replica's rows of a short batch: TF gives the replica only its real rows,
    so a mean is over those; here the replica also holds padding rows, which the example mask drops from the
    sum and the count (an empty replica's mean is 0, as Keras's `divide_no_nan` gives TF). Only inside `run`'s
    replica function, for values with one row per example of the replica's batch."""
    ops = keras.ops

    def reduce(values: Any, sample_weight: Any = None, reduction: Any = "sum_over_batch_size") -> Any:
        ctx = active_context()
        mask = None if ctx is None else ctx.example_mask
        shape = tuple(getattr(values, "shape", ()))
        if (mask is None or reduction in (None, "none") or not shape or shape[0] != mask.shape[0]
                or reduction not in ("sum", "sum_over_batch_size", "mean", "mean_with_sample_weight")):
            return reduce_values(values, sample_weight, reduction)
        rows = ops.reshape(ops.cast(mask, values.dtype), (shape[0],) + (1,) * (len(shape) - 1))
        loss = ops.sum(values * rows)
        if reduction == "sum":
            return loss
        if reduction == "mean_with_sample_weight" and sample_weight is not None:
            divisor = ops.sum(ops.cast(sample_weight, loss.dtype) * rows)
        else:
            divisor = ops.sum(rows) * float(np.prod(shape[1:], dtype=np.int64))
        return scaled(ops.divide_no_nan(loss, ops.cast(divisor, loss.dtype)))

    reduce._jdist = True  # pyright: ignore[reportFunctionMemberAccess]
    return reduce
