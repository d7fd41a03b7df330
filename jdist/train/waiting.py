"""`tf.train.checkpoints_iterator` / `wait_for_new_checkpoint`: a sidecar's loop over the checkpoints training writes.

TF's semantics (tensorflow/python/training/checkpoint_utils.py, and observed in TF 2.21): the newest checkpoint
named in the directory's `checkpoint` file is yielded once; then it polls every second for a newer one. With
`timeout` it gives up when the next poll would pass it (so `timeout=1` does not wait at all); then `timeout_fn`
(if any) decides: True ends the iteration, False waits again. `min_interval_secs` spaces the yields.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, Iterator

from jdist.train.checkpoint import latest_checkpoint

_LOG = logging.getLogger("jdist")


def wait_for_new_checkpoint(checkpoint_dir: str, last_checkpoint: str | None = None, seconds_to_sleep: float = 1,
                            timeout: float | None = None) -> str | None:
    """The newest checkpoint in `checkpoint_dir` once it differs from `last_checkpoint`; None after `timeout`."""
    stop = None if timeout is None else time.time() + timeout
    while True:
        path = latest_checkpoint(os.fspath(checkpoint_dir))
        if path is not None and path != last_checkpoint:
            return path
        if stop is not None and time.time() + seconds_to_sleep > stop:
            return None
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir: str, min_interval_secs: float = 0, timeout: float | None = None,
                         timeout_fn: Callable[[], bool] | None = None) -> Iterator[str]:
    """Each new checkpoint of `checkpoint_dir`, as it appears (see the module docstring)."""
    path = None
    while True:
        found = wait_for_new_checkpoint(checkpoint_dir, path, timeout=timeout)
        if found is None:
            if timeout_fn is None:
                _LOG.info("Timed out waiting for a checkpoint in %s.", checkpoint_dir)
                return
            if timeout_fn():
                return
            continue
        start, path = time.time(), found
        yield path
        pause = start + min_interval_secs - time.time()
        if pause > 0:
            time.sleep(pause)
