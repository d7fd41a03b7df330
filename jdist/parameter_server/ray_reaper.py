"""Stops the local Ray cluster a parameter-server job started, however that job ends.

Ray ties its head processes (GCS, raylet) to the process that started them,
but not the raylet's agents: a coordinator killed outright (measured with Ray
2.60: SIGKILL) leaves `ray::DashboardAgent` and `ray::RuntimeEnvAgent`
running for good, orphaned, and they ignore SIGTERM. So when jdist starts a
local Ray cluster it also starts this file as a small separate process (plain
Python, no imports beyond the standard library). It notes, every second, the
Ray processes descended from the coordinator (pid and start time, so a reused
pid is never hit) and reads a pipe from it; when the pipe closes (the
coordinator ended, or `ParameterServerStrategy.shutdown()` closed it after
`ray.shutdown()`), it kills whatever it noted that is still running, then exits.
Linux only (it reads /proc); elsewhere nothing is started.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time

GRACE_SECONDS = 1.0  # Ray's own shutdown goes first
POLL_SECONDS = 1.0


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a running process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ray_processes(root: int) -> dict[int, int]:
    """{pid: start time} of the Ray processes descended from `root` (not `root` itself)."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                parents[int(entry)], starts[int(entry)] = stat
    found: dict[int, int] = {}
    for pid in parents:
        ancestor, seen = parents.get(pid), 0
        while ancestor not in (None, 0, 1, root) and seen < 64:
            ancestor, seen = parents.get(ancestor), seen + 1
        # Not this watcher itself ("ray_reaper.py" names Ray too): it would kill itself halfway through
        # its list, leaving the processes noted after it, such as agents the raylet started late.
        if ancestor == root and pid != os.getpid() and "ray" in _cmdline(pid):
            found[pid] = starts[pid]
    return found


def still_running(noted: dict[int, int]) -> list[int]:
    """The noted processes (pid: start time) that still run (a zombie does not)."""
    return [pid for pid, start in noted.items() if (_stat(pid) or (0, None))[1] == start]


def kill_left(noted: dict[int, int]) -> list[int]:
    """SIGKILLs each noted process that still runs (same start time); returns their pids."""
    killed = []
    for pid in still_running(noted):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    return killed


def watch(root: int) -> None:
    """Notes `root`'s Ray processes until stdin closes, then kills those left."""
    noted: dict[int, int] = {}
    while True:
        if _stat(root) is not None:
            noted.update(ray_processes(root))
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], POLL_SECONDS)
        if ready and not os.read(sys.stdin.fileno(), 1024):
            break
    time.sleep(GRACE_SECONDS)
    killed = kill_left(noted)
    if killed:
        sys.stderr.write(f"[jdist] stopped {len(killed)} Ray process(es) left by the parameter-server job "
                         f"(pids {', '.join(map(str, killed))}).\n")


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is for the job, not for this watcher
    watch(int(sys.argv[1]))
