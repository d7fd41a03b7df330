"""Which strategy a compiled step belongs to when it runs outside every scope.

TF lets a `tf.function` built under a strategy run after its scope closed; so does
jdist: a `make_train_step` step with no strategy of its own, called outside any
scope, runs under the strategy whose mesh holds the state it is given (the
strategy that placed it), not the one-device default strategy.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import jax
from jax.sharding import NamedSharding

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_SEEN: list[weakref.ref] = []  # strategies whose scope was entered, most recent last


def remember(strategy: Strategy) -> None:
    """Records `strategy` (called when its scope is entered)."""
    alive = [r for r in _SEEN if r() is not None and r() is not strategy]
    _SEEN[:] = alive + [weakref.ref(strategy)]


def _mesh_of(state: Any) -> Any:
    for leaf in jax.tree.leaves(getattr(state, "params", state)):
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, NamedSharding):
            return sharding.mesh
        if isinstance(leaf, jax.Array):
            return None  # a single-device array: the default strategy's
    return None


def owner_of(state: Any) -> Strategy | None:
    """The most recently entered strategy whose mesh holds `state` and whose layout is the
    state's (None when no such strategy is known)."""
    mesh = _mesh_of(state)
    if mesh is None:
        return None
    candidates = [s for s in (r() for r in reversed(_SEEN)) if s is not None and s.mesh == mesh]
    if len(candidates) > 1:  # several strategies on one mesh: the one whose layout placed the state
        actual = jax.tree.map(lambda a: getattr(a, "sharding", None), state)
        for strategy in candidates:
            try:
                if jax.tree.all(jax.tree.map(_same, strategy.parameter_shardings(state), actual)):
                    return strategy
            except Exception:  # a layout that cannot apply to this state is not its owner
                continue
    return candidates[0] if candidates else None


def _same(expected: Any, actual: Any) -> bool:
    return actual is None or expected == actual
