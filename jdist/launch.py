"""Runs N worker processes of one program on this machine, as a multi-worker cluster.

    python -m jdist.launch --num-workers 2 --devices-per-worker 4 -- python scripts/train.py --epochs 1

Each worker gets `TF_CONFIG` (free localhost ports; worker 0, or `chief:0` with
`--chief`, hosts the coordinator), and with `--devices-per-worker` that many
simulated CPU devices. Output is streamed line by line as `[worker 1] ...`.

A worker fails when it exits with a non-zero code, when its heartbeat (a file
jdist touches from a thread, see jdist/cluster/heartbeat.py) goes silent for
`--timeout / 2` seconds while its process lives (stopped or hung: it is killed),
or when its program ends while the others still run after that long. The
others then get what is left of `--timeout` to stop by themselves (jdist's
watchdog makes them), then are killed. The launcher names the worker that
stopped first on its own (not one that stopped because of it) with its last
output line, and exits with its code: the worker's exit code, 128 + signal,
124 (hung) or 125 (ended early). With `--max-restarts N` it restarts the whole
job instead, up to N times. Ctrl-C stops every worker (exit code 130).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from jdist.cluster import heartbeat
from jdist.cluster.runtime import FAILURE_TIMEOUT_ENV, RESTART_COUNT_ENV
from jdist.cluster.watchdog import EXIT_PEER_FAILED

POLL_SECONDS = 0.1
EXIT_HUNG = 124  # the cause stopped responding (no heartbeat), as coreutils' `timeout`
EXIT_ENDED_EARLY = 125  # the cause ended its program while the others were still running
MIN_COLLECTIVE_TIMEOUT = 30.0
DROP_AFTER_FAILURES = 2  # with --min-workers: a worker slot blamed this often is left out of restarts


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free a moment ago (the OS picks them)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in sockets:
            sock.close()
    return ports


def cluster_config(num_workers: int, chief: bool, ports: Sequence[int]) -> dict[str, list[str]]:
    addresses = [f"localhost:{port}" for port in ports]
    if chief:
        return {"chief": addresses[:1], "worker": addresses[1:]} if num_workers > 1 else {"chief": addresses}
    return {"worker": addresses}


def task_of(index: int, chief: bool) -> tuple[str, int]:
    """Launch slot `index` -> (task type, task index)."""
    if chief:
        return ("chief", 0) if index == 0 else ("worker", index - 1)
    return "worker", index


def worker_env(base: Mapping[str, str], cluster: dict, task: tuple[str, int], devices_per_worker: int | None,
               failure_timeout: float, collective_timeout: float | None = None) -> dict:
    """A worker's environment; with simulated CPU devices, `collective_timeout` bounds each cross-process
    collective (XLA's gloo timeout, 30 min by default): a peer that never joins fails it instead of hanging."""
    env = dict(base)
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": task[0], "index": task[1]}})
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault(FAILURE_TIMEOUT_ENV, f"{failure_timeout:g}")
    if devices_per_worker is not None:
        flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", "")).split()
        flags.append(f"--xla_force_host_platform_device_count={devices_per_worker}")
        if collective_timeout is not None and not any("xla_cpu_collective_timeout_seconds" in f for f in flags):
            flags.append(f"--xla_cpu_collective_timeout_seconds={math.ceil(collective_timeout)}")
        env["XLA_FLAGS"] = " ".join(flags)
        env["JAX_NUM_CPU_DEVICES"] = str(devices_per_worker)
        env["JAX_PLATFORMS"] = "cpu"
    return env


def describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit even after SIGKILL"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def shell_code(code: int | None) -> int:
    if code is None:
        return 1
    return 128 - code if code < 0 else code


@dataclass
class Worker:
    label: str
    slot: int  # position in the first attempt's worker list: restarts blame and drop slots
    process: subprocess.Popen
    heartbeat: str
    reader: threading.Thread | None = None
    code: int | None = None
    ended_at: float | None = None  # when the launcher saw the process exit
    program_ended_at: float | None = None  # when the program ended (heartbeat marker, or exit 0)
    hung_at: float | None = None  # its last heartbeat, once declared hung
    hang_seconds: float = 0.0
    ended_early: bool = False
    stopped_by_launcher: bool = field(default=False)
    last_line: str = ""

    def beat_age(self) -> float | None:
        """Seconds since the worker's last heartbeat; None before its first one."""
        try:
            mtime = os.stat(self.heartbeat).st_mtime
        except OSError:
            return None
        return None if mtime == 0 else max(0.0, time.time() - mtime)

    def caused_by_itself(self) -> bool:
        """Whether this worker stopped on its own, not as a consequence of another's failure."""
        if self.hung_at is not None or self.ended_early:
            return True
        return (self.code not in (None, 0) and self.code not in CONSEQUENTIAL_CODES
                and not self.stopped_by_launcher)

    def stopped_at(self) -> float:
        if self.hung_at is not None:
            return self.hung_at
        if self.ended_early:
            assert self.program_ended_at is not None, "a program that ended early has ended"
            return self.program_ended_at
        return self.ended_at if self.ended_at is not None else float("inf")

    def failure(self) -> tuple[str, int]:
        """(what happened, the launcher's exit code) when this worker is the cause."""
        if self.hung_at is not None:
            return (f"{self.label} stopped responding: no heartbeat for {self.hang_seconds:.0f} s while its process "
                    "was alive (stopped or hung; the launcher killed it)", EXIT_HUNG)
        if self.ended_early:
            return (f"{self.label} ended its program while the other workers were still running "
                    "(an early return or sys.exit)", EXIT_ENDED_EARLY)
        return f"{self.label} {describe_exit(self.code)}", shell_code(self.code)


# Exits that follow another worker's failure: jdist's watchdog (3), JAX's coordination service (SIGABRT).
CONSEQUENTIAL_CODES = frozenset({EXIT_PEER_FAILED, -signal.SIGABRT, 128 + signal.SIGABRT})


class Launcher:
    def __init__(self, command: Sequence[str], num_workers: int, devices_per_worker: int | None,
                 timeout: float, chief: bool, out=None, err=None, *, max_restarts: int = 0,
                 min_workers: int | None = None):
        if num_workers < 1:
            raise ValueError(f"--num-workers must be at least 1, got {num_workers}.")
        if devices_per_worker is not None and devices_per_worker < 1:
            raise ValueError(f"--devices-per-worker must be at least 1, got {devices_per_worker}.")
        if not timeout > 0:
            raise ValueError(f"--timeout must be positive, got {timeout}.")
        if max_restarts < 0:
            raise ValueError(f"--max-restarts must be 0 or more, got {max_restarts}.")
        min_workers = num_workers if min_workers is None else min_workers
        if not 1 <= min_workers <= num_workers:
            raise ValueError(f"--min-workers must be between 1 and --num-workers ({num_workers}), got {min_workers}.")
        if not command:
            raise ValueError("Give the command to run after '--', e.g. -- python scripts/train.py")
        self.command = list(command)
        self.num_workers = num_workers
        self.devices_per_worker = devices_per_worker
        self.timeout = timeout
        self.chief = chief
        self.max_restarts = max_restarts
        self.min_workers = min_workers
        # Workers stop themselves well inside the launcher's bound; the launcher uses the same
        # bound for a silent heartbeat and for a worker that ended while the others run on.
        self.failure_timeout = max(1.0, timeout / 2)
        self.hang_after = max(4 * heartbeat.INTERVAL, self.failure_timeout)
        # A peer that is alive but never joins a collective: the collective fails after this long. Not
        # shorter than 30 s, so that one worker compiling slower than the others is not a failure.
        self.collective_timeout = max(timeout, MIN_COLLECTIVE_TIMEOUT)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.Lock()
        self.workers: list[Worker] = []
        self.restart = 0
        self._dir: str | None = None

    def say(self, message: str) -> None:
        with self._lock:
            self.err.write(f"[launch] {message}\n")
            self.err.flush()

    def _stream(self, worker: Worker, pipe) -> None:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                if line.strip():
                    worker.last_line = line
                self.out.write(f"[{worker.label}] {line}\n")
                self.out.flush()
        pipe.close()

    def start(self, slots: Sequence[int] | None = None) -> None:
        """Starts one worker per slot (default: all), numbered 0..len(slots)-1 in this attempt."""
        slots = list(range(self.num_workers)) if slots is None else list(slots)
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="jdist-launch-")
        cluster = cluster_config(len(slots), self.chief, free_ports(len(slots)))
        self.workers = []
        for index, slot in enumerate(slots):
            task = task_of(index, self.chief)
            label = f"{task[0]} {task[1]}"
            beat = os.path.join(self._dir, f"heartbeat-{self.restart}-{index}")
            with open(beat, "w"):
                pass
            os.utime(beat, (0, 0))  # "no heartbeat yet"
            env = worker_env(os.environ, cluster, task, self.devices_per_worker, self.failure_timeout,
                             self.collective_timeout)
            env[heartbeat.HEARTBEAT_ENV] = beat
            env[RESTART_COUNT_ENV] = str(self.restart)
            process = subprocess.Popen(self.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            worker = Worker(label, slot, process, beat)
            worker.reader = threading.Thread(target=self._stream, args=(worker, process.stdout), daemon=True)
            worker.reader.start()
            self.workers.append(worker)
        self.say(f"started {len(self.workers)} worker(s): " + ", ".join(
            f"{w.label} (pid {w.process.pid})" for w in self.workers))

    def _poll(self) -> None:
        """Exit codes, program ends and silent heartbeats; kills a worker as soon as it is found hung."""
        now = time.monotonic()
        for worker in self.workers:
            if worker.code is None:
                worker.code = worker.process.poll()
                if worker.code is not None:
                    worker.ended_at = now
            if worker.program_ended_at is None and (
                    worker.code == 0 or os.path.exists(worker.heartbeat + heartbeat.ENDED_SUFFIX)):
                worker.program_ended_at = now
            if worker.code is None and worker.program_ended_at is None and worker.hung_at is None:
                age = worker.beat_age()
                if age is not None and age > self.hang_after:
                    worker.hung_at, worker.hang_seconds = now - age, age
                    self.say(f"{worker.label} stopped responding: no heartbeat for {age:.0f} s; killing it.")
                    self._kill(worker, signal.SIGKILL)

    def _ended_early(self) -> tuple[Worker, float] | None:
        """The first worker whose program ended `hang_after` seconds ago while another still runs,
        and when it ended."""
        ended = [(w, w.program_ended_at) for w in self.workers if w.program_ended_at is not None]
        running = [w for w in self.workers if w.program_ended_at is None and w.code is None]
        if not ended or not running:
            return None
        first, ended_at = min(ended, key=lambda pair: pair[1])
        return (first, ended_at) if time.monotonic() - ended_at > self.hang_after else None

    def root_cause(self) -> Worker:
        """The worker that stopped first on its own (hung, ended early or failed), not one that
        stopped because a peer failed, whatever the exit codes of the others."""
        own = [w for w in self.workers if w.caused_by_itself()]
        if own:
            return min(own, key=Worker.stopped_at)
        failed = [w for w in self.workers if w.code not in (None, 0)]
        return min(failed, key=Worker.stopped_at) if failed else self.workers[0]

    def _kill(self, worker: Worker, sig: int) -> None:
        if worker.code is None and worker.process.poll() is None:
            worker.stopped_by_launcher = True
            try:
                os.killpg(worker.process.pid, sig)  # the worker's own session: it and its children
            except ProcessLookupError:
                pass

    def _signal_all(self, sig: int) -> None:
        for worker in self.workers:
            self._kill(worker, sig)

    def _wait_all(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._poll()
            if all(w.code is not None for w in self.workers):
                return True
            time.sleep(POLL_SECONDS)
        self._poll()
        return all(w.code is not None for w in self.workers)

    def stop_all(self, grace: float) -> None:
        """Lets workers exit by themselves for most of `grace`, then SIGTERM, then SIGKILL."""
        if self._wait_all(grace * 0.8):
            return
        self._signal_all(signal.SIGTERM)
        if self._wait_all(grace * 0.1):
            return
        self._signal_all(signal.SIGKILL)
        self._wait_all(max(1.0, grace * 0.1))

    def finish(self) -> None:
        for worker in self.workers:
            if worker.reader is not None:
                worker.reader.join(timeout=2.0)
            try:  # children a worker left behind in its session
                os.killpg(worker.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _failed(self) -> bool:
        if any(w.code not in (None, 0) or w.hung_at is not None for w in self.workers):
            return True
        found = self._ended_early()
        if found is not None:
            early, ended_at = found
            early.ended_early = True
            self.say(f"{early.label} ended its program {time.monotonic() - ended_at:.0f} s ago "
                     "while the other workers are still running: that is a failure of this worker.")
            self._kill(early, signal.SIGKILL)  # it only waits in JAX's exit barrier now
            return True
        return False

    def run_once(self, slots: Sequence[int] | None = None) -> Worker | None:
        """One attempt of the job; returns None when every worker finished, else the worker to blame."""
        self.start(slots)
        while True:
            self._poll()
            if self._failed():
                first = self.root_cause()
                # The others get what is left of --timeout since the first stop (at least 2 s).
                since = time.monotonic() - min(first.stopped_at(), time.monotonic())
                grace = max(2.0, self.timeout - since)
                self.say(f"seen first: {first.failure()[0]}; stopping the other workers (they get {grace:.0f} s).")
                self.stop_all(grace)
                self.finish()
                cause = self.root_cause()
                for worker in self.workers:
                    if worker is not cause:
                        how = "stopped by the launcher" if worker.stopped_by_launcher else "stopped by itself"
                        self.say(f"{worker.label} {describe_exit(worker.code)} ({how}).")
                return cause
            if all(w.code == 0 for w in self.workers):
                self.finish()
                return None
            time.sleep(POLL_SECONDS)

    def run(self) -> int:
        """Runs the job, restarting it after a failure up to `max_restarts` times."""
        slots = list(range(self.num_workers))
        blamed: dict[int, int] = {}
        try:
            while True:
                cause = self.run_once(slots)
                if cause is None:
                    self.say(f"all {len(slots)} worker(s) finished"
                             + (f" after {self.restart} restart(s)." if self.restart else "."))
                    return 0
                what, code = cause.failure()
                last = f" Its last line: {cause.last_line!r}" if cause.last_line else ""
                if self.restart >= self.max_restarts:
                    after = f" (after {self.restart} restart(s))" if self.restart else ""
                    self.say(f"FAILED{after}: {what}; exit code {code}.{last}")
                    return code
                self.restart += 1
                blamed[cause.slot] = blamed.get(cause.slot, 0) + 1
                note = ""
                if blamed[cause.slot] >= DROP_AFTER_FAILURES and len(slots) > self.min_workers:
                    slots.remove(cause.slot)
                    note = (f"; it failed {blamed[cause.slot]} times, so the job continues without it "
                            f"(--min-workers {self.min_workers})")
                self.say(f"restart {self.restart} of {self.max_restarts} on {len(slots)} worker(s), after: "
                         f"{what} (exit code {code}){note}.{last}")
        except KeyboardInterrupt:
            self.say("interrupted: stopping every worker.")
            self._signal_all(signal.SIGINT)
            if not self._wait_all(5.0):
                self._signal_all(signal.SIGKILL)
                self._wait_all(2.0)
            self.finish()
            for worker in self.workers:
                self.say(f"{worker.label} {describe_exit(worker.code)}.")
            return 130
        finally:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    if "--" in argv:
        split = argv.index("--")
        own, command = argv[:split], argv[split + 1:]
    else:
        own, command = argv, []
    parser = argparse.ArgumentParser(prog="python -m jdist.launch", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--num-workers", type=int, required=True, help="worker processes to start")
    parser.add_argument("--devices-per-worker", type=int, default=None,
                        help="simulated CPU devices per worker (sets JAX_PLATFORMS=cpu); default: real devices")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds between a worker failing and the launcher exiting, at most (default 60)")
    parser.add_argument("--chief", action="store_true", help="make the first process chief:0 instead of worker:0")
    parser.add_argument("--max-restarts", type=int, default=0,
                        help="restart the whole job up to this many times after a failure (default 0); the program "
                             "resumes from its own checkpoint, and $JDIST_RESTART_COUNT says which attempt it is")
    parser.add_argument("--min-workers", type=int, default=None,
                        help="with --max-restarts: a worker that failed twice is left out of later restarts while "
                             "at least this many remain (default: --num-workers, never shrink)")
    args = parser.parse_args(own)
    if not command:
        parser.error("give the command to run after '--', e.g. -- python scripts/train.py")
    return args, command


def main(argv: Sequence[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        launcher = Launcher(command, args.num_workers, args.devices_per_worker, args.timeout, args.chief,
                            max_restarts=args.max_restarts, min_workers=args.min_workers)
    except ValueError as err:
        sys.stderr.write(f"python -m jdist.launch: error: {err}\n")
        return 2

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # Explicitly, not inherited: a command started with `&` from a script (nohup, CI) has SIGINT
    # ignored, and would pass that on to the workers too. A handler (unlike SIG_IGN) is not
    # inherited, so the workers start with SIGINT's default action.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return launcher.run()


if __name__ == "__main__":
    sys.exit(main())
