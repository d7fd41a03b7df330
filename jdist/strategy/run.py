"""`Strategy.run`: a function compiled once per replica with `jax.shard_map` over the data axis.

Which arguments are split and which broadcast is the value model of `jdist.strategy.values`; which results
come back mirrored (`replica_taint`) or keep the batch's mask (`row_alignment`) is proven from the traced
program. `Strategy` inherits this as `ReplicaRun`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.strategy import (
    component_masks,
    context,
    dispatch,
    even_rows,
    extensions,
    function_trace,
    host_checks,
    leaf_checks,
    padded_run,
    python_control_flow,
    row_count_reads,
    traced_functions,
    uneven_rows,
)
from jdist.strategy.distributed_batch import DistributedBatch, place_host_batches, unwrap_batches
from jdist.strategy.replica_context import ReplicaContext
from jdist.strategy.replica_taint import per_replica_outputs
from jdist.strategy.row_alignment import aligned_outputs
from jdist.strategy.run_options import RunOptions, check_run_options
from jdist.strategy.shared_results import shared_results
from jdist.strategy.values import PerReplica, is_mirrored, known_row_counts, mark_mirrored, mark_single, split_mark
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_ARRAY_SCALARS = (np.ndarray, np.generic, int, float, bool, complex)
_PYTHON_RESULTS = (int, float, bool, complex, str)


class _PythonResult:
    """A Python number (or str) a replica function returns: kept in the result structure and handed back as it
    is, not compiled into an array (observed, TF 2.21: `run(lambda: 3)` is `3`, `run(lambda x: x.shape[0], ...)`
    an int: every replica returns the same object)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


jax.tree_util.register_pytree_node(_PythonResult, lambda r: ((), r.value), lambda value, _: value)


def returned_as_is(value: Any) -> Any:
    """`value` as a result of the replica function that `run` hands back as this very object, not compiled into
    an array (every replica returned the same object: a Python number, a variable)."""
    return _PythonResult(value)


def _keep_python(out: PyTree) -> PyTree:
    """`out` with its Python-number leaves as `_PythonResult` nodes (no array leaves of their own)."""
    kept = lambda x: isinstance(x, _PythonResult)  # noqa: E731
    return jax.tree.map(lambda x: _PythonResult(x) if type(x) in _PYTHON_RESULTS else x, out, is_leaf=kept)


class StrategyFields:
    """What `Strategy` gives its two halves (`ReplicaRun`, `CrossReplicaOps`), declared for type checkers only."""

    if TYPE_CHECKING:  # provided by `Strategy`
        _mesh: Mesh
        _data_axis: str
        _layout: Any
        _shard_optimizer_state: bool
        num_replicas_in_sync: int
        worker_devices: tuple

        def scope(self) -> contextlib.AbstractContextManager: ...
        def replicated_sharding(self) -> NamedSharding: ...
        def _is_split_batch(self, x: jax.Array) -> bool: ...


class ReplicaRun(StrategyFields):
    """`run` and how it classifies, compiles and returns: the per-replica half of a `Strategy`."""

    if TYPE_CHECKING:  # provided by `Strategy`
        _run_cache: dict

    def run(self, fn: Callable[..., PyTree], args: Sequence[PyTree] = (),
            kwargs: Mapping[str, PyTree] | None = None, options: RunOptions | None = None) -> PyTree:
        """Runs `fn` once per replica, compiled; returns per-replica results.

        Arguments: per-replica values (`PerReplica`, `DistributedBatch`, what
        `distribute_batch` returns) are split per replica; everything else is
        broadcast, whatever its sharding. Results that provably agree on every
        replica (e.g. after `all_reduce`) come back as plain replicated arrays; the
        rest as `PerReplica`, carrying the batch's mask when they have one row per
        example (see `jdist.strategy.values`).
        """
        if isinstance(args, DistributedBatch) and isinstance(args.value, (list, tuple)):
            args = tuple(args)  # TF's `run(fn, args=batch)` of a tuple element: its components, still masked
        if not isinstance(args, (list, tuple)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}.")
        check_run_options(options)  # TF's options; a padded batch needs none of them
        function_trace.refuse("strategy.run")  # a tf.function calling it runs as Python; run compiles the step
        strategy = self._as_strategy()
        kwargs = dict(kwargs or {})
        fn = traced_functions.canonical(fn)  # inside a tf.function: the replica function of its first call
        fn = python_control_flow.converted(fn)  # AutoGraph, as TF converts the replica function
        if context.in_replica_context():
            raise RuntimeError("strategy.run() cannot be called inside another run(); call the function directly.")
        claimed = extensions.claimed_run(fn)  # e.g. Keras models, optimizers, metrics used as TF uses variables
        if claimed is not None:
            extension, claim = claimed
            return extension.run(strategy, fn, args, kwargs, claim)
        leaf_checks.check_array_args(tuple(args), "args")  # JAX takes numbers only: named here
        leaf_checks.check_array_args(kwargs, "kwargs")
        placed_args, placed_kwargs = place_host_batches(strategy, (tuple(args), kwargs))
        fn, placed_args = component_masks.with_component_mask(self._run_cache, fn, placed_args, placed_kwargs)
        with self.scope(), extensions.run_guard():
            return self._run_compiled(fn, placed_args, placed_kwargs)

    def _as_strategy(self) -> Strategy:
        """`self`, as the `Strategy` that a `ReplicaRun` always is (its only subclass)."""
        return cast("Strategy", self)

    def _run_compiled(self, fn: Callable, args: tuple, kwargs: dict) -> Any:
        leaves, treedef = jax.tree.flatten((args, kwargs), is_leaf=lambda x: isinstance(x, PerReplica))
        kinds = tuple(self._classify(leaf) for leaf in leaves)
        if "unmarked" in kinds:
            raise self._unmarked_error(treedef, kinds)
        static = tuple(_static_key(leaf) if kind == "static" else None for leaf, kind in zip(leaves, kinds))
        all_masks = [self._input_mask(leaf, kind) for leaf, kind in zip(leaves, kinds)]
        masked = tuple(m is not None for m in all_masks)
        mask_ids = {id(m) for m in all_masks if m is not None}
        is_mask = tuple(kind == "batch" and id(leaf) in mask_ids for leaf, kind in zip(leaves, kinds))
        # Shapes are part of the key: what the traced program proves (row alignment, padding) is per shape.
        shapes = tuple(_signature(leaf, kind) for leaf, kind in zip(leaves, kinds))
        key = (fn, treedef, kinds, static, masked, is_mask, shapes)
        if key not in self._run_cache:
            self._run_cache[key] = self._compile_run(fn, treedef, kinds, leaves, masked, is_mask)
        compiled, out_tree, varying, aligned, facts, shared = self._run_cache[key]
        dynamic = [self._prepare(leaf, kind) for leaf, kind in zip(leaves, kinds) if kind != "static"]
        masks = [m for m, kind in zip(all_masks, kinds) if kind != "static"]
        own = [leaf if m else None for leaf, m, kind in zip(leaves, is_mask, kinds) if kind != "static"]
        counts = self._short_batch(facts, masks, own, aligned)
        if counts is not None:  # a short batch: TF's values or an error, never the padding's
            if self._can_run_each_replica(facts):
                return self._run_each_replica(fn, key, treedef, kinds, leaves, dynamic, counts)
            exposed = [i for i, e in enumerate(facts.exposed) if e]
            reads = [i for i, r in enumerate(facts.reads_row_count()) if r and i not in exposed]
            trimmed = even_rows.trimmed_leaves(leaves, kinds, self.num_replicas_in_sync, self._counts) \
                if exposed or reads else None
            if trimmed is not None:  # equal real rows on every replica: the program on them alone (TF's values)
                args, kwargs = jax.tree.unflatten(treedef, trimmed)
                return self._run_compiled(fn, args, kwargs)
            if (exposed or reads) and self._can_run_each_replica(facts, threads=True):
                # different real rows per replica: each on its own rows, meeting at the collectives (TF's values)
                try:
                    return self._run_each_replica(fn, key, treedef, kinds, leaves, dynamic, counts, threads=True)
                except (NameError, uneven_rows.Unserved) as error:  # the mesh axis used beyond the collectives
                    if isinstance(error, NameError) and "axis name" not in str(error):
                        raise
                    failure: Exception | None = error
            else:
                failure = None
            if exposed or reads:
                paths, row_count = _result_names(out_tree, exposed), _result_names(out_tree, reads)
                why = ("the function communicates between replicas (all_reduce, all_gather, merge_call), so its "
                       "replicas cannot run apart on their real rows" if facts.collectives
                       else "this strategy's replicas (several processes, several devices each, or parameters "
                       "laid out over the mesh) cannot run apart on their real rows")
                raise padded_run.unexact_error(fn, paths, next(c for c in counts if c is not None), why,
                                               row_count) from failure
        outs = dispatch.dispatched(compiled(*dynamic))
        results = []
        for out, is_varying, rows_of, is_shared in zip(outs, varying, aligned, shared):
            mask = _output_mask(rows_of, masks)
            if not is_varying:
                results.append(mark_single(mark_mirrored(out)) if is_shared else mark_mirrored(out))
            elif self.num_replicas_in_sync == 1:  # one replica: a plain array, cut to its real rows
                results.append(out[0] if mask is None or counts is None else out[0][: int(self._counts(mask)[0])])
            else:
                results.append(PerReplica(stacked=out, mask=mask))
        return jax.tree.unflatten(out_tree, results)

    def _counts(self, mask: Any) -> np.ndarray:
        return padded_run.row_counts(mask, self.num_replicas_in_sync, self.replicated_sharding())

    def _short_batch(self, facts: padded_run.PaddingFacts, masks: list, own: list, aligned: tuple) -> Any:
        """Per dynamic input, its replicas' real row counts when some input is padded (a mask
        input counts its own rows), else None. Counted only where the answer changes what
        `run` does; datasets record the counts on the host, so this costs no device sync."""
        if not facts.padded_inputs:
            return None
        one = self.num_replicas_in_sync == 1 and any(isinstance(a, frozenset) for a in aligned)
        # A function that communicates may read the row count from a shape (row_count_reads): checked on short
        # batches whose counts the host knows (a dataset's), at no device round trip.
        known = facts.collectives and all(known_row_counts(m) is not None for m in masks if m is not None)
        if not (self._can_run_each_replica(facts) or any(facts.exposed) or one or known):
            return None
        counts = [self._counts(m) if m is not None else (self._counts(o) if o is not None else None)
                  for m, o in zip(masks, own)]
        padded = any(c is not None and m is not None and int(c.sum()) < m.shape[0]
                     for c, m in zip(counts, masks))
        return counts if padded else None

    def _can_run_each_replica(self, facts: padded_run.PaddingFacts, threads: bool = False) -> bool:
        """Whether the replicas can run apart, each on its own rows: no collectives (a single replica's are
        the identity; with `threads`, collectives are met between the replicas' threads), one process, one
        device per replica, parameters not laid out over the mesh."""
        return ((threads or not facts.collectives or self.num_replicas_in_sync == 1) and jax.process_count() == 1
                and self._layout is None
                and self._mesh.devices.size == self.num_replicas_in_sync)

    def _run_each_replica(self, fn: Callable, key: tuple, treedef: Any, kinds: tuple, leaves: list,
                          dynamic: list, counts: list, threads: bool = False) -> Any:
        """TF's short batch: `fn` on each replica's real rows, compiled once per row count (with `threads`:
        eagerly, one thread per replica, its collectives met between them, `uneven_rows`)."""
        _, out_tree, varying, aligned, facts, _ = self._run_cache[key]
        strategy = self._as_strategy()
        devices = strategy._replica_devices()
        dyn_kinds = [k for k in kinds if k != "static"]
        inputs = padded_run.per_replica_inputs(dynamic, dyn_kinds, counts, devices)
        per_replica = []
        if threads:
            body = self._replica_body(fn, treedef, kinds, leaves)
            per_replica = uneven_rows.run_threads(
                lambda ctx, ins: body(ctx.replica_id_in_sync_group, *ins, ctx=ctx), inputs, strategy,
                strategy.data_axis, devices, len(varying))
        else:
            exact_key = ("each replica",) + key
            if exact_key not in self._run_cache:
                self._run_cache[exact_key] = jax.jit(self._replica_body(fn, treedef, kinds, leaves))
            single = self._run_cache[exact_key] = host_checks.lazily_checked(self._run_cache[exact_key])
            for r, d in enumerate(devices):
                try:
                    with padded_run.alone(d):
                        per_replica.append(single(jax.device_put(np.int32(r), d), *inputs[r]))
                except Exception as error:  # noqa: BLE001 (a replica without rows: see empty_replica_results)
                    if any(counts[i][r] for i in facts.padded_inputs):
                        raise
                    per_replica.append(padded_run.empty_replica_results(
                        fn, facts, aligned, r, d, lambda js: _result_names(out_tree, js), error))
        masks = [self._input_mask(leaf, kind) for leaf, kind in zip(leaves, kinds) if kind != "static"]
        padded = {id(masks[i]): (masks[i], counts[i]) for i in facts.padded_inputs}
        results = []
        for j, (is_varying, rows_of) in enumerate(zip(varying, aligned)):
            mask = _output_mask(rows_of, masks)
            if mask is None and len(padded) == 1:  # one row per real example? checked by shape
                mask = next(iter(padded.values()))[0]
            mask_counts = padded[id(mask)][1] if mask is not None else None
            parts = [outs[j] for outs in per_replica]
            results.append(uneven_rows.single_result(parts, strategy) if threads and uneven_rows.one_object(parts)
                           else padded_run.assemble(parts, is_varying, facts.out_shapes[j], mask, mask_counts,
                                                    devices, strategy))
        return jax.tree.unflatten(out_tree, results)

    def _replica_body(self, fn: Callable, treedef: Any, kinds: tuple, leaves: list) -> Callable:
        """`fn` for one replica alone: its arguments as given, its replica id an argument."""
        static_leaves = [leaf if kind == "static" else None for leaf, kind in zip(leaves, kinds)]
        strategy = self._as_strategy()

        def body(replica_id, *dynamic, ctx=None):
            it = iter(dynamic)
            full = [static_leaf if kind == "static" else next(it) for kind, static_leaf in zip(kinds, static_leaves)]
            (args, kwargs), masks = unwrap_batches(jax.tree.unflatten(treedef, full))
            if ctx is not None:
                ctx._example_masks = tuple(masks)
            with context.push(strategy, ctx or ReplicaContext(strategy, None, example_masks=masks,
                                                               replica_id=replica_id)):
                out = fn(*args, **kwargs)
            return [jnp.asarray(x) for x in jax.tree.leaves(_keep_python(out))]

        return body

    def _input_mask(self, leaf: Any, kind: str) -> Any:
        """The mask of real rows of a split argument (None: all rows real, or not split)."""
        if kind == "stacked":
            return leaf.mask
        note = split_mark(leaf) if kind == "batch" else None
        return None if note is None else note.mask

    def _classify(self, leaf: Any) -> str:
        """Kind of an argument leaf: "stacked" (a PerReplica), "batch" (split along dim 0),
        "replicated" (broadcast) or "static" (not an array)."""
        if isinstance(leaf, PerReplica):
            leaf.stacked  # noqa: B018 (raises a clear error for ragged values)
            return "stacked"
        if isinstance(leaf, jax.Array):
            if self._is_split_batch(leaf):
                return "batch"
            return "unmarked" if self._looks_split(leaf) else "replicated"
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

    def _looks_split(self, x: jax.Array) -> bool:
        """An array split along dim 0 over the data axis, but not marked as per-replica, on a
        strategy whose parameters are never split over that axis: it can only come from a
        batch (computed from one outside `run`, which drops the mark and the mask)."""
        if self._layout is not None or self._shard_optimizer_state or is_mirrored(x) or x.ndim == 0:
            return False
        sharding = getattr(x, "sharding", None)
        if not isinstance(sharding, NamedSharding) or not isinstance(sharding.mesh, Mesh) or not len(sharding.spec):
            return False
        mesh = sharding.mesh
        if mesh.devices.shape != self._mesh.devices.shape or not np.array_equal(mesh.devices, self._mesh.devices):
            return False
        first = sharding.spec[0]
        return self._data_axis in (first if isinstance(first, tuple) else (first,)) \
            and self.num_replicas_in_sync > 1

    def _unmarked_error(self, treedef: Any, kinds: tuple) -> ValueError:
        paths = jax.tree_util.tree_flatten_with_path(jax.tree.unflatten(treedef, [0] * len(kinds)))[0]
        where = ", ".join(("args" if p[0].idx == 0 else "kwargs") + jax.tree_util.keystr(p[1:])
                          for (p, _), k in zip(paths, kinds) if k == "unmarked")
        return ValueError(
            f"strategy.run: {where} is split over the replicas (along dim 0, over the {self._data_axis!r} axis) "
            "but is not a per-replica value: an array computed from a batch outside run loses the batch's mark "
            "and its mask of padding rows, so run cannot tell whether to split it (and which rows are real) or "
            "broadcast it. Fix: compute it inside the replica function from the batch; or pass a full batch "
            "through strategy.distribute_batch; or, to broadcast it, replicate it first: "
            "jax.device_put(x, strategy.replicated_sharding()).")

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

    def _compile_run(self, fn: Callable, treedef: Any, kinds: tuple, leaves: list, masked: tuple,
                     is_mask: tuple) -> tuple:
        axis = self._data_axis
        static_leaves = [leaf if kind == "static" else None for leaf, kind in zip(leaves, kinds)]
        dynamic_kinds = [kind for kind in kinds if kind != "static"]
        in_specs = tuple(P() if kind == "replicated" else P(axis) for kind in dynamic_kinds)
        record: dict[str, Any] = {}
        since = host_checks.placed()  # a program with tf.debugging checks raises their errors at the call

        def call_fn(*dynamic):
            it = iter(dynamic)
            full, broadcast = [], []
            for kind, static_leaf in zip(kinds, static_leaves):
                if kind == "static":
                    full.append(static_leaf)
                else:
                    value = next(it)
                    full.append(value[0] if kind == "stacked" else value)
                    if kind == "replicated":
                        broadcast.append(value)
            # A DistributedBatch reaches fn as its plain element; its mask goes to the context.
            (args, kwargs), masks = unwrap_batches(jax.tree.unflatten(treedef, full))
            strategy = self._as_strategy()
            replica = ReplicaContext(strategy, axis, example_masks=masks)
            with context.push(strategy, replica):
                out = fn(*args, **kwargs)
            out_leaves, out_tree = jax.tree.flatten(_keep_python(out))
            record["tree"] = out_tree
            record["shared"] = shared_results(out_leaves, fn, broadcast, replica.merged, replica.own_values)
            return [jnp.asarray(x) for x in out_leaves]

        def shard(body, out_specs):
            # check_vma=False: each replica differentiates its own copy of replicated
            # values, so gradients stay per-replica until all_reduce, as in TF.
            return jax.shard_map(body, mesh=self._mesh, in_specs=in_specs, out_specs=out_specs,
                                 axis_names={axis}, check_vma=False)

        abstract = [jax.ShapeDtypeStruct(np.shape(self._prepare(leaf, kind)), _dtype_of(leaf, kind))
                    for leaf, kind in zip(leaves, kinds) if kind != "static"]
        try:
            probe = jax.make_jaxpr(shard(lambda *d: tuple(call_fn(*d)), P()))(*abstract)
        except Exception as error:
            if python_control_flow.reads_traced_value(error):  # TF's AutoGraph would have converted it
                raise python_control_flow.control_flow_error(error, "strategy.run's function") from error
            if leaf_checks.is_shape_mismatch(error):  # named as the Trainer names a batch the model cannot take
                raise leaf_checks.model_mismatch_error(_batch_view(leaves, kinds, treedef), "the input",
                                                       error) from error
            raise
        (shard_eqn,) = [e for e in probe.jaxpr.eqns if e.primitive.name == "shard_map"]
        inner = shard_eqn.params["jaxpr"]
        # Arrays the function closes over are traced as extra leading inputs: constants, broadcast.
        consts = len(inner.invars) - len(dynamic_kinds)
        varying = tuple(per_replica_outputs(inner, [False] * consts + [k != "replicated" for k in dynamic_kinds]))
        # Which outputs have one row per example of which split inputs (their masks apply);
        # a masked PerReplica argument (rows of an earlier result) keeps its mask too.
        dynamic_masked = [m for m, kind in zip(masked, kinds) if kind != "static"]
        rows_in = [frozenset([i]) if k == "batch" or m else None
                   for i, (k, m) in enumerate(zip(dynamic_kinds, dynamic_masked))]
        aligned = tuple(aligned_outputs(inner, [None] * consts + rows_in))
        dynamic_is_mask = [m for m, kind in zip(is_mask, kinds) if kind != "static"]
        facts = padded_run.analyse(inner, consts, dynamic_masked, dynamic_is_mask, aligned, axis)
        padded = [m or i for m, i in zip(dynamic_masked, dynamic_is_mask)]
        replicas = self.num_replicas_in_sync

        @functools.cache
        def reads_row_count() -> tuple[bool, ...]:
            """The function traced again with one more row per replica (row_count_reads); a function that
            cannot take one more row reads its row count by construction."""
            grown = [jax.ShapeDtypeStruct(row_count_reads.more_rows(a.shape, k, replicas) if p else a.shape,
                                          a.dtype) for a, k, p in zip(abstract, dynamic_kinds, padded)]
            try:
                closed = jax.make_jaxpr(shard(lambda *d: tuple(call_fn(*d)), P()))(*grown)
            except Exception:  # noqa: BLE001 (see the docstring)
                return (True,) * len(inner.outvars)
            (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "shard_map"]
            return row_count_reads.reads_row_count(inner, eqn.params["jaxpr"])

        facts = dataclasses.replace(facts, reads_row_count=reads_row_count)

        def body(*dynamic):
            outs = call_fn(*dynamic)
            return tuple(x[None] if v else x for x, v in zip(outs, varying))

        compiled = host_checks.checked(jax.jit(shard(body, tuple(P(axis) if v else P() for v in varying))), since)
        return compiled, record["tree"], varying, aligned, facts, record["shared"]


def _output_mask(rows_of: Any, masks: Sequence[Any]) -> Any:
    """The mask of a result of `run` row-aligned with the split inputs `rows_of` (see
    `jdist.strategy.row_alignment`): theirs when they share one; None when not aligned."""
    if not isinstance(rows_of, frozenset):
        return None
    found = {id(m): m for m in (masks[i] for i in rows_of) if m is not None}
    return next(iter(found.values())) if len(found) == 1 else None


def _result_names(tree: Any, indices: Sequence[int]) -> list[str]:
    """How error messages name the results at `indices` of a result structure."""
    paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(jax.tree.unflatten(tree, [0] * tree.num_leaves))[0]]
    return [f"its result{jax.tree_util.keystr(paths[i])}" if paths[i] else "its result" for i in indices]


def _batch_view(leaves: list, kinds: tuple, treedef: Any) -> Any:
    """`(args, kwargs)` with only the split (per-replica) arrays kept, for error messages; every
    array when none is split."""
    split = any(kind in ("batch", "stacked") for kind in kinds)
    keep = [leaf.stacked[0] if kind == "stacked" else leaf
            if (kind in ("batch", "stacked") or (not split and kind == "replicated")) else None
            for leaf, kind in zip(leaves, kinds)]
    return jax.tree.unflatten(treedef, keep)


def _signature(leaf: Any, kind: str) -> Any:
    if kind == "static":
        return None
    value = leaf.stacked if kind == "stacked" else leaf
    if isinstance(value, jax.Array):
        return value.shape, value.dtype
    return np.shape(value), getattr(value, "dtype", type(value))


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
