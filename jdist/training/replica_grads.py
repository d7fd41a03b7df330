"""Gradients per replica, summed in one packed all-reduce, where that is exactly the global view's gradient.

In the global view XLA differentiates the loss of the whole batch and all-reduces each parameter's
gradient where it is produced; XLA:CPU runs the combined all-reduce through gloo as one ring per array
(`jdist.strategy.packing`). Across CPU processes that is most of a small model's step: for the MLP
784-512-512-10 on 2 processes, 7 rings took 27-31 ms of a 41 ms step, one ring of the same 2.7 MB 15 ms
(XLA profile, 2-core machine under load). Here each replica differentiates its own rows, as TF's
`strategy.run` does, and the gradients are summed in one buffer per dtype, as TF's MultiWorkerMirroredStrategy
packs them.

That is the same gradient only when the forward pass computes each example's loss from that example
alone: `jdist.training.row_local` proves it from the forward's jaxpr (batch normalization, in-batch
negatives, dropout or a loss normalised by the batch size fail the proof and keep the global view). Used only
where it pays and is simple: a mesh whose data axis spans CPU processes and has no other axis, parameters
replicated and updated whole, no model state, and float32 compute (the step core checks the policy: in float16
where the sum is rounded decides whether a loss-scaled gradient overflows, and the step would not match one
device's).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from jdist.strategy import context
from jdist.strategy.packing import bytes_per_pack, packed_psum, spans_cpu_processes
from jdist.training.row_local import is_row_local
from jdist.typing import PyTree


def applies(forward: Callable, params: PyTree, inputs: PyTree, mask: Any, model_state: Any, rng: Any, *, mesh: Any,
            axis: str, param_shardings: Any, update_shardings: Any) -> bool:
    """Whether `per_replica_grad` gives the global view's gradient here, and is worth it.

    `forward(params, inputs, mask, rng) -> (losses, aux)` is the forward pass the loss is built on.
    """
    if jax.tree.leaves(model_state) or not spans_cpu_processes(mesh, axis):
        return False
    if any(size != 1 for name, size in mesh.shape.items() if name != axis):
        return False
    if not _replicated(param_shardings) or not _replicated(update_shardings):
        return False
    n = int(mesh.shape[axis])
    leaves = jax.tree.leaves((inputs, mask))
    if not leaves or any(np.ndim(x) == 0 for x in leaves):
        return False
    rows = {int(np.shape(x)[0]) for x in leaves}
    if len(rows) != 1 or min(rows) % n:
        return False
    return is_row_local(forward, [params, inputs, mask, rng], [1, 2], min(rows) // n)


def _replicated(shardings: Any) -> bool:
    """Every sharding in the tree keeps its array whole (None: no shardings)."""
    return all(isinstance(s, NamedSharding) and all(e is None for e in s.spec) for s in jax.tree.leaves(shardings))


def per_replica_grad(loss: Callable[..., Callable], scale: Any, rows: Any, params: PyTree, inputs: PyTree, mask: Any,
                     rng: Any, *, mesh: Any, axis: str) -> tuple[Any, Any]:
    """`jax.grad(loss(scale, rows), has_aux=True)(params, inputs, mask, None, rng)` computed on each replica's
    rows and summed over the data `axis` in one all-reduce per dtype (or per `bytes_per_pack` of the
    strategy's `CommunicationOptions`, the one being traced). The aux's per-example values
    (losses, aux, mask) come back split over the axis, as the global view has them."""

    def body(params, inputs, mask, rng, scale, rows):
        params = jax.tree.map(lambda p: jax.lax.pcast(p, axis, to="varying"), params)
        grads, (losses, aux, full_mask, _) = jax.grad(loss(scale, rows), has_aux=True)(
            params, inputs, mask, None, rng)
        return packed_psum(grads, axis, bytes_per_pack(context.get_strategy())), (losses, aux, full_mask)

    grads, (losses, aux, full_mask) = jax.shard_map(
        body, mesh=mesh, in_specs=(P(), P(axis), P(axis), P(), P(), P()), out_specs=(P(), P(axis)))(
        params, inputs, mask, rng, jnp.asarray(scale), jnp.asarray(rows))
    return grads, (losses, aux, full_mask)
