"""Keras 3's optimizers as optax transformations: the same names, defaults and update maths.

`Trainer(model, "adam")` must train as Keras's `compile(optimizer="adam")` does, so
these are not optax's `adam` & co. (optax adds epsilon to the bias-corrected second
moment, Keras to the raw one; optax's momentum SGD folds the learning rate in
later): each function follows `keras/src/optimizers/<name>.py` line by line, with
Keras's order of operations around it: clip the gradients (`clipnorm`,
`global_clipnorm` or `clipvalue`), decay the weights by `weight_decay * lr`, then
the optimizer's own step. The learning rate may be a float or a schedule
`f(iterations)` (a Keras `LearningRateSchedule` works), evaluated at the number of
updates done so far, as Keras does.

    jdist.optimizers.get("adam")                      # keras.optimizers.Adam()'s defaults
    jdist.optimizers.adamw(learning_rate=3e-4)        # an optax.GradientTransformation
    jdist.optimizers.get(keras.optimizers.SGD(0.1, momentum=0.9))   # from a Keras optimizer's config
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

LearningRate = float | Callable[[Any], Any]
# (grads, slots, iterations, lr, globals) -> (deltas, slots, globals): one optimizer's own step.
StepFn = Callable[..., tuple[Any, Any, Any]]


class KerasOptimizerState(NamedTuple):
    """`iterations` counts the updates done (Keras's `optimizer.iterations`); `slots` holds one
    pytree like the parameters per slot variable; `extra` holds scalars (Nadam's `u_product`)."""
    iterations: jax.Array
    slots: dict
    extra: dict


def _keras_optimizer(name: str, slot_inits: dict[str, float], step: StepFn, learning_rate: LearningRate, *,
                     weight_decay: float | None, clipnorm: float | None, clipvalue: float | None,
                     global_clipnorm: float | None, extra: dict | None = None) -> optax.GradientTransformation:
    if sum(c is not None for c in (clipnorm, clipvalue, global_clipnorm)) > 1:
        raise ValueError(f"{name}: only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set "
                         f"(got clipnorm={clipnorm}, clipvalue={clipvalue}, global_clipnorm={global_clipnorm}).")

    def init(params: Any) -> KerasOptimizerState:
        slots = {k: jax.tree.map(lambda p, v=v: jnp.full_like(p, v), params) for k, v in slot_inits.items()}
        dtype = _float_dtype(params)
        scalars = {k: jnp.asarray(v, dtype) for k, v in (extra or {}).items()}
        return KerasOptimizerState(jnp.zeros((), jnp.int32), slots, scalars)

    def update(updates: optax.Updates, state: optax.OptState,
               params: optax.Params | None = None) -> tuple[optax.Updates, KerasOptimizerState]:
        assert isinstance(state, KerasOptimizerState), "the state `init` made"
        grads = _clip(updates, clipnorm, clipvalue, global_clipnorm)
        lr = learning_rate(state.iterations) if callable(learning_rate) else learning_rate
        deltas, slots, scalars = step(grads, state.slots, state.iterations, lr, state.extra, params)
        if weight_decay:
            if params is None:
                raise ValueError(f"{name} with weight_decay needs the parameters: tx.update(grads, state, params).")
            # Keras decays the variable before the step: variable -= variable * wd * lr.
            deltas = jax.tree.map(lambda d, p: d - p * jnp.asarray(weight_decay, p.dtype) * jnp.asarray(lr, p.dtype),
                                  deltas, params)
        return deltas, KerasOptimizerState(state.iterations + 1, slots, scalars)

    return optax.GradientTransformation(init, update)


def _float_dtype(params: Any) -> Any:
    for leaf in jax.tree.leaves(params):
        if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating):
            return jnp.asarray(leaf).dtype
    return jnp.float32


def _clip(grads: Any, clipnorm: float | None, clipvalue: float | None, global_clipnorm: float | None) -> Any:
    """Keras's `_clip_gradients`: per-tensor norm, global norm or value clipping."""
    if clipnorm and clipnorm > 0:
        def by_norm(g):
            l2sum = jnp.sum(jnp.square(g), keepdims=True)
            pred = l2sum > 0
            l2norm = jnp.where(pred, jnp.sqrt(jnp.where(pred, l2sum, jnp.ones_like(l2sum))), l2sum)
            return g * clipnorm / jnp.maximum(l2norm, clipnorm)
        return jax.tree.map(by_norm, grads)
    if global_clipnorm and global_clipnorm > 0:
        norm = optax.global_norm(grads)
        scale = global_clipnorm * jnp.minimum(1.0 / norm, 1.0 / global_clipnorm) + (norm - norm)
        return jax.tree.map(lambda g: g * scale.astype(g.dtype), grads)
    if clipvalue and clipvalue > 0:
        return jax.tree.map(lambda g: jnp.clip(g, -clipvalue, clipvalue), grads)
    return grads


def _cast(x: Any, like: Any) -> Any:
    return jnp.asarray(x, jnp.asarray(like).dtype)


def _map(fn: Callable, grads: Any, *slot_trees: Any) -> tuple:
    """Applies `fn(g, *slots) -> (delta, *new_slots)` per leaf; returns (deltas, new slot trees)."""
    treedef = jax.tree.structure(grads)
    outs = [fn(g, *s) for g, *s in zip(jax.tree.leaves(grads), *(treedef.flatten_up_to(t) for t in slot_trees))]
    columns = list(zip(*outs)) if outs else [[] for _ in range(1 + len(slot_trees))]
    return tuple(jax.tree.unflatten(treedef, list(c)) for c in columns)


def sgd(learning_rate: LearningRate = 0.01, momentum: float = 0.0, nesterov: bool = False, *,
        weight_decay: float | None = None, clipnorm: float | None = None, clipvalue: float | None = None,
        global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.SGD`: m = momentum * m - lr * g; variable += m (or += momentum * m - lr * g)."""
    if not isinstance(momentum, float) or not 0 <= momentum <= 1:
        raise ValueError(f"`momentum` must be a float between [0, 1], got {momentum!r}.")

    def step(grads, slots, iterations, lr, extra, params):
        if momentum == 0:
            return jax.tree.map(lambda g: -(g * _cast(lr, g)), grads), slots, extra

        def leaf(g, m):
            lr_, mom = _cast(lr, g), _cast(momentum, g)
            m = m * mom - g * lr_
            return (m * mom - g * lr_ if nesterov else m), m

        deltas, m = _map(leaf, grads, slots["momentum"])
        return deltas, {"momentum": m}, extra

    return _keras_optimizer("SGD", {"momentum": 0.0} if momentum else {}, step, learning_rate,
                            weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                            global_clipnorm=global_clipnorm)


def _adam_step(beta_1: float, beta_2: float, epsilon: float, amsgrad: bool) -> StepFn:
    def step(grads, slots, iterations, lr, extra, params):
        def leaf(g, m, v, v_hat=None):
            t = (iterations + 1).astype(g.dtype)
            alpha = _cast(lr, g) * jnp.sqrt(1 - _cast(beta_2, g) ** t) / (1 - _cast(beta_1, g) ** t)
            m = m + (g - m) * (1 - beta_1)
            v = v + (jnp.square(g) - v) * (1 - beta_2)
            denom_v = v
            if v_hat is not None:
                v_hat = jnp.maximum(v_hat, v)
                denom_v = v_hat
            delta = -((m * alpha) / (jnp.sqrt(denom_v) + epsilon))
            return (delta, m, v) if v_hat is None else (delta, m, v, v_hat)

        trees = [slots["momentum"], slots["velocity"]] + ([slots["velocity_hat"]] if amsgrad else [])
        out = _map(leaf, grads, *trees)
        new = {"momentum": out[1], "velocity": out[2]}
        if amsgrad:
            new["velocity_hat"] = out[3]
        return out[0], new, extra

    return step


def adam(learning_rate: LearningRate = 0.001, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7,
         amsgrad: bool = False, *, weight_decay: float | None = None, clipnorm: float | None = None,
         clipvalue: float | None = None, global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.Adam`: variable -= m * lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) / (sqrt(v) + epsilon)."""
    slots = {"momentum": 0.0, "velocity": 0.0, **({"velocity_hat": 0.0} if amsgrad else {})}
    return _keras_optimizer("Adam", slots, _adam_step(beta_1, beta_2, epsilon, amsgrad), learning_rate,
                            weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                            global_clipnorm=global_clipnorm)


def adamw(learning_rate: LearningRate = 0.001, weight_decay: float = 0.004, beta_1: float = 0.9,
          beta_2: float = 0.999, epsilon: float = 1e-7, amsgrad: bool = False, *, clipnorm: float | None = None,
          clipvalue: float | None = None, global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.AdamW`: Adam after decaying the weights by `weight_decay * lr` (default 0.004)."""
    if weight_decay is None:
        raise ValueError("Argument `weight_decay` must be a float. Received: weight_decay=None")
    return adam(learning_rate, beta_1, beta_2, epsilon, amsgrad, weight_decay=weight_decay, clipnorm=clipnorm,
                clipvalue=clipvalue, global_clipnorm=global_clipnorm)


def rmsprop(learning_rate: LearningRate = 0.001, rho: float = 0.9, momentum: float = 0.0, epsilon: float = 1e-7,
            centered: bool = False, *, weight_decay: float | None = None, clipnorm: float | None = None,
            clipvalue: float | None = None, global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.RMSprop`: v = rho * v + (1 - rho) * g^2; variable -= lr * g / sqrt(v + epsilon)."""

    def step(grads, slots, iterations, lr, extra, params):
        def leaf(g, v, m, a):
            v = rho * v + (1 - rho) * jnp.square(g)
            if centered:
                a = rho * a + (1 - rho) * g
                denominator = v - jnp.square(a) + epsilon
            else:
                denominator = v + epsilon
            increment = (_cast(lr, g) * g) / jnp.sqrt(denominator)
            if momentum > 0:
                m = momentum * m + increment
                return -m, v, m, a
            return -increment, v, m, a

        zeros = jax.tree.map(jnp.zeros_like, grads)
        deltas, v, m, a = _map(leaf, grads, slots["velocity"], slots.get("momentum", zeros),
                               slots.get("average_gradient", zeros))
        new = {"velocity": v}
        if momentum > 0:
            new["momentum"] = m
        if centered:
            new["average_gradient"] = a
        return deltas, new, extra

    slots = {"velocity": 0.0, **({"momentum": 0.0} if momentum > 0 else {}),
             **({"average_gradient": 0.0} if centered else {})}
    return _keras_optimizer("RMSprop", slots, step, learning_rate, weight_decay=weight_decay, clipnorm=clipnorm,
                            clipvalue=clipvalue, global_clipnorm=global_clipnorm)


def adagrad(learning_rate: LearningRate = 0.001, initial_accumulator_value: float = 0.1, epsilon: float = 1e-7, *,
            weight_decay: float | None = None, clipnorm: float | None = None, clipvalue: float | None = None,
            global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.Adagrad`: a += g^2; variable -= lr * g / sqrt(a + epsilon)."""

    def step(grads, slots, iterations, lr, extra, params):
        def leaf(g, a):
            a = a + jnp.square(g)
            return -((_cast(lr, g) * g) / jnp.sqrt(a + epsilon)), a

        deltas, a = _map(leaf, grads, slots["accumulator"])
        return deltas, {"accumulator": a}, extra

    return _keras_optimizer("Adagrad", {"accumulator": initial_accumulator_value}, step, learning_rate,
                            weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                            global_clipnorm=global_clipnorm)


def adamax(learning_rate: LearningRate = 0.001, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7, *,
           weight_decay: float | None = None, clipnorm: float | None = None, clipvalue: float | None = None,
           global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.Adamax`: u = max(beta_2 * u, |g|); variable -= lr * m / ((1 - beta_1^t) (u + epsilon))."""

    def step(grads, slots, iterations, lr, extra, params):
        def leaf(g, m, u):
            t = (iterations + 1).astype(g.dtype)
            m = m + (g - m) * (1 - beta_1)
            u = jnp.maximum(beta_2 * u, jnp.abs(g))
            return -((_cast(lr, g) * m) / ((1 - _cast(beta_1, g) ** t) * (u + epsilon))), m, u

        deltas, m, u = _map(leaf, grads, slots["m"], slots["u"])
        return deltas, {"m": m, "u": u}, extra

    return _keras_optimizer("Adamax", {"m": 0.0, "u": 0.0}, step, learning_rate, weight_decay=weight_decay,
                            clipnorm=clipnorm, clipvalue=clipvalue, global_clipnorm=global_clipnorm)


def nadam(learning_rate: LearningRate = 0.001, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7, *,
          weight_decay: float | None = None, clipnorm: float | None = None, clipvalue: float | None = None,
          global_clipnorm: float | None = None) -> optax.GradientTransformation:
    """`keras.optimizers.Nadam`: Adam with Nesterov momentum and Keras's 0.96 momentum schedule."""

    def step(grads, slots, iterations, lr, extra, params):
        dtype = extra["u_product"].dtype
        u_product = extra["u_product"] * beta_1 * (1.0 - 0.5 * jnp.power(jnp.asarray(0.96, dtype),
                                                                           (iterations + 1).astype(dtype)))

        def leaf(g, m, v):
            t, t1 = (iterations + 1).astype(g.dtype), (iterations + 2).astype(g.dtype)
            decay, b1, b2 = _cast(0.96, g), _cast(beta_1, g), _cast(beta_2, g)
            u_t = b1 * (1.0 - 0.5 * decay ** t)
            u_t_1 = b1 * (1.0 - 0.5 * decay ** t1)
            u_product_t = u_product.astype(g.dtype)
            u_product_t_1 = u_product_t * u_t_1
            m = m + (g - m) * (1 - b1)
            v = v + (jnp.square(g) - v) * (1 - b2)
            m_hat = (u_t_1 * m) / (1 - u_product_t_1) + ((1 - u_t) * g) / (1 - u_product_t)
            v_hat = v / (1 - b2 ** t)
            return -((m_hat * _cast(lr, g)) / (jnp.sqrt(v_hat) + epsilon)), m, v

        deltas, m, v = _map(leaf, grads, slots["momentum"], slots["velocity"])
        return deltas, {"momentum": m, "velocity": v}, {"u_product": u_product}

    return _keras_optimizer("Nadam", {"momentum": 0.0, "velocity": 0.0}, step, learning_rate,
                            weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                            global_clipnorm=global_clipnorm, extra={"u_product": 1.0})


_BY_NAME: dict[str, Callable[..., optax.GradientTransformation]] = {
    "sgd": sgd, "adam": adam, "adamw": adamw, "rmsprop": rmsprop, "adagrad": adagrad, "adamax": adamax,
    "nadam": nadam,
}
# Keras config keys these functions take (the rest must be Keras's defaults; see from_keras).
_ACCEPTED = {"learning_rate", "momentum", "nesterov", "beta_1", "beta_2", "epsilon", "amsgrad", "weight_decay",
             "rho", "centered", "initial_accumulator_value", "clipnorm", "clipvalue", "global_clipnorm"}
_IGNORED_IF_DEFAULT = {"name": None, "use_ema": False, "ema_momentum": None, "ema_overwrite_frequency": None,
                       "loss_scale_factor": None, "gradient_accumulation_steps": None}


def get(identifier: Any) -> optax.GradientTransformation:
    """An optax transformation from a Keras optimizer name ("adam", "SGD", ...: Keras's defaults), an
    optax `GradientTransformation` (returned as is) or a Keras 3 optimizer object (its config)."""
    if isinstance(identifier, optax.GradientTransformation):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key not in _BY_NAME:
            raise ValueError(f"Unknown optimizer {identifier!r}; known names: {sorted(_BY_NAME)}, or pass an "
                             "optax.GradientTransformation (e.g. optax.adam(1e-3)).")
        return _BY_NAME[key]()
    if _is_keras_optimizer(identifier):
        return from_keras(identifier)
    raise TypeError(f"An optimizer must be a name ({sorted(_BY_NAME)}), an optax.GradientTransformation or a "
                    f"Keras optimizer, got {identifier!r}.")


def _is_keras_optimizer(obj: Any) -> bool:
    return any(c.__module__.startswith("keras") and c.__name__ in ("Optimizer", "BaseOptimizer")
               for c in type(obj).__mro__)


def from_keras(optimizer: Any) -> optax.GradientTransformation:
    """The optax twin of a Keras 3 optimizer object, from its config (learning rate schedules kept as
    callables). Options without a twin here (EMA, gradient accumulation, loss-scale factor) are an error."""
    key = type(optimizer).__name__.lower()
    if key not in _BY_NAME:
        raise ValueError(f"Keras optimizer {type(optimizer).__name__} has no optax twin here (known: "
                         f"{sorted(_BY_NAME)}); pass an optax.GradientTransformation instead.")
    config = dict(optimizer.get_config())
    for option, default in _IGNORED_IF_DEFAULT.items():
        value = config.pop(option, default)
        if option not in ("name", "ema_momentum") and value not in (default, None, False):
            raise ValueError(f"Keras optimizer option {option}={value!r} is not supported by jdist.optimizers; "
                             "leave it at its default or pass an optax.GradientTransformation.")
    unknown = set(config) - _ACCEPTED
    if unknown:
        raise ValueError(f"Keras optimizer options {sorted(unknown)} are not supported by jdist.optimizers.")
    if not isinstance(config.get("learning_rate"), (int, float)):
        config["learning_rate"] = optimizer._learning_rate  # a LearningRateSchedule: called with the step
    if key == "sgd":
        config["momentum"] = float(config["momentum"])
    return _BY_NAME[key](**config)
