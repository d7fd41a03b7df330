"""`Strategy`: a device mesh, a parameter layout and an input plan.

Every TF strategy is a preset of these three (see `MirroredStrategy`,
`OneDeviceStrategy`). Per-replica code (`run`) is compiled once with
`jax.shard_map` over the data axis; global-view code is a plain `jax.jit` over
arrays sharded by `distribute_batch` and `place`.
"""
from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

from jdist import context, dispatch, keras_distribution, keras_run
from jdist.devices import Device, DeviceLike, resolve_devices
from jdist.distributed_batch import is_distributed_batch, local_examples, place_host_batches, unwrap_batches
from jdist.layout import (
    Layout,
    LayoutLike,
    ShardingCache,
    as_layout,
    shard_optimizer_state,
    split_over_data,
    split_shardings_over_data,
)
from jdist.logical_devices import logical_axes, replicate_on, split_on
from jdist.process_local import check_divisible, process_batch_slice, to_host
from jdist.reduce_op import ReduceOp
from jdist.replica_context import ReplicaContext
from jdist.replica_taint import per_replica_outputs
from jdist.row_alignment import OTHER, aligned_outputs
from jdist.values import (
    PerReplica,
    is_mirrored,
    local_components,
    local_row_counts,
    mark_mirrored,
    mark_split,
    split_mark,
    stack_on_devices,
)

_ARRAY_SCALARS = (np.ndarray, np.generic, int, float, bool, complex)


class ValueContext:
    """What `experimental_distribute_values_from_function` tells `value_fn` (TF's ValueContext)."""

    def __init__(self, replica_id_in_sync_group: int = 0, num_replicas_in_sync: int = 1):
        self.replica_id_in_sync_group = replica_id_in_sync_group
        self.num_replicas_in_sync = num_replicas_in_sync

    def __repr__(self) -> str:
        return (
            f"ValueContext(replica_id_in_sync_group={self.replica_id_in_sync_group}, "
            f"num_replicas_in_sync={self.num_replicas_in_sync})"
        )


def build_mesh(devices: Sequence[Device], mesh_shape: Mapping[str, int] | None, data_axis: str) -> Mesh:
    """A mesh with Auto axes (the compiler inserts collectives, as TF's strategies do).

    One size in `mesh_shape` may be -1: it takes whatever devices are left.
    """
    shape = dict(mesh_shape) if mesh_shape else {data_axis: -1}
    if data_axis not in shape:
        raise ValueError(
            f"mesh_shape {dict(shape)} has no {data_axis!r} axis; add one (size 1 for pure model parallelism)."
        )
    fill = [name for name, size in shape.items() if size == -1]
    if len(fill) > 1:
        raise ValueError(f"mesh_shape {dict(shape)}: at most one axis may be -1.")
    known = math.prod(size for size in shape.values() if size != -1)
    if fill:
        if len(devices) % known:
            raise ValueError(f"mesh_shape {dict(shape)} cannot fill {len(devices)} devices.")
        shape[fill[0]] = len(devices) // known
    if math.prod(shape.values()) != len(devices):
        raise ValueError(
            f"mesh_shape {dict(shape)} needs {math.prod(shape.values())} devices but "
            f"{len(devices)} are available; make the axis sizes multiply to {len(devices)}."
        )
    grid = np.array(devices, dtype=object).reshape(tuple(shape.values()))
    return Mesh(grid, tuple(shape), axis_types=(AxisType.Auto,) * len(shape))


class Strategy:
    """A distribution strategy: `jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=rules)`.

    The data axis carries replicas; other axes split parameters as `layout` says:
    a `jdist.Layout`, or a list of `(regex, PartitionSpec)` pairs / a mapping
    (see `jdist.layout`). No layout means every parameter is replicated.
    """

    _keras_distribution: Any = None  # the Keras Distribution over this mesh, made on first use (keras_distribution)

    def __init__(
        self,
        mesh_shape: Mapping[str, int] | None = None,
        layout: LayoutLike | None = None,
        *,
        devices: Sequence[DeviceLike] | None = None,
        data_axis: str = "data",
        shard_optimizer_state: bool = False,
        pipeline: Any = None,
    ):
        self._shard_optimizer_state = bool(shard_optimizer_state)
        self._devices = resolve_devices(devices)
        self._mesh = build_mesh(self._devices, mesh_shape, data_axis)
        self._data_axis = data_axis
        self._layout = as_layout(layout)
        self._pipeline = pipeline
        if pipeline is not None:  # stacked blocks split over the stage axis (jdist.pipeline)
            pipeline.check_mesh(self._mesh)
            self._layout = pipeline.layout(self._layout)
        if self._layout is not None:
            self._layout.check_mesh(self._mesh)
        self._run_cache: dict[Any, tuple] = {}

    # ----------------------------------------------------------------- properties
    @property
    def mesh(self) -> Mesh:
        return self._mesh

    @property
    def data_axis(self) -> str:
        return self._data_axis

    @property
    def layout(self) -> Layout | None:
        """The partition rules parameters follow (None: all replicated)."""
        return self._layout

    @property
    def pipeline(self) -> Any:
        """The `jdist.Pipeline` splitting the model's stacked blocks over stages, or None."""
        return self._pipeline

    @property
    def num_replicas_in_sync(self) -> int:
        return int(self._mesh.shape[self._data_axis])

    @property
    def worker_devices(self) -> tuple:
        return tuple(self._mesh.devices.flat)

    @property
    def cluster_resolver(self) -> Any:
        return None

    @property
    def should_checkpoint(self) -> bool:
        """Whether this process writes checkpoint files (TF's `extended.should_checkpoint`)."""
        return True

    @property
    def should_save_summary(self) -> bool:
        """Whether this process writes logs and summaries (TF's `extended.should_save_summary`)."""
        return True

    def __repr__(self) -> str:
        shape = ", ".join(f"{k}={v}" for k, v in self._mesh.shape.items())
        return f"{type(self).__name__}(mesh=({shape}))"

    # ---------------------------------------------------------------- shardings
    def replicated_sharding(self) -> NamedSharding:
        return NamedSharding(self._mesh, P())

    def data_sharding(self) -> NamedSharding:
        """Splits dimension 0 (the batch) over the data axis."""
        return NamedSharding(self._mesh, P(self._data_axis))

    def parameter_shardings(self, tree: Any) -> Any:
        """The sharding of each leaf of a parameter pytree, optimizer state or `TrainState`,
        as the layout says (replicated without one). A TrainState's optimizer state
        follows its parameters (see `jdist.layout`). Computed once per tree structure,
        shapes and dtypes."""
        return self._placements().get("stored", tree, self._resolve_shardings)

    def _placements(self) -> ShardingCache:
        return self.__dict__.setdefault("_placement_cache", ShardingCache())

    def _resolve_shardings(self, tree: Any) -> Any:
        if self._layout is None:
            replicated = self.replicated_sharding()
            shardings = jax.tree.map(lambda _: replicated, tree)
        else:
            shardings = self._layout.shardings(tree, self._mesh)
        if self._shard_optimizer_state:  # ZeRO-1: each replica stores the state of its share of the update
            shardings = shard_optimizer_state(tree, shardings, self._data_axis)
        return shardings

    @property
    def shard_optimizer_state(self) -> bool:
        """Whether a train state's optimizer state is stored split over the data axis (ZeRO-1)."""
        return self._shard_optimizer_state

    def summary(self, tree: Any = None, opt_state: Any = None) -> str:
        """A table of every parameter of `tree` (params or a `TrainState`): shape, spec,
        bytes per device, the optimizer state that follows it, and the total memory per
        device, plus the mesh. Leaves may be abstract (`jax.eval_shape` output).

            print(strategy.summary(state))
        """
        from jdist.summary import layout_summary

        layout = self._layout if self._layout is not None else Layout(default=P())
        opt_state_spec: Callable[[Any], P] | None = None
        if self._shard_optimizer_state:  # ZeRO-1: the stored spec, as parameter_shardings gives it
            def zero1_spec(s):
                return split_over_data(s.spec, s.shape, s.dtype, self._mesh, self._data_axis)

            opt_state_spec = zero1_spec
        text = layout_summary(layout, self._mesh, self._data_axis, tree, opt_state, opt_state_spec)
        if self._pipeline is not None:
            text += "\n" + self._pipeline.summary(layout, self._mesh, tree)
        return text

    # ---------------------------------------------------------- logical devices
    def experimental_split_to_logical_devices(self, tensor: Any, partition_dimensions: Sequence[int] | P) -> Any:
        """TF's name for `jdist.split(tensor, partition_dimensions)` on this strategy."""
        return split_on(self, tensor, partition_dimensions)

    def experimental_replicate_to_logical_devices(self, tensor: Any) -> Any:
        """TF's name for `jdist.replicate(tensor)` on this strategy."""
        return replicate_on(self, tensor)

    def experimental_assign_to_logical_device(self, tensor: Any, logical_device_id: int) -> Any:
        """TF pins `tensor` to one logical device of the replica. Under SPMD partitioning
        (which jdist always uses; TF raises in that mode) a value cannot live on one device
        only, so after checking `logical_device_id` the value is kept whole on every logical
        device of the replica, as `jdist.replicate` does: the same numbers, not pinned."""
        count = math.prod(self._mesh.shape[a] for a in logical_axes(self))
        if not 0 <= logical_device_id < count:
            raise ValueError(
                f"logical_device_id={logical_device_id} is out of range: each replica has {count} "
                "logical device(s) (the mesh axes other than the data axis)."
            )
        return replicate_on(self, tensor)

    def place(self, tree: Any) -> Any:
        """Puts a parameter / optimizer-state pytree where this strategy keeps it.

        The result has its own buffers, so donating it to a train step never frees
        the caller's arrays (`jax.device_put`, even with `may_alias=False`, reuses a
        single-device array's buffer as one shard of a replicated result).
        """
        shardings = self.parameter_shardings(tree)
        return jax.jit(_copy_tree, out_shardings=shardings)(jax.device_put(tree, shardings))

    def create_train_state(self, state_cls: type, *, apply_fn: Callable, params: Any, tx: Any, **kwargs: Any) -> Any:
        """Builds `state_cls` (e.g. `jdist.TrainState`) with parameters and optimizer state placed here.

        The hook behind `TrainState.create`; strategies that keep parameters
        outside this process (parameter servers) override it.
        """
        params = self.place(params)
        if self._shard_optimizer_state:  # made straight into its split layout: never whole on one device
            state = state_cls(step=self.place(0), apply_fn=apply_fn, params=params, tx=tx,
                              opt_state=jax.eval_shape(tx.init, params), **kwargs)
            shardings = self.parameter_shardings(state).opt_state
            return state.replace(opt_state=jax.jit(tx.init, out_shardings=shardings)(params))
        opt_state = tx.init(params)
        state = state_cls(step=self.place(0), apply_fn=apply_fn, params=params, tx=tx, opt_state=opt_state, **kwargs)
        if self._layout is None:
            return state.replace(opt_state=self.place(opt_state))
        # Laid out with the whole state in view, so optimizer state follows its parameters.
        return state.replace(opt_state=jax.device_put(opt_state, self.parameter_shardings(state).opt_state))

    @property
    def single_program_step(self) -> bool:
        """Whether `compile_step` makes one XLA program on this strategy's mesh, so several
        steps can run inside one compiled loop (`Trainer(steps_per_execution=k)`). False where
        the parameters live apart from the compute devices and a step is several programs."""
        return True

    def compute_view(self, tree: Any) -> Any:
        """`tree` (parameters, a train state) where the compute devices can read it: itself here;
        a copy on the compute devices where the parameters are stored elsewhere."""
        return tree

    def compile_step(self, step_fn: Callable, state: Any, *, donate: bool, batch_sharding: Any = None,
                     out_sharding: Any = None) -> Callable:
        """Compiles a global-view `step_fn(state, batch, update_shardings) -> (state, out)`.

        The hook behind `make_train_step` and `Trainer.fit`: one `jax.jit` with the
        layout's state shardings, the batch split over the data axis (or
        `batch_sharding`, a sharding or a pytree prefix of them), `out` replicated (or
        `out_sharding`), and weight-update sharding (`update_shardings`: where each
        leaf's share of the optimizer update runs). Strategies whose parameters live
        apart from the compute mesh override it and may pass `update_shardings=None`.
        """
        state_shardings = self.parameter_shardings(state)
        update_shardings = self._placements().get(
            "update", state, lambda t: split_shardings_over_data(t, self.parameter_shardings(t), self._data_axis))

        def traced(state, batch):
            # Traced as this strategy's cross-replica code, so jdist.split() and
            # get_strategy() inside the loss see it even outside strategy.scope().
            with context.push(self, None):
                return step_fn(state, batch, update_shardings)

        return jax.jit(
            traced,
            in_shardings=(state_shardings, self.data_sharding() if batch_sharding is None else batch_sharding),
            out_shardings=(state_shardings, self.replicated_sharding() if out_sharding is None else out_sharding),
            donate_argnums=(0,) if donate else (),
        )

    # ------------------------------------------------- hooks: where a state lives
    # The Trainer, its checkpoint I/O and `jdist.checkpoint.CheckpointManager` go through these
    # hooks and never ask which strategy they hold. The defaults keep a state on this process's
    # mesh; the parameter-server strategy overrides them to keep it on its servers.
    def place_state(self, state: Any, into: Any = None) -> Any:
        """Puts a whole train state (host or device values) where this strategy keeps it, in
        buffers of its own (the hook behind `Trainer.state = ...`). `into`: the state it
        replaces, for strategies that restore into storage they already hold."""
        return self.place(state)

    def keeps_remotely(self, value: Any) -> bool:
        """Whether `value` is a handle to values this strategy keeps outside this process (a
        Trainer then trains such a train state where it is)."""
        return False

    def host_copy(self, tree: Any) -> Any:
        """A numpy copy of `tree` (a train state, parameters), whole on every process; with
        several processes every process must call it. `place_state(copy)` puts it back."""
        return to_host(tree)

    def checkpoint_view(self, tree: Any) -> Any:
        """What a checkpoint of `tree` holds: `tree` itself here (each process writes its own
        shards); a host copy where the values live outside this process."""
        return tree

    def restore_into(self, target: Any, restored: Any) -> Any:
        """`target` holding `restored` (values read from a checkpoint in the structure of
        `checkpoint_view(target)`, already laid out by this strategy): `restored` itself here;
        strategies that keep values elsewhere push them there and return `target`."""
        return restored

    @property
    def should_use_with_coordinator(self) -> bool:
        """Whether training steps are scheduled on remote workers through a coordinator (TF's
        `_should_use_with_coordinator`) rather than run from this process."""
        return False

    def cluster_coordinator(self) -> Any:
        """The coordinator that schedules this strategy's steps on its workers (made on first
        use); only for strategies with `should_use_with_coordinator`."""
        raise NotImplementedError(f"{self!r} runs its steps from this process: it has no cluster coordinator.")

    def local_batch_slice(self, global_batch_size: int) -> slice:
        """The rows of each global batch that this process loads and passes to `distribute_batch`.

        All of them in a single process; one contiguous share per worker with several.
        """
        return process_batch_slice(self.data_sharding(), global_batch_size)

    def distribute_batch(self, batch: Any) -> Any:
        """Places a global batch (a pytree of arrays) split over the replicas along dim 0.

        The arrays are per-replica values (`run` splits them, see `jdist.values`) and
        stay plain `jax.Array`s for jitted steps."""
        sizes = {tuple(np.shape(x))[:1] for x in jax.tree.leaves(batch)}
        if any(s == () for s in sizes):
            raise ValueError("Every leaf of a batch needs a leading batch dimension (rank >= 1).")
        if len(sizes) > 1:
            raise ValueError(
                f"The leaves of a batch disagree on the batch size: {sorted(s[0] for s in sizes)}. "
                "Every array in one batch must have the same leading dimension."
            )
        if sizes:
            (size,), = sizes
            check_divisible(size, self.num_replicas_in_sync)
        return mark_split(jax.device_put(batch, self.data_sharding()))

    def memory_report(self) -> Any:
        """Memory in use on each of this strategy's devices (a `jdist.memory.MemoryReport`; print it)."""
        from jdist.memory import memory_report

        return memory_report(self.worker_devices)

    # -------------------------------------------------------------------- scope
    @contextlib.contextmanager
    def scope(self) -> Iterator["Strategy"]:
        """Makes this strategy current; values created eagerly inside land on its mesh."""
        token = context.enter_scope(self)
        try:
            # With Keras 3 (JAX) imported, its own fit and variables follow this strategy too.
            with self._mesh_context(), keras_distribution.scope(self):
                yield self
        finally:
            context.exit_scope(token)

    def _mesh_context(self):
        return jax.set_mesh(self._mesh)

    def default_replica_context(self) -> ReplicaContext:
        return ReplicaContext(self, None)

    # ---------------------------------------------------------------------- run
    def run(self, fn: Callable, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        """Runs `fn` once per replica, compiled; returns per-replica results.

        Arguments: per-replica values (`PerReplica`, `DistributedBatch`, what
        `distribute_batch` returns) are split per replica; everything else is
        broadcast, whatever its sharding. Results that provably agree on every
        replica (e.g. after `all_reduce`) come back as plain replicated arrays; the
        rest as `PerReplica`, carrying the batch's mask when they have one row per
        example (see `jdist.values`).
        """
        if not isinstance(args, (list, tuple)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}.")
        kwargs = dict(kwargs or {})
        if context.in_replica_context():
            raise RuntimeError("strategy.run() cannot be called inside another run(); call the function directly.")
        objects = keras_run.keras_objects(fn)  # Keras models, optimizers, metrics used as TF uses variables
        if objects:
            return keras_run.run(self, fn, args, kwargs, objects, context)
        placed_args, placed_kwargs = place_host_batches(self, (tuple(args), kwargs))
        with self.scope(), keras_run.guard():
            return self._run_compiled(fn, placed_args, placed_kwargs)

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
            with context.push(self, ReplicaContext(self, axis, example_masks=masks)):
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

    # ------------------------------------------------------------ cross-replica
    def _require_cross_replica(self, method: str, alternative: str) -> None:
        if context.in_replica_context():
            raise RuntimeError(
                f"strategy.{method}() requires being in cross-replica context; inside run() use "
                f"{alternative} instead."
            )

    def _split_view(self, value: Any) -> Any:
        """`(stacked, mask)` of a per-replica value: its `(replicas, rows, ...)` view and
        its `(replicas, rows)` mask of real rows (None: all real); None for a plain value."""
        n = self.num_replicas_in_sync
        if isinstance(value, PerReplica):
            if not value.is_stacked:
                return None
            stacked, mask = value.stacked, value.mask
            return stacked, None if mask is None else mask.reshape(stacked.shape[:2])
        if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer) and self._is_split_batch(value):
            mask = split_mark(value).mask
            rows = value.shape[0] // n
            return (value.reshape((n, rows) + value.shape[1:]),
                    None if mask is None else mask.reshape(n, rows))
        return None

    def _row_counts(self, mask: Any) -> np.ndarray:
        """Real rows of every replica (all processes'), from a `(replicas, rows)` mask."""
        return np.asarray(_row_count_fn(self.replicated_sharding())(mask))

    def _equal_rows(self, stacked: Any, mask: Any, what: str) -> Any:
        """`stacked` cut to its replicas' real rows when they all hold the same number."""
        counts = self._row_counts(mask)
        if len(set(counts.tolist())) > 1:
            shapes = [(int(c),) + tuple(stacked.shape[2:]) for c in counts]
            raise ValueError(
                f"{what}: the replicas hold different numbers of real examples (shapes {shapes}; a short "
                "last batch leaves some replicas with fewer or none), so their values cannot be combined "
                "element by element. Reduce over the examples too, e.g. strategy.reduce(op, value, axis=0), "
                "or gather along axis 0."
            )
        return stacked[:, : int(counts[0])]

    @staticmethod
    def _batch_values(value: Any) -> Any:
        """A `DistributedBatch` stands for its element (TF's nest of per-replica values)."""
        return jax.tree.map(lambda v: v.value if is_distributed_batch(v) else v, value, is_leaf=is_distributed_batch)

    def reduce(self, reduce_op: ReduceOp | str, value: Any, axis: int | Sequence[int] | None = None) -> Any:
        """Combines per-replica values into one (TF's `Strategy.reduce`).

        `axis=None` reduces across replicas only; with `axis`, each replica's value is
        first reduced along it, and MEAN divides by the true element count. Padding
        rows of a short batch (and of results with one row per example) never count.
        """
        op = ReduceOp.from_value(reduce_op)
        self._require_cross_replica(
            "reduce", "get_replica_context().all_reduce(), or get_replica_context().merge_call()"
        )
        return dispatch.dispatched_each(jax.tree.map(
            lambda v: self._reduce_leaf(op, v, axis), self._batch_values(value),
            is_leaf=lambda x: isinstance(x, PerReplica)
        ))

    def _reduce_leaf(self, op: ReduceOp, value: Any, axis: Any) -> Any:
        n = self.num_replicas_in_sync
        if isinstance(value, PerReplica) and not value.is_stacked:
            return _reduce_ragged(op, value.values, axis)
        view = self._split_view(value)
        if view is None:
            # A plain value counts once per replica (TF 2.21 returns run's replica-invariant
            # results as a PerReplica of N equal values), so SUM counts each copy.
            value = jnp.asarray(value)
            axes = () if axis is None else _normalize_axis(axis, value.ndim)
            total = jnp.sum(value, axis=axes) if axes else value
            return total * n if op is ReduceOp.SUM else total / _count(value.shape, axes)
        stacked, mask = view
        axes = () if axis is None else _normalize_axis(axis, stacked.ndim - 1)
        if mask is not None and 0 not in axes:
            stacked, mask = self._equal_rows(stacked, mask, f"reduce(axis={axis!r})"), None
        inner = tuple(a + 1 for a in axes)
        if mask is None:
            total = jnp.sum(stacked, axis=(0,) + inner)
            count = n * _count(stacked.shape[1:], axes)
        else:  # rows are reduced: padding rows are left out of the sum and the count
            keep = mask.reshape(mask.shape + (1,) * (stacked.ndim - 2))
            total = jnp.sum(jnp.where(keep, stacked, jnp.zeros((), stacked.dtype)), axis=(0,) + inner)
            count = jnp.sum(mask) * _count(stacked.shape[1:], tuple(a for a in axes if a != 0))
        return total if op is ReduceOp.SUM else total / count

    def gather(self, value: Any, axis: int) -> Any:
        """Concatenates the replicas' values along `axis` (TF's `Strategy.gather`);
        only real rows of a short batch (and of per-example results) are gathered."""
        self._require_cross_replica("gather", "get_replica_context().all_gather()")
        return dispatch.dispatched_each(jax.tree.map(
            lambda v: self._gather_leaf(v, axis), self._batch_values(value),
            is_leaf=lambda x: isinstance(x, PerReplica)
        ))

    def _gather_leaf(self, value: Any, axis: int) -> Any:
        if isinstance(value, PerReplica) and not value.is_stacked:
            parts = [jnp.asarray(v) for v in value.values]
            _check_rank(parts[0].ndim)
            ax = axis % parts[0].ndim
            for p in parts:
                if p.shape[:ax] + p.shape[ax + 1:] != parts[0].shape[:ax] + parts[0].shape[ax + 1:]:
                    raise ValueError(
                        f"gather: per-replica shapes {[q.shape for q in parts]} differ outside axis {axis}."
                    )
            target = self.worker_devices[0]
            return jnp.concatenate([jax.device_put(p, target) for p in parts], axis=ax)
        view = self._split_view(value)
        if view is None:
            value = jnp.asarray(value)
            _check_rank(value.ndim)
            return jnp.concatenate([value] * self.num_replicas_in_sync, axis=axis)
        stacked, mask = view
        _check_rank(stacked.ndim - 1)
        ax = axis % (stacked.ndim - 1)
        if mask is not None and ax == 0:  # the real rows of each replica, in replica order
            counts = self._row_counts(mask)
            rows = stacked.shape[1]
            index = np.concatenate([np.arange(i * rows, i * rows + c) for i, c in enumerate(counts)])
            return jnp.take(stacked.reshape((-1,) + stacked.shape[2:]), index, axis=0)
        if mask is not None:
            stacked = self._equal_rows(stacked, mask, f"gather(axis={axis!r})")
        moved = jnp.moveaxis(stacked, 0, ax)
        shape = stacked.shape[1:]
        return moved.reshape(shape[:ax] + (shape[ax] * stacked.shape[0],) + shape[ax + 1:])

    def experimental_local_results(self, value: Any) -> tuple:
        """This process's per-replica components, as a tuple in replica order.

        Per-replica values give their components (only the real rows of a short batch
        and of per-example results); results of `run` identical on every replica give
        one copy per replica, each on its replica's device, as TF 2.21 does; any other
        value is returned alone, `(value,)`.
        """
        def components(v):
            if isinstance(v, PerReplica):
                return v.values
            if is_distributed_batch(v):  # only each replica's real examples, as TF's
                return local_examples(v)
            if is_mirrored(v):
                return self._mirrored_components(v)
            view = self._split_view(v)
            if view is None:
                return None
            stacked, mask = view
            parts = local_components(stacked)
            if mask is None:
                return parts
            return tuple(p[:c] for p, c in zip(parts, local_row_counts(split_mark(v).mask)))

        leaves, treedef = jax.tree.flatten(
            value, is_leaf=lambda x: isinstance(x, PerReplica) or is_distributed_batch(x))
        split = [components(leaf) for leaf in leaves]
        if all(s is None for s in split):
            return (value,)
        count = max(len(s) for s in split if s is not None)
        return tuple(
            jax.tree.unflatten(treedef, [leaf if s is None else s[i] for leaf, s in zip(leaves, split)])
            for i in range(count)
        )

    def _mirrored_components(self, value: jax.Array) -> tuple:
        """One copy per local replica of a replicated result, each the copy already on that
        replica's device (no transfer)."""
        local = [d for d in self._replica_devices() if d.process_index == jax.process_index()]
        on_device = {shard.device: shard.data for shard in value.addressable_shards}
        if not all(d in on_device for d in local):
            return (value,) * len(local)
        return tuple(on_device[d] for d in local)

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ValueContext], Any]) -> Any:
        """Calls `value_fn` once per local replica and returns the results as `PerReplica`."""
        n = self.num_replicas_in_sync
        local = [
            (replica, device)
            for replica, device in enumerate(self._replica_devices())
            if device.process_index == jax.process_index()
        ]
        results = [value_fn(ValueContext(replica, n)) for replica, _ in local]
        devices = [device for _, device in local]
        return jax.tree.map(
            lambda *vs: stack_on_devices(list(zip(devices, vs)), self._replica_mesh(), self._data_axis),
            *results,
        )

    # -------------------------------------------------------------------- input
    def experimental_distribute_dataset(self, dataset: Any, options: Any = None) -> Any:
        """Splits a dataset of global batches over the replicas (see `jdist.input`).

        Iterating gives `jdist.DistributedBatch`es on the mesh: TF's per-replica split,
        padded to equal shards, with a mask of the real examples.
        """
        from jdist.input import distribute_dataset

        return distribute_dataset(self, dataset, options)

    def distribute_datasets_from_function(self, dataset_fn: Callable, options: Any = None) -> Any:
        """Calls `dataset_fn(jdist.InputContext)` once per input pipeline; its per-replica batches
        are handed to this process's replicas in turn (see `jdist.input`)."""
        from jdist.input import distribute_datasets_from_function

        return distribute_datasets_from_function(self, dataset_fn, options)

    def experimental_distribute_datasets_from_function(self, dataset_fn: Callable, options: Any = None) -> Any:
        """Deprecated alias of `distribute_datasets_from_function` (as in TF)."""
        return self.distribute_datasets_from_function(dataset_fn, options)

    def _replica_devices(self) -> list:
        """One device per replica: the first device of each slice of the data axis."""
        grid = np.moveaxis(self._mesh.devices, self._mesh.axis_names.index(self._data_axis), 0)
        return list(grid.reshape(grid.shape[0], -1)[:, 0])

    def _replica_mesh(self) -> Mesh:
        if len(self._mesh.axis_names) == 1:
            return self._mesh
        return Mesh(np.array(self._replica_devices(), dtype=object), (self._data_axis,),
                    axis_types=(AxisType.Auto,))


# ------------------------------------------------------------------- helpers
def _output_mask(rows_of: Any, masks: Sequence[Any]) -> Any:
    """The mask of a result of `run` row-aligned with the split inputs `rows_of` (see
    `jdist.row_alignment`): theirs when they share one; None when not aligned."""
    if not isinstance(rows_of, frozenset):
        return None
    found = {id(m): m for m in (masks[i] for i in rows_of) if m is not None}
    return next(iter(found.values())) if len(found) == 1 else None


@functools.cache
def _row_count_fn(out_sharding: NamedSharding) -> Callable:
    return jax.jit(lambda mask: jnp.sum(mask, axis=1, dtype=jnp.int32), out_shardings=out_sharding)


def _copy_tree(tree: Any) -> Any:
    return jax.tree.map(jnp.copy, tree)


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


def _check_rank(rank: int) -> None:
    if rank < 1:
        raise ValueError("gather needs per-replica values of rank >= 1; add an axis first, e.g. x[None].")


def _normalize_axis(axis: Any, rank: int) -> tuple:
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"`axis` must be an int or a sequence of ints, got {axis!r}.")
        if not -rank <= a < rank:
            raise ValueError(f"`axis` = {axis!r} out of range for `value` with rank {rank}")
        out.append(int(a) % rank)
    return tuple(sorted(set(out)))


def _count(shape: Sequence[int], axes: tuple) -> int:
    return math.prod(shape[a] for a in axes)


def _reduce_ragged(op: ReduceOp, parts: Sequence[Any], axis: Any) -> Any:
    parts = [np.asarray(p) for p in parts]
    if axis is None:
        if len({p.shape for p in parts}) > 1:
            raise ValueError(
                f"Cannot reduce per-replica values of different shapes {[p.shape for p in parts]} "
                "with axis=None; pass `axis=` to reduce inside each replica first."
            )
        total = np.sum(np.stack(parts), axis=0)
        return jnp.asarray(total if op is ReduceOp.SUM else total / len(parts))
    sums, counts = [], 0
    for p in parts:
        axes = _normalize_axis(axis, p.ndim)
        sums.append(np.sum(p, axis=axes))
        counts += _count(p.shape, axes)
    total = np.sum(np.stack(sums), axis=0)
    return jnp.asarray(total if op is ReduceOp.SUM else total / counts)
