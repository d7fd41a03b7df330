"""`jdist.train.CheckpointManager`: TF's `tf.train.CheckpointManager` over `jdist.train.Checkpoint`.

    manager = jdist.train.CheckpointManager(checkpoint, directory, max_to_keep=3)
    checkpoint.restore(manager.latest_checkpoint)       # None on a fresh start: nothing restored
    ... manager.save() ...                              # directory/ckpt-1, ckpt-2, ...; older ones deleted

TF's rules (observed in TF 2.21): the n-th save of the checkpoint is `ckpt-n` (the counter is saved
with it, so a restarted job goes on from the restored number); beyond `max_to_keep` the oldest is
deleted (`None` keeps all; `keep_checkpoint_every_n_hours` spares one per period); a new manager on
the same directory takes over the list recorded in its `checkpoint` file. `checkpoints` and
`latest_checkpoint` are the prefixes TF gives (`directory/ckpt-3`). The whole training state of a
sharded job is `jdist.checkpoint.CheckpointManager`'s job; this one keeps Keras objects and variables.
"""
from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable

from jdist.train import checkpoint as checkpoint_lib


def _number(value: Any) -> int:
    """An int from an int, a numpy/JAX scalar or a variable (`step_counter`, `checkpoint_number`)."""
    value = value.numpy() if hasattr(value, "numpy") else value
    return int(value)


class CheckpointManager:
    """`tf.train.CheckpointManager(checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
    checkpoint_name='ckpt', step_counter=None, checkpoint_interval=None, init_fn=None)`."""

    def __init__(self, checkpoint: checkpoint_lib.Checkpoint, directory: str, max_to_keep: int | None,
                 keep_checkpoint_every_n_hours: float | None = None, checkpoint_name: str = "ckpt",
                 step_counter: Any = None, checkpoint_interval: int | None = None,
                 init_fn: Callable[[], Any] | None = None):
        if not isinstance(checkpoint, checkpoint_lib.Checkpoint):
            raise TypeError(f"CheckpointManager manages a tf.train.Checkpoint (jdist.train.Checkpoint), got "
                            f"{type(checkpoint).__name__}; wrap the objects: tf.train.Checkpoint(model=model, ...).")
        if max_to_keep is not None and max_to_keep <= 0:  # TF 2.21's message
            raise ValueError(f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep}.")
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError("`step_counter` should be passed if `checkpoint_interval` is not None.")
        self._checkpoint = checkpoint
        self._directory = os.fspath(directory)
        self._max_to_keep = max_to_keep
        self._keep_every_s = None if keep_checkpoint_every_n_hours is None else keep_checkpoint_every_n_hours * 3600.0
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._step_counter = step_counter
        self._checkpoint_interval = checkpoint_interval
        self._last_checkpoint_step: int | None = None
        self._init_fn = init_fn
        self._kept: collections.OrderedDict[str, float] = collections.OrderedDict()
        now = time.time()
        state = checkpoint_lib.read_index(self._directory)
        if state is None:
            self._latest: str | None = None
            self._last_preserved = now - 1.0
            return
        self._latest = state["latest"]
        self._last_preserved = min(state["last_preserved"] or now - 1.0, now)
        timestamps = state["timestamps"] or [self._last_preserved] * len(state["paths"])
        for path, stamp in zip(state["paths"], timestamps):
            if min(stamp, now) > self._last_preserved:
                self._kept[path] = min(stamp, now)

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> checkpoint_lib.Checkpoint:
        return self._checkpoint

    @property
    def checkpoint_interval(self) -> int | None:
        return self._checkpoint_interval

    @property
    def checkpoints(self) -> list[str]:
        """The kept checkpoints' prefixes, oldest first."""
        return list(self._kept)

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint's prefix (`directory/ckpt-3`), or None before any."""
        return self._latest

    def save(self, checkpoint_number: Any = None, check_interval: bool = True, options: Any = None) -> str | None:
        """Saves `ckpt-{n}` (n: `checkpoint_number`, else the checkpoint's save counter after counting this
        save), deletes what exceeds `max_to_keep`, and returns the prefix; None when `checkpoint_interval`
        steps have not passed since the last save."""
        if self._checkpoint_interval is not None:
            step = _number(self._step_counter)
            if self._last_checkpoint_step is not None:
                if step == self._last_checkpoint_step:
                    return None
                if check_interval and step < self._last_checkpoint_step + self._checkpoint_interval:
                    return None
            self._last_checkpoint_step = step
        self._checkpoint._set_count(self._checkpoint._count() + 1)
        number = self._checkpoint._count() if checkpoint_number is None else _number(checkpoint_number)
        path = self._checkpoint.write(f"{self._prefix}-{number}")
        self._kept.pop(path, None)  # an overwritten checkpoint moves to the end of the queue, as in TF
        self._kept[path] = time.time()
        self._latest = path
        self._record()  # before deleting: a process killed while deleting still finds the new checkpoint
        self._sweep()
        self._record()
        return path

    def restore_or_initialize(self) -> str | None:
        """Restores the latest checkpoint and returns its prefix; else runs `init_fn` (if any) and returns None."""
        if self._latest is not None:
            self._checkpoint.restore(self._latest)
            if self._checkpoint_interval is not None:
                self._last_checkpoint_step = _number(self._step_counter)
            return self._latest
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self) -> None:
        """Nothing to wait for: saves are written before `save` returns."""

    def _sweep(self) -> None:
        if not self._max_to_keep:
            return
        while len(self._kept) > self._max_to_keep:
            path, stamp = self._kept.popitem(last=False)
            if self._keep_every_s is not None and stamp - self._keep_every_s >= self._last_preserved:
                self._last_preserved = stamp  # kept on disk, no longer listed (TF's rule)
                continue
            checkpoint_lib.remove(path)

    def _record(self) -> None:
        if self._latest is None:
            return
        checkpoint_lib.write_index(self._directory, self._latest, list(self._kept), list(self._kept.values()),
                                   self._last_preserved)
