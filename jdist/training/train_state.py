"""`TrainState`: parameters, optimizer state and step, placed by the current strategy."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import optax
from flax.training import train_state as flax_train_state

from jdist.strategy import context
from jdist.typing import PyTree

if TYPE_CHECKING:
    from flax import nnx


class TrainState(flax_train_state.TrainState):
    """flax's TrainState, created straight onto the current strategy's devices.

    `TrainState.create(apply_fn=..., params=..., tx=...)` inside `strategy.scope()`
    places parameters and optimizer state per the strategy's layout (replicated
    for Mirrored), with no `device_put` by the user.
    """

    @classmethod
    def create(cls, *, apply_fn: Callable, params: PyTree, tx: optax.GradientTransformation, **kwargs) -> "TrainState":
        return context.get_strategy().create_train_state(cls, apply_fn=apply_fn, params=params, tx=tx, **kwargs)

    def apply_gradients(self, *, grads: PyTree, **kwargs: Any) -> "TrainState":  # kwargs: any fields to replace
        """Applies `grads` (flax's `apply_gradients`). Inside `strategy.run` the gradients
        are first summed over the replicas, as TF's `optimizer.apply_gradients` does in a
        replica context, so mirrored parameters stay identical on every replica. As in TF,
        gradients that were already all-reduced are summed again: pass the per-replica ones."""
        replica = context.get_replica_context()
        if replica is not None and replica.axis_name is not None:
            grads = replica.all_reduce("sum", grads)
        return super().apply_gradients(grads=grads, **kwargs)

    @classmethod
    def from_nnx(cls, model: nnx.Module, tx: optax.GradientTransformation) -> "TrainState":
        """From a flax NNX module: `apply_fn(params, *args)` merges the params back in."""
        from flax import nnx

        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        return cls.create(apply_fn=functools.partial(_nnx_apply, graphdef, rest), params=params, tx=tx)


def _nnx_apply(graphdef: Any, rest: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
    from flax import nnx

    return nnx.merge(graphdef, params, rest)(*args, **kwargs)
