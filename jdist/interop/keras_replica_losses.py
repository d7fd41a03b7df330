"""Losses a model adds in its forward pass (`add_loss`) count under a strategy as TF counts them: once per replica,
averaged over the replicas.

TF's `fit` and `evaluate` call the model once per replica on the replica's part of the batch, so a layer's
`self.add_loss(0.1 * tf.reduce_sum(x))` is that replica's sum, and the step's loss (scaled by 1 / replicas, as
every replica's loss is) adds their mean: observed, TF 2.21 with Keras 3 and with tf_keras, 16 rows at
batch_size=8 on 4 replicas, the first epoch's loss 1.5919 where the whole batch's sums give 2.5062, and the
weights trained accordingly. jdist's Keras step is one program over the whole batch, so such a loss was the
replicas' sum. Here, in `fit`'s and `evaluate`'s steps under a strategy's distribution, the losses of the forward
pass are computed on each replica's rows, TF's chunks of ceil(rows / replicas) consecutive rows (the model called
again on them, `jax.vmap` over the replicas where the chunks are equal; only the losses are kept), and their mean
over the replicas replaces the whole batch's in the loss the gradient is taken of; the logged loss weighs each
replica's by its rows, as TF's loss tracker does (observed, TF 2.21 with tf_keras, 21 rows at batch_size=8 on 3
replicas). Losses that do not depend on the batch (weight regularizers) come out the same. `train_on_batch` and
`test_on_batch` (the whole batch in every replica on TF) keep the whole batch's losses.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

from jdist.input.split import chunk_sizes, chunk_starts
from jdist.interop import keras_loss_chain, keras_replica_batch_norm, keras_replica_means


def install(is_strategy_distribution: Callable[[Any], bool]) -> None:
    """Registers the per-replica forward-pass losses into Keras's JAX trainer's `compute_loss_and_updates`
    (`keras_loss_chain`, outermost), once (a no-op outside a strategy's distribution)."""
    keras_loss_chain.register("replica_losses", 2, lambda method: _per_replica_losses(method, is_strategy_distribution))


def _per_replica_losses(original: Callable, is_strategy_distribution: Callable[[Any], bool]) -> Callable:
    @functools.wraps(original)
    def compute_loss_and_updates(self: Any, *args: Any, **kwargs: Any) -> Any:
        replicas = keras_replica_means.step_replicas(is_strategy_distribution)
        if replicas < 2:
            return original(self, *args, **kwargs)
        with _losses_per_replica(self, replicas) as log_offsets:
            loss, aux = original(self, *args, **kwargs)
        if log_offsets:  # the logged (unscaled) loss weighs the replicas' losses by their rows
            aux = (aux[0] + log_offsets[0],) + tuple(aux[1:])
        return loss, aux

    return compute_loss_and_updates


@contextlib.contextmanager
def _losses_per_replica(model: Any, replicas: int) -> Iterator[list]:
    """The model's `stateless_call` with its forward-pass losses replaced by their mean over the replicas (set on
    the instance past Keras's attribute tracking while the step is traced, and undone after). Yields a list that
    receives, per call, what the logged loss differs by: TF's loss tracker weighs each replica's loss by its rows,
    its gradient does not (they differ on a batch the replicas do not divide)."""
    original = model.stateless_call
    log_offsets: list = []

    def stateless_call(trainable: Any, non_trainable: Any, *args: Any, return_losses: bool = False,
                       **kwargs: Any) -> Any:
        out = original(trainable, non_trainable, *args, return_losses=return_losses, **kwargs)
        if not return_losses or not out[2] or not args:
            return out
        found = _replica_losses(original, trainable, non_trainable, args[0], kwargs, replicas)
        if found is None or len(found[0]) != len(out[2]):
            return out
        means, offset = found
        log_offsets.append(offset)
        return out[0], out[1], means

    object.__setattr__(model, "stateless_call", stateless_call)
    try:
        yield log_offsets
    finally:
        object.__delattr__(model, "stateless_call")


def _replica_losses(call: Callable, trainable: Any, non_trainable: Any, x: Any, kwargs: dict,
                    replicas: int) -> tuple[list, Any] | None:
    """Each forward-pass loss averaged over the model called on every replica's rows (TF's chunks), and the sum
    of those losses weighed by the replicas' rows less their plain mean. None where the inputs have no rows."""
    import jax
    import jax.numpy as jnp
    from keras.src import tree

    leaves = [leaf for leaf in tree.flatten(x) if leaf is not None]
    rows_found = {int(leaf.shape[0]) for leaf in leaves if getattr(leaf, "ndim", 0)}
    if len(rows_found) != 1:
        return None
    rows = next(iter(rows_found))

    def replica(chunk: Any) -> list:
        with keras_replica_batch_norm.whole_batches():  # a replica's rows are its whole batch
            return list(call(trainable, non_trainable, chunk, return_losses=True, **kwargs)[2])

    sizes = chunk_sizes(rows, replicas)
    if len(set(sizes)) == 1:  # one traced call for all replicas
        chunks = tree.map_structure(
            lambda v: None if v is None else jnp.reshape(v, (replicas, sizes[0]) + tuple(v.shape[1:])), x)
        stacked = [jnp.asarray(loss) for loss in jax.vmap(replica)(chunks)]
        return [jnp.mean(loss, axis=0) for loss in stacked], jnp.zeros((), stacked[0].dtype) if stacked else 0.0
    starts = chunk_starts(rows, replicas)
    each = [replica(tree.map_structure(lambda v, a=start, n=size: None if v is None else v[a:a + n], x))
            for start, size in zip(starts, sizes)]
    stacked = [jnp.stack([jnp.asarray(losses[i]) for losses in each]) for i in range(len(each[0]))]
    share = jnp.asarray([size / rows for size in sizes])
    means = [jnp.mean(loss, axis=0) for loss in stacked]
    offset = sum(jnp.sum(jnp.where(share > 0, loss, 0) * share.astype(loss.dtype)) - mean
                 for loss, mean in zip(stacked, means))
    return means, offset
