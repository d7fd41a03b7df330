"""Running a train step where the parameters live elsewhere: capture its gradients.

Strategies whose parameters are stored apart from the compute devices
(`CentralStorageStrategy`, `ParameterServerStrategy`) run the user's unchanged
step `step(state, batch)` on a *proxy* state whose optimizer only records the
gradients handed to `state.apply_gradients`. The real optimizer update then runs
where the parameters live (the parameter device, or the parameter servers).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import optax


# NamedTuples, as optax's own states: pytrees without registration, and optimizer states to a type checker.
class NotApplied(NamedTuple):
    """The proxy's optimizer state until `apply_gradients` is called (an empty pytree)."""


class Captured(NamedTuple):
    """The proxy's optimizer state after `apply_gradients(grads=g)`: holds `g`."""

    grads: Any


def _init(params: optax.Params) -> NotApplied:
    del params
    return NotApplied()


def _update(updates: optax.Updates, state: optax.OptState,
            params: optax.Params | None = None) -> tuple[optax.Updates, Captured]:
    del state, params
    # The parameter change is zero: the proxy's new parameters are discarded anyway.
    return jax.tree.map(lambda g: g * 0, updates), Captured(updates)


GRADIENT_CAPTURE = optax.GradientTransformation(_init, _update)


def capturing_state(state: Any, params: Any) -> Any:
    """A proxy of flax-`TrainState`-like `state` holding `params` whose optimizer captures gradients."""
    for name in ("replace", "apply_gradients", "tx", "opt_state"):
        if not hasattr(state, name):
            raise TypeError(
                f"This strategy runs train steps on a flax TrainState (jdist.TrainState); got "
                f"{type(state).__name__}, which has no `{name}`. Create the state with jdist.TrainState.create()."
            )
    return state.replace(params=params, tx=GRADIENT_CAPTURE, opt_state=NotApplied())


def captured_gradients(new_proxy: Any) -> Any:
    """The gradients the step applied, or None when it applied none (an eval step)."""
    opt_state = getattr(new_proxy, "opt_state", None)
    return opt_state.grads if isinstance(opt_state, Captured) else None


def without_parameters(new_proxy: Any) -> Any:
    """The proxy minus the (discarded) parameters, so compiled steps do not return them."""
    return new_proxy.replace(params=None)
