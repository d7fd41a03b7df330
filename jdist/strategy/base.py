"""`Strategy`: a device mesh, a parameter layout and an input plan.

Every TF strategy is a preset of these three (see `MirroredStrategy`,
`OneDeviceStrategy`). Per-replica code (`run`, in `jdist.strategy.run`) is
compiled once with `jax.shard_map` over the data axis; `reduce`, `gather` and
`experimental_local_results` are in `jdist.strategy.cross_replica`; global-view
code is a plain `jax.jit` over arrays sharded by `distribute_batch` and `place`.
This module holds the mesh, the shardings, scope and the hooks presets override.
"""
from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

from jdist.layout import (
    Layout,
    LayoutLike,
    ShardingCache,
    as_layout,
    shard_optimizer_state,
    split_over_data,
    split_shardings_over_data,
)
from jdist.strategy import context, extensions, host_checks, initial_values
from jdist.strategy.batch import leading_size, place_rows
from jdist.strategy.cross_replica import CrossReplicaOps
from jdist.strategy.devices import Device, DeviceLike, resolve_devices
from jdist.strategy.extended import StrategyExtended
from jdist.strategy.leaf_checks import check_leaves
from jdist.strategy.logical_devices import logical_axes, replicate_on, split_on
from jdist.strategy.process_local import check_divisible, process_batch_slice, to_host
from jdist.strategy.replica_context import DefaultReplicaContext, ReplicaContext
from jdist.strategy.run import ReplicaRun
from jdist.strategy.values import (
    mark_split,
)
from jdist.typing import ArrayLike, DatasetLike, PyTree

if TYPE_CHECKING:  # annotations only: higher layers, no import edge
    import optax

    from jdist.cluster.resolver import ClusterResolver
    from jdist.diagnostics.memory import MemoryReport
    from jdist.input.dataset import DistributedDataset
    from jdist.input.options import InputContext, InputOptions
    from jdist.input.sources import FileSource
    from jdist.pipeline import Pipeline


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


class Strategy(ReplicaRun, CrossReplicaOps):
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
        pipeline: Pipeline | None = None,
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
    def pipeline(self) -> Pipeline | None:
        """The `jdist.Pipeline` splitting the model's stacked blocks over stages, or None."""
        return self._pipeline

    @property
    def num_replicas_in_sync(self) -> int:
        return int(self._mesh.shape[self._data_axis])

    @property
    def worker_devices(self) -> tuple:
        return tuple(self._mesh.devices.flat)

    @property
    def cluster_resolver(self) -> ClusterResolver | None:
        return None

    @property
    def should_checkpoint(self) -> bool:
        """Whether this process writes checkpoint files (TF's `extended.should_checkpoint`)."""
        return True

    @property
    def should_save_summary(self) -> bool:
        """Whether this process writes logs and summaries (TF's `extended.should_save_summary`)."""
        return True

    @property
    def extended(self) -> StrategyExtended:
        """TF's `strategy.extended`: devices by TF's names, `reduce_to`, `update` (jdist.strategy.extended)."""
        return self.__dict__.setdefault("_extended_view", StrategyExtended(self))

    _between_graph = False  # each worker process runs its own copy of the program (TF's between-graph)
    _require_static_shapes = False  # whether input pipelines must give every batch the same shape

    def _parameter_device_names(self) -> tuple[str, ...]:
        """TF's names of where variables live when that is not each replica's device (empty: it is)."""
        return ()

    def __repr__(self) -> str:
        shape = ", ".join(f"{k}={v}" for k, v in self._mesh.shape.items())
        return f"{type(self).__name__}(mesh=({shape}))"

    # ---------------------------------------------------------------- shardings
    def replicated_sharding(self) -> NamedSharding:
        return NamedSharding(self._mesh, P())

    def data_sharding(self, stacked: bool = False) -> NamedSharding:
        """Splits the batch dimension over the data axis: dim 0, or dim 1 of a `stacked` `(k, batch, ...)`
        block. Made once per strategy (every batch and step of a pass asks for it)."""
        cache = self.__dict__.setdefault("_data_shardings", {})
        if stacked not in cache:
            cache[stacked] = NamedSharding(self._mesh, P(None, self._data_axis) if stacked else P(self._data_axis))
        return cache[stacked]

    def parameter_shardings(self, tree: PyTree) -> PyTree:
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

    def summary(self, tree: PyTree = None, opt_state: PyTree = None) -> str:
        """A table of every parameter of `tree` (params or a `TrainState`): shape, spec,
        bytes per device, the optimizer state that follows it, and the total memory per
        device, plus the mesh. Leaves may be abstract (`jax.eval_shape` output).

            print(strategy.summary(state))
        """
        layout_summary = extensions.method("layout_summary")
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
    def experimental_split_to_logical_devices(self, tensor: ArrayLike,
                                              partition_dimensions: Sequence[int] | P) -> jax.Array:
        """TF's name for `jdist.split(tensor, partition_dimensions)` on this strategy."""
        return split_on(self, tensor, partition_dimensions)

    def experimental_replicate_to_logical_devices(self, tensor: ArrayLike) -> jax.Array:
        """TF's name for `jdist.replicate(tensor)` on this strategy."""
        return replicate_on(self, tensor)

    def experimental_assign_to_logical_device(self, tensor: ArrayLike, logical_device_id: int) -> jax.Array:
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

    def place(self, tree: PyTree) -> PyTree:
        """Puts a parameter / optimizer-state pytree where this strategy keeps it.

        The result has its own buffers, so donating it to a train step never frees
        the caller's arrays (`jax.device_put`, even with `may_alias=False`, reuses a
        single-device array's buffer as one shard of a replicated result). With several
        processes every copy of a value is the first replica's (the chief's), as TF
        broadcasts initial values: workers seeded differently still start identical.
        """
        shardings = self.parameter_shardings(tree)
        if jax.process_count() > 1:
            return initial_values.from_first_replica(tree, shardings)
        return jax.jit(_copy_tree, out_shardings=shardings)(jax.device_put(tree, shardings))

    def init_in_place(self, state: PyTree) -> PyTree:
        """`state` placed where this strategy keeps it, its optimizer state made there by a
        compiled `state.tx.init` (never whole on the host first): `state.opt_state` may be
        abstract (`jax.eval_shape(tx.init, params)`). None where this strategy keeps state
        elsewhere (`place` / `place_state` overridden): the caller places a host-made state."""
        if type(self).place is not Strategy.place or type(self).place_state is not Strategy.place_state:
            return None
        shardings = self.parameter_shardings(state).opt_state
        placed = self.place(state.replace(opt_state=None))
        return placed.replace(opt_state=jax.jit(state.tx.init, out_shardings=shardings)(placed.params))

    def create_train_state(self, state_cls: type, *, apply_fn: Callable[..., Any], params: PyTree,
                           tx: optax.GradientTransformation, **kwargs: Any) -> PyTree:
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

    def compute_view(self, tree: PyTree) -> PyTree:
        """`tree` (parameters, a train state) where the compute devices can read it: itself here;
        a copy on the compute devices where the parameters are stored elsewhere."""
        return tree

    def update_shardings(self, state: PyTree) -> PyTree:
        """Where each replica's share of the optimizer update runs (weight-update sharding): every
        large replicated leaf split over the data axis, so each replica updates 1/N of it and the
        new values are all-gathered. None: every replica updates every leaf, as TF's strategies do."""
        return self._placements().get(
            "update", state, lambda t: split_shardings_over_data(t, self.parameter_shardings(t), self._data_axis))

    def compile_step(self, step_fn: Callable[..., Any], state: PyTree, *, donate: bool,
                     batch_sharding: PyTree = None, out_sharding: PyTree = None) -> Callable[..., Any]:
        """Compiles a global-view `step_fn(state, batch, update_shardings) -> (state, out)`.

        The hook behind `make_train_step` and `Trainer.fit`: one `jax.jit` with the
        layout's state shardings, the batch split over the data axis (or
        `batch_sharding`, a sharding or a pytree prefix of them), `out` replicated (or
        `out_sharding`), and weight-update sharding (`update_shardings`: where each
        leaf's share of the optimizer update runs). Strategies whose parameters live
        apart from the compute mesh override it and may pass `update_shardings=None`.
        """
        state_shardings = self.parameter_shardings(state)
        update_shardings = self.update_shardings(state)

        def traced(state, batch):
            # Traced as this strategy's cross-replica code, so jdist.split() and
            # get_strategy() inside the loss see it even outside strategy.scope().
            with context.push(self, None):
                return step_fn(state, batch, update_shardings)

        return host_checks.lazily_checked(jax.jit(  # a failed tf.debugging check raises after the step
            traced,
            in_shardings=(state_shardings, self.data_sharding() if batch_sharding is None else batch_sharding),
            out_shardings=(state_shardings, self.replicated_sharding() if out_sharding is None else out_sharding),
            donate_argnums=(0,) if donate else (),
        ))

    # ------------------------------------------------- hooks: where a state lives
    # The Trainer, its checkpoint I/O and `jdist.checkpoint.CheckpointManager` go through these
    # hooks and never ask which strategy they hold. The defaults keep a state on this process's
    # mesh; the parameter-server strategy overrides them to keep it on its servers.
    def place_state(self, state: PyTree, into: PyTree = None) -> PyTree:
        """Puts a whole train state (host or device values) where this strategy keeps it, in
        buffers of its own (the hook behind `Trainer.state = ...`). `into`: the state it
        replaces, for strategies that restore into storage they already hold."""
        return self.place(state)

    def keeps_remotely(self, value: Any) -> bool:  # any value: True only for a remote handle
        """Whether `value` is a handle to values this strategy keeps outside this process (a
        Trainer then trains such a train state where it is)."""
        return False

    def host_copy(self, tree: PyTree) -> PyTree:
        """A numpy copy of `tree` (a train state, parameters), whole on every process; with
        several processes every process must call it. `place_state(copy)` puts it back."""
        return to_host(tree)

    def checkpoint_view(self, tree: PyTree) -> PyTree:
        """What a checkpoint of `tree` holds: `tree` itself here (each process writes its own
        shards); a host copy where the values live outside this process."""
        return tree

    def restore_into(self, target: PyTree, restored: PyTree) -> PyTree:
        """`target` holding `restored` (values read from a checkpoint in the structure of
        `checkpoint_view(target)`, already laid out by this strategy): `restored` itself here;
        strategies that keep values elsewhere push them there and return `target`."""
        return restored

    @property
    def should_use_with_coordinator(self) -> bool:
        """Whether training steps are scheduled on remote workers through a coordinator (TF's
        `_should_use_with_coordinator`) rather than run from this process."""
        return False

    def keras_variable_store(self) -> Any:  # the store's type lives in the strategy that has one
        """Where Keras variables created in this scope keep their values outside this process (an object
        with `register(variable)`), or None: they stay Keras's own (on this strategy's mesh)."""
        return None

    def cluster_coordinator(self) -> Any:  # the coordinator's type lives in the strategy that has one
        """The coordinator that schedules this strategy's steps on its workers (made on first
        use); only for strategies with `should_use_with_coordinator`."""
        raise NotImplementedError(f"{self!r} runs its steps from this process: it has no cluster coordinator.")

    def local_batch_slice(self, global_batch_size: int) -> slice:
        """The rows of each global batch that this process loads and passes to `distribute_batch`.

        All of them in a single process; one contiguous share per worker with several.
        """
        return process_batch_slice(self.data_sharding(), global_batch_size)

    def distribute_batch(self, batch: PyTree) -> PyTree:
        """Places a global batch (a pytree of arrays) split over the replicas along dim 0.

        The arrays are per-replica values (`run` splits them, see `jdist.strategy.values`) and
        stay plain `jax.Array`s for jitted steps. Its arrays are checked as the Trainer checks
        a batch (`jdist.strategy.leaf_checks`)."""
        check_leaves(batch, "batch")
        if jax.tree.leaves(batch):
            check_divisible(leading_size(batch, "a batch"), self.num_replicas_in_sync)
        return mark_split(place_rows(batch, self.data_sharding()))

    def memory_report(self) -> MemoryReport:
        """Memory in use on each of this strategy's devices (a `jdist.diagnostics.memory.MemoryReport`; print it)."""
        return extensions.method("memory_report")(self.worker_devices)

    # -------------------------------------------------------------------- scope
    @contextlib.contextmanager
    def scope(self) -> Iterator["Strategy"]:
        """Makes this strategy current; values created eagerly inside land on its mesh."""
        token = context.enter_scope(self)
        try:
            # Higher layers' part of the scope: with Keras 3 (JAX), its own fit and variables follow it too.
            with self._mesh_context(), extensions.scope(self):
                yield self
        finally:
            context.exit_scope(token)

    def _mesh_context(self):
        return jax.set_mesh(self._mesh)

    def default_replica_context(self) -> ReplicaContext:
        return DefaultReplicaContext(self, None)

    # -------------------------------------------------------------------- input
    def experimental_distribute_dataset(self, dataset: DatasetLike | FileSource,
                                        options: InputOptions | None = None) -> DistributedDataset:
        """Splits a dataset of global batches over the replicas (see `jdist.input.dataset`).

        Iterating gives `jdist.DistributedBatch`es on the mesh: TF's per-replica split,
        padded to equal shards, with a mask of the real examples.
        """
        return extensions.method("distribute_dataset")(self, dataset, options)

    def distribute_datasets_from_function(self, dataset_fn: Callable[[InputContext], DatasetLike],
                                          options: InputOptions | None = None) -> DistributedDataset:
        """Calls `dataset_fn(jdist.InputContext)` once per input pipeline; its per-replica batches
        are handed to this process's replicas in turn (see `jdist.input.dataset`)."""
        return extensions.method("distribute_datasets_from_function")(self, dataset_fn, options)

    def experimental_distribute_datasets_from_function(self, dataset_fn: Callable[[InputContext], DatasetLike],
                                                       options: InputOptions | None = None) -> DistributedDataset:
        """Deprecated alias of `distribute_datasets_from_function` (as in TF)."""
        return self.distribute_datasets_from_function(dataset_fn, options)


def _copy_tree(tree: Any) -> Any:
    return jax.tree.map(jnp.copy, tree)
