"""No process of a parameter-server job outlives `strategy.shutdown()` or the job: the job here starts
its own local Ray cluster, in a child process of the test."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jdist.parameter_server import ray_reaper

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve().parent / "multiworker_scripts" / "ps_lifetime_job.py"

# Kills and bounded waits on a Ray cluster's processes: in the serial pass (marker `multiprocess`).
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper reads /proc (Linux)"),
              pytest.mark.multiprocess]


def start(mode):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, str(SCRIPT), mode], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def read_until(process, prefix, seconds):
    deadline, lines = time.monotonic() + seconds, []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith(prefix):
            return line[len(prefix):].strip(), lines
    process.kill()
    raise AssertionError(f"no line starting {prefix!r}:\n" + "".join(lines))


def wait_gone(noted, seconds):
    deadline = time.monotonic() + seconds
    while ray_reaper.still_running(noted) and time.monotonic() < deadline:
        time.sleep(0.2)
    return ray_reaper.still_running(noted)


def test_shutdown_stops_every_ray_process_it_started():
    process = start("shutdown")
    try:
        noted = {int(k): v for k, v in json.loads(read_until(process, "ray processes ", 240)[0]).items()}
        assert len(noted) >= 3  # GCS, raylet, its agents, the actors
        left, _ = read_until(process, "after shutdown ", 120)
        assert json.loads(left) == []
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_killed_coordinator_leaves_no_ray_process():
    """Ray 2.60 ties its GCS and raylet to the process that started them, not the raylet's agents: with
    the coordinator killed outright, ray::DashboardAgent and ray::RuntimeEnvAgent ran on for good."""
    process = start("killed")
    noted = {}
    try:
        noted = {int(k): v for k, v in json.loads(read_until(process, "ray processes ", 240)[0]).items()}
        read_until(process, "ready", 60)
        process.kill()
        process.wait(timeout=10)
        left = wait_gone(noted, 45)  # the watcher fires within seconds; 45 s bounds a loaded machine
        reapers = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                   if ray_reaper._cmdline(pid).rstrip().endswith(f"ray_reaper.py {process.pid}")]
        assert left == [], (f"still running: {[ray_reaper._cmdline(pid) for pid in left]}; "
                            f"the job's watcher {'still runs' if reapers else 'has exited'}")
    finally:
        process.kill()
        for pid in ray_reaper.still_running(noted):  # processes this test's job started
            os.kill(pid, signal.SIGKILL)



# A job as ray_lifetime makes one: it starts the watcher on itself, then a Ray-named child after it.
_FAKE_JOB = """
import subprocess, sys, time
watcher = subprocess.Popen([sys.executable, "-I", "-S", sys.argv[1], str(__import__("os").getpid())],
                           stdin=subprocess.PIPE, start_new_session=True)
time.sleep(1.5)  # the watcher's first look: only itself
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "ray::Fake"])
time.sleep(2.5)  # noted after the watcher
print(watcher.pid, child.pid, flush=True)
time.sleep(120)
"""


def test_the_watcher_never_notes_itself():
    """The watcher is a child of the job and its command line names Ray ("ray_reaper.py"): noted, it killed
    itself partway through its list, and what was noted after it (Ray's agents when the raylet started
    them late) ran on."""
    job = subprocess.Popen([sys.executable, "-c", _FAKE_JOB, ray_reaper.__file__], stdout=subprocess.PIPE,
                           text=True)
    watcher = child = 0
    try:
        watcher, child = map(int, job.stdout.readline().split())
        started = {pid: ray_reaper._stat(pid)[1] for pid in (watcher, child)}
        job.kill()
        job.wait(timeout=10)
        assert wait_gone(started, 30) == []
    finally:
        job.kill()
        for pid in (watcher, child):
            if pid and ray_reaper._stat(pid) is not None:
                os.kill(pid, signal.SIGKILL)
