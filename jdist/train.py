"""`jdist.train.Checkpoint`: TF's object checkpoints for Keras models and optimizers.

    checkpoint = jdist.train.Checkpoint(optimizer=optimizer, model=model)
    checkpoint.save(os.path.join(checkpoint_dir, "ckpt"))          # ckpt-1.npz, ckpt-2.npz, ...
    new_checkpoint = jdist.train.Checkpoint(optimizer=new_optimizer, model=new_model)
    new_checkpoint.restore(jdist.train.latest_checkpoint(checkpoint_dir))

Each object's variables are saved in their order (TF matches a checkpoint to objects by
their structure, not by names, which Keras numbers per instance: `sequential_1/...`), so
a checkpoint written under a strategy restores into a freshly created model built with
or without one; shapes are checked. As in TF, restoring into an optimizer that has no variables yet is deferred until
it is built. Sharded, asynchronous checkpoints of whole training states are
`jdist.checkpoint.CheckpointManager`.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any

import numpy as np

from jdist.cluster.spec import ClusterSpec

__all__ = ["Checkpoint", "ClusterSpec", "latest_checkpoint"]

_INDEX = "checkpoint"


def _variables(obj: Any) -> list:
    variables = getattr(obj, "variables", None)
    if variables is None:
        raise TypeError(f"Checkpoint: {type(obj).__name__} has no `variables`; pass Keras models, layers, "
                        "optimizers or metrics.")
    return list(variables)


class Checkpoint:
    """Saves and restores the variables of the named Keras objects."""

    def __init__(self, **objects: Any):
        for obj in objects.values():
            _variables(obj)
        self._objects = objects
        self.save_counter = 0

    def save(self, file_prefix: str) -> str:
        self.save_counter += 1
        path = f"{file_prefix}-{self.save_counter}"
        arrays = {f"{name}/{i}": np.asarray(v.value)
                  for name, obj in self._objects.items() for i, v in enumerate(_variables(obj))}
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        # numpy's stub matches **arrays against `allow_pickle`; the keys here are "name/i" paths.
        np.savez(path + ".npz", **arrays)  # pyright: ignore[reportArgumentType]
        with open(os.path.join(directory, _INDEX), "w") as f:
            json.dump({"latest": os.path.basename(path)}, f)
        return path

    def restore(self, save_path: str | None) -> "Checkpoint":
        if save_path is None:
            raise ValueError("Checkpoint.restore(None): no checkpoint found (latest_checkpoint returned None).")
        with np.load(save_path + ".npz") as data:
            saved = {key: data[key] for key in data.files}
        for name, obj in self._objects.items():
            values = [saved[f"{name}/{i}"] for i in range(len(saved)) if f"{name}/{i}" in saved]
            if getattr(obj, "built", True) or not hasattr(obj, "build"):
                _assign(obj, values, name)
            else:
                _defer(obj, values, name)
        return self


def _assign(obj: Any, values: list, name: str) -> None:
    variables = _variables(obj)
    shapes = [tuple(v.shape) for v in variables]
    if shapes != [np.shape(x) for x in values]:
        raise ValueError(f"Checkpoint.restore: {name} has variables of shapes {shapes}, the checkpoint "
                         f"{[np.shape(x) for x in values]}; is it from a different model?")
    for v, x in zip(variables, values):
        v.assign(x)


def _defer(obj: Any, values: list, name: str) -> None:
    build = obj.build

    @functools.wraps(build)  # Keras passes the input shape by the signature it reads from build
    def build_then_restore(*args: Any, **kwargs: Any) -> Any:
        del obj.build
        out = build(*args, **kwargs)
        _assign(obj, values, name)
        return out

    obj.build = build_then_restore


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The prefix of the newest checkpoint `Checkpoint.save` wrote to `checkpoint_dir`, or None."""
    index = os.path.join(checkpoint_dir, _INDEX)
    if not os.path.exists(index):
        return None
    with open(index) as f:
        return os.path.join(checkpoint_dir, json.load(f)["latest"])
