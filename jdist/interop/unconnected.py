"""TF's gradient for a source the target does not depend on: `None` by default, zeros on request.

`jax.grad` gives zeros for an input the output does not use; `tf.GradientTape.gradient` gives None
(`unconnected_gradients=tf.UnconnectedGradients.NONE`, its default) or zeros (`ZERO`), and None for a source
that is not floating point. The difference is not cosmetic: Keras's optimizers skip a None gradient, but apply
a zero one (Adam moves a variable on a zero gradient through its momentum). A source is connected when the
linearized target reads its tangent, the rule of TF's recorded graph: `stop_gradient` cuts it, `0 * x` does not.
"""
from __future__ import annotations

import enum
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.extend.core import Literal


class UnconnectedGradients(enum.Enum):
    """`tf.UnconnectedGradients`: what `gradient` gives for a source the target does not depend on."""

    NONE = "none"
    ZERO = "zero"


def requested(unconnected_gradients: Any) -> UnconnectedGradients:
    if unconnected_gradients is None:
        return UnconnectedGradients.NONE
    if isinstance(unconnected_gradients, UnconnectedGradients):
        return unconnected_gradients
    try:
        return UnconnectedGradients(unconnected_gradients)
    except ValueError:  # TF 2.21's message (observed)
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}") from None


def _reads(closed: Any) -> list[bool]:
    """For each input of a jaxpr: whether its output reads it (any output of an equation that reads a needed
    value is needed; a nested jaxpr counts as one equation)."""
    jaxpr = closed.jaxpr
    needed = {v for v in jaxpr.outvars if not isinstance(v, Literal)}
    for eqn in reversed(jaxpr.eqns):
        if any(v in needed for v in eqn.outvars):
            needed.update(v for v in eqn.invars if not isinstance(v, Literal))
    return [v in needed for v in jaxpr.invars]


def total(target: Any, output_gradients: Any = None) -> jax.Array:
    """The scalar TF differentiates: the sum over a target's elements, and over the members of a structured
    target (TF 2.21: the gradient of {'y0': x**2, 'y1': 1/x} at 2 is 3.75), each weighted by its
    `output_gradients` (one per member)."""
    leaves = jax.tree.leaves(target, is_leaf=lambda x: hasattr(x, "assign") and hasattr(x, "path"))  # a variable
    weights = [None] * len(leaves) if output_gradients is None else (
        jax.tree.leaves(output_gradients) if len(leaves) > 1 else [output_gradients])
    if len(weights) != len(leaves):
        raise ValueError(f"tape.gradient: output_gradients has {len(weights)} members for a target of {len(leaves)}.")
    parts = [jnp.sum(jnp.asarray(leaf) if weight is None else jnp.asarray(leaf) * jnp.asarray(weight))
             for leaf, weight in zip(leaves, weights)]
    return functools.reduce(jnp.add, parts) if parts else jnp.zeros(())


def _linearized(target: Callable[[list], jax.Array], primal: list) -> tuple[list[int], list, jax.Array, Callable]:
    """The target linearized in the floating-point members of `primal` (the others held fixed): their indices,
    their values, the target's value and the linear map."""
    floating = [i for i, value in enumerate(primal) if jnp.issubdtype(jnp.result_type(value), jnp.inexact)]

    def of_floating(values: list) -> jax.Array:
        full = list(primal)
        for i, value in zip(floating, values):
            full[i] = value
        return jnp.asarray(target(full))

    subset = [primal[i] for i in floating]
    value, linear = jax.linearize(of_floating, subset)
    return floating, subset, value, linear


def gradients(target: Callable[[list], jax.Array], primal: list, unconnected_gradients: Any = None) -> list:
    """d target / d primal[i] for each i, the scalar `target` taking the list `primal`; a source that is not
    floating point, or that the target does not depend on, gets None (zeros with `UnconnectedGradients.ZERO`)."""
    mode = requested(unconnected_gradients)
    floating, subset, value, linear = _linearized(target, primal)
    result: list = [None] * len(primal)
    if jnp.issubdtype(value.dtype, jnp.inexact):  # an integer target: TF's tape records nothing, all None
        (grads,) = jax.linear_transpose(linear, subset)(jnp.ones_like(value))
        connected = _reads(jax.make_jaxpr(linear)(subset))
        for i, grad, used in zip(floating, grads, connected):
            result[i] = grad if used or mode is UnconnectedGradients.ZERO else None
    if mode is UnconnectedGradients.ZERO:  # TF: zeros for every unconnected source, integer ones included
        result = [jnp.zeros_like(primal[i]) if g is None else g for i, g in enumerate(result)]
    return result


def jacobians(target: Callable[[list], jax.Array], primal: list, unconnected_gradients: Any = None) -> list:
    """`tape.jacobian`: d target[t] / d primal[i][s] for each i, shaped `target.shape + primal[i].shape` (one
    transposed linearization per element of the target, vectorized); None as in `gradients`."""
    mode = requested(unconnected_gradients)
    floating, subset, value, linear = _linearized(target, primal)
    result: list = [None] * len(primal)
    if jnp.issubdtype(value.dtype, jnp.inexact):
        transpose = jax.linear_transpose(linear, subset)
        basis = jnp.eye(value.size, dtype=value.dtype).reshape((value.size, *value.shape))
        (rows,) = jax.vmap(transpose)(basis)
        connected = _reads(jax.make_jaxpr(linear)(subset))
        for i, row, used in zip(floating, rows, connected):
            shape = (*value.shape, *jnp.shape(primal[i]))
            result[i] = row.reshape(shape) if used or mode is UnconnectedGradients.ZERO else None
    if mode is UnconnectedGradients.ZERO:
        result = [jnp.zeros((*value.shape, *jnp.shape(primal[i])), jnp.result_type(primal[i])) if g is None else g
                  for i, g in enumerate(result)]
    return result
