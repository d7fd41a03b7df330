"""`tf.train.get_checkpoint_state`, `load_variable`, `CheckpointOptions` and `Coordinator`: TF's checkpoint
utilities over jdist's checkpoints (jdist.train), and TF1's thread coordinator.

TF 2.21's rules (observed): `get_checkpoint_state(dir)` reads the directory's `checkpoint` file and gives its
paths joined to `dir` (None without the file); `load_variable(dir_or_prefix, key)` is the saved value by TF's key
(`'v/.ATTRIBUTES/VARIABLE_VALUE'`; a trailing `:0` dropped), a numpy scalar for a 0-d value, and
`NotFoundError: Key nope not found in checkpoint` for a missing key. jdist's saves are synchronous and local, so
`CheckpointOptions` (async saving, the I/O device) changes nothing.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from jdist.tf_compat import checkpoint_reader
from jdist.tf_compat.error_types import NotFoundError
from jdist.train import checkpoint as checkpoint_lib


class CheckpointState:
    """TF's `CheckpointState` proto: the newest checkpoint's prefix and the kept ones, oldest first."""

    def __init__(self, model_checkpoint_path: str, all_model_checkpoint_paths: list[str],
                 all_model_checkpoint_timestamps: list[float], last_preserved_timestamp: float):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = all_model_checkpoint_paths
        self.all_model_checkpoint_timestamps = all_model_checkpoint_timestamps
        self.last_preserved_timestamp = last_preserved_timestamp

    def __str__(self) -> str:
        lines = [f'model_checkpoint_path: "{self.model_checkpoint_path}"']
        lines += [f'all_model_checkpoint_paths: "{p}"' for p in self.all_model_checkpoint_paths]
        lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in self.all_model_checkpoint_timestamps]
        if self.last_preserved_timestamp:
            lines.append(f"last_preserved_timestamp: {self.last_preserved_timestamp!r}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__


def get_checkpoint_state(checkpoint_dir: Any, latest_filename: str | None = None) -> CheckpointState | None:
    """`tf.train.get_checkpoint_state`: the `checkpoint` file of `checkpoint_dir`, or None if there is none."""
    directory = os.fspath(checkpoint_dir)
    if latest_filename not in (None, checkpoint_lib.INDEX):
        if not os.path.exists(os.path.join(directory, str(latest_filename))):
            return None
        raise ValueError(f"jdist's checkpoints keep their index in '{checkpoint_lib.INDEX}', not "
                         f"{latest_filename!r}")
    state = checkpoint_lib.read_index(directory)
    if state is None:
        return None
    return CheckpointState(state["latest"], list(state["paths"]), list(state["timestamps"]),
                           state["last_preserved"] or 0.0)


def load_variable(ckpt_dir_or_file: Any, name: str) -> Any:
    """`tf.train.load_variable`: the value saved under `name` in the newest checkpoint of a directory (or the
    checkpoint at a prefix)."""
    checkpoint = checkpoint_reader.load_checkpoint(ckpt_dir_or_file)
    name = name[:-2] if name.endswith(":0") else name
    if not checkpoint.has_tensor(name):
        raise NotFoundError(None, None, f"Key {name} not found in checkpoint")
    value = checkpoint.get_tensor(name)
    return value[()] if getattr(value, "ndim", None) == 0 else value


class CheckpointOptions:
    """`tf.train.CheckpointOptions`: accepted by `Checkpoint.save` / `write` / `restore` and
    `CheckpointManager.save`; jdist saves synchronously to local files, so the options change nothing."""

    def __init__(self, experimental_io_device: str | None = None, experimental_enable_async_checkpoint: bool = False,
                 experimental_write_callbacks: Any = None, enable_async: bool = False,
                 experimental_sharding_callback: Any = None, experimental_skip_slot_variables: bool = False):
        self.experimental_io_device = experimental_io_device
        self.experimental_enable_async_checkpoint = experimental_enable_async_checkpoint or enable_async
        self.enable_async = enable_async or experimental_enable_async_checkpoint
        self.experimental_write_callbacks = experimental_write_callbacks
        self.experimental_sharding_callback = experimental_sharding_callback
        self.experimental_skip_slot_variables = experimental_skip_slot_variables


class Coordinator:
    """`tf.train.Coordinator`: TF1's stop flag shared by Python threads (`should_stop`, `request_stop`,
    `stop_on_exception`, `wait_for_stop`, `join`, which re-raises the first exception a thread reported)."""

    def __init__(self, clean_stop_exception_types: tuple[type[BaseException], ...] | None = None):
        self._clean = (StopIteration,) if clean_stop_exception_types is None else tuple(clean_stop_exception_types)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._exc_info: Any = None
        self._threads: set[threading.Thread] = set()
        self.joined = False

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, ex: BaseException | tuple | None = None) -> None:
        """Asks every thread to stop; an exception (or `sys.exc_info()` tuple) is re-raised by `join`."""
        with self._lock:
            if ex is not None and self._exc_info is None and not self.joined:
                info = ex if isinstance(ex, tuple) else (type(ex), ex, ex.__traceback__)
                if not issubclass(info[0], self._clean):
                    self._exc_info = info
            self._stop.set()

    def clear_stop(self) -> None:
        with self._lock:
            self.joined, self._exc_info = False, None
            self._stop.clear()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """Inside the block an exception requests a stop (and is kept for `join`) instead of propagating."""
        try:
            yield
        except BaseException:  # noqa: BLE001 (TF's: any exception stops the threads)
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        return self._stop.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.add(thread)

    def join(self, threads: Iterable[threading.Thread] | None = None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Waits for the threads after a stop is requested; re-raises the exception a thread reported."""
        threads = set(self._threads if threads is None else set(threads) | self._threads)
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self.joined = True
            self._threads = set()
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])
        if alive and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: {' '.join(alive)}")

    def raise_requested_exception(self) -> None:
        with self._lock:
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])


NAMES = dict(get_checkpoint_state=get_checkpoint_state, load_variable=load_variable,
             CheckpointOptions=CheckpointOptions, Coordinator=Coordinator,
             **checkpoint_reader.NAMES)  # load_checkpoint, list_variables, CheckpointReader: TF's types and errors
