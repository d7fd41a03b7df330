"""Mixed precision as in `tf.keras.mixed_precision`: a dtype policy and dynamic loss scaling.

    jdist.mixed_precision.set_global_policy("mixed_bfloat16")
    step = jdist.make_train_step(loss_fn)          # computes in bfloat16, keeps float32 parameters

A policy names a compute dtype (what layers compute in) and a variable dtype
(what parameters and optimizer state are stored in). Under "mixed_*" the step
casts the float32 parameters and the floating inputs to the compute dtype
inside the compiled step, so gradients come back in float32 and the optimizer
updates float32 values. float16's narrow exponent range needs loss scaling:
wrap the optimizer in `LossScaleOptimizer`, whose state (the scale and its
counter) lives in the optimizer state and so in the `TrainState`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jdist.typing import PyTree

_MIXED = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
_PLAIN = ("float16", "bfloat16", "float32", "float64")


class Policy:
    """`Policy("mixed_bfloat16")`: bfloat16 compute, float32 variables (TF's `Policy`).

    Names: "mixed_float16", "mixed_bfloat16", or a floating dtype name
    ("float32", "bfloat16", ...) meaning compute and variables both in it.
    """

    def __init__(self, name: "Policy | str"):
        if isinstance(name, Policy):
            name = name.name
        if name in _MIXED:
            compute, variable = _MIXED[name], "float32"
        elif name in _PLAIN:
            compute = variable = name
        else:
            raise ValueError(
                f"Cannot convert {name!r} to a mixed precision Policy. Valid policies are "
                f"'mixed_float16', 'mixed_bfloat16', and floating dtype names {list(_PLAIN)}."
            )
        self._name = name
        self._compute_dtype = compute
        self._variable_dtype = variable

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_dtype(self) -> str:
        """The dtype layers compute in, as a string (as TF returns it)."""
        return self._compute_dtype

    @property
    def variable_dtype(self) -> str:
        """The dtype parameters and optimizer state are kept in."""
        return self._variable_dtype

    @property
    def needs_loss_scaling(self) -> bool:
        """True for float16 compute, whose small range underflows small gradients."""
        return self._compute_dtype == "float16"

    def cast_to_compute(self, tree: PyTree) -> PyTree:
        """Casts the floating leaves of `tree` to the compute dtype; other leaves unchanged."""
        return _cast_floating(tree, self._compute_dtype)

    def cast_to_variable(self, tree: PyTree) -> PyTree:
        """Casts the floating leaves of `tree` to the variable dtype."""
        return _cast_floating(tree, self._variable_dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f'<Policy "{self.name}">'


def _cast_floating(tree: Any, dtype: str) -> Any:
    target = jnp.dtype(dtype)

    def cast(x):
        if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != target:
            return jnp.asarray(x).astype(target)
        return x

    return jax.tree.map(cast, tree)


_global_policy = Policy("float32")


def set_global_policy(policy: Policy | str | None) -> None:
    """Sets the policy steps built from now on use by default (None resets to "float32")."""
    global _global_policy
    _global_policy = Policy("float32") if policy is None else Policy(policy)


def global_policy() -> Policy:
    """The current global policy ("float32" unless `set_global_policy` changed it)."""
    return _global_policy


def as_policy(policy: Policy | str | None) -> Policy:
    """`policy` as a `Policy`; None means the global policy."""
    return global_policy() if policy is None else Policy(policy)


# ------------------------------------------------------------- loss scaling
class LossScaleState(NamedTuple):
    """The dynamic loss scale, its finite-step counter, and the wrapped optimizer's state."""

    loss_scale: jax.Array
    counter: jax.Array
    inner_state: Any


def LossScaleOptimizer(  # noqa: N802 (TF's name)
    inner_optimizer: optax.GradientTransformation,
    initial_scale: float = 2.0**15,
    dynamic_growth_steps: int = 2000,
) -> optax.GradientTransformationExtraArgs:
    """Dynamic loss scaling around an optax optimizer, as `tf.keras.mixed_precision.LossScaleOptimizer`.

    The loss is multiplied by the current scale before differentiation (the
    train step does this, or `scale_loss` in custom loops) and `update` divides
    the gradients by it. If any gradient is non-finite the step is skipped
    (zero updates, inner optimizer state unchanged, so its step count and
    learning-rate schedule do not advance) and the scale is halved; after
    `dynamic_growth_steps` consecutive finite steps it is doubled. Defaults are
    TF's: initial scale 2**15, growth every 2000 steps.
    """
    if dynamic_growth_steps < 1:
        raise ValueError(f"dynamic_growth_steps must be >= 1, got {dynamic_growth_steps}.")
    if not initial_scale > 0:
        raise ValueError(f"initial_scale must be positive, got {initial_scale}.")

    def init(params):
        return LossScaleState(
            loss_scale=jnp.asarray(initial_scale, jnp.float32),
            counter=jnp.zeros((), jnp.int32),
            inner_state=inner_optimizer.init(params),
        )

    def update(updates, state, params=None, **extra_args):
        scale = state.loss_scale
        grads = jax.tree.map(lambda g: (g / scale.astype(g.dtype)).astype(g.dtype), updates)
        finite = all_finite(grads)
        updates, inner_state = optax.with_extra_args_support(inner_optimizer).update(
            grads, state.inner_state, params, **extra_args
        )
        updates = jax.tree.map(lambda u: jnp.where(finite, u, jnp.zeros_like(u)), updates)
        inner_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), inner_state, state.inner_state)
        grow = finite & (state.counter == dynamic_growth_steps - 1)
        new_scale = jnp.where(finite, jnp.where(grow, scale * 2.0, scale), scale / 2.0)
        counter = jnp.where(finite & ~grow, state.counter + 1, 0).astype(jnp.int32)
        return updates, LossScaleState(new_scale, counter, inner_state)

    return optax.GradientTransformationExtraArgs(init, update)


def all_finite(tree: PyTree) -> jax.Array:
    """True when every element of every leaf is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def find_loss_scale(opt_state: PyTree) -> LossScaleState | None:
    """The `LossScaleState` inside an optimizer state (None if it has none)."""
    found = [
        x for x in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, LossScaleState))
        if isinstance(x, LossScaleState)
    ]
    if len(found) > 1:
        raise ValueError("The optimizer state holds more than one LossScaleOptimizer; wrap the optimizer once.")
    return found[0] if found else None


def loss_scale_of(policy: Policy, opt_state: PyTree, *, remedy: str) -> jax.Array:
    """The loss scale a step multiplies its loss by: 1 unless the optimizer scales losses.

    Raises when `policy` computes in float16 but nothing scales the loss (`remedy`
    says how to add a `LossScaleOptimizer`), or when the optimizer state lives
    apart from the compute devices (central storage, parameter servers), where
    dynamic loss scaling cannot run.
    """
    from jdist.strategy.gradient_capture import NotApplied

    state = find_loss_scale(opt_state)
    if policy.needs_loss_scaling and isinstance(opt_state, NotApplied):
        raise ValueError(
            f"The {policy.name!r} policy needs dynamic loss scaling, which this strategy does not support: "
            "its optimizer state lives apart from the compute devices (central storage, parameter "
            "servers). Use policy='mixed_bfloat16', which needs no loss scaling."
        )
    if policy.needs_loss_scaling and state is None:
        raise ValueError(
            f"The {policy.name!r} policy computes in float16, whose small range turns small gradients "
            f"into zeros: {remedy} to use dynamic loss scaling (or use 'mixed_bfloat16')."
        )
    return jnp.float32(1.0) if state is None else state.loss_scale


def current_loss_scale(opt_state: PyTree) -> jax.Array:
    """The loss scale in use (1.0 when the optimizer does no loss scaling)."""
    found = find_loss_scale(opt_state)
    return jnp.asarray(1.0, jnp.float32) if found is None else found.loss_scale


def scale_loss(loss: jax.Array, opt_state: PyTree) -> jax.Array:
    """`loss * current_loss_scale(opt_state)`, for custom loops (TF's `optimizer.scale_loss`)."""
    loss = jnp.asarray(loss)
    loss = loss.astype(jnp.promote_types(loss.dtype, jnp.float32))  # float16 would overflow at 2**15
    return loss * current_loss_scale(opt_state).astype(loss.dtype)
