"""`tf.train.load_checkpoint` / `tf.train.list_variables` as a TF script sees them: jdist.train's reader with
TF's dtypes, value types and errors, so the migration guide's `print_checkpoint` prints what TF's prints.

TF 2.21's rules (observed): `get_variable_to_dtype_map()` gives `tf.DType`s (`tf.float32`, `tf.int64`; the
`_CHECKPOINTABLE_OBJECT_GRAPH` entry is `tf.string`, its `get_tensor` value `bytes`); `get_tensor` of a missing
key raises `NotFoundError: Key nope not found in checkpoint`; `load_checkpoint` / `list_variables` of a prefix
with no files raise `NotFoundError: Unsuccessful TensorSliceReader constructor: Failed to find any matching
files for <path>`, of a directory without a `checkpoint` file `ValueError: Couldn't find 'checkpoint' file or
checkpoints in given directory <dir>`. jdist's object graph is JSON (its key list), not TF's proto, so the graph
entry's bytes are that JSON text.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from jdist.tf_compat.dtype_table import as_dtype, string
from jdist.tf_compat.error_types import NotFoundError
from jdist.train import object_graph, reader


class CheckpointReader:
    """TF's `CheckpointReader` over a jdist checkpoint: shapes, `tf.DType`s and values by TF's keys."""

    def __init__(self, prefix: str):
        self._reader = reader.CheckpointReader(prefix)

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return self._reader.get_variable_to_shape_map()

    def get_variable_to_dtype_map(self) -> dict[str, Any]:
        dtypes = self._reader.get_variable_to_dtype_map()
        return {key: string if dtype == np.dtype(object) else as_dtype(dtype) for key, dtype in dtypes.items()}

    def has_tensor(self, key: str) -> bool:
        return self._reader.has_tensor(key)

    def get_tensor(self, key: str) -> Any:
        if not self._reader.has_tensor(key):
            raise NotFoundError(None, None, f"Key {key} not found in checkpoint")
        value = self._reader.get_tensor(key)
        if key == object_graph.GRAPH or isinstance(value, str):
            return str(value).encode()
        return value


def _open(ckpt_dir_or_file: Any) -> CheckpointReader:
    path = os.fspath(ckpt_dir_or_file)
    try:
        return CheckpointReader(reader._prefix(path))
    except FileNotFoundError:
        raise NotFoundError(None, None, "Unsuccessful TensorSliceReader constructor: Failed to find any "
                                        f"matching files for {path}") from None


def load_checkpoint(ckpt_dir_or_file: Any) -> CheckpointReader:
    """`tf.train.load_checkpoint`: the newest checkpoint of a directory (or the one at a prefix), as a reader."""
    return _open(ckpt_dir_or_file)


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """`tf.train.list_variables`: (key, shape) of every value in the checkpoint, sorted by key (TF's)."""
    return sorted(_open(ckpt_dir_or_file).get_variable_to_shape_map().items())


NAMES = dict(load_checkpoint=load_checkpoint, list_variables=list_variables, CheckpointReader=CheckpointReader)
