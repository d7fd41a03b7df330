"""`tf.custom_gradient`, `tf.grad_pass_through`, `tf.recompute_grad` and `tf.no_gradient` over JAX's autodiff.

`@tf.custom_gradient` takes TF's function `f(*x) -> (y, grad_fn)`, `grad_fn(*upstream) -> input gradients`
(None for an input without one), and makes it a `jax.custom_vjp`: `jax.grad`, `tf.GradientTape` (which JAX
differentiates) and `strategy.run` all see `grad_fn`'s gradients. JAX keeps only arrays between the forward and
the backward pass, not `grad_fn`'s closure, so the backward pass calls `f` again for its `grad_fn` (XLA computes
the repeated forward once inside compiled code; Python side effects in `f` happen twice while tracing). Called
on values outside any differentiation, `f` runs once and `y` is returned, as TF's eager call.
TF's form whose `grad_fn` takes `variables=` (gradients for the variables `f` reads) is not provided.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

_NO_GRADIENT: set[str] = set()


def _differentiable(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic, float, int)) and not isinstance(x, bool)


def _zero_cotangent(x: Any) -> Any:
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.zeros_like(x)
    return np.zeros(x.shape, jax.dtypes.float0)  # JAX's cotangent for integer inputs


def _takes_variables(grad_fn: Callable[..., Any]) -> bool:
    try:
        return "variables" in inspect.signature(grad_fn).parameters
    except (TypeError, ValueError):
        return False


def custom_gradient(f: Callable[..., Any] | None = None) -> Any:
    """`@tf.custom_gradient`: `f` returns `(y, grad_fn)`; the gradient of `y` is what `grad_fn` says."""
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        if not any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves((args, kwargs))):
            return f(*args, **kwargs)[0]  # nothing differentiates these values: TF's eager forward
        positions = [i for i, a in enumerate(args) if _differentiable(a)]

        def call(inputs: tuple) -> tuple[Any, Callable[..., Any]]:
            full = list(args)
            for i, value in zip(positions, inputs):
                full[i] = value
            y, grad_fn = f(*full, **kwargs)
            if _takes_variables(grad_fn):
                raise NotImplementedError(
                    "tf.custom_gradient: a grad_fn with `variables` (gradients for the variables the function "
                    "reads) is not provided by jdist. Pass the variables' values as arguments of the decorated "
                    "function instead, so grad_fn returns their gradients with the inputs'.")
            return y, grad_fn

        @jax.custom_vjp
        def forward(*inputs: Any) -> Any:
            return call(inputs)[0]

        def forward_with_residuals(*inputs: Any) -> tuple[Any, tuple]:
            return call(inputs)[0], inputs

        def backward(inputs: tuple, upstream: Any) -> tuple:
            _, grad_fn = call(inputs)
            grads = grad_fn(*jax.tree.leaves(upstream, is_leaf=lambda x: x is None))
            grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
            if len(grads) != len(inputs):
                raise ValueError(f"tf.custom_gradient: grad_fn returned {len(grads)} gradients for "
                                 f"{len(inputs)} inputs.")
            return tuple(_zero_cotangent(x) if g is None else jnp.asarray(g, jnp.asarray(x).dtype)
                         for g, x in zip(grads, inputs))

        forward.defvjp(forward_with_residuals, backward)
        return forward(*[args[i] for i in positions])

    return decorated


def grad_pass_through(f: Callable[..., Any]) -> Callable[..., Any]:
    """`tf.grad_pass_through(f)`: `f`'s values with the identity's gradient (straight-through)."""
    @functools.wraps(f)
    def passing(*args: Any, **kwargs: Any) -> Any:
        @custom_gradient
        def identity_grad(*xs: Any) -> tuple[Any, Callable[..., Any]]:
            return f(*xs, **kwargs), lambda *dy: dy[0] if len(dy) == 1 else dy
        return identity_grad(*args)
    return passing


def recompute_grad(f: Callable[..., Any]) -> Callable[..., Any]:
    """`tf.recompute_grad(f)`: `jax.checkpoint(f)`, whose backward pass computes `f`'s forward again instead of
    keeping its intermediate values; `f` itself on values outside any differentiation."""
    checkpointed = jax.checkpoint(f)

    @functools.wraps(f)
    def recomputing(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves((args, kwargs))):
            return checkpointed(*args, **kwargs)
        return f(*args, **kwargs)
    return recomputing


def no_gradient(op_type: str) -> None:
    """`tf.no_gradient(op_type)`: TF's registration of an op without a gradient. jdist has no op registry (JAX
    differentiates every primitive): the name is kept, and registering it twice is TF's KeyError."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    if op_type in _NO_GRADIENT:
        raise KeyError(f"Registering two gradient with name '{op_type}'!")
    _NO_GRADIENT.add(op_type)
