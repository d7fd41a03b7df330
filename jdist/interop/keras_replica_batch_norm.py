"""Keras's `BatchNormalization` in `fit` under a strategy normalizes each replica's rows by their own statistics.

TF's `fit` runs the model once per replica on the replica's part of the batch, and Keras's `BatchNormalization`
(not synchronized, its default; Keras 3 on JAX takes no `synchronized=True`) computes its batch mean and variance
over those rows only. jdist's Keras step is one program over the whole batch, which would normalize by the whole
batch's statistics: the same model then trained to other weights than on TF (observed, TF 2.21 with Keras 3 on 4
replicas, batch_size=8: its first epoch's loss 1.2295 where the whole batch's statistics give 1.1889).
Here, in `fit`'s train step under a strategy's distribution, on a batch the replicas divide, each replica's chunk
of rows is normalized by its own moments, and the moving statistics move toward the first replica's moments: TF's moving
statistics are mirrored variables without aggregation, which keep the first replica's update (observed, TF 2.21 with
Keras 3, momentum=0 on 4 replicas: the moving mean and variance of 8 rows are those of rows 0 and 1). A batch the
replicas do not divide is normalized in TF's chunks of ceil(rows / replicas) consecutive rows (8 rows on 3 replicas:
3, 3, 2), as tf_keras trains it (observed, TF 2.21 with tf_keras, 22 rows at batch_size=8 on 3 replicas); TF's Keras 3
fails there ("Inputs to operation AddN ... must have the same size and shape"), and where a replica gets no rows
(6 rows on 4) its Keras 3 trains to NaN, where tf_keras and jdist leave the empty replica out. Masked inputs, batch
renormalization and `train_on_batch` (the whole batch in every replica on TF) keep Keras's own computation.
"""
from __future__ import annotations

import functools
import threading
from contextlib import AbstractContextManager
from typing import Any, Callable

from jdist.input.split import chunk_sizes
from jdist.interop import keras_loss_chain, keras_replica_means
from jdist.thread_locals import setting

_STEP = threading.local()  # `active` while Keras's train step computes its loss (TF's per-replica call)


def install(is_strategy_distribution: Callable[[Any], bool]) -> None:
    """Wraps Keras's `BatchNormalization.call` and marks the train step in `compute_loss_and_updates`
    (`keras_loss_chain`), once (a no-op outside a strategy's distribution)."""
    from keras.src.layers.normalization.batch_normalization import BatchNormalization

    original = BatchNormalization.call
    if getattr(original, "_jdist_replica_batch_norm", False):
        return
    BatchNormalization.call = _per_replica(original, is_strategy_distribution)
    keras_loss_chain.register("replica_batch_norm", 1, _in_step)


def _in_step(original: Callable) -> Callable:
    """Marks the train step's forward pass: only there does TF call the model once per replica (a model called
    directly, even in the strategy's scope, sees the whole batch on TF too)."""
    @functools.wraps(original)
    def compute_loss_and_updates(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_STEP, "active", False)
        _STEP.active = keras_replica_means.split_over_replicas()
        try:
            return original(self, *args, **kwargs)
        finally:
            _STEP.active = outer

    return compute_loss_and_updates


def whole_batches() -> AbstractContextManager[Any]:
    """Keras's own computation over the batch it gets, inside the step too (a model called on one replica's rows)."""
    return setting(_STEP, "active", False, default=False)


def _replicas(layer: Any, inputs: Any, training: Any, mask: Any, is_strategy_distribution: Callable) -> int:
    """How many replicas' chunks the batch is normalized in (1: Keras's own computation)."""
    if not getattr(_STEP, "active", False) or not training or not layer.trainable or mask is not None or layer.renorm:
        return 1
    if getattr(layer, "synchronized", False):  # synchronized=True (jdist.layers): the global batch's statistics
        return 1
    if len(inputs.shape) < 2:
        return 1
    replicas = keras_replica_means.step_replicas(is_strategy_distribution)
    rows = inputs.shape[0]
    axis = layer.axis % len(inputs.shape)
    if replicas < 2 or rows is None or rows < 2 or axis == 0:
        return 1
    return replicas


def _per_replica(original: Callable, is_strategy_distribution: Callable[[Any], bool]) -> Callable:
    @functools.wraps(original)
    def call(self: Any, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        replicas = _replicas(self, inputs, training, mask, is_strategy_distribution)
        if replicas == 1:
            return original(self, inputs, training=training, mask=mask)
        return _normalize_per_replica(self, inputs, replicas)

    call._jdist_replica_batch_norm = True  # pyright: ignore[reportAttributeAccessIssue]
    return call


def _normalize_per_replica(layer: Any, inputs: Any, replicas: int) -> Any:
    """Keras's training-mode computation, with the moments of each replica's consecutive rows (TF's chunks)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from keras import backend, ops

    dtype = backend.result_type(inputs.dtype, "float32")
    x = jnp.asarray(inputs, dtype)
    axis = layer.axis % x.ndim
    sizes = np.asarray(chunk_sizes(x.shape[0], replicas))
    segment = jnp.asarray(np.repeat(np.arange(replicas), sizes))  # each row's replica
    inner = tuple(a for a in range(1, x.ndim) if a != axis)  # a row's axes reduced besides the batch
    count = jnp.asarray(np.maximum(sizes, 1) * int(np.prod([x.shape[a] for a in inner], dtype=np.int64)), dtype)
    keep = [1] * x.ndim
    keep[0] = x.shape[0]
    keep[axis] = x.shape[axis]

    def replica_mean(values: Any) -> Any:  # (replicas, channels): each replica's mean over its rows
        rows = jnp.sum(values, axis=inner) if inner else values
        return jax.ops.segment_sum(rows, segment, num_segments=replicas) / count[:, None]

    def per_row(stat: Any) -> Any:  # each row's replica's statistic, shaped to broadcast against x
        return stat[segment].reshape(keep)

    mean = replica_mean(x)
    variance = replica_mean(jnp.square(x - per_row(mean)))
    inv = jax.lax.rsqrt(variance + layer.epsilon)
    if layer.scale:
        inv = inv * jnp.asarray(layer.gamma.value, dtype)
    shift = -mean * inv
    if layer.center:
        shift = shift + jnp.asarray(layer.beta.value, dtype)
    outputs = x * per_row(inv) + per_row(shift)

    momentum = layer.momentum
    first_mean = mean[0].reshape(layer.moving_mean.shape)  # TF keeps the first replica's update
    first_variance = variance[0].reshape(layer.moving_variance.shape)
    moving_mean = jnp.asarray(layer.moving_mean.value, dtype)
    moving_variance = jnp.asarray(layer.moving_variance.value, dtype)
    layer.moving_mean.assign(moving_mean * momentum + first_mean * (1.0 - momentum))
    layer.moving_variance.assign(moving_variance * momentum + first_variance * (1.0 - momentum))
    return ops.cast(outputs, layer.compute_dtype)
