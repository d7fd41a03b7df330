"""`SyncBatchNorm`: batch normalization with statistics over the whole global batch.

TF's plain `BatchNormalization` under a strategy normalizes each replica by its
own slice of the batch; `SyncBatchNormalization` all-reduces the statistics.
`jdist.SyncBatchNorm` is the latter everywhere: inside `strategy.run` it sums
over replicas with `all_reduce`, and in a global-view step (the `Trainer`) the
layer already sees the global batch. A `mask` (the Trainer passes one to models
whose `__call__` takes `mask`) leaves padding examples out of the statistics, so
they equal single-device statistics over the real examples.

Keras 3's `BatchNormalization(synchronized=True)` (TF's synchronized batch normalization; Keras
refuses it on JAX) gets the same rule from `install_keras_synchronized`: inside `strategy.run` its
moments are all-reduced as TF's Keras computes them (sums of x and x**2 and the row count over the
replicas), and outside a replica function (Keras's `fit`, one program over the global batch) they
are plain moments, already global. Keras's batch moments in `strategy.run` skip a short batch's padding
rows, as TF computes them on each replica's real rows only.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from jdist.strategy import context
from jdist.strategy.reduce_op import ReduceOp


def _cross_replica_sum(tree: Any) -> Any:
    ctx = context.get_replica_context()
    if ctx is None or ctx.axis_name is None:
        return tree
    return ctx.all_reduce(ReduceOp.SUM, tree)


class SyncBatchNorm(nn.Module):
    """Batch normalization over the global batch (flax `BatchNorm`'s fields and `batch_stats`).

    `__call__(x, use_running_average=None, *, mask=None)`: `mask` has shape `(batch,)`,
    1 for real examples and 0 for padding. Statistics use two passes (mean, then
    the mean squared deviation) for accuracy.
    """

    use_running_average: bool | None = None
    axis: int = -1
    momentum: float = 0.99
    epsilon: float = 1e-5
    dtype: Any = None
    param_dtype: Any = jnp.float32
    use_bias: bool = True
    use_scale: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, use_running_average: bool | None = None, *, mask: Any = None) -> jax.Array:
        use_running_average = nn.merge_param("use_running_average", self.use_running_average, use_running_average)
        feature_axis = self.axis % x.ndim
        features = x.shape[feature_axis]
        reduce_axes = tuple(i for i in range(x.ndim) if i != feature_axis)
        stat_shape = [1] * x.ndim
        stat_shape[feature_axis] = features

        ra_mean = self.variable("batch_stats", "mean", lambda: jnp.zeros((features,), jnp.float32))
        ra_var = self.variable("batch_stats", "var", lambda: jnp.ones((features,), jnp.float32))

        x32 = x.astype(jnp.float32)
        if use_running_average:
            mean, var = ra_mean.value, ra_var.value
        else:
            if mask is None:
                weight = jnp.ones_like(x32)
            else:
                m = jnp.asarray(mask, jnp.float32)
                weight = jnp.broadcast_to(m.reshape(m.shape + (1,) * (x.ndim - m.ndim)), x.shape)
            count = jnp.maximum(_cross_replica_sum(jnp.sum(weight, axis=reduce_axes)), 1.0)
            mean = _cross_replica_sum(jnp.sum(x32 * weight, axis=reduce_axes)) / count
            centered = x32 - mean.reshape(stat_shape)
            var = _cross_replica_sum(jnp.sum(jnp.square(centered) * weight, axis=reduce_axes)) / count
            if not self.is_initializing():
                ra_mean.value = self.momentum * ra_mean.value + (1 - self.momentum) * mean
                ra_var.value = self.momentum * ra_var.value + (1 - self.momentum) * var

        y = (x32 - mean.reshape(stat_shape)) * jax.lax.rsqrt(var.reshape(stat_shape) + self.epsilon)
        if self.use_scale:
            y = y * self.param("scale", nn.initializers.ones, (features,), self.param_dtype).reshape(stat_shape)
        if self.use_bias:
            y = y + self.param("bias", nn.initializers.zeros, (features,), self.param_dtype).reshape(stat_shape)
        return y.astype(self.dtype or x.dtype)


def install_keras_synchronized() -> None:
    """Keras's batch statistics inside `strategy.run` as TF's: over the replica's real rows, and over every
    replica's for `BatchNormalization(synchronized=True)` (which Keras refuses on JAX)."""
    from keras.src import backend

    if backend.backend() != "jax":
        return
    from keras.src.backend.jax import nn as jax_nn
    from keras.src.layers.normalization.batch_normalization import BatchNormalization

    if getattr(jax_nn.moments, "_jdist", False):
        return
    jax_nn.moments = _replica_moments(jax_nn.moments)
    init = BatchNormalization.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, synchronized: bool = False, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.synchronized = bool(synchronized)

    __init__.__signature__ = inspect.signature(init)  # pyright: ignore[reportAttributeAccessIssue] (Keras's config)
    BatchNormalization.__init__ = __init__


def _replica_moments(moments: Callable) -> Callable:
    """Keras's JAX `moments` as TF's Keras computes them in a replica function, over the replica's real rows
    (a short batch's padding rows count for nothing; TF gives each replica only its real rows), and with
    `synchronized=True` over every replica's: the sums of x and x**2 and the row count all-reduced, mean =
    sum / count, variance = max(mean of squares - mean**2, 0) (keras/src/backend/tensorflow/nn.py)."""

    def replica_moments(x: Any, axes: Any, keepdims: bool = False, synchronized: bool = False) -> Any:
        ctx = context.get_replica_context() if context.in_replica_context() else None
        x = jnp.asarray(x)
        axes = tuple(a % x.ndim for a in (axes if isinstance(axes, (tuple, list)) else (axes,)))
        mask = None if ctx is None else ctx.example_mask
        if mask is None or 0 not in axes or mask.shape[0] != x.shape[0]:
            mask = None
        if ctx is None or (mask is None and not synchronized):
            return moments(x, axes, keepdims)
        dtype = x.dtype
        x32 = x.astype(jnp.float32) if dtype in (jnp.float16, jnp.bfloat16) else x
        weight = jnp.ones_like(x32)
        if mask is not None:
            weight = weight * jnp.asarray(mask, x32.dtype).reshape((-1,) + (1,) * (x.ndim - 1))
        sums = [jnp.sum(x32 * weight, axes, keepdims=True), jnp.sum(weight, axes, keepdims=True)]
        if synchronized:
            sums = ctx.all_reduce(ReduceOp.SUM, [*sums, jnp.sum(jnp.square(x32) * weight, axes, keepdims=True)])
        total, count = sums[0], sums[1]
        safe = jnp.where(count > 0, count, 1)
        mean = jnp.where(count > 0, total / safe, 0)
        if synchronized:
            variance = jnp.maximum(jnp.where(count > 0, sums[2] / safe, 0) - jnp.square(mean), 0)
        else:  # two passes, as tf.nn.moments
            variance = jnp.where(count > 0, jnp.sum(jnp.square(x32 - mean) * weight, axes, keepdims=True) / safe, 0)
        if not keepdims:
            mean, variance = jnp.squeeze(mean, axes), jnp.squeeze(variance, axes)
        return mean.astype(dtype), variance.astype(dtype)

    replica_moments._jdist = True  # pyright: ignore[reportFunctionMemberAccess]
    return replica_moments
