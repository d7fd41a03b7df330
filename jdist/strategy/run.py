"""`Strategy.run`: a function compiled once per replica with `jax.shard_map` over the data axis.

Which arguments are split and which broadcast is the value model of `jdist.strategy.values`; which results
come back mirrored (`replica_taint`) or keep the batch's mask (`row_alignment`) is proven from the traced
program. `Strategy` inherits this as `ReplicaRun`.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.input.distributed_batch import place_host_batches, unwrap_batches
from jdist.interop import keras_run
from jdist.strategy import context, dispatch, traced_functions
from jdist.strategy.replica_context import ReplicaContext
from jdist.strategy.replica_taint import per_replica_outputs
from jdist.strategy.row_alignment import OTHER, aligned_outputs
from jdist.strategy.values import PerReplica, mark_mirrored, split_mark

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_ARRAY_SCALARS = (np.ndarray, np.generic, int, float, bool, complex)


class StrategyFields:
    """What `Strategy` gives its two halves (`ReplicaRun`, `CrossReplicaOps`), declared for type checkers only."""

    if TYPE_CHECKING:  # provided by `Strategy`
        _mesh: Mesh
        _data_axis: str
        num_replicas_in_sync: int
        worker_devices: tuple

        def scope(self) -> contextlib.AbstractContextManager: ...
        def replicated_sharding(self) -> NamedSharding: ...
        def _is_split_batch(self, x: jax.Array) -> bool: ...


class ReplicaRun(StrategyFields):
    """`run` and how it classifies, compiles and returns: the per-replica half of a `Strategy`."""

    if TYPE_CHECKING:  # provided by `Strategy`
        _run_cache: dict

    def run(self, fn: Callable, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        """Runs `fn` once per replica, compiled; returns per-replica results.

        Arguments: per-replica values (`PerReplica`, `DistributedBatch`, what
        `distribute_batch` returns) are split per replica; everything else is
        broadcast, whatever its sharding. Results that provably agree on every
        replica (e.g. after `all_reduce`) come back as plain replicated arrays; the
        rest as `PerReplica`, carrying the batch's mask when they have one row per
        example (see `jdist.strategy.values`).
        """
        if not isinstance(args, (list, tuple)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}.")
        strategy = self._as_strategy()
        kwargs = dict(kwargs or {})
        fn = traced_functions.canonical(fn)  # inside a tf.function: the replica function of its first call
        if context.in_replica_context():
            raise RuntimeError("strategy.run() cannot be called inside another run(); call the function directly.")
        objects = keras_run.keras_objects(fn)  # Keras models, optimizers, metrics used as TF uses variables
        if objects:
            return keras_run.run(strategy, fn, args, kwargs, objects, context)
        placed_args, placed_kwargs = place_host_batches(strategy, (tuple(args), kwargs))
        with self.scope(), keras_run.guard():
            return self._run_compiled(fn, placed_args, placed_kwargs)

    def _as_strategy(self) -> Strategy:
        """`self`, as the `Strategy` that a `ReplicaRun` always is (its only subclass)."""
        return cast("Strategy", self)

    def _run_compiled(self, fn: Callable, args: tuple, kwargs: dict) -> Any:
        leaves, treedef = jax.tree.flatten((args, kwargs), is_leaf=lambda x: isinstance(x, PerReplica))
        kinds = tuple(self._classify(leaf) for leaf in leaves)
        static = tuple(_static_key(leaf) if kind == "static" else None for leaf, kind in zip(leaves, kinds))
        masked = tuple(isinstance(leaf, PerReplica) and leaf.mask is not None for leaf in leaves)
        key = (fn, treedef, kinds, static, masked)
        if key not in self._run_cache:
            self._run_cache[key] = self._compile_run(fn, treedef, kinds, leaves, masked)
        compiled, out_tree, varying, aligned = self._run_cache[key]
        dynamic = [self._prepare(leaf, kind) for leaf, kind in zip(leaves, kinds) if kind != "static"]
        masks = [self._input_mask(leaf, kind) for leaf, kind in zip(leaves, kinds) if kind != "static"]
        outs = dispatch.dispatched(compiled(*dynamic))
        results = []
        for out, is_varying, rows_of in zip(outs, varying, aligned):
            if not is_varying:
                results.append(mark_mirrored(out))
            elif self.num_replicas_in_sync == 1:
                results.append(out[0])
            else:
                results.append(PerReplica(stacked=out, mask=_output_mask(rows_of, masks)))
        return jax.tree.unflatten(out_tree, results)

    def _input_mask(self, leaf: Any, kind: str) -> Any:
        """The mask of real rows of a split batch argument (None: all rows real, or not a batch)."""
        note = split_mark(leaf) if kind == "batch" else None
        return None if note is None else note.mask

    def _classify(self, leaf: Any) -> str:
        """Kind of an argument leaf: "stacked" (a PerReplica), "batch" (split along dim 0),
        "replicated" (broadcast) or "static" (not an array)."""
        if isinstance(leaf, PerReplica):
            leaf.stacked  # noqa: B018 (raises a clear error for ragged values)
            return "stacked"
        if isinstance(leaf, jax.Array):
            return "batch" if self._is_split_batch(leaf) else "replicated"
        if isinstance(leaf, _ARRAY_SCALARS) or hasattr(leaf, "__jax_array__"):
            return "replicated"
        return "static"

    def _is_split_batch(self, x: jax.Array) -> bool:
        """Whether `x` is a per-replica batch of this strategy: marked as split (by
        `distribute_batch` or a `DistributedBatch`) and split over this mesh's data axis.
        The mark decides, never the sharding alone: parameters and optimizer state may
        be stored split over the data axis too (FSDP, ZeRO-1) and are broadcast."""
        if split_mark(x) is None:
            return False
        sharding = getattr(x, "sharding", None)
        if not isinstance(sharding, NamedSharding) or not isinstance(sharding.mesh, Mesh) or x.ndim == 0 \
                or len(sharding.spec) == 0:
            return False
        if sharding.mesh.devices.shape != self._mesh.devices.shape or not np.array_equal(
            sharding.mesh.devices, self._mesh.devices
        ):
            return False
        first = sharding.spec[0]
        axes = first if isinstance(first, tuple) else (first,)
        return self._data_axis in axes and x.shape[0] % self.num_replicas_in_sync == 0

    def _prepare(self, leaf: Any, kind: str) -> Any:
        if kind == "stacked":
            return leaf.stacked
        if kind == "replicated" and isinstance(leaf, jax.Array):
            sharding = leaf.sharding
            if not (isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, Mesh)
                    and sharding.mesh.devices.shape == self._mesh.devices.shape
                    and np.array_equal(sharding.mesh.devices, self._mesh.devices)):
                return jax.device_put(leaf, self.replicated_sharding())
        return leaf

    def _compile_run(self, fn: Callable, treedef: Any, kinds: tuple, leaves: list, masked: tuple) -> tuple:
        axis = self._data_axis
        static_leaves = [leaf if kind == "static" else None for leaf, kind in zip(leaves, kinds)]
        dynamic_kinds = [kind for kind in kinds if kind != "static"]
        in_specs = tuple(P() if kind == "replicated" else P(axis) for kind in dynamic_kinds)
        record: dict[str, Any] = {}

        def call_fn(*dynamic):
            it = iter(dynamic)
            full = []
            for kind, static_leaf in zip(kinds, static_leaves):
                if kind == "static":
                    full.append(static_leaf)
                else:
                    value = next(it)
                    full.append(value[0] if kind == "stacked" else value)
            # A DistributedBatch reaches fn as its plain element; its mask goes to the context.
            (args, kwargs), masks = unwrap_batches(jax.tree.unflatten(treedef, full))
            strategy = self._as_strategy()
            with context.push(strategy, ReplicaContext(strategy, axis, example_masks=masks)):
                out = fn(*args, **kwargs)
            out_leaves, out_tree = jax.tree.flatten(out)
            record["tree"] = out_tree
            return [jnp.asarray(x) for x in out_leaves]

        def shard(body, out_specs):
            # check_vma=False: each replica differentiates its own copy of replicated
            # values, so gradients stay per-replica until all_reduce, as in TF.
            return jax.shard_map(body, mesh=self._mesh, in_specs=in_specs, out_specs=out_specs,
                                 axis_names={axis}, check_vma=False)

        abstract = [jax.ShapeDtypeStruct(np.shape(self._prepare(leaf, kind)), _dtype_of(leaf, kind))
                    for leaf, kind in zip(leaves, kinds) if kind != "static"]
        probe = jax.make_jaxpr(shard(lambda *d: tuple(call_fn(*d)), P()))(*abstract)
        (shard_eqn,) = [e for e in probe.jaxpr.eqns if e.primitive.name == "shard_map"]
        inner = shard_eqn.params["jaxpr"]
        # Arrays the function closes over are traced as extra leading inputs: constants, broadcast.
        consts = len(inner.invars) - len(dynamic_kinds)
        varying = tuple(per_replica_outputs(inner, [False] * consts + [k != "replicated" for k in dynamic_kinds]))
        # Which outputs have one row per example of which split inputs (their masks apply).
        # A masked PerReplica argument (rows of an earlier result) is not traced further: OTHER.
        dynamic_masked = [m for m, kind in zip(masked, kinds) if kind != "static"]
        rows_in = [frozenset([i]) if k == "batch" else (OTHER if m else None)
                   for i, (k, m) in enumerate(zip(dynamic_kinds, dynamic_masked))]
        aligned = tuple(aligned_outputs(inner, [None] * consts + rows_in))

        def body(*dynamic):
            outs = call_fn(*dynamic)
            return tuple(x[None] if v else x for x, v in zip(outs, varying))

        compiled = jax.jit(shard(body, tuple(P(axis) if v else P() for v in varying)))
        return compiled, record["tree"], varying, aligned


def _output_mask(rows_of: Any, masks: Sequence[Any]) -> Any:
    """The mask of a result of `run` row-aligned with the split inputs `rows_of` (see
    `jdist.strategy.row_alignment`): theirs when they share one; None when not aligned."""
    if not isinstance(rows_of, frozenset):
        return None
    found = {id(m): m for m in (masks[i] for i in rows_of) if m is not None}
    return next(iter(found.values())) if len(found) == 1 else None


def _static_key(leaf: Any) -> Any:
    try:
        hash(leaf)
        return leaf
    except TypeError:
        return ("id", id(leaf))


def _dtype_of(leaf: Any, kind: str) -> Any:
    if kind == "stacked":
        return leaf.stacked.dtype
    return jnp.asarray(leaf).dtype if not hasattr(leaf, "dtype") else leaf.dtype
