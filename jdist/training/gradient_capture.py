"""Running a train step where the parameters live elsewhere: capture its gradients.

Strategies whose parameters are stored apart from the compute devices
(`CentralStorageStrategy`, `ParameterServerStrategy`) run the user's unchanged
step `step(state, batch)` on a *proxy* state whose optimizer only records the
gradients handed to `state.apply_gradients`. The real optimizer update then runs
where the parameters live (the parameter device, or the parameter servers).
"""
from __future__ import annotations

from typing import Any

import jax
import optax


@jax.tree_util.register_pytree_node_class
class NotApplied:
    """The proxy's optimizer state until `apply_gradients` is called (an empty pytree)."""

    def tree_flatten(self):
        return (), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls()


@jax.tree_util.register_pytree_node_class
class Captured:
    """The proxy's optimizer state after `apply_gradients(grads=g)`: holds `g`."""

    def __init__(self, grads: Any):
        self.grads = grads

    def tree_flatten(self):
        return (self.grads,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0])


def _init(params: Any) -> NotApplied:
    del params
    return NotApplied()


def _update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Captured]:
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
