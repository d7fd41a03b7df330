"""`tf.custom_gradient`, `tf.grad_pass_through`, `tf.recompute_grad` and `tf.no_gradient` over JAX's autodiff.

`@tf.custom_gradient` takes TF's function `f(*x) -> (y, grad_fn)`, `grad_fn(*upstream) -> input gradients`
(None for an input without one), and makes it a `jax.custom_vjp`: `jax.grad`, `tf.GradientTape` (which JAX
differentiates) and `strategy.run` all see `grad_fn`'s gradients. JAX keeps only arrays between the forward and
the backward pass, not `grad_fn`'s closure, so the backward pass calls `f` again for its `grad_fn` (XLA computes
the repeated forward once inside compiled code; Python side effects in `f` happen twice while tracing). Called
on values outside any differentiation, `f` runs once and `y` is returned, as TF's eager call.
Trainable variables `f` reads (found by running it once under a scope that records reads) become inputs of the
`custom_vjp` too, read inside `f` through a Keras stateless scope: `grad_fn(*upstream, variables=...)` gives
their gradients, as TF's form with `variables`.
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

from jdist.interop import inner_scopes

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


def _scope(values: dict[int, Any], read: list | None = None) -> Any:
    """A Keras stateless scope over the current one: variables in `values` (by id) read those values, others
    the current scope's; trainable variables read are appended to `read` (TF's variable watcher)."""
    def value_of(variable: Any, outer: Any) -> Any:
        if read is not None and variable.trainable and all(variable is not v for v in read):
            read.append(variable)
        if id(variable) in values:
            return values[id(variable)]
        return None if outer is None else outer.get_current_value(variable)

    return inner_scopes.inner_scope(value_of)


def _current(variable: Any) -> Any:
    """The variable's value as the current scope reads it (a tape's replay: the value differentiated)."""
    return jnp.asarray(variable.value)


def custom_gradient(f: Callable[..., Any] | None = None) -> Any:
    """`@tf.custom_gradient`: `f` returns `(y, grad_fn)`; the gradient of `y` is what `grad_fn` says. Trainable
    variables `f` reads are inputs too: `grad_fn(*upstream, variables=...)` returns `(input_grads, variable_grads)`,
    as TF's."""
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        from keras.src.backend import in_stateless_scope

        if not in_stateless_scope() and not any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves((args, kwargs))):
            return f(*args, **kwargs)[0]  # nothing differentiates these values: TF's eager forward
        read: list = []
        with _scope({}, read):
            _, first_grad_fn = f(*args, **kwargs)
        variables = [v for v in read if all(v is not a for a in args)]
        if variables and not _takes_variables(first_grad_fn):  # TF 2.21's message
            raise TypeError("@tf.custom_gradient grad_fn must accept keyword argument 'variables', since function "
                            f"uses variables: {[v.path for v in variables]}")
        values = [_current(v) for v in variables]
        if not any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves((args, kwargs, values))):
            return f(*args, **kwargs)[0]
        positions = [i for i, a in enumerate(args) if _differentiable(a)]

        def call(inputs: tuple) -> tuple[Any, Callable[..., Any]]:
            full = list(args)
            for i, value in zip(positions, inputs):
                full[i] = value
            with _scope({id(v): x for v, x in zip(variables, inputs[len(positions):])}):
                return f(*full, **kwargs)

        @jax.custom_vjp
        def forward(*inputs: Any) -> Any:
            return call(inputs)[0]

        def forward_with_residuals(*inputs: Any) -> tuple[Any, tuple]:
            return call(inputs)[0], inputs

        def backward(inputs: tuple, upstream: Any) -> tuple:
            _, grad_fn = call(inputs)
            upstream = jax.tree.leaves(upstream, is_leaf=lambda x: x is None)
            variable_grads: list = []
            if variables:
                grads, variable_grads = grad_fn(*upstream, variables=variables)
                if len(variable_grads) != len(variables):  # TF 2.21's message
                    raise ValueError("Must return gradient for each variable from @custom_gradient grad_fn.")
            else:
                grads = grad_fn(*upstream)
            grads = jax.tree.leaves(grads, is_leaf=lambda g: g is None)  # TF flattens them (`(dy, [])` is one)
            if len(grads) != len(positions):
                raise ValueError(f"tf.custom_gradient: grad_fn returned {len(grads)} gradients for "
                                 f"{len(positions)} inputs.")
            return tuple(_zero_cotangent(x) if g is None else jnp.asarray(g, jnp.asarray(x).dtype)
                         for g, x in zip([*grads, *variable_grads], inputs))

        forward.defvjp(forward_with_residuals, backward)
        return forward(*[args[i] for i in positions], *values)

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
