"""Saving and loading a Trainer's weights or whole state (Keras's `save_weights` / `load_weights`).

A path is a checkpoint directory (`jdist.checkpoint.CheckpointManager`, orbax underneath): every
process writes its own shards, and loading lays the values out for the Trainer's current strategy,
so a checkpoint saved under one strategy or device count loads under another. "weights" are the
parameters and the model's other collections (batch statistics); "state" adds the optimizer
state, the step and the dropout key.
"""
from __future__ import annotations

import os
from typing import Any

from jdist.checkpoint import CheckpointManager

WEIGHTS, STATE = "weights", "state"


def contents_of(trainer: Any, what: str) -> Any:
    """The tree to save or restore into: the weights, or the whole training state (host copies of
    what lives on parameter servers, so a restore pushes only what the caller puts back)."""
    state = trainer.state
    if trainer._remote:
        if what == STATE:
            return trainer.state_on_host()
        return {"params": trainer.strategy.gather_parameters(state), "model_state": None}
    if what == STATE:
        return state
    return {"params": state.params, "model_state": state.model_state}


def save(trainer: Any, manager: CheckpointManager, what: str, metadata: dict | None = None) -> None:
    """Writes `what` as the manager's next checkpoint (its step numbers only order the saves)."""
    latest = manager.latest_step()
    index = trainer.step if latest is None or trainer.step > latest else latest + 1
    info = {"contents": what, "step": int(trainer.step), "epoch": int(trainer.epoch), **(metadata or {})}
    manager.save(index, contents_of(trainer, what), metadata=info, force=True)


def load(trainer: Any, path: str | os.PathLike, *, weights_only: bool = False) -> dict:
    """Restores the newest checkpoint in `path` into `trainer` (with `weights_only`, only the weights
    of a whole-state checkpoint); returns its metadata."""
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
        trainer.state = restored  # placed by the strategy (pushed to the servers under parameter servers)
        return info
    if what == STATE:
        restored = {"params": restored.params, "model_state": getattr(restored, "model_state", None)}
    if trainer._remote:
        trainer.strategy.restore(trainer.state, restored["params"])
    else:
        trainer.state = trainer.state.replace(**restored)
    return info
