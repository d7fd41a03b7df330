"""Losses: TF's loss-scaling helpers, and Keras 3's per-example losses by name.

Gradients are summed across replicas (TF's rule), so each replica must divide by
the global batch size; dividing by the per-replica size silently multiplies the
learning rate by the replica count.

`get("mse")`, `get("sparse_categorical_crossentropy")`, `SparseCategoricalCrossentropy(from_logits=True)`
or a Keras 3 loss object give per-example losses with Keras's names, defaults and values
(the `Trainer`'s `loss=`).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import optax

from jdist.strategy import context
from jdist.strategy.reduce_op import ReduceOp
from jdist.typing import ArrayLike


def _replica_context(caller: str):
    ctx = context.get_replica_context()
    if ctx is None:
        raise RuntimeError(
            f"You are calling {caller} in cross replica context, which is not allowed without "
            "`global_batch_size`: call it inside strategy.run(), or pass global_batch_size."
        )
    return ctx


def compute_average_loss(
    per_example_loss: ArrayLike,
    sample_weight: ArrayLike | float | None = None,
    global_batch_size: int | jax.Array | None = None,
    mask: ArrayLike | None = None,
) -> jax.Array:
    """sum(per_example_loss * sample_weight) / global_batch_size, as `tf.nn.compute_average_loss`.

    `global_batch_size=None` uses this replica's batch size times the replica
    count (TF's default). `mask` marks real examples of a padded batch: padding
    contributes nothing, and with `global_batch_size=None` the denominator is the
    number of real examples over all replicas. Inside `strategy.run` on a
    `jdist.DistributedBatch`, `mask` defaults to the replica's example mask, and
    then the default denominator stays TF's: the replica's real examples times
    the replica count (TF 2.21, 4 replicas holding 3, 3, 3 and 1 of 10 examples:
    the last divides by 4, the others by 12). An empty batch gives 0, never NaN.
    """
    loss = jnp.asarray(per_example_loss)
    from_context = mask is None and loss.ndim > 0
    if from_context:
        mask = _batch_mask_for(loss)
    if loss.ndim == 0:
        loss = loss[None]
    weights = jnp.ones_like(loss) if sample_weight is None else jnp.broadcast_to(
        jnp.asarray(sample_weight, loss.dtype).reshape(
            jnp.shape(sample_weight) + (1,) * (loss.ndim - jnp.ndim(sample_weight))
        ),
        loss.shape,
    )
    if mask is not None:
        m = jnp.asarray(mask, loss.dtype)
        weights = weights * m.reshape(m.shape + (1,) * (loss.ndim - m.ndim))
    total = jnp.sum(loss * weights)
    if global_batch_size is None:
        ctx = _replica_context("compute_average_loss")
        if mask is None:
            denominator = jnp.asarray(loss.shape[0] * ctx.num_replicas_in_sync, loss.dtype)
        elif from_context:  # this replica's real rows, as TF's shape of its share
            denominator = jnp.sum(jnp.asarray(mask, loss.dtype)) * ctx.num_replicas_in_sync
        else:
            denominator = ctx.all_reduce(ReduceOp.SUM, jnp.sum(jnp.asarray(mask, loss.dtype)))
    else:
        denominator = jnp.asarray(_batch_size(global_batch_size), loss.dtype)
    return jnp.where(denominator > 0, total / jnp.where(denominator > 0, denominator, 1), 0.0)


def _batch_size(global_batch_size: int | jax.Array) -> int | jax.Array:
    """A non-negative Python int, or an integer scalar computed in the step (`tf.shape(labels)[0] * replicas`)."""
    if (isinstance(global_batch_size, jax.Array) and global_batch_size.ndim == 0
            and jnp.issubdtype(global_batch_size.dtype, jnp.integer)):
        return global_batch_size
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size < 0:
        raise ValueError(f"global_batch_size must be a non-negative integer, got {global_batch_size!r}.")
    return global_batch_size


def _batch_mask_for(loss: Any) -> Any:
    """The replica's example mask from `run`'s distributed batch, if any (padding rows must not count)."""
    ctx = context.get_replica_context()
    mask = None if ctx is None else ctx.example_mask
    if mask is None:
        return None
    if loss.shape[0] != mask.shape[0]:
        raise ValueError(
            f"compute_average_loss: per_example_loss has {loss.shape[0]} rows but this replica's distributed "
            f"batch has {mask.shape[0]} (real examples plus padding), so the padding cannot be masked "
            "automatically. Keep the batch dimension first, or pass mask= explicitly."
        )
    return mask


def scale_regularization_loss(regularization_loss: ArrayLike | Sequence[ArrayLike]) -> jax.Array:
    """sum(regularization_loss) / num_replicas_in_sync, as `tf.nn.scale_regularization_loss`."""
    ctx = _replica_context("scale_regularization_loss")
    return jnp.sum(jnp.asarray(regularization_loss)) / ctx.num_replicas_in_sync


# ------------------------------------------------------------- Keras's losses
# Per-example losses with Keras 3's names, arguments and maths (keras/src/losses/losses.py and the
# JAX backend's nn.py): the Trainer averages them over the real examples itself. As in Keras, the
# cross-entropies take probabilities unless `from_logits=True`, and the loss keeps y_pred's dtype.
_EPSILON = 1e-7  # keras.config.epsilon()


def same_rank(y_true: Any, y_pred: Any) -> tuple:
    """Keras's `squeeze_or_expand_to_same_rank`: (batch,) labels against (batch, 1) outputs."""
    t_rank, p_rank = jnp.ndim(y_true), jnp.ndim(y_pred)
    if t_rank == p_rank + 1 and y_true.shape[-1] == 1:
        if p_rank == 1:
            y_pred = y_pred[..., None]
        else:
            y_true = jnp.squeeze(y_true, -1)
    if p_rank == t_rank + 1 and y_pred.shape[-1] == 1:
        if t_rank == 1:
            y_true = y_true[..., None]
        else:
            y_pred = jnp.squeeze(y_pred, -1)
    return y_true, y_pred


def _float(y_pred: Any) -> jax.Array:
    y_pred = jnp.asarray(y_pred)
    return y_pred if jnp.issubdtype(y_pred.dtype, jnp.floating) else y_pred.astype(jnp.float32)


def _prepare(y_true: Any, y_pred: Any) -> tuple:
    y_pred = _float(y_pred)
    return same_rank(jnp.asarray(y_true).astype(y_pred.dtype), y_pred)


def mean_squared_error(y_true: Any, y_pred: Any) -> jax.Array:
    """mean((y_true - y_pred)^2) over the last axis (`keras.losses.mean_squared_error`)."""
    y_true, y_pred = _prepare(y_true, y_pred)
    return jnp.mean(jnp.square(y_true - y_pred), axis=-1)


def mean_absolute_error(y_true: Any, y_pred: Any) -> jax.Array:
    """mean(|y_true - y_pred|) over the last axis (`keras.losses.mean_absolute_error`)."""
    y_true, y_pred = _prepare(y_true, y_pred)
    return jnp.mean(jnp.abs(y_true - y_pred), axis=-1)


def huber(y_true: Any, y_pred: Any, delta: float = 1.0) -> jax.Array:
    """Quadratic within `delta`, linear outside, averaged over the last axis (`keras.losses.huber`)."""
    y_true, y_pred = _prepare(y_true, y_pred)
    return jnp.mean(optax.huber_loss(y_pred, y_true, delta=delta).astype(y_pred.dtype), axis=-1)


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0,
                        axis: int = -1) -> jax.Array:
    """`keras.losses.binary_crossentropy`: probabilities clipped to [1e-7, 1 - 1e-7] unless `from_logits`."""
    y_true, y_pred = _prepare(y_true, y_pred)
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        bce = -y_true * jax.nn.log_sigmoid(y_pred) - (1.0 - y_true) * jax.nn.log_sigmoid(-y_pred)
    else:
        p = jnp.clip(y_pred, _EPSILON, 1.0 - _EPSILON)
        bce = -(y_true * jnp.log(p) + (1.0 - y_true) * jnp.log(1.0 - p))
    return jnp.mean(bce, axis=axis)


def _log_probabilities(y_pred: jax.Array, from_logits: bool, axis: int) -> jax.Array:
    if from_logits:
        return jax.nn.log_softmax(y_pred, axis=axis)
    # Keras renormalises the scores and clips them: logits given here give a meaningless loss.
    p = y_pred / jnp.sum(y_pred, axis, keepdims=True)
    return jnp.log(jnp.clip(p, _EPSILON, 1.0 - _EPSILON))


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0,
                             axis: int = -1) -> jax.Array:
    """`keras.losses.categorical_crossentropy` of one-hot (or soft) labels."""
    y_pred = _float(y_pred)
    y_true = jnp.asarray(y_true).astype(y_pred.dtype)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"categorical_crossentropy needs one-hot labels shaped like y_pred: got y_true "
                         f"{y_true.shape} and y_pred {y_pred.shape}. For integer labels use "
                         "sparse_categorical_crossentropy.")
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / y_true.shape[-1]
    return -jnp.sum(y_true * _log_probabilities(y_pred, from_logits, axis), axis=axis)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, axis: int = -1) -> jax.Array:
    """`keras.losses.sparse_categorical_crossentropy` of integer labels ((batch,) or (batch, 1)).

    As in Keras, `y_pred` holds probabilities unless `from_logits=True`."""
    y_pred = _float(y_pred)
    labels = jnp.asarray(y_true)
    if labels.ndim == y_pred.ndim and labels.shape[axis] == 1:
        labels = jnp.squeeze(labels, axis=axis)
    if labels.shape != y_pred.shape[:-1]:
        raise ValueError(f"sparse_categorical_crossentropy needs integer labels shaped like y_pred without its "
                         f"class axis: got y_true {jnp.shape(y_true)} and y_pred {y_pred.shape}. For one-hot "
                         "labels use categorical_crossentropy.")
    labels = labels.astype(jnp.int32)
    if from_logits and axis in (-1, y_pred.ndim - 1):
        return optax.softmax_cross_entropy_with_integer_labels(y_pred, labels).astype(y_pred.dtype)
    one_hot = jax.nn.one_hot(labels, y_pred.shape[axis], dtype=y_pred.dtype, axis=axis)
    return -jnp.sum(one_hot * _log_probabilities(y_pred, from_logits, axis), axis=axis)


class _LossFunctionWrapper:
    """A Keras loss class's twin: a picklable callable `loss(y_true, y_pred) -> per-example losses`."""

    fn: Callable[..., Any]

    def __init__(self, name: str | None = None, **kwargs: Any):
        self.name = name or snake_case(type(self).__name__)
        self._kwargs = kwargs

    def __call__(self, y_true: Any, y_pred: Any) -> jax.Array:
        return type(self).fn(y_true, y_pred, **self._kwargs)

    def get_config(self) -> dict:
        return {"name": self.name, **self._kwargs}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"


class MeanSquaredError(_LossFunctionWrapper):
    fn = staticmethod(mean_squared_error)

    def __init__(self, name: str = "mean_squared_error"):
        super().__init__(name)


class MeanAbsoluteError(_LossFunctionWrapper):
    fn = staticmethod(mean_absolute_error)

    def __init__(self, name: str = "mean_absolute_error"):
        super().__init__(name)


class Huber(_LossFunctionWrapper):
    fn = staticmethod(huber)

    def __init__(self, delta: float = 1.0, name: str = "huber_loss"):
        super().__init__(name, delta=delta)


class BinaryCrossentropy(_LossFunctionWrapper):
    fn = staticmethod(binary_crossentropy)

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 name: str = "binary_crossentropy"):
        super().__init__(name, from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)


class CategoricalCrossentropy(_LossFunctionWrapper):
    fn = staticmethod(categorical_crossentropy)

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 name: str = "categorical_crossentropy"):
        super().__init__(name, from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)


class SparseCategoricalCrossentropy(_LossFunctionWrapper):
    fn = staticmethod(sparse_categorical_crossentropy)

    def __init__(self, from_logits: bool = False, axis: int = -1, name: str = "sparse_categorical_crossentropy"):
        super().__init__(name, from_logits=from_logits, axis=axis)


def crossentropy(y_true: Any, y_pred: Any) -> jax.Array:
    """Keras's "crossentropy" / "ce": binary, sparse or categorical, chosen from the shapes as Keras does."""
    is_binary, is_sparse = binary_or_sparse(y_true, y_pred)
    if is_binary:
        return binary_crossentropy(y_true, y_pred)
    return (sparse_categorical_crossentropy if is_sparse else categorical_crossentropy)(y_true, y_pred)


def binary_or_sparse(y_true: Any, y_pred: Any) -> tuple[bool, bool]:
    """Keras's `is_binary_or_sparse_categorical`: from the label and prediction shapes only."""
    t_shape, p_shape = jnp.shape(y_true), jnp.shape(y_pred)
    is_binary = p_shape[-1] == 1
    is_sparse = len(t_shape) < len(p_shape) or t_shape[-1] == 1 and p_shape[-1] > 1
    return is_binary, is_sparse


_BY_NAME: dict[str, Callable] = {}
for _names, _fn in (
        (("mse", "MSE", "mean_squared_error", "MeanSquaredError"), mean_squared_error),
        (("mae", "MAE", "mean_absolute_error", "MeanAbsoluteError"), mean_absolute_error),
        (("huber", "Huber"), huber),
        (("bce", "BCE", "binary_crossentropy", "BinaryCrossentropy"), binary_crossentropy),
        (("categorical_crossentropy", "CategoricalCrossentropy"), categorical_crossentropy),
        (("sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"), sparse_categorical_crossentropy),
        (("crossentropy", "ce", "CE", "Crossentropy"), crossentropy)):
    _BY_NAME.update(dict.fromkeys(_names, _fn))


def get(identifier: Any) -> Callable[[Any, Any], Any]:
    """A per-example loss `fn(y_true, y_pred) -> (batch,)` from a Keras loss name ("mse",
    "sparse_categorical_crossentropy", ...: Keras's defaults, so cross-entropies take probabilities),
    a `jdist.losses` object, a Keras 3 loss object (`keras.losses.X(...)`) or a function."""
    if isinstance(identifier, str):
        if identifier not in _BY_NAME:
            raise ValueError(f"Unknown loss {identifier!r}; known names: {sorted(_BY_NAME)}, or pass "
                             "fn(y_true, y_pred) -> per-example losses.")
        return _BY_NAME[identifier]
    if _is_keras_loss(identifier):
        return KerasLoss(identifier)
    if callable(identifier):
        return identifier
    raise TypeError(f"loss must be a name, a Keras loss or a function loss(y_true, y_pred) -> per-example "
                    f"losses, got {identifier!r}.")


def _is_keras_loss(obj: Any) -> bool:
    return any(c.__name__ == "Loss" and c.__module__.startswith("keras") for c in type(obj).__mro__)


class KerasLoss:
    """A Keras 3 loss object as a per-example loss: its `call` (the unreduced losses) on JAX arrays,
    after casting to the loss's dtype as Keras's `__call__` does. The Trainer then reduces as
    Keras's default "sum_over_batch_size" reduction: the weighted sum over the real examples
    divided by their number. Needs Keras's JAX backend."""

    def __init__(self, loss: Any):
        import keras

        if keras.backend.backend() != "jax":
            raise ValueError(f"A Keras loss runs in jdist only on Keras's JAX backend (this Keras uses "
                             f"{keras.backend.backend()!r}): set KERAS_BACKEND=jax before importing keras.")
        reduction = getattr(loss, "reduction", "sum_over_batch_size")
        if reduction not in ("sum_over_batch_size", None, "none"):
            raise ValueError(f"{type(loss).__name__}(reduction={reduction!r}): the Trainer reduces like Keras's "
                             "default reduction, 'sum_over_batch_size'; leave reduction at its default.")
        self.loss = loss
        self.name = getattr(loss, "name", type(loss).__name__)

    def __call__(self, y_true: Any, y_pred: Any) -> jax.Array:
        dtype = getattr(self.loss, "dtype", None) or jnp.asarray(y_pred).dtype
        cast = lambda a: jnp.asarray(a, dtype)  # noqa: E731
        return jnp.asarray(self.loss.call(jax.tree.map(cast, y_true), jax.tree.map(cast, y_pred)))

    def __repr__(self) -> str:
        return f"KerasLoss({self.loss!r})"


def snake_case(name: str) -> str:
    """Keras's default object name from a class name:
    `SparseCategoricalCrossentropy` -> `sparse_categorical_crossentropy`."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
