"""Gradient accumulation: one global batch as k micro-batches, compiled as one `lax.scan`.

Micro-batches are cut so that each stays split over the data axis with no data
movement: micro-batch j takes the j-th contiguous chunk of every replica's
shard. The effective batch per optimizer step stays the global batch, while
peak activation memory is that of one micro-batch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.strategy import batch as batch_rows, context
from jdist.strategy.batch import leading_size
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


def check_accumulation_steps(steps: Any) -> int:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"accumulation_steps must be a positive integer, got {steps!r}.")
    return steps


def _batch_size(batch: Any) -> int:
    return leading_size(batch, "the batch to split into micro-batches")


def split_microbatches(batch: PyTree, steps: int, strategy: Strategy | None = None) -> PyTree:
    """`batch` with a new leading axis of `steps` micro-batches, each still sharded over replicas.

    In global view (inside `jax.jit` or eagerly) the global batch must be a
    multiple of replicas x steps; inside `strategy.run` the replica's local
    batch is split into `steps` contiguous chunks.
    """
    steps = check_accumulation_steps(steps)
    size = _batch_size(batch)
    if context.in_replica_context():
        if size % steps:
            raise ValueError(
                f"The per-replica batch of {size} examples does not split into {steps} equal micro-batches; "
                f"use a per-replica batch that is a multiple of {steps}."
            )
        return jax.tree.map(lambda x: x.reshape((steps, size // steps) + x.shape[1:]), batch)
    strategy = strategy or context.get_strategy()
    return split_on_mesh(batch, steps, strategy.mesh, strategy.data_axis)


def split_on_mesh(batch: PyTree, steps: int, mesh: Mesh, data_axis: str) -> PyTree:
    """`split_microbatches` for a global batch sharded over `data_axis` of `mesh`."""
    steps = check_accumulation_steps(steps)
    size = _batch_size(batch)
    n = int(mesh.shape[data_axis])
    if size % (n * steps):
        lower = size - size % (n * steps)
        raise ValueError(
            f"The global batch of {size} examples does not split into {steps} micro-batches over {n} "
            f"replicas: it must be a multiple of replicas x accumulation_steps = {n * steps} "
            f"(e.g. {lower or n * steps} or {lower + n * steps}), or choose accumulation_steps dividing {size // n}."
        )
    sharding = NamedSharding(mesh, P(None, data_axis))

    def split(x):
        per = size // (n * steps)
        y = x.reshape((n, steps, per) + x.shape[1:]).swapaxes(0, 1).reshape((steps, n * per) + x.shape[1:])
        return jax.lax.with_sharding_constraint(y, sharding)

    return jax.tree.map(split, batch)


def accumulate_gradients(
    grad_fn: Callable[[Any, Any], Any],
    params: PyTree,
    batch: PyTree,
    steps: int,
    *,
    has_aux: bool = False,
    reduce: str = "mean",
    strategy: Strategy | None = None,
) -> Any:
    """The mean (or `reduce="sum"`: the sum) of `grad_fn(params, micro_batch)` over `steps`
    micro-batches of `batch`, via `lax.scan`.

    For custom loops (inside `jax.jit` or `strategy.run`):

        grads = jdist.accumulate_gradients(jax.grad(mean_loss), params, batch, steps=4)

    Equals `grad_fn(params, batch)` for a loss that is a mean over equally
    weighted examples. With `has_aux`, `grad_fn` returns `(grads, aux)` and the
    result is `(grads, aux)` with each aux leaf stacked along a leading
    `steps` axis. Gradients are summed in at least float32. For padded batches
    (masks) the mean of micro-batch means is not the batch mean: let `grad_fn`
    differentiate the masked *sum* divided by the whole batch's real-example
    count and pass `reduce="sum"`, or use `make_train_step(...,
    accumulation_steps=k)`, which does this for you.
    """
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}.")
    micro = split_microbatches(batch, steps, strategy)
    first = jax.tree.map(lambda x: x[0], micro)
    shapes = jax.eval_shape(grad_fn, params, first)
    grad_shapes = shapes[0] if has_aux else shapes
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.promote_types(s.dtype, jnp.float32)), grad_shapes)

    def body(acc, mb):
        out = grad_fn(params, mb)
        grads, aux = out if has_aux else (out, None)
        acc = jax.tree.map(lambda a, g: a + g.astype(a.dtype), acc, grads)
        return acc, aux

    total, aux = jax.lax.scan(body, zeros, micro)
    grads = jax.tree.map(lambda t, s: (t / steps if reduce == "mean" else t).astype(s.dtype), total, grad_shapes)
    return (grads, aux) if has_aux else grads


def _spec_on(sharding: Any, mesh: Any) -> P:
    """A parameter's spec within a program on `mesh`: replicated when it is stored elsewhere
    (e.g. on a parameter device, as central storage keeps it)."""
    if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, Mesh) \
            and sharding.mesh.shape_tuple == mesh.shape_tuple \
            and tuple(sharding.mesh.devices.flat) == tuple(mesh.devices.flat):
        return sharding.spec
    return P()


def _axes(spec: Any) -> set:
    out = set()
    for entry in spec:
        if isinstance(entry, tuple):
            out.update(entry)
        elif entry is not None:
            out.add(entry)
    return out


def scan_accumulate(
    grad_fn: Callable[[Any, Any, Any, Any], tuple[Any, Any, Any]],
    params: PyTree,
    micro: Any,
    *,
    fold: Callable[[Any, Any, Any], Any],
    carry: Any,
    mesh: Any,
    data_axis: str,
    param_shardings: Any,
    model_state: Any = None,
) -> tuple[Any, Any, Any]:
    """Sums `grad_fn`'s gradients over the micro-batches of `micro` (leading axis) in one `lax.scan`.

    `grad_fn(params, micro_batch, piece, model_state) -> (grads, aux, model_state)`:
    `aux` leaves lead with the micro-batch's examples and `piece` is a distinct
    int per call (for random keys). `fold(carry, aux, micro_batch) -> carry`
    runs once per micro-batch. Returns `(summed grads in >= float32, carry,
    model_state)`.

    When no parameter is split over the data axis and there is no
    `model_state` to thread, each replica differentiates its own shard (a
    `vmap` over a replica axis sharded over the data axis) and keeps its own
    running sum, so gradients cross replicas once, after the loop, instead of
    once per micro-batch. Otherwise each micro-batch is differentiated in the
    global view and XLA reduces its gradients inside the loop (FSDP keeps them
    sharded that way).
    """
    n = int(mesh.shape[data_axis])
    specs = jax.tree.map(lambda s: _spec_on(s, mesh), param_shardings)
    per_replica = n > 1 and model_state is None and not any(data_axis in _axes(s) for s in jax.tree.leaves(specs))
    steps = jax.tree.leaves(micro)[0].shape[0]

    if per_replica:
        grad_shardings = jax.tree.map(lambda s: NamedSharding(mesh, P(data_axis, *s)), specs)
        by_replica = NamedSharding(mesh, P(data_axis))

        def replica_piece(mb, j, ms):
            shards = jax.tree.map(lambda x: batch_rows.per_replica(x, n, by_replica), mb)
            grads, aux, _ = jax.vmap(lambda s, i: grad_fn(params, s, j * n + i, None))(shards, jnp.arange(n))
            aux = jax.tree.map(lambda a: a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:]), aux)
            return jax.lax.with_sharding_constraint(grads, grad_shardings), aux, ms

        piece = replica_piece
    else:
        def piece(mb, j, ms):
            return grad_fn(params, mb, j, ms)

    first = jax.tree.map(lambda x: x[0], micro)
    grad_shapes = jax.eval_shape(piece, first, jnp.int32(0), model_state)[0]
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.promote_types(s.dtype, jnp.float32)), grad_shapes)

    def body(state, xs):
        acc, c, ms = state
        mb, j = xs
        grads, aux, ms = piece(mb, j, ms)
        acc = jax.tree.map(lambda a, g: a + g.astype(a.dtype), acc, grads)
        return (acc, fold(c, aux, mb), ms), None

    (total, carry, model_state), _ = jax.lax.scan(
        body, (zeros, carry, model_state), (micro, jnp.arange(steps, dtype=jnp.int32)))
    if per_replica:
        total = jax.tree.map(lambda g: jnp.sum(g, axis=0), total)
    return total, carry, model_state
