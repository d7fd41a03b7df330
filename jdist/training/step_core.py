"""The step core: the one global-view train and eval step every way of training builds on.

`jdist.make_train_step`, `jdist.make_eval_step`, the Trainer's steps and the
parameter-server workers' steps differ only in how a model is called and what
is kept besides the weights (loss sums, metric states). Everything else lives
here, once:

- the masked-loss rule (`masked_sum`): padding rows never count;
- the real-example count: the loss is the masked sum over the global batch
  divided by the number of real examples, so XLA's gradient all-reduce gives
  exactly the single-device gradient of the mean;
- gradient accumulation: the batch as k micro-batches in one `lax.scan`
  (`jdist.training.accumulation.scan_accumulate`);
- mixed precision: parameters cast to the policy's compute dtype inside the
  differentiated function, and the loss scaled by the loss scale of a
  `LossScaleOptimizer`;
- weight-update sharding: where each replica's share of the optimizer update
  runs (`update_shardings`, from `Strategy.compile_step`).

As optax documents a `GradientTransformation` as a pair of pure functions
behind `Protocol`s, a step here is pure functions behind `Protocol`s: the
caller gives a `Forward` (how to compute per-example losses) and a `Fold` (how
to keep what it reports), and `build` returns a `StepCore` whose `train` and
`evaluate` are pure functions to compile (inside `Strategy.compile_step`).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol

import jax
import jax.numpy as jnp

from jdist import mixed_precision
from jdist.training import gather, replica_grads
from jdist.training.accumulation import check_accumulation_steps, scan_accumulate, split_on_mesh


def masked_sum(values: Any, mask: Any) -> Any:
    """The masked-loss rule: the sum of per-example `values` over the real examples (`mask > 0`),
    each weighed by its mask. Padding rows count nothing, even when their values are not finite."""
    return jnp.sum(jnp.where(mask > 0, values * mask, 0))


class Forward(Protocol):
    """`(params, model_state, inputs, mask, rng, train) -> (losses, aux, model_state)`.

    `params` are already in the policy's compute dtype; `inputs` is one
    (micro-)batch as the caller packed it and `mask` its real-example mask
    (float, or None when every row is real). `losses` is the per-example loss
    the step minimises (already weighed by sample weights), one value per row;
    `aux` is whatever the caller's `Fold` needs (predictions, metric inputs),
    each leaf with one row per example; `model_state` the model's updated
    non-parameter collections (or its argument unchanged).
    """

    def __call__(self, params: Any, model_state: Any, inputs: Any, mask: Any, rng: Any,
                 train: bool) -> tuple[Any, Any, Any]:
        ...


class Fold(Protocol):
    """`(carry, losses, aux, inputs, mask) -> carry`: adds one (micro-)batch's results to what the
    caller keeps (masked loss sums, metric states). `mask` has the dtype of `losses`."""

    def __call__(self, carry: Any, losses: Any, aux: Any, inputs: Any, mask: Any, /) -> Any:
        ...


class TrainFn(Protocol):
    """`(state, inputs, mask, carry, update_shardings, *, model_state, rng) -> (state, carry)`:
    one optimizer step on a global batch. `update_shardings` (a state-shaped tree of shardings,
    or None) says where each replica's share of the update runs; `model_state` (None: none) is
    threaded through the forward passes and stored with `apply_gradients(model_state=...)`."""

    def __call__(self, state: Any, inputs: Any, mask: Any, carry: Any, update_shardings: Any, *,
                 model_state: Any = None, rng: Any = None) -> tuple[Any, Any]:
        ...


class EvalFn(Protocol):
    """`(state, inputs, mask, carry, *, model_state) -> carry`: one forward pass, folded."""

    def __call__(self, state: Any, inputs: Any, mask: Any, carry: Any, *, model_state: Any = None) -> Any:
        ...


class StepCore(NamedTuple):
    """The pure functions of one step (see the module docs)."""

    train: TrainFn
    evaluate: EvalFn


def _as_mask(mask: Any, losses: Any) -> Any:
    """The real-example mask in the losses' dtype (all ones when every row is real)."""
    if mask is None:
        return jnp.ones(losses.shape[:1], losses.dtype)
    return jnp.asarray(mask, losses.dtype)


def _rows(inputs: Any, mask: Any) -> Any:
    """The number of rows of a batch, padding included (a float32 constant)."""
    leaf = mask if mask is not None else jax.tree.leaves(inputs)[0]
    return jnp.float32(jnp.shape(leaf)[0])


def real_count(inputs: Any, mask: Any) -> Any:
    """The number of real examples of a batch (float32)."""
    if mask is not None:
        return jnp.sum(jnp.asarray(mask, jnp.float32))
    return _rows(inputs, mask)


def _constrain(tree: Any, shardings: Any) -> Any:
    return jax.tree.map(jax.lax.with_sharding_constraint, tree, shardings)


def build(
    forward: Forward,
    fold: Fold,
    *,
    policy: mixed_precision.Policy,
    accumulation_steps: int = 1,
    mesh: Callable[[], Any],
    data_axis: Callable[[], str],
    param_shardings: Callable[[Any], Any],
    loss_scale_remedy: str,
) -> StepCore:
    """The `StepCore` of `forward` and `fold`.

    `mesh()`, `data_axis()` and `param_shardings(params)` are asked while the
    step is traced (the strategy compiling it may be known only then).
    `loss_scale_remedy` completes the error for float16 without loss scaling.
    """
    k = check_accumulation_steps(accumulation_steps)

    def to_compute(params):
        return params if policy.name == "float32" else policy.cast_to_compute(params)

    def objective(scale, divisor):
        """`(params, inputs, mask, model_state, rng) -> (masked loss sum * scale / divisor, outputs)`."""

        def loss(params, inputs, mask, model_state, rng):
            losses, aux, model_state = forward(to_compute(params), model_state, inputs, mask, rng, True)
            mask = _as_mask(mask, losses)
            return masked_sum(losses, mask) * scale / jnp.maximum(divisor, 1.0), (losses, aux, mask, model_state)

        return loss

    def train(state, inputs, mask, carry, update_shardings, *, model_state=None, rng=None):
        scale = mixed_precision.loss_scale_of(policy, getattr(state, "opt_state", None), remedy=loss_scale_remedy)
        count = real_count(inputs, mask)
        factor = None
        if k == 1:
            # Differentiates the masked sum over the batch's row count (a constant) and rescales by
            # rows / count afterwards: the count's all-reduce then joins the gradients' one instead
            # of being a separate collective every step waits on before its backward pass (5% of a
            # Transformer step on 8 CPU devices, scripts/benchmark.py). The backward pass sees the
            # same magnitudes as a full batch's, so float16 loss scaling behaves as before.
            rows = _rows(inputs, mask)
            if policy.name == "float32" and replica_grads.applies(
                    lambda p, i, m, r: forward(p, None, i, m, r, True)[:2], state.params, inputs, mask,
                    model_state, rng, mesh=mesh(), axis=data_axis(), param_shardings=param_shardings(state.params),
                    update_shardings=update_shardings):
                # Across CPU processes: each replica's gradient, summed in one packed all-reduce (the same
                # gradient, proven from the forward's jaxpr; see jdist/training/replica_grads.py). Float32
                # only: in float16 the sum's precision decides whether a scaled gradient overflows.
                grads, (losses, aux, full_mask) = replica_grads.per_replica_grad(
                    objective, scale, rows, state.params, inputs, mask, rng, mesh=mesh(), axis=data_axis())
                new_model_state = model_state
            else:
                grads, (losses, aux, full_mask, new_model_state) = jax.grad(objective(scale, rows), has_aux=True)(
                    state.params, inputs, mask, model_state, rng)
            carry = fold(carry, losses, aux, inputs, full_mask)
            factor = rows / jnp.maximum(count, 1.0)
        else:
            grad_fn = jax.grad(objective(scale, count), has_aux=True)

            def micro_grads(params, mb, piece, model_state):
                key = jax.random.fold_in(rng, piece) if rng is not None else None
                grads, (losses, aux, full_mask, model_state) = grad_fn(params, mb[0], mb[1], model_state, key)
                return grads, (losses, aux, full_mask), model_state

            def fold_micro(c, out, mb):
                losses, aux, full_mask = out
                return fold(c, losses, aux, mb[0], full_mask)

            the_mesh, axis = mesh(), data_axis()
            micro = split_on_mesh((inputs, mask), k, the_mesh, axis)
            grads, carry, new_model_state = scan_accumulate(
                micro_grads, state.params, micro, fold=fold_micro, carry=carry, mesh=the_mesh, data_axis=axis,
                param_shardings=param_shardings(state.params), model_state=model_state)
            grads = jax.tree.map(lambda g, p: g.astype(p.dtype), grads, state.params)
        if update_shardings is not None and hasattr(state, "opt_state"):
            grads = _constrain(grads, update_shardings.params)
            state = state.replace(params=_constrain(state.params, update_shardings.params),
                                  opt_state=_constrain(state.opt_state, update_shardings.opt_state))
        if factor is not None:  # after the constraint: each replica rescales only its share
            grads = jax.tree.map(lambda g: (g * factor).astype(g.dtype), grads)
        if model_state is not None:
            new_state = state.apply_gradients(grads=grads, model_state=new_model_state)
        else:
            new_state = state.apply_gradients(grads=grads)
        if update_shardings is not None and hasattr(state, "opt_state"):
            # The new parameters whole again in one all-gather, not one per split leaf.
            new_state = new_state.replace(params=gather.gather_split(
                new_state.params, update_shardings.params, param_shardings(new_state.params), mesh(), data_axis()))
        return new_state, carry

    def evaluate(state, inputs, mask, carry, *, model_state=None):
        losses, aux, _ = forward(to_compute(state.params), model_state, inputs, mask, None, False)
        return fold(carry, losses, aux, inputs, _as_mask(mask, losses))

    return StepCore(train, evaluate)
