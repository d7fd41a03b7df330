"""Distributed datasets: global batches split over replicas, padded, masked and prefetched onto the mesh.

    dist_ds = strategy.experimental_distribute_dataset(dataset)   # dataset of GLOBAL batches
    for batch in dist_ds:                                         # jdist.DistributedBatch
        per_replica_loss = strategy.run(step_fn, args=(batch,))   # step_fn gets the plain element

Each batch of `b` examples is cut into `num_replicas` chunks of `ceil(b / n)` (TF's
rule); every chunk is padded to `ceil(G / n)` rows for the declared global batch `G`,
so shapes never change and nothing recompiles on the short last batch. The pieces
are assembled with `jax.make_array_from_process_local_data`, so the same code runs
with one process or many. Three ways a step's rows are found:

- global (one process, or `AutoShardPolicy.DATA`): every process reads the same global
  batch and keeps its replicas' chunks;
- per-process streams (`FILE`, `OFF` with several processes): each process reads its
  own stream of global-size batches and contributes `1 / num_workers` of each per step;
- `distribute_datasets_from_function`: each process's replicas take consecutive
  per-replica batches from the process's own dataset.

In the last two, workers may run out at different steps; before each step they agree
(through JAX's coordination service, with a timeout) whether anyone still has data,
and a worker without data contributes empty, masked slots.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
from typing import TYPE_CHECKING, Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jdist.cluster.process_sync import ProcessChannel
from jdist.input import checks as input_checks
from jdist.input.options import AutoShardPolicy, InputContext, InputOptions, InputReplicationMode
from jdist.input.prefetch import TwoStagePrefetcher
from jdist.input.producers import (
    FUNCTION as _FUNCTION,
    GLOBAL as _GLOBAL,
    LOCAL as _LOCAL,
    PRODUCERS,
    EmptyDatasetError as EmptyDatasetError,  # re-exported: raised by iteration
    Producer,
)
from jdist.input.sources import FileSource, check_dataset, dataset_length, open_cursor
from jdist.input.split import (
    ElementSpec,
    ReplicaPlan,
    as_numpy_leaves,
    replica_plan,
)
from jdist.input.tensor_spec import Optional, per_replica_spec, spec_of_batch
from jdist.strategy import extensions, function_trace
from jdist.strategy.batch import place_rows
from jdist.strategy.default import DefaultStrategy
from jdist.strategy.distributed_batch import DistributedBatch
from jdist.typing import DatasetLike, PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

logger = logging.getLogger("jdist.input.dataset")

# --------------------------------------------------------------- public entry points
def distribute_dataset(strategy: Strategy, dataset: DatasetLike | FileSource,
                       options: InputOptions | None = None) -> "DistributedDataset":
    """`strategy.experimental_distribute_dataset`: see the module docstring."""
    options = options or InputOptions()
    if options.experimental_replication_mode is InputReplicationMode.PER_REPLICA:
        raise NotImplementedError(
            "InputReplicationMode.PER_REPLICA is only supported by distribute_datasets_from_function (as in TF)."
        )
    if isinstance(dataset, DistributedDataset):
        raise TypeError("This dataset is already distributed; distribute the original dataset instead.")
    if _default_keeps(strategy, dataset):
        return dataset  # type: ignore[return-value]  # TF's default strategy: the dataset itself
    if not isinstance(dataset, FileSource):
        check_dataset(dataset)
    plan = replica_plan(strategy.mesh, strategy.data_axis)
    policy, reason = choose_shard_policy(_requested_policy(options, dataset), dataset, plan.num_workers)
    if plan.num_workers > 1:
        logger.info("Input sharding over %d workers: %s (%s).", plan.num_workers, policy.name, reason)
    if isinstance(dataset, FileSource):
        files = dataset.files_for(plan.worker_index, plan.num_workers) if policy is AutoShardPolicy.FILE \
            else dataset.files_for(0, 1)
        dataset = dataset.make_dataset(files)
        check_dataset(dataset)
    mode = _LOCAL if plan.num_workers > 1 and policy in (AutoShardPolicy.FILE, AutoShardPolicy.OFF) else _GLOBAL
    if mode == _LOCAL:
        _require_exclusive(plan, f"AutoShardPolicy.{policy.name}")
    return DistributedDataset(strategy, plan, options, mode, [dataset], policy=policy)


def distribute_datasets_from_function(strategy: Strategy, dataset_fn: Callable[[InputContext], DatasetLike],
                                      options: InputOptions | None = None) -> "DistributedDataset":
    """`strategy.distribute_datasets_from_function`: `dataset_fn(InputContext)` is called once per
    input pipeline (one per worker process; one per local replica with `PER_REPLICA`) and returns a
    dataset of per-replica batches; the process's replicas take consecutive batches from it."""
    options = options or InputOptions()
    plan = replica_plan(strategy.mesh, strategy.data_axis)
    if plan.num_workers > 1:
        _require_exclusive(plan, "distribute_datasets_from_function")
    n = plan.num_replicas
    if options.experimental_replication_mode is InputReplicationMode.PER_REPLICA:
        contexts = [InputContext(n, replica, n) for replica in plan.local_replicas]
    else:
        contexts = [InputContext(plan.num_workers, plan.worker_index, n)]
    datasets = [dataset_fn(ctx) for ctx in contexts]
    if len(datasets) == 1 and _default_keeps(strategy, datasets[0]):
        return datasets[0]  # type: ignore[return-value]  # TF's default strategy: dataset_fn's dataset itself
    for ds in datasets:
        check_dataset(ds)
    return DistributedDataset(strategy, plan, options, _FUNCTION, datasets)


def _default_keeps(strategy: Strategy, dataset: Any) -> bool:
    """Whether the default strategy (`get_strategy()` outside any scope) hands a tf.data dataset back as it is,
    as TF 2.21's does (observed: `experimental_distribute_dataset(ds) is ds`, and
    `distribute_datasets_from_function` returns `dataset_fn`'s dataset; its elements are plain tensors). Other
    sources (lists, grain, generators) are still distributed: jdist's own batches, with masks."""
    return isinstance(strategy, DefaultStrategy) and hasattr(dataset, "element_spec") and hasattr(dataset, "batch")


def _requested_policy(options: InputOptions, dataset: Any) -> AutoShardPolicy:
    """InputOptions' policy, or, where it is AUTO, the one the dataset's `tf.data.Options` set (as TF reads it)."""
    if options.auto_shard_policy is not AutoShardPolicy.AUTO:
        return options.auto_shard_policy
    dataset_options = getattr(dataset, "options", None)
    distribute = getattr(dataset_options(), "experimental_distribute", None) if callable(dataset_options) else None
    return AutoShardPolicy(getattr(distribute, "auto_shard_policy", AutoShardPolicy.AUTO))


def choose_shard_policy(policy: AutoShardPolicy, dataset: DatasetLike | FileSource,
                        num_workers: int) -> tuple[AutoShardPolicy, str]:
    """The policy actually applied, and why. `FILE` problems are errors raised here, on every
    worker alike, before any worker waits for another."""
    policy = AutoShardPolicy(policy)
    is_files = isinstance(dataset, FileSource)
    num_files = len(dataset.files) if is_files else 0
    if num_workers <= 1:
        return policy, "one worker: nothing to shard"
    if policy is AutoShardPolicy.FILE:
        if not is_files:
            raise ValueError(
                "AutoShardPolicy.FILE needs a jdist.FileSource(files, make_dataset) so each worker can build the "
                f"dataset from its own files; got a {type(dataset).__name__}. Use AutoShardPolicy.DATA (every "
                "worker reads all batches and keeps its share) or AUTO."
            )
        if num_files < num_workers:
            raise ValueError(
                f"AutoShardPolicy.FILE: {num_files} file(s) for {num_workers} workers, so some worker would get "
                "no file. Split the data into at least as many files as workers, or use AutoShardPolicy.DATA."
            )
        return policy, f"{num_files} files over {num_workers} workers"
    if policy is AutoShardPolicy.AUTO:
        if is_files and num_files >= num_workers:
            return AutoShardPolicy.FILE, f"AUTO chose FILE: {num_files} files over {num_workers} workers"
        why = (f"{num_files} file(s) for {num_workers} workers" if is_files
               else "the dataset is not a jdist.FileSource")
        return AutoShardPolicy.DATA, f"AUTO fell back to DATA: {why}"
    if policy is AutoShardPolicy.DATA:
        return policy, "every worker reads all batches and keeps its replicas' chunks"
    return policy, "each worker's dataset is its own stream"


def _require_exclusive(plan: ReplicaPlan, what: str) -> None:
    if not plan.exclusive:
        raise ValueError(
            f"{what} gives each worker process its own data, which needs every replica (a slice of the mesh's "
            "data axis) to live in one process and every process to hold as many replicas. This mesh shares "
            "replicas between processes; use AutoShardPolicy.DATA / experimental_distribute_dataset, or lay the "
            "mesh out so each process owns whole replicas."
        )


# --------------------------------------------------------------- dataset and iterator
@dataclasses.dataclass
class _Layout:
    """Fixed by the first batch (or the options) and kept across epochs: shapes never change."""

    global_batch_size: int | None = None
    per_replica: int | None = None
    spec: ElementSpec | None = None

    def sizes(self) -> tuple[int, int]:
        """(global batch size, rows per replica), for code that runs once a batch size was declared."""
        assert self.global_batch_size is not None and self.per_replica is not None, "declared by the first batch"
        return self.global_batch_size, self.per_replica

    def known_spec(self) -> ElementSpec:
        """The element spec, for code that runs once the first batch (here or on a peer) was seen."""
        assert self.spec is not None, "observed on the first batch"
        return self.spec


class DistributedDataset:
    """An iterable of `DistributedBatch`es; each `iter()` starts the next epoch.

    `len()` is known for lists and `ArrayDataset`s read one global batch per step.
    """

    def __init__(self, strategy: Strategy, plan: ReplicaPlan, options: InputOptions, mode: str, datasets: list,
                 policy: AutoShardPolicy | None = None):
        self._strategy = strategy
        self._plan = plan
        self._options = options
        self._mode = mode
        self._datasets = datasets
        self.shard_policy = policy
        self._layout = _Layout()
        if options.global_batch_size is not None:
            self._declare(options.global_batch_size)
        # Only per-process streams talk between workers; a channel is named by creation order, so
        # datasets that never sync (and may exist on some workers only) do not take a name.
        self._channel = ProcessChannel(plan.processes if mode != _GLOBAL else (), options.cross_process_timeout_s)
        self._next_epoch = 0
        self._starts = itertools.count()

    def _declare(self, global_batch_size: int) -> None:
        n = self._plan.num_replicas
        layout = self._layout
        if layout.global_batch_size is not None and layout.global_batch_size != global_batch_size:
            raise ValueError(
                f"This dataset's global batch size is {layout.global_batch_size}, but {global_batch_size} was "
                "requested (from a saved iterator state or InputOptions); they must match."
            )
        if self._mode == _LOCAL and global_batch_size % self._plan.num_workers:
            assert self.shard_policy is not None, "per-worker streams come from the FILE or OFF policy"
            raise ValueError(
                f"With per-worker streams (AutoShardPolicy.{self.shard_policy.name}) each of the "
                f"{self._plan.num_workers} workers contributes an equal share of every global batch, so the "
                f"global batch size {global_batch_size} must be a multiple of {self._plan.num_workers}."
            )
        layout.global_batch_size = global_batch_size
        layout.per_replica = -(-global_batch_size // n)

    @property
    def options(self) -> InputOptions:
        return self._options

    @property
    def element_spec(self) -> PyTree:
        """The element's `TensorSpec`s as each replica sees them (`jdist.input.tensor_spec`)."""
        source = self._datasets[0]
        spec = getattr(source, "element_spec", None)
        if spec is None:
            if self._layout.spec is None:
                leaves, treedef = as_numpy_leaves(open_cursor(source, 0).next())
                self._layout.spec = ElementSpec.of(leaves, treedef)
            spec = spec_of_batch(self._layout.spec.zeros(0), self._layout.spec.treedef)
        return per_replica_spec(spec, self._plan.num_replicas, split=self._mode == _GLOBAL)

    @property
    def per_replica_batch_size(self) -> int | None:
        """Rows per replica in every batch (real examples plus padding); known after the first batch."""
        return self._layout.per_replica

    def known_length(self) -> int | None:
        """The batches of one pass when the source knows them in advance, else None.

        `len()` of a distributed dataset raises `TypeError`, as TF's does (TF 2.21, observed:
        "object of type 'DistributedDataset' has no len()"); TF users read `cardinality` instead."""
        return dataset_length(self._datasets[0]) if self._mode == _GLOBAL else None

    @property
    def cardinality(self) -> np.int64:
        """TF's: the batches of one pass (of each worker's own dataset for `distribute_datasets_from_function`),
        -1 for an endless dataset, -2 where it is not known, as a `numpy.int64` (TF 2.21, observed: a
        `range(10).batch(4)` gives `np.int64(3)`; a per-worker `range(10).batch(2)` gives 5)."""
        source = self._datasets[0]
        count = getattr(source, "cardinality", None)
        if callable(count):
            return np.int64(np.asarray(count()))
        length = dataset_length(source)
        return np.int64(-2 if length is None else length)

    def reduce(self, initial_state: Any, reduce_func: Callable[[Any, Any], Any]) -> Any:
        """TF's: `state = reduce_func(state, batch)` over one pass, from `initial_state`; Python numbers in the
        result become arrays, as TF returns tensors (a Python int counter gives an int32 one)."""
        state = initial_state
        for batch in self:
            state = reduce_func(state, batch)
        return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)) if isinstance(x, (int, float, bool)) else x, state)

    def __iter__(self) -> "DistributedIterator":
        epoch = self._next_epoch
        self._next_epoch += 1
        return DistributedIterator(self, epoch)

    def _producer(self, epoch: int, state: dict) -> Producer:
        return PRODUCERS[self._mode](self, epoch, state, f"s{next(self._starts)}")

    def _to_device(self, leaves: list, treedef: Any, mask: np.ndarray) -> DistributedBatch:
        shown_as = getattr(self._strategy, "per_replica_display", None)  # TF's text for tf.distribute's strategies
        if not self._options.experimental_fetch_to_device:
            return DistributedBatch(jax.tree.unflatten(treedef, leaves), mask, shown_as=shown_as)
        input_checks.check_device_leaves(leaves, treedef)  # strings, objects: a named error
        rows = self._plan.num_replicas * self._layout.sizes()[1]
        local = [*leaves, mask]
        placed = place_rows(local, self._strategy.data_sharding(), rows="local", global_rows=rows)  # one transfer
        return DistributedBatch(jax.tree.unflatten(treedef, placed[:-1]), placed[-1], host_mask=mask,
                                shown_as=shown_as)


class DistributedIterator:
    """Yields `DistributedBatch`es for one epoch, prepared and moved to the mesh ahead of use:
    one thread reads and pads the next batch while another moves the previous one to the
    devices, keeping `InputOptions.experimental_per_replica_buffer_size` batches ready.

    Position save/restore (for checkpoints):
      `get_state()` returns a JSON-serializable dict: the position just after the last batch
      this iterator returned (batches prefetched but not yet returned are not counted).
      `set_state(state)` on an iterator of an identically built distributed dataset makes
      its next batch the one that followed the saved position (same epoch, same shuffle
      order); a later `iter(dataset)` continues with the following epoch.
      With one process, or `AutoShardPolicy.DATA`, every process's state is the same.
      With FILE/OFF sharding or `distribute_datasets_from_function` each process reads its
      own stream and has its own state: save one per process (`jax.process_index()`) and
      give each process its own back.
    """

    def __init__(self, dataset: DistributedDataset, epoch: int):
        self._dataset = dataset
        self._state: dict = {"mode": dataset._mode, "epoch": epoch, "step": 0}
        self._prefetcher: TwoStagePrefetcher | None = None

    def __iter__(self) -> "DistributedIterator":
        return self

    def __next__(self) -> DistributedBatch:
        function_trace.refuse("reading a distributed iterator")  # a tf.function reading one runs as Python
        if self._prefetcher is None:
            producer = self._dataset._producer(self._state["epoch"], self._state)

            def prepare():  # host stage: read, split, pad, mask; the position after this batch
                leaves, treedef, mask = producer.next_step()
                return leaves, treedef, mask, producer.state()

            def transfer(item):  # device stage
                leaves, treedef, mask, state = item
                return self._dataset._to_device(leaves, treedef, mask), state

            self._prefetcher = TwoStagePrefetcher(prepare, transfer,
                                                  self._dataset.options.experimental_per_replica_buffer_size)
        batch, self._state = self._prefetcher.get()
        return batch

    def get_next(self) -> DistributedBatch:
        """TF's name for `next(iterator)`."""
        return next(self)

    next = get_next  # TF's iterators keep Python 2's name too

    def get_next_as_optional(self) -> Optional:
        """The next batch as an `Optional`, with no value at the end (TF's loop over a dataset of
        unknown length)."""
        try:
            return Optional(next(self), True, self.element_spec)
        except StopIteration:
            return Optional(None, False, self.element_spec)

    @property
    def element_spec(self) -> PyTree:
        return self._dataset.element_spec

    def get_state(self) -> dict:
        return dict(self._state)

    def set_state(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("mode") != self._dataset._mode:
            raise ValueError(
                f"This iterator state was not saved from a dataset distributed the same way (expected mode "
                f"{self._dataset._mode!r}, got {state.get('mode') if isinstance(state, dict) else state!r})."
            )
        self.close()
        self._prefetcher = None
        self._state = dict(state)
        self._dataset._next_epoch = int(state["epoch"]) + 1

    @property
    def epoch(self) -> int:
        return int(self._state["epoch"])

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops the prefetch thread; the iteration ends. (A finished epoch stops it by itself.)"""
        if self._prefetcher is not None:
            self._prefetcher.close(timeout_s)

    def __del__(self):
        try:
            self.close(timeout_s=0.0)  # never block the garbage collector; the thread is a daemon
        except Exception:
            pass


extensions.register_method("distribute_dataset", distribute_dataset)
extensions.register_method("distribute_datasets_from_function", distribute_datasets_from_function)
