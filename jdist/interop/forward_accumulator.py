"""`tf.autodiff.ForwardAccumulator`: TF's forward-mode autodiff (Jacobian-vector products), eagerly.

    with tf.autodiff.ForwardAccumulator(primals=x, tangents=t) as acc:
        y = f(x)
    acc.jvp(y)  # d y / d x . t

TF records the block's operations and pushes the tangents forward through them. JAX differentiates
functions, so, as the eager `GradientTape` does (`jdist.interop.eager_tape`), `jvp(target)` replays
the `with` block's statements from its source with the primals as the inputs and takes
`jax.linearize` of the target's replay, applied to the tangents. A `GradientTape` inside the block
is replayed too, so `acc.jvp(tape.gradient(...))` is a Hessian-vector product (forward over back).
As TF's: a target that does not depend on the primals gets None (zeros with
`unconnected_gradients='zero'`), an integer target None.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jdist.interop import eager_tape, keras_run, unconnected


def _is_variable(x: Any) -> bool:
    return hasattr(x, "path") and hasattr(x, "assign")


def _leaves(tree: Any) -> list:
    return jax.tree.leaves(tree, is_leaf=lambda x: x is None or _is_variable(x))


def _dtype(x: Any) -> np.dtype:
    return jnp.dtype(str(x.dtype)) if hasattr(x, "dtype") else jnp.result_type(x)


class ForwardAccumulator:
    """TF's `tf.autodiff.ForwardAccumulator(primals, tangents)`, outside `tf.function` and `strategy.run`."""

    def __init__(self, primals: Any, tangents: Any):
        self._primals = _leaves(primals)
        tangent_leaves = _leaves(tangents)
        if len(tangent_leaves) != len(self._primals):
            raise ValueError(f"ForwardAccumulator: {len(self._primals)} primals but {len(tangent_leaves)} tangents; "
                             "give one tangent per primal, in the same structure.")
        self._tangents = []
        for primal, tangent in zip(self._primals, tangent_leaves):
            if primal is None or tangent is None:
                raise ValueError("ForwardAccumulator: a primal or tangent is None; pass tensors or variables.")
            dtype, tangent_dtype = _dtype(primal), _dtype(tangent)
            if isinstance(tangent, (np.ndarray, jax.Array)) and not _is_variable(tangent) and tangent_dtype != dtype:
                raise ValueError(  # TF 2.21's error (observed: an int32 tangent for a float32 primal)
                    f"Tensor conversion requested dtype {dtype.name} for Tensor with dtype {tangent_dtype.name}: "
                    f"{tangent!r}. Give the tangent the primal's dtype.")
            value = jnp.asarray(getattr(tangent, "value", tangent), dtype)
            if value.shape != tuple(np.shape(getattr(primal, "value", primal))):
                raise ValueError(f"ForwardAccumulator: a tangent of shape {value.shape} for a primal of shape "
                                 f"{tuple(np.shape(getattr(primal, 'value', primal)))}; give each tangent its "
                                 "primal's shape.")
            self._tangents.append(value)
        self._block: eager_tape.Block | None = None

    def __enter__(self) -> "ForwardAccumulator":
        if keras_run.current_frame() is not None:
            raise NotImplementedError(
                "tf.autodiff.ForwardAccumulator runs eagerly only (outside tf.function and strategy.run); inside "
                "compiled code use jax.jvp, or a GradientTape's jacobian.")
        self._block = eager_tape.enter(sys._getframe(1))
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def jvp(self, primals: Any, unconnected_gradients: object = None) -> Any:
        """d primals / d (the accumulator's primals), applied to the tangents, for each tensor of `primals`
        (computed in the accumulator's block); structured as `primals`."""
        if self._block is None:
            raise RuntimeError("ForwardAccumulator.jvp needs the accumulator to have been entered "
                               "(`with tf.autodiff.ForwardAccumulator(primals, tangents) as acc:`).")
        block, caller = self._block, sys._getframe(1)
        expression = eager_tape.target_expression(block, caller)
        names = {**caller.f_globals, **caller.f_locals}
        mode = unconnected.requested(unconnected_gradients)
        flat, treedef = jax.tree.flatten(primals, is_leaf=_is_variable)
        results = []
        for index, leaf in enumerate(flat):
            def pick(result: Any, index: int = index) -> Any:
                found = jax.tree.leaves(result, is_leaf=_is_variable)[index]
                return jnp.asarray(getattr(found, "value", found))

            (result,) = eager_tape.gradient(
                block, expression, self._primals, None, None, eager_tape.Watch(list(self._primals), False), names,
                pick, self._forward(leaf, mode))
            results.append(result)
        return jax.tree.unflatten(treedef, results)

    def _forward(self, leaf: Any, mode: unconnected.UnconnectedGradients) -> Callable[[Callable, list], list]:
        def differentiate(replayed: Callable[[list], Any], primal: list) -> list:
            floating, subset, value, linear = unconnected._linearized(replayed, primal)
            connected = unconnected._reads(jax.make_jaxpr(linear)(subset)) if floating else []
            if jnp.issubdtype(value.dtype, jnp.inexact) and any(connected):
                return [linear([self._tangents[i] for i in floating])]
            if mode is unconnected.UnconnectedGradients.ZERO:
                return [jnp.zeros(np.shape(getattr(leaf, "value", leaf)), jnp.result_type(value))]
            return [None]

        return differentiate

