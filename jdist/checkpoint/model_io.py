"""Saving and loading a Trainer's weights or whole state (Keras's `save_weights` / `load_weights`).

A path is a checkpoint directory (`jdist.checkpoint.CheckpointManager`, orbax underneath): every
process writes its own shards, and loading lays the values out for the Trainer's current strategy,
so a checkpoint saved under one strategy or device count loads under another. "weights" are the
parameters and the model's other collections (batch statistics); "state" adds the optimizer
state, the step and the dropout key. Where the state lives is the strategy's business
(`Strategy.checkpoint_view`, `Strategy.place_state`); orbax is imported on first use only.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jdist.checkpoint import CheckpointManager

WEIGHTS, STATE = "weights", "state"


def contents_of(trainer: Any, what: str) -> Any:
    """The tree to save or restore into: the weights, or the whole training state (a host copy of
    a state kept outside this process, so a restore pushes only what the caller puts back)."""
    state = trainer.strategy.checkpoint_view(trainer.state)
    if what == STATE:
        return state
    return {"params": state.params, "model_state": getattr(state, "model_state", None)}


def write(trainer: Any, path: str | os.PathLike, what: str) -> None:
    """Writes `what` to the checkpoint directory `path`, synchronously."""
    from jdist.checkpoint import CheckpointManager

    manager = CheckpointManager(path, async_save=False)
    try:
        save(trainer, manager, what)
    finally:
        manager.close()


def save(trainer: Any, manager: CheckpointManager, what: str, metadata: dict | None = None) -> None:
    """Writes `what` as the manager's next checkpoint (its step numbers only order the saves)."""
    latest = manager.latest_step()
    index = trainer.step if latest is None or trainer.step > latest else latest + 1
    info = {"contents": what, "step": int(trainer.step), "epoch": int(trainer.epoch), **(metadata or {})}
    manager.save(index, contents_of(trainer, what), metadata=info, force=True)


def load(trainer: Any, path: str | os.PathLike, *, weights_only: bool = False) -> dict:
    """Restores the newest checkpoint in `path` into `trainer` (with `weights_only`, only the weights
    of a whole-state checkpoint); returns its metadata."""
    from jdist.checkpoint import CheckpointManager

    manager = CheckpointManager(path, async_save=False)
    try:
        step = manager.latest_step()
        if step is None:
            raise FileNotFoundError(f"No checkpoint found in {os.fspath(path)}.")
        info = manager.metadata(step)
        what = info.get("contents", STATE)
        restored = manager.restore(step, target=contents_of(trainer, what), strategy=trainer.strategy)
    finally:
        manager.close()
    if what == STATE and not weights_only:
        trainer.state = restored  # placed by the strategy (pushed back where it keeps the state)
        return info
    if what == STATE:
        restored = {"params": restored.params, "model_state": getattr(restored, "model_state", None)}
    # The weights put into the whole state: the state's own fields only (a state kept outside this
    # process holds no model collections), placed by the strategy.
    current = trainer.strategy.checkpoint_view(trainer.state)
    trainer.state = current.replace(**{k: v for k, v in restored.items() if hasattr(current, k)})
    return info
