"""`tf.train.load_checkpoint` / `list_variables`: a checkpoint's values by TF's keys, without the objects."""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from jdist.train import checkpoint as checkpoint_lib, object_graph


class CheckpointReader:
    """TF's `CheckpointReader`: `get_variable_to_shape_map` (shapes as lists), `get_variable_to_dtype_map`
    (numpy dtypes, whose `.name` is TF's: "float32"), `get_tensor`, `has_tensor`."""

    def __init__(self, prefix: str):
        self._prefix = prefix
        self._values = checkpoint_lib.read_arrays(prefix)
        graph = json.loads(str(self._values[object_graph.GRAPH]))
        self._values[object_graph.GRAPH] = np.asarray(json.dumps(graph))

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {k: list(np.shape(v)) for k, v in self._values.items()}

    def get_variable_to_dtype_map(self) -> dict[str, Any]:
        return {k: np.dtype(object) if v.dtype.kind == "U" else v.dtype for k, v in self._values.items()}

    def has_tensor(self, key: str) -> bool:
        return key in self._values

    def get_tensor(self, key: str) -> Any:
        if key not in self._values:
            raise KeyError(f"Key {key} not found in checkpoint {self._prefix}; it holds {sorted(self._values)}")
        value = self._values[key]
        if value.dtype.kind == "U":
            return value.item()
        return value[()] if value.ndim == 0 else value  # TF's: a numpy scalar for a 0-d value


def _prefix(ckpt_dir_or_file: Any) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = checkpoint_lib.latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}")
        return latest
    return path


def load_checkpoint(ckpt_dir_or_file: Any) -> CheckpointReader:
    """The newest checkpoint of a directory (or the one at a prefix), as a reader."""
    return CheckpointReader(_prefix(ckpt_dir_or_file))


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """(key, shape) of every value in the checkpoint, sorted by key, as TF's."""
    return sorted(load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map().items())
