"""A liveness signal from a worker to the launcher that started it: a file whose mtime a thread renews.

`python -m jdist.launch` creates one file per worker in a directory it owns and
passes its path in `JDIST_HEARTBEAT_FILE`. Importing jdist starts a daemon
thread that touches the file every `INTERVAL` seconds. The thread keeps
running while the main thread waits on a peer (XLA releases the GIL), so a
stale file means the process itself stopped advancing: SIGSTOP, a machine
swapping to death, a native call holding the GIL. When the program ends,
`mark_ended()` creates `<file>.ended` (before JAX's exit barrier, which may
wait on peers), so the launcher can tell a worker that ended early from one
still training.
"""
from __future__ import annotations

import atexit
import os
import threading

HEARTBEAT_ENV = "JDIST_HEARTBEAT_FILE"
INTERVAL = 0.5
ENDED_SUFFIX = ".ended"

_lock = threading.Lock()
_path: str | None = None
_owner = 0  # the process that beats: not its children (a forked data loader must not speak for it)
_stop = threading.Event()


def _beat(path: str) -> None:
    while True:
        try:
            os.utime(path)
        except OSError:
            return  # the launcher removed its directory: nobody is listening any more
        if _stop.wait(INTERVAL):
            return


def start_from_environment() -> str | None:
    """Starts the heartbeat thread once when the launcher asked for it; returns the file's path."""
    global _path, _owner
    with _lock:
        if _path is not None:
            return _path
        path = os.environ.pop(HEARTBEAT_ENV, None)  # child processes it starts do not inherit it
        if not path:
            return None
        _path, _owner = path, os.getpid()
        threading.Thread(target=_beat, args=(path,), name="jdist-heartbeat", daemon=True).start()
        atexit.register(mark_ended)
    return path


def mark_ended() -> None:
    """The program is over (normal end or sys.exit): tell the launcher; idempotent."""
    if _path is None or os.getpid() != _owner:
        return
    try:
        with open(_path + ENDED_SUFFIX, "x"):
            pass
    except OSError:
        pass
