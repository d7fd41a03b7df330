"""Global-view train and eval steps: one `jax.jit` over the sharded global batch.

The loss is a (masked) mean over the whole global batch and XLA inserts the
gradient all-reduce, so no loss scaling can go wrong. Shardings come from the
strategy, the state is donated, and each step compiles once per batch shape.

With several replicas the optimizer update is *weight-update sharded*: each
replica updates only its slice of every replicated parameter and optimizer
slot (gradients are reduce-scattered, new parameters all-gathered), instead of
all N replicas repeating the whole update. The stored layout and the results are
unchanged; the update costs 1/N of the compute (3x faster for the MLP on 8
simulated CPU devices, see scripts/benchmark.py).

Options: gradient accumulation over micro-batches (`accumulation_steps`) and a
mixed precision `policy` (with dynamic loss scaling when the optimizer is a
`jdist.mixed_precision.LossScaleOptimizer`).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from jdist import context, dispatch, input_checks, memory, mixed_precision, step_owner
from jdist.accumulation import check_accumulation_steps, scan_accumulate, split_microbatches
from jdist.distributed_batch import place_host_batches, split_batch
from jdist.layout import split_shardings_over_data

LossFn = Callable[[Any, Any], Any]  # (params, batch) -> per-example loss, or (loss, aux) with has_aux


def batch_mask(batch: Any, per_example: Any) -> Any:
    """The real-example mask of a batch (a `DistributedBatch`'s mask or a dict's "mask"
    entry), else all ones."""
    _, mask = split_batch(batch)
    if mask is not None:
        return jnp.asarray(mask, per_example.dtype)
    return jnp.ones(per_example.shape[:1], per_example.dtype)


def _rows(batch: Any) -> Any:
    """The number of rows of a batch, padding included (a float32 constant)."""
    return jnp.float32(jax.tree.leaves(split_batch(batch)[0])[0].shape[0])


def _real_count(batch: Any) -> Any:
    """The number of real examples in a batch (float32)."""
    _, mask = split_batch(batch)
    if mask is not None:
        return jnp.sum(jnp.asarray(mask, jnp.float32))
    return _rows(batch)


def _masked_sums(per_example: Any, aux: dict, mask: Any) -> dict:
    sums = {"loss": jnp.sum(per_example * mask), "count": jnp.sum(mask)}
    for name, value in aux.items():
        sums[name] = jnp.sum(jnp.asarray(value, per_example.dtype) * mask)
    return sums


def _split(out: Any, has_aux: bool) -> tuple[Any, dict]:
    if has_aux:
        per_example, aux = out
        return per_example, dict(aux)
    return out, {}


def _with_policy(loss_fn: LossFn, policy: mixed_precision.Policy, has_aux: bool) -> Callable:
    """`(params, batch) -> (per-example float32 loss, aux)`, computing in the policy's dtype."""

    def compute(params, batch):
        inputs, _ = split_batch(batch)
        if policy.name != "float32":
            params = policy.cast_to_compute(params)
            inputs = _cast_inputs(inputs, policy)
        per_example, aux = _split(loss_fn(params, inputs), has_aux)
        per_example = jnp.asarray(per_example)
        return per_example.astype(jnp.promote_types(per_example.dtype, jnp.float32)), aux

    return compute


def _cast_inputs(batch: Any, policy: mixed_precision.Policy) -> Any:
    if isinstance(batch, dict) and "mask" in batch:
        rest = policy.cast_to_compute({k: v for k, v in batch.items() if k != "mask"})
        return {**rest, "mask": batch["mask"]}
    return policy.cast_to_compute(batch)


def weight_update_shardings(strategy: Any, tree: Any, min_bytes: int | None = None) -> Any:
    """Each leaf's layout with its first unsplit dimension that the replica count divides
    also split over the data axis: where that leaf's share of the update runs.
    Leaves smaller than `min_bytes` (default `jdist.layout.WEIGHT_UPDATE_MIN_BYTES`) keep their layout."""
    return split_shardings_over_data(tree, strategy.parameter_shardings(tree), strategy.data_axis, min_bytes)


def _constrain(tree: Any, shardings: Any) -> Any:
    return jax.tree.map(jax.lax.with_sharding_constraint, tree, shardings)


class _Compiled:
    """Compiles `fn(state, batch, update_shardings)` once per strategy and state structure.

    The strategy decides how (`Strategy.compile_step`): one jit with its layout by
    default, its own composition where parameters live apart from the compute devices.
    """

    def __init__(self, fn: Callable, strategy: Any, donate: bool):
        self._fn = fn  # fn(state, batch, update_shardings); update_shardings may be None
        self._strategy = strategy
        self._donate = donate
        self._cache: dict[Any, Callable] = {}
        self._checks = input_checks.StepChecks()

    @property
    def strategy(self) -> Any:
        return self._strategy or context.get_strategy()

    def strategy_for(self, state: Any) -> Any:
        """Its own strategy, else the current scope's; outside every scope the strategy that
        placed `state` (`jdist.step_owner`), so a step runs after the scope closed."""
        if self._strategy is not None:
            return self._strategy
        if context.has_strategy():
            return context.get_strategy()
        return step_owner.owner_of(state) or context.get_strategy()

    def jitted(self, state: Any, *, donate: bool | None = None, strategy: Any = None) -> Callable:
        """The compiled step for states shaped like `state` (`strategy.compile_step`: a `jax.jit`
        function unless the strategy composes its own)."""
        donate = self._donate if donate is None else donate
        strategy = strategy or self.strategy_for(state)
        key = (strategy, jax.tree.structure(state), donate)
        if key not in self._cache:
            self._cache[key] = strategy.compile_step(self._fn, state, donate=donate)
        return self._cache[key]

    def lower(self, state: Any, batch: Any) -> jax.stages.Lowered:
        """The lowered step (`.compile().cost_analysis()`, `.as_text()`, ...)."""
        fn = self.jitted(state)
        if not hasattr(fn, "lower"):
            raise TypeError(f"{self.strategy_for(state)!r} runs a step as several programs; there is no single "
                            "program to lower or analyse.")
        return fn.lower(state, place_host_batches(self.strategy_for(state), batch))

    def __call__(self, state: Any, batch: Any) -> Any:
        self._checks(batch, lambda: jax.device_get(getattr(state, "step", None)))
        strategy = self.strategy_for(state)
        fn = self.jitted(state, strategy=strategy)
        batch = place_host_batches(strategy, batch)
        try:
            new_state, out = fn(state, batch)
        except RuntimeError as error:
            if memory.is_out_of_memory(error):
                raise memory.out_of_memory_error(error, state, batch, strategy) from error
            raise
        except ValueError as error:
            if "does not match the sharding" in str(error):  # e.g. ZeRO-1 optimizer state placed on its own
                raise ValueError(
                    f"The state is not laid out as {strategy!r} keeps it ({error}). Pass "
                    "strategy.place(state) (the whole train state, so its optimizer state follows the "
                    "parameters), or create it with TrainState.create inside strategy.scope().") from error
            raise
        dispatch.dispatched((out, new_state))  # `out` first: the state is often donated next
        return new_state, out

    def __getstate__(self) -> dict:
        # Compiled executables stay in the process that built them; a copy sent to
        # another process (a parameter-server worker) compiles its own.
        return {**self.__dict__, "_cache": {}, "_checks": input_checks.StepChecks()}


def make_train_step(
    loss_fn: LossFn,
    strategy: Any = None,
    *,
    has_aux: bool = False,
    donate: bool = True,
    accumulation_steps: int = 1,
    policy: mixed_precision.Policy | str | None = None,
) -> Callable:
    """`step(state, batch) -> (state, sums)`; `sums` holds masked sums of the loss and of each
    aux value plus the real-example `count`, so epoch means are exact. A `DistributedBatch`
    reaches `loss_fn` as its plain element, and its mask weighs the loss.

    `accumulation_steps=k` computes the gradient of the global batch as k
    micro-batches in one compiled loop (the same update as one step on the
    whole batch, with 1/k of the activation memory); the batch must be a
    multiple of replicas x k. `policy` (default: the global policy) sets the
    compute dtype; float16 needs `tx=jdist.mixed_precision.LossScaleOptimizer(tx)`.
    """
    k = check_accumulation_steps(accumulation_steps)
    policy = mixed_precision.as_policy(policy)
    compute = _with_policy(loss_fn, policy, has_aux)

    def step(state, batch, update_shardings):
        scale = mixed_precision.loss_scale_of(
            policy, getattr(state, "opt_state", None),
            remedy="create the TrainState with tx=jdist.mixed_precision.LossScaleOptimizer(tx)")
        count = _real_count(batch)
        factor = None
        if k == 1:
            grads, factor, sums = _gradients(compute, state.params, batch, count, scale)
        else:
            grads, sums = _accumulated_gradients(
                compute, state.params, batch, count, scale, k, strategy or context.get_strategy())
        if update_shardings is not None and hasattr(state, "opt_state"):
            grads = _constrain(grads, update_shardings.params)
            state = state.replace(
                params=_constrain(state.params, update_shardings.params),
                opt_state=_constrain(state.opt_state, update_shardings.opt_state),
            )
        if factor is not None:  # after the constraint: each replica rescales only its share
            grads = jax.tree.map(lambda g: (g * factor).astype(g.dtype), grads)
        return state.apply_gradients(grads=grads), sums

    return _Compiled(step, strategy, donate)


def _scaled_loss(compute: Callable, count: Any, scale: Any) -> Callable:
    """`params, batch -> (masked loss sum * scale / count, (per-example loss, per-example aux, mask))`;
    `count` is the real-example count, or a constant the caller rescales by afterwards."""

    def loss(params, batch):
        per_example, aux = compute(params, batch)
        mask = batch_mask(batch, per_example)
        aux = {k: jnp.broadcast_to(jnp.asarray(v, per_example.dtype), per_example.shape) for k, v in aux.items()}
        total = jnp.sum(per_example * mask)
        return total * scale / jnp.maximum(count, 1.0), (per_example, aux, mask)

    return loss


def _gradients(compute, params, batch, count, scale):
    """`(gradients of the masked sum * scale / rows, rows / count, sums)`: the gradients times the
    factor are those of the masked mean."""
    # Differentiates the masked sum over the batch's row count (a constant) and rescales by
    # rows / count afterwards: the count's all-reduce then joins the gradients' one instead
    # of being a separate collective every step waits on before its backward pass (5% of a
    # Transformer step on 8 CPU devices, scripts/benchmark.py). The backward pass sees the
    # same magnitudes as a full batch's, so float16 loss scaling behaves as before.
    rows = _rows(batch)
    grads, (per_example, aux, mask) = jax.grad(_scaled_loss(compute, rows, scale), has_aux=True)(params, batch)
    return grads, rows / jnp.maximum(count, 1.0), _masked_sums(per_example, aux, mask)


def _accumulated_gradients(compute, params, batch, count, scale, steps, strategy):
    """The whole batch's gradient as `steps` micro-batches in one loop (see `scan_accumulate`)."""
    grad_fn = jax.grad(_scaled_loss(compute, count, scale), has_aux=True)

    def micro_grads(p, mb, piece, model_state):
        grads, aux = grad_fn(p, mb)
        return grads, aux, model_state

    # Loss and metric sums are kept per replica (a leading replica axis sharded over the data
    # axis) and added up once after the loop, so they cost no collective per micro-batch.
    n, by_replica = strategy.num_replicas_in_sync, NamedSharding(strategy.mesh, P(strategy.data_axis))

    def fold(sums, aux, mb):
        per_replica = jax.tree.map(
            lambda a: jax.lax.with_sharding_constraint(a.reshape((n, -1)), by_replica), aux)
        new = jax.vmap(lambda pe, a, m: _masked_sums(pe, a, m))(*per_replica)
        return jax.tree.map(jnp.add, sums, new)

    micro = split_microbatches(batch, steps, strategy)
    first = jax.tree.map(lambda x: x[0], micro)
    sums0 = jax.tree.map(lambda s: jnp.zeros((n,) + s.shape, s.dtype),
                         jax.eval_shape(lambda mb: _masked_sums(*grad_fn(params, mb)[1]), first))
    grads, sums, _ = scan_accumulate(micro_grads, params, micro, fold=fold, carry=sums0, mesh=strategy.mesh,
                                     data_axis=strategy.data_axis,
                                     param_shardings=strategy.parameter_shardings(params))
    sums = jax.tree.map(lambda x: jnp.sum(x, axis=0), sums)
    return jax.tree.map(lambda g, p: g.astype(p.dtype), grads, params), sums


def make_eval_step(loss_fn: LossFn, strategy: Any = None, *, has_aux: bool = False,
                   policy: mixed_precision.Policy | str | None = None) -> Callable:
    """`evaluate(state, batch) -> sums` over the real examples of a global batch."""
    compute = _with_policy(loss_fn, mixed_precision.as_policy(policy), has_aux)

    def step(state, batch, update_shardings):
        per_example, aux = compute(state.params, batch)
        return state, _masked_sums(per_example, aux, batch_mask(batch, per_example))

    compiled = _Compiled(step, strategy, donate=False)
    return lambda state, batch: compiled(state, batch)[1]
