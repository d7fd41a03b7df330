"""Keras's own `BackupAndRestore` in a multi-worker job: only the chief writes and removes the shared backup.

Keras 3's callback has every process write `latest.weights.h5` and
`training_metadata.json` into the shared `backup_dir` and remove the
directory when `fit` ends. With several workers they collide: h5 refuses the
second writer (`BlockingIOError: unable to lock file`), and a worker still
writing its metadata after the last step fails with `FileNotFoundError` once
the chief has removed the directory. TF's rule (tf_keras'
`distributed_file_utils.write_dirpath`): the chief writes the real files;
every other worker writes to a temporary path of its own, removed right after,
and never removes the shared directory. Here that temporary path is a local
directory outside `backup_dir`, so the chief removing `backup_dir` at the end
cannot pull it from under a worker that is a little behind. Every worker
still restores from `backup_dir`. Installed once a jdist strategy's Keras
distribution is made; with one process nothing changes.
"""
from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
from typing import Any, Callable, Iterator

_PATHS = ("backup_dir", "_weights_path", "_training_metadata_path", "_prev_weights_path",
          "_prev_training_metadata_path")


def install() -> None:
    """Wraps `keras.callbacks.BackupAndRestore`'s writing and its removal at train end, once per process."""
    from keras.src.callbacks.backup_and_restore import BackupAndRestore

    if getattr(BackupAndRestore._save_model, "_jdist", False):
        return
    BackupAndRestore._save_model = _chief_writes(BackupAndRestore._save_model)
    BackupAndRestore.on_train_end = _chief_removes(BackupAndRestore.on_train_end)


def is_non_chief_worker() -> bool:
    """This process is one of several and not the chief (process 0)."""
    import jax

    return jax.process_count() > 1 and jax.process_index() != 0


def _chief_writes(original: Callable) -> Callable:
    @functools.wraps(original)
    def save_model(callback: Any) -> Any:
        if not is_non_chief_worker():
            return original(callback)
        with _writing_elsewhere(callback):
            return original(callback)

    save_model._jdist = True  # pyright: ignore[reportAttributeAccessIssue]
    return save_model


def _chief_removes(original: Callable) -> Callable:
    @functools.wraps(original)
    def on_train_end(callback: Any, logs: Any = None) -> Any:
        if not is_non_chief_worker():
            return original(callback, logs)
        return None  # the shared directory is the chief's to remove

    return on_train_end


@contextlib.contextmanager
def _writing_elsewhere(callback: Any) -> Iterator[None]:
    """The callback's file paths point into a fresh local directory, removed afterwards."""
    import os

    from keras.src.utils import file_utils

    shared = {name: getattr(callback, name) for name in _PATHS}
    temp = tempfile.mkdtemp(prefix="jdist-backup-worker-")
    callback.backup_dir = temp
    callback._weights_path = file_utils.join(temp, os.path.basename(shared["_weights_path"]))
    callback._training_metadata_path = file_utils.join(temp, os.path.basename(shared["_training_metadata_path"]))
    callback._prev_weights_path = f"{callback._weights_path}.bkp"
    callback._prev_training_metadata_path = f"{callback._training_metadata_path}.bkp"
    try:
        yield
    finally:
        for name, value in shared.items():
            setattr(callback, name, value)
        shutil.rmtree(temp, ignore_errors=True)
