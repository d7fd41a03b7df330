"""TF's `tf.distribute.experimental.PreemptionCheckpointHandler` over `tf.train.Checkpoint` objects.

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, directory=checkpoint_dir, max_to_keep=1)
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, manager)
    while handler.total_run_calls < STEPS:
        handler.run(distributed_train_step, next(iterator))

As TF 2.21 does (observed, MultiWorkerMirroredStrategy in one process, SIGTERM between two calls of `run`):
the handler restores the latest checkpoint when made; `run` first checks for a notice, and at the agreed step
saves through the manager (TF's own numbering: `ckpt-1`) with the count of completed runs in the checkpoint's
`checkpointed_runs` variable, then exits with code 42; otherwise it calls the function and counts one run. The
restarted job's `total_run_calls` is the saved count and its variables are those of that step (a notice during
run 6 saves the state after 5 runs). `save_checkpoint_if_preempted()`, for loops that call their step
themselves, checks and counts the same way after the step (a notice before the 7th check saves the state after
7 steps with `total_run_calls` 6). The notice and the step agreement are `jdist.checkpoint.preemption_watch`.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator

import numpy as np

from jdist.checkpoint.preemption_watch import PreemptionWatch, TerminationConfig, logger
from jdist.train.checkpoint import Checkpoint
from jdist.train.manager import CheckpointManager

_ITERATION_VARIABLE = "checkpointed_runs"  # TF's name for the run count kept in the checkpoint


class _RunCount:
    """The int64 run count a checkpoint keeps (a variable to `tf.train.Checkpoint`)."""

    shape = ()
    dtype = np.dtype(np.int64)

    def __init__(self) -> None:
        self._value = np.int64(0)

    @property
    def value(self) -> np.ndarray:
        return np.asarray(self._value)

    def assign(self, value: Any) -> None:
        self._value = np.int64(np.asarray(value))

    def numpy(self) -> np.int64:
        return self._value


class PreemptionCheckpointHandler(PreemptionWatch):
    """`tf.distribute.experimental.PreemptionCheckpointHandler(cluster_resolver,
    checkpoint_or_checkpoint_manager, checkpoint_dir=None, termination_config=None)`.

    Args:
      cluster_resolver: the strategy's (`strategy.cluster_resolver`); processes are found through
        `jax.distributed`, so it is kept for `cluster_resolver` only.
      checkpoint_or_checkpoint_manager: a `tf.train.CheckpointManager`, or a `tf.train.Checkpoint` saved in
        `checkpoint_dir` by a manager made here (keeping one checkpoint).
      termination_config: a `tf.distribute.experimental.TerminationConfig`; its `save_fn(*args, **kwargs)`
        replaces `manager.save(*args, **kwargs)`.
    """

    def __init__(self, cluster_resolver: Any, checkpoint_or_checkpoint_manager: Any,
                 checkpoint_dir: str | os.PathLike | None = None,
                 termination_config: TerminationConfig | None = None):
        target = checkpoint_or_checkpoint_manager
        if isinstance(target, CheckpointManager):
            manager = target
        elif isinstance(target, Checkpoint):
            if checkpoint_dir is None:
                raise ValueError("When a tf.train.Checkpoint is passed to PreemptionCheckpointHandler, pass "
                                 "checkpoint_dir= too: the directory its checkpoints are saved in.")
            manager = CheckpointManager(target, os.fspath(checkpoint_dir), max_to_keep=1)
        else:
            raise TypeError("PreemptionCheckpointHandler saves a tf.train.Checkpoint or tf.train.CheckpointManager, "
                            f"got {type(target).__name__}. For a functional JAX state, use "
                            "jdist.PreemptionCheckpointHandler with a jdist.checkpoint.CheckpointManager.")
        self._manager = manager
        runs = getattr(manager.checkpoint, _ITERATION_VARIABLE, None)
        if runs is None:
            runs = _RunCount()
            setattr(manager.checkpoint, _ITERATION_VARIABLE, runs)
        self._checkpointed_runs: Any = runs
        super().__init__(cluster_resolver, termination_config)
        manager.restore_or_initialize()
        self._run_counter = int(np.asarray(self._checkpointed_runs.value))

    def run(self, distributed_train_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Saves and exits if a notice reached this step; else `distributed_train_function(*args, **kwargs)`,
        counted as one run. Pass a function of one training step: the count is the resumed step."""
        self._maybe_checkpoint(((), {}))  # what a save passes to manager.save: nothing
        result = distributed_train_function(*args, **kwargs)
        self._count_run()
        return result

    def save_checkpoint_if_preempted(self, *args: Any, **kwargs: Any) -> None:
        """For a loop that calls its step itself: saves and exits if a notice reached this step (`args` and
        `kwargs` go to `manager.save`), then counts one run."""
        self._maybe_checkpoint((args, kwargs))
        self._count_run()

    @contextlib.contextmanager
    def watch_preemption_scope(self) -> Iterator[None]:
        """TF's scope for TPU loops; here notices are handled by `run` and `save_checkpoint_if_preempted`."""
        yield

    def _save(self, state: Any) -> None:
        args, kwargs = state  # manager.save's arguments
        logger.warning("Preemption: saving a checkpoint after %d runs in %s.", self._run_counter,
                       self._manager.directory)
        self._checkpointed_runs.assign(self._run_counter)
        if self._save_fn is not None:
            self._save_fn(*args, **kwargs)
        else:
            self._manager.save(*args, **kwargs)
