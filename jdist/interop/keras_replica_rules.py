"""TF's rules for Keras objects used inside `strategy.run`'s replica function (`jdist.interop.keras_run`).

In a replica context TF clips each replica's gradients and sums them before applying them, a metric counts only
the replica's real examples, and Keras 3 on TensorFlow scales a batch-reduced loss by 1 / replicas. Keras on JAX
knows no replicas, so while the replica function is traced these rules are put on the Keras objects it uses
(`patched`) and on Keras's loss reduction (`install_loss_scaling`).
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Sequence

import jax
import numpy as np

from jdist.strategy import context, thread_state


def patched(objects: Sequence[Any], keras: Any) -> Any:
    """`_patched`, entered once for the replica threads of one `run` alike (`thread_state.shared`)."""
    return thread_state.shared(("keras patches", *map(id, objects)), lambda: _patched(objects, keras))


@contextlib.contextmanager
def _patched(objects: Sequence[Any], keras: Any):
    """Inside the replica function: optimizers sum the clipped gradients over replicas; metrics honour the example
    mask."""
    patched = []
    try:
        for obj in objects:
            if isinstance(obj, keras.optimizers.Optimizer):
                inner = [o for o in _inner_optimizers(obj, keras) if "_backend_update_step" not in o.__dict__]
                for (owner, name), method in _summing_apply(obj, inner).items():
                    patched.append((owner, name, owner.__dict__.get(name)))
                    setattr(owner, name, method)
            elif isinstance(obj, keras.metrics.Metric):
                for metric in (obj, *_inner_metrics(obj, keras)):
                    patched.append((metric, "update_state", metric.__dict__.get("update_state")))
                    metric.update_state = _masked_update(metric.update_state)
        yield
    finally:
        for obj, name, before in reversed(patched):
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


def _inner_optimizers(optimizer: Any, keras: Any) -> list:
    """The optimizer and those it wraps (`LossScaleOptimizer.inner_optimizer`), whose update steps it runs."""
    found = [optimizer]
    while isinstance(inner := getattr(found[-1], "inner_optimizer", None), keras.optimizers.Optimizer):
        found.append(inner)
    return found


def _summing_apply(optimizer: Any, updaters: list) -> dict:
    """TF's `apply_gradients` and Keras 3's `apply` in a replica context: each replica's gradients are clipped
    (`clipnorm`, `clipvalue`, `global_clipnorm`) and then summed over the replicas, right before the update step,
    as TF's Keras 3 sums in its backend's `_backend_update_step` (TF 2.21 observed: SGD(1.0, clipvalue=0.05)
    moves a bias by 4 * 0.05 on 4 replicas; `optimizer.apply` in a custom `train_step` sums as well).

    Returns the methods to set, keyed by (object, name): `updaters`' `_backend_update_step` sums,
    `stateless_apply` (functional code that all-reduces itself) does not, and `skip_gradients_aggregation=True`
    (Keras 2's opt-out, also `experimental_aggregate_gradients=False`) applies each replica's own gradients.
    A `LossScaleOptimizer` (its `apply`: `tf_compat.loss_scale_apply`) skips a step where any replica's
    gradients are not finite (TF 2.21 takes the first replica's check).
    """
    summing = [True]

    def summed(grads: list) -> list:
        grads = list(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        total = replica_context().all_reduce("sum", [grads[i] for i in present])
        for i, g in zip(present, total):
            grads[i] = g
        return grads

    def as_summing(flag: bool, method: Callable, *args: Any, **kwargs: Any) -> Any:
        before, summing[0] = summing[0], flag
        try:
            return method(*args, **kwargs)
        finally:
            summing[0] = before

    apply_gradients, stateless_apply = optimizer.apply_gradients, optimizer.stateless_apply
    handed_on = "apply_gradients" in optimizer.__dict__  # `keras_deferred`'s: the sum goes to the servers

    def apply_gradients_summed(grads_and_vars, skip_gradients_aggregation=False,
                               experimental_aggregate_gradients=True, **kwargs):
        flag = summing[0] and not skip_gradients_aggregation and experimental_aggregate_gradients
        if handed_on and flag:
            pairs = list(grads_and_vars)
            grads_and_vars, flag = list(zip(summed([g for g, _ in pairs]), [v for _, v in pairs])), False
        return as_summing(flag, apply_gradients, grads_and_vars, **kwargs)

    def stateless_apply_as_given(*args, **kwargs):
        return as_summing(False, stateless_apply, *args, **kwargs)

    def update_step_of(update_step: Callable) -> Callable:
        def update_step_summed(grads, trainable_variables, learning_rate):
            return update_step(summed(grads) if summing[0] else grads, trainable_variables, learning_rate)
        return update_step_summed

    methods = {(optimizer, "apply_gradients"): apply_gradients_summed,
               (optimizer, "stateless_apply"): stateless_apply_as_given}
    methods.update({(o, "_backend_update_step"): update_step_of(o._backend_update_step) for o in updaters})

    def accumulating(backend_apply: Callable) -> Callable:
        def apply_summed_first(grads, trainable_variables):
            if not summing[0]:
                return backend_apply(grads, trainable_variables)
            return as_summing(False, backend_apply, summed(grads), trainable_variables)
        return apply_summed_first

    # TF 2.21 cannot run `gradient_accumulation_steps` in a replica (a `cond` around `merge_call`: RuntimeError);
    # here the replicas' sum is accumulated, and the update is one device's on the whole batches.
    methods.update({(o, "_backend_apply_gradients"): accumulating(o._backend_apply_gradients)
                    for o in updaters if getattr(o, "gradient_accumulation_steps", None)})
    if hasattr(optimizer, "check_finite"):
        check_finite = optimizer.check_finite

        def check_finite_everywhere(grads):
            finite = check_finite(grads)
            if not summing[0]:
                return finite
            not_finite = jax.numpy.logical_not(finite).astype("int32")
            return replica_context().all_reduce("sum", [not_finite])[0] == 0
        methods[(optimizer, "check_finite")] = check_finite_everywhere
    return methods


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
    _scale_additional_losses(scaled)
    loss_module.reduce_values = _masked_reduce(keras, loss_module.reduce_values, active_context, scaled)


def _scale_additional_losses(scaled: Callable[[Any], Any]) -> None:
    """`compute_loss` adds the model's own losses (`add_loss`, regularizers) scaled as its compiled loss, as TF's
    Keras 3 trainer does (`_aggregate_additional_loss`; TF 2.21 observed: a custom `train_step` with
    `compute_loss` on 4 replicas, a layer adding 0.587 on replica 0, whose compiled loss is 2.001, returns
    0.647)."""
    from keras.src.trainers.trainer import Trainer

    aggregate = Trainer._aggregate_additional_loss

    def aggregate_scaled(self: Any, loss: Any) -> Any:
        return scaled(aggregate(self, loss))

    Trainer._aggregate_additional_loss = aggregate_scaled  # pyright: ignore[reportAttributeAccessIssue]


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
