"""What a user tells the input pipeline (TF's `InputOptions`, `InputContext`, `AutoShardPolicy`)."""
from __future__ import annotations

import dataclasses
import enum


class AutoShardPolicy(enum.IntEnum):
    """How `experimental_distribute_dataset` splits a dataset across worker processes.

    Values are TF's (`tf.data.experimental.AutoShardPolicy`). With one process every
    policy is a no-op, as in TF.

    - `FILE`: each worker builds the dataset from its own files of a `jdist.FileSource`
      (file `i` goes to worker `i % num_workers`). Fewer files than workers is an error.
    - `DATA`: every worker reads the whole dataset and keeps only its replicas' part of
      each global batch.
    - `AUTO`: `FILE` when the dataset is a `FileSource` with enough files, else `DATA`;
      the choice is logged once per distributed dataset.
    - `OFF`: no sharding; each worker's dataset is its own stream (the user shards).
    """

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2


class InputReplicationMode(str, enum.Enum):  # noqa: UP042 (StrEnum would change str())
    """One input pipeline per worker process (`PER_WORKER`) or per replica (`PER_REPLICA`)."""

    PER_WORKER = "PER_WORKER"
    PER_REPLICA = "PER_REPLICA"


@dataclasses.dataclass(frozen=True)
class InputOptions:
    """Options for `experimental_distribute_dataset` / `distribute_datasets_from_function`.

    TF's fields, plus:
      auto_shard_policy: how worker processes split the data (TF sets this on the
        dataset's `tf.data.Options`; jdist takes it here).
      global_batch_size: the declared global batch size; by default the first batch's
        size. Every batch pads to it, so shapes never change.
      cross_process_timeout_s: how long a worker waits for the others to report their
        input position (multi-process pipelines whose workers may run out of data at
        different steps) before raising instead of hanging.

    `experimental_per_replica_buffer_size` is the depth of the background prefetcher, in
    global batches (each holds one element per replica, TF's per-replica buffer); 0 reads
    each batch in the consuming thread. `experimental_fetch_to_device=False` keeps batches
    in host memory (numpy); `strategy.run` and `make_train_step` move them when used.
    """

    experimental_fetch_to_device: bool | None = None
    experimental_replication_mode: InputReplicationMode = InputReplicationMode.PER_WORKER
    experimental_place_dataset_on_device: bool = False
    experimental_per_replica_buffer_size: int = 1
    auto_shard_policy: AutoShardPolicy = AutoShardPolicy.AUTO
    global_batch_size: int | None = None
    cross_process_timeout_s: float = 300.0

    def __post_init__(self):
        if self.experimental_fetch_to_device is None:
            object.__setattr__(self, "experimental_fetch_to_device", True)
        object.__setattr__(self, "experimental_replication_mode",
                           InputReplicationMode(self.experimental_replication_mode))
        object.__setattr__(self, "auto_shard_policy", AutoShardPolicy(self.auto_shard_policy))
        if self.experimental_place_dataset_on_device:
            raise ValueError(
                "experimental_place_dataset_on_device=True is not supported: jdist builds batches on the "
                "host and moves each one to the mesh (fetch_to_device)."
            )
        if not isinstance(self.experimental_per_replica_buffer_size, int) or \
                self.experimental_per_replica_buffer_size < 0:
            raise ValueError(
                "experimental_per_replica_buffer_size must be a non-negative int (0 disables prefetching), got "
                f"{self.experimental_per_replica_buffer_size!r}."
            )
        if self.global_batch_size is not None and (
                isinstance(self.global_batch_size, bool) or not isinstance(self.global_batch_size, int)
                or self.global_batch_size < 1):
            raise ValueError(f"global_batch_size must be a positive int, got {self.global_batch_size!r}.")
        if self.cross_process_timeout_s <= 0:
            raise ValueError(f"cross_process_timeout_s must be positive, got {self.cross_process_timeout_s!r}.")


class InputContext:
    """What `distribute_datasets_from_function` tells `dataset_fn` (TF's `tf.distribute.InputContext`).

    Shard with `input_pipeline_id` out of `num_input_pipelines`, and batch with
    `get_per_replica_batch_size(global_batch_size)`.
    """

    def __init__(self, num_input_pipelines: int = 1, input_pipeline_id: int = 0, num_replicas_in_sync: int = 1):
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """`global_batch_size // num_replicas_in_sync`; `ValueError` when it does not divide."""
        if global_batch_size % self._num_replicas_in_sync != 0:
            raise ValueError(
                f"The `global_batch_size` {global_batch_size!r} is not divisible by `num_replicas_in_sync` "
                f"{self._num_replicas_in_sync!r} "
            )
        return global_batch_size // self._num_replicas_in_sync

    def __str__(self) -> str:
        return (f"tf.distribute.InputContext(input pipeline id {self.input_pipeline_id}, "
                f"total: {self.num_input_pipelines})")

    def __repr__(self) -> str:
        return (f"InputContext(num_input_pipelines={self.num_input_pipelines}, "
                f"input_pipeline_id={self.input_pipeline_id}, num_replicas_in_sync={self.num_replicas_in_sync})")
