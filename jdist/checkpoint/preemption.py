"""`PreemptionCheckpointHandler`: save at the next step boundary when the job is told to stop.

TF's `tf.distribute.experimental.PreemptionCheckpointHandler` for a functional JAX training state. How the
notice is heard and the step agreed is `jdist.checkpoint.preemption_watch`: at that step every process saves
the state, waits for the write, and calls `exit_fn` (default `sys.exit(42)`, TF's restartable exit code). The
rerun restores and carries on:

    manager = jdist.checkpoint.CheckpointManager("/ckpt", max_to_keep=2)
    handler = jdist.PreemptionCheckpointHandler(None, manager, iterator=it)
    state = handler.restore(state)                 # no-op on the first run
    while handler.total_run_calls < STEPS:
        state, loss = handler.run(train_step, state, next(it))

JAX state is immutable, so `run` needs to know the state: `train_fn`'s first
argument is the state, and it returns the new state, alone or first in a tuple.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import jax

from jdist.checkpoint.manager import CheckpointManager
from jdist.checkpoint.preemption_watch import RESTART_EXIT_CODE, PreemptionWatch, TerminationConfig, logger
from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

__all__ = ["RESTART_EXIT_CODE", "PreemptionCheckpointHandler", "TerminationConfig"]

R = TypeVar("R")  # what the training function returns


class PreemptionCheckpointHandler(PreemptionWatch):
    """Saves a checkpoint at the next step boundary after a preemption notice, then exits.

    Args:
      cluster_resolver: accepted for TF compatibility; processes are found through jax.distributed.
      checkpoint_or_manager: the `jdist.checkpoint.CheckpointManager` to save and restore with.
        None: one is created in `checkpoint_dir` (keeping 2 checkpoints).
      checkpoint_dir: directory for the created manager; only used without a manager.
      termination_config: a `TerminationConfig`; None uses the defaults.
      iterator: an input iterator whose position is saved and restored with the state.
    """

    def __init__(
        self,
        cluster_resolver: Any = None,
        checkpoint_or_manager: CheckpointManager | None = None,
        checkpoint_dir: str | os.PathLike | None = None,
        termination_config: TerminationConfig | None = None,
        *,
        iterator: Any = None,
    ):
        if checkpoint_or_manager is None:
            if checkpoint_dir is None:
                raise ValueError("Pass a jdist.checkpoint.CheckpointManager, or a checkpoint_dir to create one in.")
            checkpoint_or_manager = CheckpointManager(checkpoint_dir, max_to_keep=2)
        if not isinstance(checkpoint_or_manager, CheckpointManager):
            raise TypeError(
                "checkpoint_or_manager must be a jdist.checkpoint.CheckpointManager (or None with "
                f"checkpoint_dir=), got {type(checkpoint_or_manager).__name__}. For tf.train.Checkpoint and "
                "tf.train.CheckpointManager, TF's handler is jdist.train.PreemptionCheckpointHandler "
                "(tf.distribute.experimental.PreemptionCheckpointHandler in jdist.tf_compat)."
            )
        self._manager = checkpoint_or_manager
        self._iterator = iterator
        super().__init__(cluster_resolver, termination_config)

    def restore(self, target: PyTree, *, strategy: Strategy | None = None) -> PyTree:
        """The latest checkpoint restored into `target`'s structure (and the iterator), or `target`.

        Sets `total_run_calls` to the restored count.
        """
        if self._manager.latest_step() is None:
            return target
        restored = self._manager.restore_with_info(target=target, iterator=self._iterator, strategy=strategy)
        self._run_counter = int(restored.metadata.get("total_run_calls", restored.step))
        return restored.state

    def run(self, train_fn: Callable[..., R], state: PyTree, *args: Any, **kwargs: Any) -> R:  # args: train_fn's own
        """`train_fn(state, *args, **kwargs)`, then a save-and-exit if a preemption step was reached.

        `train_fn` returns the new state, or a tuple whose first element is it; `run`
        returns whatever `train_fn` returned.
        """
        out = train_fn(state, *args, **kwargs)
        self._count_run()
        self._maybe_checkpoint(_new_state(out, state))
        return out

    def save_checkpoint_if_preempted(self, state: PyTree) -> None:
        """For loops that run steps themselves: counts one run and saves/exits if preempted."""
        self._count_run()
        self._maybe_checkpoint(state)

    def _save(self, state: Any) -> None:
        step = self._run_counter
        logger.warning("Preemption: saving a checkpoint at run %d.", step)
        if self._save_fn is not None:
            self._save_fn(step, state)
            return
        self._manager.wait_until_finished()  # a regular save of this very step may be in flight
        if self._manager.latest_step() != step:
            self._manager.save(step, state, iterator=self._iterator, metadata={"total_run_calls": step}, force=True)
        self._manager.wait_until_finished()

    def _wait_for_writes(self) -> None:
        self._manager.wait_until_finished()


def _new_state(out: Any, state: Any) -> Any:
    """The new state in `train_fn`'s result: the result itself or its first element."""
    structure = jax.tree_util.tree_structure(state)
    if jax.tree_util.tree_structure(out) == structure:
        return out
    if isinstance(out, (tuple, list)) and out and jax.tree_util.tree_structure(out[0]) == structure:
        return out[0]
    raise TypeError(
        "PreemptionCheckpointHandler.run: train_fn must return the new state (same structure as its "
        "first argument), alone or as the first element of a tuple, e.g. `return state, loss`."
    )
