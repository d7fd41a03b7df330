"""Replica-aware metrics: state accumulates per replica, combined only when read.

TF keeps Keras metric state in SyncOnRead variables: each replica adds to its own
copy and the copies are summed when `result()` is read. jdist does the same with
pure functions: a metric is `init` / `update` / `compute` over a small state
pytree (sums and counts). Inside `run` each replica updates its own state (a
`PerReplica` comes back); the `Trainer` keeps one state per replica stacked on
a leading axis. `result(state)` combines `PerReplica` leaves with the metric's
`aggregation` (SUM by default) and then computes, so a mean or an accuracy is
exact over the global batch and masked padding (`sample_weight=0`) never counts. Inside
`run` on a `jdist.DistributedBatch`, `update` applies the replica's mask of real examples by
default (as `compute_average_loss` does), so padding rows never count.

    acc = jdist.metrics.SparseCategoricalAccuracy()
    state = strategy.run(lambda s, y, logits: acc.update(s, y, logits), args=(acc.init(), y, logits))
    acc.result(state)        # summed over replicas, then total / count

Keras-style stateful use also works eagerly: `update_state`, `result()`, `reset_state`.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

import functools
import inspect

from jdist import context, dispatch
from jdist.aggregation import VariableAggregation, mark_per_replica
from jdist.values import PerReplica

State = Any


class Metric:
    """Base class for metrics. Subclasses define `init`, `update` and `compute`.

    `aggregation` says how each state leaf combines across replicas when read
    (SUM, MEAN or ONLY_FIRST_REPLICA); override `aggregations(state)` to choose per leaf.
    """

    aggregation: VariableAggregation = VariableAggregation.SUM

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "update" in cls.__dict__:
            cls.update = _per_replica_update(cls.__dict__["update"])

    def __init__(self, name: str | None = None, dtype: Any = jnp.float32):
        self.name = name or _snake_case(type(self).__name__)
        self.dtype = dtype
        self._state: State | None = None

    # ---------------------------------------------------------- pure functions
    def init(self) -> State:
        """The empty state of one replica."""
        raise NotImplementedError

    def update(self, state: State, *args: Any, sample_weight: Any = None) -> State:
        """The state after one batch (traceable; called per replica)."""
        raise NotImplementedError

    def compute(self, state: State) -> jax.Array:
        """The metric's value from an aggregated (whole-run) state."""
        raise NotImplementedError

    def aggregations(self, state: State) -> Any:
        """A pytree like `state` of `VariableAggregation`s (default: `self.aggregation` everywhere)."""
        return jax.tree.map(lambda _: self.aggregation, state)

    def aggregate(self, state: State) -> State:
        """Combines per-replica leaves (`PerReplica`) into one state; plain leaves pass through."""
        is_leaf = lambda x: isinstance(x, PerReplica)  # noqa: E731
        leaves, treedef = jax.tree.flatten(state, is_leaf=is_leaf)
        kinds = jax.tree.leaves(self.aggregations(jax.tree.unflatten(treedef, [0] * len(leaves))))
        return jax.tree.unflatten(treedef, [aggregate_leaf(leaf, kind) for leaf, kind in zip(leaves, kinds)])

    def result(self, state: State | None = None) -> jax.Array:
        """The value: of `state` (aggregating per-replica parts first), else of the eager state."""
        if state is None:
            state = self._state if self._state is not None else self.init()
        return dispatch.dispatched(self.compute(self.aggregate(state)))

    # ------------------------------------------------------- Keras-style eager
    def update_state(self, *args: Any, sample_weight: Any = None) -> None:
        """Eagerly folds one batch into this object's own state (Keras's `update_state`)."""
        state = self._state if self._state is not None else self.init()
        if getattr(self, "_jit_update", None) is None:
            self._jit_update = jax.jit(self.update)
        self._state = dispatch.dispatched(self._jit_update(state, *args, sample_weight=sample_weight))

    def reset_state(self) -> None:
        self._state = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _per_replica_update(update: Callable) -> Callable:
    """Inside `run`, every state leaf stays per-replica (SyncOnRead), even a count that happens
    to be equal on all replicas, so reading it sums the replicas' copies; and padding rows of
    the replica's distributed batch never count (its example mask joins `sample_weight`), as
    `compute_average_loss` masks itself."""
    signature = inspect.signature(update)

    @functools.wraps(update)
    def wrapped(self, state, *args, **kwargs):
        if "sample_weight" in signature.parameters:
            bound = signature.bind(self, state, *args, **kwargs)
            weight = _masked_sample_weight(self, args[0] if args else None, bound.arguments.get("sample_weight"))
            if weight is not None:
                bound.arguments["sample_weight"] = weight
                args, kwargs = bound.args[2:], bound.kwargs
        return mark_per_replica(update(self, state, *args, **kwargs))

    wrapped._per_replica = True
    return wrapped


def _masked_sample_weight(metric: "Metric", values: Any, sample_weight: Any) -> Any:
    """`sample_weight` times the replica's mask of real examples, inside `run` on a distributed
    batch whose rows `values` are; None where nothing needs masking."""
    ctx = context.get_replica_context()
    if ctx is None or ctx.axis_name is None or values is None or jnp.ndim(values) == 0:
        return None
    try:
        mask = ctx.example_mask
    except ValueError:
        if sample_weight is not None:
            return None  # several distributed batches: the caller's weights decide
        raise ValueError(
            f"{metric.name}.update() inside run() was given several distributed batches, so which "
            "example mask applies is ambiguous. Pass the batch's mask yourself: "
            "update(state, ..., sample_weight=batch.mask)."
        ) from None
    if mask is None or jnp.shape(values)[0] != mask.shape[0]:
        return None  # not one row per example of the batch: no padding rows to drop
    mask = jnp.asarray(mask, jnp.float32)
    if sample_weight is None:
        return mask
    weight = jnp.asarray(sample_weight)
    return weight * mask.reshape(mask.shape + (1,) * max(weight.ndim - 1, 0))


def aggregate_leaf(leaf: Any, aggregation: VariableAggregation) -> Any:
    """Reads one SyncOnRead leaf: SUM / MEAN over replicas, or replica 0's value."""
    if not isinstance(leaf, PerReplica):
        return leaf
    if aggregation is VariableAggregation.NONE:
        raise ValueError(
            "A metric state leaf with VariableAggregation.NONE cannot be read across replicas; "
            "use SUM, MEAN or ONLY_FIRST_REPLICA."
        )
    if leaf.is_stacked:
        stacked = leaf.stacked
        if aggregation is VariableAggregation.ONLY_FIRST_REPLICA:
            return stacked[0]
        total = jnp.sum(stacked, axis=0)
        return total / stacked.shape[0] if aggregation is VariableAggregation.MEAN else total
    parts = [jnp.asarray(v) for v in leaf.values]
    if aggregation is VariableAggregation.ONLY_FIRST_REPLICA:
        return parts[0]
    total = sum(jax.device_put(p, jax.devices()[0]) for p in parts)
    return total / len(parts) if aggregation is VariableAggregation.MEAN else total


def _weights(sample_weight: Any, values: jax.Array) -> jax.Array:
    """Per-element weights broadcast to `values` (a mask of shape (batch,) works for any rank)."""
    if sample_weight is None:
        return jnp.ones_like(values)
    w = jnp.asarray(sample_weight, values.dtype)
    w = w.reshape(w.shape + (1,) * (values.ndim - w.ndim))
    return jnp.broadcast_to(w, values.shape)


class Mean(Metric):
    """The weighted mean of all values seen: `update(state, values, sample_weight=None)`."""

    def init(self) -> State:
        return {"total": jnp.zeros((), self.dtype), "count": jnp.zeros((), self.dtype)}

    def update(self, state: State, values: Any, sample_weight: Any = None) -> State:
        values = jnp.asarray(values, self.dtype)
        w = _weights(sample_weight, values)
        return {"total": state["total"] + jnp.sum(values * w), "count": state["count"] + jnp.sum(w)}

    def compute(self, state: State) -> jax.Array:
        count = state["count"]
        return jnp.where(count > 0, state["total"] / jnp.where(count > 0, count, 1), 0.0)


class MeanMetricWrapper(Mean):
    """The mean of `fn(y_true, y_pred)` per example: how accuracy-like metrics are built."""

    def __init__(self, fn: Callable[[Any, Any], Any], name: str | None = None, dtype: Any = jnp.float32):
        super().__init__(name=name or getattr(fn, "__name__", None), dtype=dtype)
        self.fn = fn

    def update(self, state: State, y_true: Any, y_pred: Any = None, sample_weight: Any = None) -> State:
        if y_pred is None:
            raise TypeError(f"{self.name}.update(state, y_true, y_pred, sample_weight=None) needs y_pred.")
        return super().update(state, self.fn(y_true, y_pred), sample_weight=sample_weight)


def accuracy(y_true: Any, y_pred: Any) -> jax.Array:
    """1.0 where the prediction equals the label exactly (Keras's `Accuracy`)."""
    return (jnp.asarray(y_true) == jnp.asarray(y_pred)).astype(jnp.float32)


def sparse_categorical_accuracy(y_true: Any, y_pred: Any) -> jax.Array:
    """1.0 where the arg-max of the scores equals the integer label."""
    y_true = jnp.asarray(y_true)
    if y_true.ndim == jnp.ndim(y_pred):  # labels of shape (batch, 1), as Keras allows
        y_true = y_true[..., 0]
    return (jnp.argmax(y_pred, axis=-1) == y_true).astype(jnp.float32)


class Accuracy(MeanMetricWrapper):
    """How often predictions equal labels."""

    def __init__(self, name: str = "accuracy", dtype: Any = jnp.float32):
        super().__init__(accuracy, name=name, dtype=dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often the arg-max of `y_pred` equals the integer label `y_true`."""

    def __init__(self, name: str = "accuracy", dtype: Any = jnp.float32):
        super().__init__(sparse_categorical_accuracy, name=name, dtype=dtype)


_BY_NAME: dict[str, Callable[[], Metric]] = {
    "accuracy": SparseCategoricalAccuracy,
    "acc": SparseCategoricalAccuracy,
    "sparse_categorical_accuracy": lambda: SparseCategoricalAccuracy(name="sparse_categorical_accuracy"),
}


def get(identifier: "Metric | str | Callable") -> Metric:
    """A metric from an instance, a name ("accuracy") or a per-example function `fn(y_true, y_pred)`.

    "accuracy" means sparse categorical accuracy (integer labels, score vectors),
    which is what Keras picks for a sparse categorical loss.
    """
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        if identifier not in _BY_NAME:
            raise ValueError(f"Unknown metric {identifier!r}; known names: {sorted(_BY_NAME)}, or pass a Metric.")
        return _BY_NAME[identifier]()
    if callable(identifier):
        return MeanMetricWrapper(identifier)
    raise TypeError(f"A metric must be a jdist.metrics.Metric, a name or a function, got {identifier!r}.")


def _snake_case(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
