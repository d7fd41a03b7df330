"""`SyncBatchNorm`: batch normalization with statistics over the whole global batch.

TF's plain `BatchNormalization` under a strategy normalizes each replica by its
own slice of the batch; `SyncBatchNormalization` all-reduces the statistics.
`jdist.SyncBatchNorm` is the latter everywhere: inside `strategy.run` it sums
over replicas with `all_reduce`, and in a global-view step (the `Trainer`) the
layer already sees the global batch. A `mask` (the Trainer passes one to models
whose `__call__` takes `mask`) leaves padding examples out of the statistics, so
they equal single-device statistics over the real examples.
"""
from __future__ import annotations

from typing import Any

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
