"""`tf.nn.compute_average_loss` and `tf.nn.scale_regularization_loss` with TF's argument checks.

The arithmetic is `jdist.losses`'; what TF 2.21 adds (observed) is checked here: a strategy's cross-replica
context (inside `strategy.scope()`, outside `strategy.run`) is refused by `scale_regularization_loss`, and by
`compute_average_loss` without a `global_batch_size`, with TF's message; a per-example loss must have rank 1 or
more, and `global_batch_size` may be an integer tensor (a custom loop
passes `tf.shape(labels)[0] * strategy.num_replicas_in_sync`), not a float.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jax.core import Tracer

from jdist import losses
from jdist.strategy import context
from jdist.tf_compat.ops import convert_to_tensor
from jdist.typing import ArrayLike, Tensor, TensorLike


def _in_replica_context(caller: str) -> None:
    if context.in_cross_replica_context():  # TF 2.21's message (observed)
        raise RuntimeError(f"You are calling `{caller}` in cross replica context, while it was expected to be "
                           "called in replica context.")


def _integer_batch_size(global_batch_size: Any) -> Any:
    """A Python int, or an integer tensor (a traced one as it is); anything else is TF's TypeError."""
    dtype = np.dtype(global_batch_size.dtype) if hasattr(global_batch_size, "dtype") else (
        np.dtype(np.float32) if isinstance(global_batch_size, float) else np.asarray(global_batch_size).dtype)
    if isinstance(global_batch_size, bool) or dtype.kind not in "iu":
        raise TypeError(f"global_batch_size must be an integer..  Expected \"x\" to be integer type.  Found: "
                        f"tensor of dtype <dtype: '{dtype.name}'>")
    if isinstance(global_batch_size, Tracer):
        return global_batch_size
    return int(np.asarray(global_batch_size))


def compute_average_loss(per_example_loss: TensorLike, sample_weight: ArrayLike | float | None = None,
                         global_batch_size: TensorLike | None = None) -> Tensor:
    """`sum(per_example_loss * sample_weight) / global_batch_size` (see `jdist.losses.compute_average_loss`)."""
    loss = convert_to_tensor(per_example_loss)
    if np.ndim(loss) == 0:  # TF 2.21's message (observed)
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with at least rank 1. "
                         f"Received per_example_loss={np.asarray(loss)} with rank 0")
    if global_batch_size is None:  # the replica's batch size times the replicas: only inside strategy.run
        _in_replica_context("compute_average_loss")
        return losses.compute_average_loss(loss, sample_weight)
    return losses.compute_average_loss(loss, sample_weight, global_batch_size=_integer_batch_size(global_batch_size))


def scale_regularization_loss(regularization_loss: ArrayLike | Sequence[ArrayLike]) -> Tensor:
    """`sum(regularization_loss) / num_replicas_in_sync` (see `jdist.losses.scale_regularization_loss`)."""
    _in_replica_context("scale_regularization_loss")
    return losses.scale_regularization_loss(regularization_loss)
