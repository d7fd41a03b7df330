"""`jdist.train.Checkpoint`: TF's object checkpoints for Keras models, optimizers and `tf.Variable`s.

    checkpoint = jdist.train.Checkpoint(optimizer=optimizer, model=model, epoch=epoch)
    checkpoint.save(os.path.join(checkpoint_dir, "ckpt"))          # ckpt-1, ckpt-2, ... (ckpt-1.npz on disk)
    new_checkpoint = jdist.train.Checkpoint(optimizer=new_optimizer, model=new_model, epoch=new_epoch)
    new_checkpoint.restore(jdist.train.latest_checkpoint(checkpoint_dir))

Each object's variables are saved in their order (TF matches a checkpoint to objects by
their structure, not by names, which Keras numbers per instance: `sequential_1/...`), so
a checkpoint written under a strategy restores into a freshly created model built with
or without one; shapes are checked. As in TF, restoring into an optimizer that has no variables yet is deferred until
it is built, the save counter is saved and restored (a restarted job numbers its next save on), and
`restore(None)` (no checkpoint yet) restores nothing. The directory's `checkpoint` file is TF's text format,
so `latest_checkpoint` and `CheckpointManager` read it as TF's do. Sharded, asynchronous checkpoints of whole
training states are `jdist.checkpoint.CheckpointManager`.
"""
from __future__ import annotations

import functools
import json
import os
import re
import time
from typing import Any

import numpy as np

INDEX = "checkpoint"
_SUFFIX = ".npz"
_COUNTER = "__save_counter__"


def _variables(obj: Any) -> list:
    variables = getattr(obj, "variables", None)
    if variables is None:
        raise TypeError(f"Checkpoint: {type(obj).__name__} has no `variables`; pass Keras models, layers, "
                        "optimizers, metrics or tf.Variables.")
    return list(variables)


class CheckpointLoadStatus:
    """What `restore` returns: TF's status methods, for scripts that call them (the restore already happened)."""

    def __init__(self, path: str | None):
        self.save_path = path

    def assert_consumed(self) -> "CheckpointLoadStatus":
        if self.save_path is None:
            raise AssertionError("No checkpoint was restored (restore(None)).")
        return self

    def assert_existing_objects_matched(self) -> "CheckpointLoadStatus":
        return self.assert_consumed()

    def assert_nontrivial_match(self) -> "CheckpointLoadStatus":
        return self.assert_consumed()

    def expect_partial(self) -> "CheckpointLoadStatus":
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        """Nothing to run: the values were assigned when `restore` was called."""

    def initialize_or_restore(self, session: Any = None) -> None:
        """Nothing to run: the values were assigned when `restore` was called."""


class Checkpoint:
    """Saves and restores the variables of the named Keras objects and `tf.Variable`s."""

    def __init__(self, **objects: Any):
        if _COUNTER in objects:
            raise ValueError(f"Checkpoint: {_COUNTER!r} is reserved for the save counter; name the object otherwise.")
        for obj in objects.values():
            _variables(obj)
        self._objects = objects
        self.save_counter = 0

    def write(self, file_prefix: str) -> str:
        """Writes the checkpoint at exactly `file_prefix` (no number, no `checkpoint` file): TF's `write`."""
        arrays = {f"{name}/{i}": np.asarray(v.value)
                  for name, obj in self._objects.items() for i, v in enumerate(_variables(obj))}
        arrays[_COUNTER] = np.asarray(self.save_counter, np.int64)
        os.makedirs(os.path.dirname(file_prefix) or ".", exist_ok=True)
        partial = f"{file_prefix}.partial-{os.getpid()}{_SUFFIX}"
        # numpy's stub matches **arrays against `allow_pickle`; the keys here are "name/i" paths.
        np.savez(partial, **arrays)  # pyright: ignore[reportArgumentType]
        os.replace(partial, file_prefix + _SUFFIX)  # a process killed mid-save leaves no half checkpoint
        return file_prefix

    def save(self, file_prefix: str) -> str:
        """Writes `{file_prefix}-{n}` for the n-th save and names it in the directory's `checkpoint` file."""
        self.save_counter += 1
        path = self.write(f"{file_prefix}-{self.save_counter}")
        write_index(os.path.dirname(path) or ".", path, [path], [time.time()])
        return path

    def restore(self, save_path: str | None) -> CheckpointLoadStatus:
        """Assigns the saved values; `None` (what `latest_checkpoint` gives before the first save) restores
        nothing, as in TF, where `restore(None)` initializes."""
        if save_path is None:
            return CheckpointLoadStatus(None)
        save_path = os.fspath(save_path)
        if not os.path.exists(save_path + _SUFFIX):
            raise FileNotFoundError(f"Checkpoint.restore: no checkpoint at {save_path!r} (expected the file "
                                    f"{save_path + _SUFFIX}); pass a prefix that save() or latest_checkpoint() gave.")
        with np.load(save_path + _SUFFIX) as data:
            saved = {key: data[key] for key in data.files}
        for name, obj in self._objects.items():
            values = [saved[f"{name}/{i}"] for i in range(len(saved)) if f"{name}/{i}" in saved]
            if getattr(obj, "built", True) or not hasattr(obj, "build"):
                _assign(obj, values, name)
            else:
                _defer(obj, values, name)
        if _COUNTER in saved:
            self.save_counter = int(saved[_COUNTER])
        return CheckpointLoadStatus(save_path)

    read = restore


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


def exists(prefix: str) -> bool:
    """Whether a checkpoint was written at `prefix`."""
    return os.path.exists(prefix + _SUFFIX)


def remove(prefix: str) -> None:
    """Deletes the checkpoint at `prefix` (what `CheckpointManager` does beyond `max_to_keep`)."""
    if exists(prefix):
        os.remove(prefix + _SUFFIX)


def write_index(directory: str, latest: str, paths: list[str], timestamps: list[float],
                last_preserved: float | None = None) -> None:
    """The directory's `checkpoint` file in TF's text format (paths inside `directory` written relative)."""
    def shown(path: str) -> str:
        relative = os.path.relpath(path, directory)
        return path if relative.startswith("..") else relative

    lines = [f'model_checkpoint_path: "{shown(latest)}"']
    lines += [f'all_model_checkpoint_paths: "{shown(p)}"' for p in paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in timestamps]
    if last_preserved is not None:
        lines.append(f"last_preserved_timestamp: {last_preserved!r}")
    partial = os.path.join(directory, f"{INDEX}.partial-{os.getpid()}")
    with open(partial, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(partial, os.path.join(directory, INDEX))


def read_index(directory: str) -> dict[str, Any] | None:
    """The `checkpoint` file of `directory` as a dict (`latest`, `paths`, `timestamps`, `last_preserved`), or
    None if there is none. Paths come back joined to `directory`, as TF's `get_checkpoint_state` gives them."""
    index = os.path.join(directory, INDEX)
    if not os.path.isfile(index):
        return None
    with open(index) as f:
        text = f.read()
    if text.lstrip().startswith("{"):  # the JSON index jdist wrote before it wrote TF's format
        return {"latest": os.path.join(directory, json.loads(text)["latest"]), "paths": [], "timestamps": [],
                "last_preserved": None}
    fields: dict[str, list[str]] = {}
    for key, value in re.findall(r'^(\w+):\s*(.+?)\s*$', text, flags=re.MULTILINE):
        fields.setdefault(key, []).append(value[1:-1] if value.startswith('"') else value)
    if "model_checkpoint_path" not in fields:
        return None
    return {"latest": os.path.join(directory, fields["model_checkpoint_path"][-1]),
            "paths": [os.path.join(directory, p) for p in fields.get("all_model_checkpoint_paths", [])],
            "timestamps": [float(t) for t in fields.get("all_model_checkpoint_timestamps", [])],
            "last_preserved": float(fields["last_preserved_timestamp"][-1])
            if "last_preserved_timestamp" in fields else None}


def latest_checkpoint(checkpoint_dir: str) -> str | None:
    """The prefix of the newest checkpoint saved to `checkpoint_dir` (`.../ckpt-3`), or None when there is none
    (no directory, no `checkpoint` file, or its newest checkpoint's file is gone), as TF's."""
    state = read_index(os.fspath(checkpoint_dir))
    if state is None or not exists(state["latest"]):
        return None
    return state["latest"]
