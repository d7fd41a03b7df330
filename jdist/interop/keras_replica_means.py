"""Keras's `fit` under a strategy trains on a batch the replicas do not divide as TF's `fit` does.

TF's `fit` splits each batch over the replicas in consecutive chunks of ceil(rows / replicas) (22 rows at
batch_size=8 on 4 replicas: the last batch of 6 as 2, 2, 2, 0; every batch of 8 on 3 replicas as 3, 3, 2), and
each replica's loss is the mean over its own rows, scaled by 1 / replicas (Keras 3 on TensorFlow:
`scale_loss_for_distribution`; tf_keras likewise). The gradient of such a step is the mean of the replicas'
means, not the mean over the batch: observed, TF 2.21 with Keras 3 and with tf_keras, the weights after 3 epochs
of 22 rows at batch_size=8 on 4 replicas are those of one device with the last 6 rows weighted 0.75. The loss
and metrics that `fit` reports stay those of the whole batch (the loss tracker weighs each replica's mean by
its rows).

jdist computes such a batch whole on every device (`keras_distribution`); here its gradient is given TF's
weighting: row i of replica r weighs rows / (replicas * rows_r), applied as a factor on the sample weights of
the loss the gradient is taken of, while the loss recorded for the logs is the unweighted one. Batches the
replicas divide, `train_on_batch` (each replica gets the whole batch on TF), losses other than Keras's mean over
the batch and models with their own `compute_loss` are left as they are.
"""
from __future__ import annotations

import functools
import threading
from contextlib import AbstractContextManager
from typing import Any, Callable

import numpy as np

from jdist.input.split import chunk_sizes
from jdist.interop import keras_loss_chain, keras_variables
from jdist.thread_locals import setting

_ON_BATCH = threading.local()  # `active` during `train_on_batch` and `test_on_batch`, which TF runs on the whole batch
# in every replica


def install(is_strategy_distribution: Callable[[Any], bool]) -> None:
    """Registers the gradient's weighting into `compute_loss_and_updates` (`keras_loss_chain`, innermost) and wraps
    Keras's JAX trainer's `train_on_batch` and `test_on_batch`, once (a no-op outside a strategy's distribution)."""
    from keras.src.backend.jax.trainer import JAXTrainer

    if getattr(JAXTrainer.train_on_batch, "_jdist_replica_means", False):
        return
    keras_loss_chain.register("replica_means", 0, lambda method: _weighting(method, is_strategy_distribution))
    JAXTrainer.train_on_batch = _whole_batch(JAXTrainer.train_on_batch, is_strategy_distribution, "train_function")
    JAXTrainer.test_on_batch = _whole_batch(JAXTrainer.test_on_batch, is_strategy_distribution, "test_function")


def split_over_replicas() -> bool:
    """Whether the step being traced is one TF splits over the replicas: `fit`'s and `evaluate`'s, not
    `train_on_batch`'s or `test_on_batch`'s (TF 2.21 with Keras 3 hands each replica the whole batch there:
    `predict_on_batch` of 5 rows on 4 replicas returns 20, observed)."""
    return not getattr(_ON_BATCH, "active", False)


def one_replica() -> AbstractContextManager[Any]:
    """While one replica's part of a step is traced: the rows it gets are its whole batch (no further split)."""
    return setting(_ON_BATCH, "active", True, default=False)


def _whole_batch(original: Callable, is_strategy_distribution: Callable[[Any], bool], slot: str) -> Callable:
    """`train_on_batch` (`test_on_batch`) traced apart from `fit`'s (`evaluate`'s) steps: under a strategy's
    distribution it keeps its own compiled step in place of the one in `slot`, as a batch of the same shape is
    split over the replicas there and not here."""
    step = {"train_function": "train_step", "test_function": "test_step"}[slot]

    @functools.wraps(original)
    def on_batch(self: Any, *args: Any, **kwargs: Any) -> Any:
        with keras_variables.remembered_scope(self):  # a model made in a scope keeps its strategy (TF's do)
            return in_distribution(self, *args, **kwargs)

    def in_distribution(self: Any, *args: Any, **kwargs: Any) -> Any:
        from keras.src.distribution import distribution_lib

        if not is_strategy_distribution(distribution_lib.distribution()):
            return original(self, *args, **kwargs)
        outer = getattr(_ON_BATCH, "active", False)
        kept = f"_jdist_on_batch_{slot}"
        fit_function = getattr(self, slot)
        setattr(self, slot, getattr(self, kept, None))
        own_step = getattr(self, kept, None) is None and step not in self.__dict__
        if own_step:  # a function of its own for `jax.jit` to trace: its cache would hand back `fit`'s trace
            object.__setattr__(self, step, _delegating(getattr(self, step)))
        _ON_BATCH.active = True
        try:
            return original(self, *args, **kwargs)
        finally:
            _ON_BATCH.active = outer
            if own_step:
                object.__delattr__(self, step)
            setattr(self, kept, getattr(self, slot))
            setattr(self, slot, fit_function)

    on_batch._jdist_replica_means = True  # pyright: ignore[reportAttributeAccessIssue]
    return on_batch


def _delegating(method: Callable) -> Callable:
    """A new function object that calls `method` (JAX caches traces per function, and a bound method of the same
    model and function compares equal to `fit`'s, so a batch of `fit`'s shape would reuse `fit`'s trace)."""
    def step(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    return step


def replica_weights(rows: int, replicas: int) -> np.ndarray | None:
    """Each row's weight in TF's mean of per-replica means (None where every replica gets as many rows)."""
    sizes = [size for size in chunk_sizes(rows, replicas) if size]
    if len(set(sizes)) == 1 and len(sizes) == replicas:
        return None
    return np.concatenate([np.full(size, rows / (replicas * size), np.float32) for size in sizes])


def _weighting(original: Callable, is_strategy_distribution: Callable[[Any], bool]) -> Callable:
    @functools.wraps(original)
    def compute_loss_and_updates(self: Any, trainable_variables: Any, non_trainable_variables: Any,
                                 metrics_variables: Any, x: Any, y: Any, sample_weight: Any, training: bool = False,
                                 optimizer_variables: Any = None) -> Any:
        args = (self, trainable_variables, non_trainable_variables, metrics_variables, x, y)
        loss, aux = original(*args, sample_weight, training, optimizer_variables)
        weights = _weights(self, x, training, is_strategy_distribution)  # after the call has built the losses
        if weights is not None:  # the gradient's loss is TF's; the logs' loss, metrics and state the batch's own
            loss, _ = original(*args, _weighted(sample_weight, weights), training, optimizer_variables)
        return loss, aux

    return compute_loss_and_updates


def step_replicas(is_strategy_distribution: Callable[[Any], bool]) -> int:
    """How many replicas TF's step being traced calls the model on, each with its chunk of the batch: the
    strategy's replicas in `fit`'s and `evaluate`'s steps under its distribution; 1 where TF computes the whole
    batch at once (no strategy, `train_on_batch` / `test_on_batch`) and where jdist does (several processes)."""
    import jax
    from keras.src.distribution import distribution_lib

    current = distribution_lib.distribution()
    if not split_over_replicas() or not is_strategy_distribution(current) or jax.process_count() != 1:
        return 1
    strategy: Any = current.strategy  # pyright: ignore[reportOptionalMemberAccess]
    return strategy.num_replicas_in_sync


def _weights(model: Any, x: Any, training: bool, is_strategy_distribution: Callable[[Any], bool]) -> Any:
    from keras.src import tree
    from keras.src.trainers.trainer import Trainer

    replicas = step_replicas(is_strategy_distribution) if training else 1
    if replicas < 2:  # one replica's weights are all 1
        return None
    if type(model).compute_loss is not Trainer.compute_loss or not _means_over_batch(model):
        return None
    first = next((leaf for leaf in tree.flatten(x) if leaf is not None), None)
    if first is None or not np.ndim(first):
        return None
    return replica_weights(int(np.shape(first)[0]), replicas)


def _means_over_batch(model: Any) -> bool:
    """Whether every compiled loss is a mean over the batch (Keras's default reduction), which TF scales."""
    compiled = getattr(model, "_compile_loss", None)
    flat = getattr(compiled, "_flat_losses", None)
    if not flat:
        return False
    return all(getattr(loss_fn, "reduction", None) == "sum_over_batch_size" for _, loss_fn, _, _ in flat)


def _weighted(sample_weight: Any, weights: np.ndarray) -> Any:
    """`sample_weight` (None, one array, or one per output) times the rows' weights."""
    import jax.numpy as jnp
    from keras.src import tree

    def times(value: Any) -> Any:
        if value is None:
            return None
        value = jnp.asarray(value)
        return value * jnp.asarray(weights, value.dtype).reshape((-1,) + (1,) * (value.ndim - 1))

    if sample_weight is None:
        return jnp.asarray(weights)
    return tree.map_structure(times, sample_weight)
