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

import functools
import inspect
import os
from typing import Any, Callable, Sequence, TypeAlias

import jax
import jax.numpy as jnp

from jdist.losses import snake_case
from jdist.strategy import context, dispatch
from jdist.strategy.aggregation import VariableAggregation, mark_per_replica
from jdist.strategy.values import PerReplica
from jdist.typing import ArrayLike, PyTree

State = PyTree  # one replica's metric state
# A metric as `compile(metrics=...)` takes it: a `Metric`, a Keras name ("accuracy"), a Keras metric
# object or a per-example function `fn(y_true, y_pred)`.
MetricLike: TypeAlias = "Metric | str | Callable[..., Any]"


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

    def __init__(self, name: str | None = None, dtype: Any = None):
        self.name = name or snake_case(type(self).__name__)
        self.dtype = dtype
        self._state: State | None = None

    # ---------------------------------------------------------- pure functions
    def init(self) -> State:
        """The empty state of one replica."""
        raise NotImplementedError

    def update(self, state: State, *args: ArrayLike, sample_weight: ArrayLike | None = None) -> State:
        """The state after one batch (traceable; called per replica)."""
        raise NotImplementedError

    def compute(self, state: State) -> jax.Array:
        """The metric's value from an aggregated (whole-run) state."""
        raise NotImplementedError

    def aggregations(self, state: State) -> PyTree:
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
    def update_state(self, *args: ArrayLike, sample_weight: ArrayLike | None = None) -> None:
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
    """The weighted mean of all values seen: `update(state, values, sample_weight=None)`.

    The state's dtype is `dtype`, by default JAX's default float (float64 with `jax_enable_x64`),
    so a float64 model's metrics are summed in float64."""

    def init(self) -> State:
        return {"total": jnp.zeros((), self.dtype or float), "count": jnp.zeros((), self.dtype or float)}

    def update(self, state: State, values: ArrayLike, sample_weight: ArrayLike | None = None) -> State:
        dtype = state["total"].dtype
        values = jnp.asarray(values, dtype)
        w = _weights(sample_weight, values)
        return {"total": (state["total"] + jnp.sum(values * w)).astype(dtype),
                "count": (state["count"] + jnp.sum(w)).astype(dtype)}

    def compute(self, state: State) -> jax.Array:
        count = state["count"]
        return jnp.where(count > 0, state["total"] / jnp.where(count > 0, count, 1), 0.0)


class MeanMetricWrapper(Mean):
    """The mean of `fn(y_true, y_pred)` per example: how accuracy-like metrics are built."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None, dtype: Any = None, **kwargs: Any):
        super().__init__(name=name or getattr(fn, "__name__", None), dtype=dtype)
        self.fn = fn
        self._fn_kwargs = kwargs

    def update(self, state: State, y_true: ArrayLike, y_pred: ArrayLike | None = None,
               sample_weight: ArrayLike | None = None) -> State:
        if y_pred is None:
            raise TypeError(f"{self.name}.update(state, y_true, y_pred, sample_weight=None) needs y_pred.")
        return super().update(state, self.fn(y_true, y_pred, **self._fn_kwargs), sample_weight=sample_weight)


# ------------------------------------------------ Keras's per-example metric functions
# Same names, arguments and values as keras/src/metrics/accuracy_metrics.py (1.0 per hit, in
# y_pred's float dtype); their classes below are MeanMetricWrappers, as in Keras.
def _float_of(y_pred: ArrayLike) -> Any:
    dtype = jnp.asarray(y_pred).dtype
    return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32


def accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> jax.Array:
    """1.0 where the prediction equals the label exactly (Keras's `Accuracy`)."""
    y_true, y_pred = same_rank(jnp.asarray(y_true), jnp.asarray(y_pred))
    return (y_true == y_pred.astype(y_true.dtype)).astype(_float_of(y_pred))


def binary_accuracy(y_true: ArrayLike, y_pred: ArrayLike, threshold: float = 0.5) -> jax.Array:
    """1.0 where `y_pred > threshold` equals the 0/1 label."""
    y_true, y_pred = same_rank(jnp.asarray(y_true), jnp.asarray(y_pred))
    return (y_true == (y_pred > threshold).astype(y_true.dtype)).astype(_float_of(y_pred))


def categorical_accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> jax.Array:
    """1.0 where the arg-max of the scores equals the arg-max of the one-hot label."""
    return (jnp.argmax(y_true, axis=-1) == jnp.argmax(y_pred, axis=-1)).astype(_float_of(y_pred))


def sparse_categorical_accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> jax.Array:
    """1.0 where the arg-max of the scores equals the integer label ((batch,) or (batch, 1))."""
    y_true = jnp.asarray(y_true)
    if y_true.ndim == jnp.ndim(y_pred) and y_true.shape[-1] == 1:  # labels of shape (batch, 1)
        y_true = y_true[..., 0]
    dtype = _float_of(y_pred)
    return (jnp.argmax(y_pred, axis=-1).astype(dtype) == y_true.astype(dtype)).astype(dtype)


def _in_top_k(labels: Any, y_pred: ArrayLike, k: int) -> jax.Array:
    """Keras's `ops.in_top_k`: the label's score ranks within the k largest (ties count in its favour)."""
    y_pred = jnp.asarray(y_pred)
    y_pred = y_pred.reshape(-1, y_pred.shape[-1])
    at_label = jnp.take_along_axis(y_pred, labels.reshape(-1, 1).astype(jnp.int32), axis=-1)
    at_label = jnp.where(jnp.isnan(at_label), -jnp.inf, at_label)
    rank = 1 + jnp.sum(y_pred > at_label, axis=-1)
    return (rank <= k).reshape(labels.shape).astype(_float_of(y_pred))


def top_k_categorical_accuracy(y_true: ArrayLike, y_pred: ArrayLike, k: int = 5) -> jax.Array:
    """1.0 where the one-hot label's class is among the k highest scores."""
    return _in_top_k(jnp.argmax(y_true, axis=-1), y_pred, k)


def sparse_top_k_categorical_accuracy(y_true: ArrayLike, y_pred: ArrayLike, k: int = 5) -> jax.Array:
    """1.0 where the integer label is among the k highest scores."""
    y_true = jnp.asarray(y_true)
    if y_true.ndim == jnp.ndim(y_pred) and y_true.shape[-1] == 1:
        y_true = y_true[..., 0]
    return _in_top_k(y_true, y_pred, k)


def keras_accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> jax.Array:
    """Keras's "accuracy" / "acc" in `compile`: binary, sparse categorical or categorical accuracy,
    chosen from the label and prediction shapes (y_pred's last axis 1: binary; labels of lower rank
    or a last axis of 1: sparse; else one-hot labels)."""
    from jdist.losses import binary_or_sparse

    is_binary, is_sparse = binary_or_sparse(y_true, y_pred)
    if is_binary:
        return binary_accuracy(y_true, y_pred)
    return (sparse_categorical_accuracy if is_sparse else categorical_accuracy)(y_true, y_pred)


def mean_squared_error(y_true: ArrayLike, y_pred: ArrayLike) -> jax.Array:
    from jdist.losses import mean_squared_error as mse

    return mse(y_true, y_pred)


def mean_absolute_error(y_true: ArrayLike, y_pred: ArrayLike) -> jax.Array:
    from jdist.losses import mean_absolute_error as mae

    return mae(y_true, y_pred)


def same_rank(y_true: ArrayLike, y_pred: ArrayLike) -> tuple:
    from jdist.losses import same_rank as same_rank

    return same_rank(y_true, y_pred)


class Accuracy(MeanMetricWrapper):
    """How often predictions equal labels."""

    def __init__(self, name: str = "accuracy", dtype: Any = None):
        super().__init__(accuracy, name=name, dtype=dtype)


class BinaryAccuracy(MeanMetricWrapper):
    """How often `y_pred > threshold` matches the 0/1 label."""

    def __init__(self, name: str = "binary_accuracy", dtype: Any = None, threshold: float = 0.5):
        super().__init__(binary_accuracy, name=name, dtype=dtype, threshold=threshold)


class CategoricalAccuracy(MeanMetricWrapper):
    """How often the arg-max of `y_pred` matches the one-hot label's."""

    def __init__(self, name: str = "categorical_accuracy", dtype: Any = None):
        super().__init__(categorical_accuracy, name=name, dtype=dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often the arg-max of `y_pred` equals the integer label `y_true`."""

    def __init__(self, name: str = "sparse_categorical_accuracy", dtype: Any = None):
        super().__init__(sparse_categorical_accuracy, name=name, dtype=dtype)


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the one-hot label's class is among the k highest scores."""

    def __init__(self, k: int = 5, name: str = "top_k_categorical_accuracy", dtype: Any = None):
        super().__init__(top_k_categorical_accuracy, name=name, dtype=dtype, k=k)


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the integer label is among the k highest scores."""

    def __init__(self, k: int = 5, name: str = "sparse_top_k_categorical_accuracy", dtype: Any = None):
        super().__init__(sparse_top_k_categorical_accuracy, name=name, dtype=dtype, k=k)


class MeanSquaredError(MeanMetricWrapper):
    def __init__(self, name: str = "mean_squared_error", dtype: Any = None):
        super().__init__(mean_squared_error, name=name, dtype=dtype)


class MeanAbsoluteError(MeanMetricWrapper):
    def __init__(self, name: str = "mean_absolute_error", dtype: Any = None):
        super().__init__(mean_absolute_error, name=name, dtype=dtype)


_AGGREGATIONS = {"sum": VariableAggregation.SUM, "mean": VariableAggregation.MEAN,
                 "only_first_replica": VariableAggregation.ONLY_FIRST_REPLICA, "none": VariableAggregation.NONE}


class KerasMetric(Metric):
    """A Keras 3 metric object through its stateless API, replica-aware like every jdist metric.

    The state is the list of the metric's variable values (`stateless_reset_state`), updated by
    `stateless_update_state` and read by `stateless_result`; each variable combines across
    replicas by its own `aggregation` (Keras metrics sum theirs), so AUC's, Precision's and
    Recall's confusion counts are summed over the replicas before the result is computed. Needs
    Keras's JAX backend."""

    def __init__(self, metric: Any, name: str | None = None):
        import keras

        if keras.backend.backend() != "jax":
            raise ValueError(f"A Keras metric runs in jdist only on Keras's JAX backend (this Keras uses "
                             f"{keras.backend.backend()!r}): set KERAS_BACKEND=jax before importing keras.")
        if not metric.variables:
            raise ValueError(f"Keras metric {metric.name!r} has no variables yet (it builds them on its first "
                             "update); give it the arguments that build them in its constructor.")
        super().__init__(name=name or metric.name, dtype=None)
        self.metric = metric

    def init(self) -> State:
        return [jnp.asarray(v) for v in self.metric.stateless_reset_state()]

    def update(self, state: State, y_true: ArrayLike, y_pred: ArrayLike | None = None,
               sample_weight: ArrayLike | None = None) -> State:
        return [jnp.asarray(v) for v in self.metric.stateless_update_state(
            list(state), y_true, y_pred, sample_weight=sample_weight)]

    def compute(self, state: State) -> jax.Array:
        return jnp.asarray(self.metric.stateless_result(list(state)))

    def aggregations(self, state: State) -> PyTree:
        return [_AGGREGATIONS[str(getattr(v, "aggregation", "sum")).lower()] for v in self.metric.variables]


def _keras_metric(class_name: str, name: str) -> Callable[[], Metric]:
    def make() -> Metric:
        os.environ.setdefault("KERAS_BACKEND", "jax")  # jdist runs Keras metrics on its JAX backend
        try:
            import keras
        except ImportError as error:
            raise ImportError(f"Metric {name!r} is Keras's {class_name}: install keras (pip install keras) and "
                              "set KERAS_BACKEND=jax.") from error
        return KerasMetric(getattr(keras.metrics, class_name)(name=name), name=name)

    return make


_NATIVE: dict[str, Callable[..., Any]] = {
    "accuracy": keras_accuracy, "acc": keras_accuracy,
    "binary_accuracy": binary_accuracy, "categorical_accuracy": categorical_accuracy,
    "sparse_categorical_accuracy": sparse_categorical_accuracy,
    "top_k_categorical_accuracy": top_k_categorical_accuracy,
    "sparse_top_k_categorical_accuracy": sparse_top_k_categorical_accuracy,
    "mse": mean_squared_error, "MSE": mean_squared_error, "mean_squared_error": mean_squared_error,
    "MeanSquaredError": mean_squared_error,
    "mae": mean_absolute_error, "MAE": mean_absolute_error, "mean_absolute_error": mean_absolute_error,
    "MeanAbsoluteError": mean_absolute_error,
    "BinaryAccuracy": binary_accuracy, "CategoricalAccuracy": categorical_accuracy,
    "SparseCategoricalAccuracy": sparse_categorical_accuracy,
    "TopKCategoricalAccuracy": top_k_categorical_accuracy,
    "SparseTopKCategoricalAccuracy": sparse_top_k_categorical_accuracy,
}
_KERAS_ONLY = {"auc": "AUC", "AUC": "AUC", "precision": "Precision", "Precision": "Precision",
               "recall": "Recall", "Recall": "Recall"}


def get(identifier: "Metric | str | Callable") -> Metric:
    """A metric from an instance, a Keras name, a Keras 3 metric object or a per-example function
    `fn(y_true, y_pred)`; named as Keras names it (the string given, else the object's name).

    "accuracy" / "acc" is resolved as Keras's `compile` resolves it, from the label and
    prediction shapes at the first step: binary, sparse categorical or categorical accuracy.
    "auc", "precision" and "recall" are Keras's own metric objects (they need Keras).
    """
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        if identifier in _NATIVE:
            return MeanMetricWrapper(_NATIVE[identifier], name=identifier)
        if identifier in _KERAS_ONLY:
            return _keras_metric(_KERAS_ONLY[identifier], identifier)()
        raise ValueError(f"Unknown metric {identifier!r}; known names: {sorted(_NATIVE) + sorted(_KERAS_ONLY)}, "
                         "or pass a Metric, a Keras metric or a function fn(y_true, y_pred).")
    if _is_keras_metric(identifier):
        return KerasMetric(identifier)
    if callable(identifier):
        return MeanMetricWrapper(identifier)
    raise TypeError(f"A metric must be a jdist.metrics.Metric, a name or a function, got {identifier!r}.")


def _is_keras_metric(obj: Any) -> bool:
    return any(c.__name__ == "Metric" and c.__module__.startswith("keras") for c in type(obj).__mro__)


def compile_metrics(metrics: Sequence[MetricLike] = (),
                    weighted_metrics: Sequence[MetricLike] = ()) -> list[tuple[str, Metric, bool]]:
    """`(log name, metric, weighted)` for Keras's `compile(metrics=, weighted_metrics=)`.

    As in Keras 3, `metrics` ignore sample and class weights (padding still never counts) and
    `weighted_metrics` weigh each example by them. Names follow Keras: a repeated name gets
    `_1`, `_2`, ...; a weighted metric whose name is taken becomes `weighted_<name>`."""
    entries: list[tuple[str, Metric, bool]] = []
    counters: dict[str, int] = {"loss": 1}
    for group, weighted in ((metrics, False), (weighted_metrics, True)):
        if isinstance(group, (str, Metric)) or not isinstance(group, Sequence):
            raise TypeError(f"{'weighted_metrics' if weighted else 'metrics'} must be a list or tuple of metrics, "
                            f"got {group!r}.")
        for identifier in group:
            metric = get(identifier)
            name = metric.name
            if name == "loss":
                raise ValueError("A metric cannot be named 'loss' (the Trainer reports the loss under that name).")
            if name in counters:
                if weighted:
                    name = f"weighted_{metric.name}"
                if name in counters:
                    counters[name] += 1
                    name = f"{name}_{counters[name] - 1}"
            counters.setdefault(name, 1)
            entries.append((name, metric, weighted))
    return entries

