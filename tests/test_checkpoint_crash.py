"""Crash, preemption and multi-process checkpoint tests, with real subprocesses.

A tiny MLP trains for 30 steps in tests/checkpoint_worker.py. Killing it with
SIGKILL at random steps (repeatedly) or SIGTERM, then rerunning the same
command, must end with exactly the weights, RNG key, metric totals and input
position of an uninterrupted run (same program on the same 2 CPU devices, so
equality is exact).
"""
from __future__ import annotations

import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jdist
from jdist.checkpoint import CheckpointManager
from jdist.checkpoint.handlers import IteratorPositionError

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("checkpoint_worker.py")
sys.path.insert(0, str(WORKER.parent))
from checkpoint_worker import mp_expected, mp_reference  # noqa: E402

# Worker processes that must meet in time (gloo collectives, signals, bounded waits): the README's command runs
# these in a second, serial pass, alone on the machine (pyproject.toml, marker `multiprocess`).
pytestmark = pytest.mark.multiprocess

TIMEOUT = 120  # seconds any one subprocess may take


def _env(devices: int, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(extra or {})
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


class Worker:
    """A worker process whose stdout lines arrive on a queue."""

    def __init__(self, args: list[str], log: Path, devices: int = 2, env: dict | None = None):
        self.log = log
        self._err = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=self._err,
            text=True, env=_env(devices, env), cwd=str(ROOT),
        )
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.strip())
        self._queue.put(None)

    def wait_for_step(self, step: int, timeout: float = TIMEOUT) -> int:
        """Blocks until the worker reports a finished step >= `step`; returns it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"worker exited before step {step}: {self.lines[-3:]}\n{self._stderr()}")
            self.lines.append(line)
            if line.startswith("step ") and int(line.split()[1]) >= step:
                return int(line.split()[1])
        self.kill()
        raise AssertionError(f"worker did not reach step {step} in {timeout}s\n{self._stderr()}")

    def finish(self, timeout: float = TIMEOUT) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"worker did not finish in {timeout}s\n{self._stderr()}") from None
        while True:
            try:
                line = self._queue.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        self._err.close()
        return rc

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def resumed_at(self) -> int:
        return next(int(line.split()[1]) for line in self.lines if line.startswith("resumed "))

    def last_step(self) -> int:
        return max((int(line.split()[1]) for line in self.lines if line.startswith("step ")), default=0)

    def _stderr(self) -> str:
        self._err.flush()
        return self.log.read_text()[-3000:]


def _train_args(mode: str, directory: Path, out: Path, **extra) -> list[str]:
    args = ["train", "--mode", mode, "--dir", str(directory), "--out", str(out)]
    for key, value in extra.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def _assert_same_result(out: Path, reference: dict) -> None:
    got = dict(np.load(out))
    assert set(got) == set(reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(got[name], value, err_msg=f"{name} differs from the uninterrupted run")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """Final arrays of an uninterrupted run."""
    tmp = tmp_path_factory.mktemp("reference")
    worker = Worker(_train_args("backup", tmp / "backup", tmp / "final.npz"), tmp / "stderr.log")
    assert worker.finish() == 0, worker._stderr()
    assert worker.resumed_at() == 0 and worker.last_step() == 30
    assert not (tmp / "backup").exists(), "backups must be deleted after training completes"
    return dict(np.load(tmp / "final.npz"))


def test_kill9_at_random_steps_then_rerun_matches_uninterrupted_run(tmp_path, reference):
    rng = random.Random(20261121)
    kill_points = [rng.randint(2, 8), rng.randint(12, 17), rng.randint(21, 27)]
    backup_dir, out = tmp_path / "backup", tmp_path / "final.npz"
    args = _train_args("backup", backup_dir, out, save_freq=3)
    resumed = []
    for i, point in enumerate(kill_points):
        worker = Worker(args, tmp_path / f"run{i}.log")
        killed_after = worker.wait_for_step(point)
        worker.kill(signal.SIGKILL)
        assert worker.finish() == -signal.SIGKILL
        resumed.append(worker.resumed_at())
        if i:
            assert resumed[-1] <= kill_points[i - 1] + 3, (resumed, kill_points)
        assert killed_after >= point
    final = Worker(args, tmp_path / "final.log")
    assert final.finish() == 0, final._stderr()
    resumed.append(final.resumed_at())
    # Backups happen every 3 steps; each rerun resumes from the newest complete one.
    assert resumed[0] == 0
    assert all(r % 3 == 0 for r in resumed), resumed
    assert all(0 < r <= k + 3 for r, k in zip(resumed[1:], kill_points)), (resumed, kill_points)
    assert final.last_step() == 30
    _assert_same_result(out, reference)
    assert not backup_dir.exists()


def test_sigterm_saves_at_next_step_and_rerun_resumes(tmp_path, reference):
    ckpt_dir, out = tmp_path / "ckpt", tmp_path / "final.npz"
    args = _train_args("preempt", ckpt_dir, out, delay=0.05)
    worker = Worker(args, tmp_path / "run0.log")
    worker.wait_for_step(random.Random(7).randint(5, 20))
    worker.kill(signal.SIGTERM)
    assert worker.finish() == 42, worker._stderr()  # TF's restartable exit code
    saved = sorted(int(p.name) for p in ckpt_dir.iterdir() if p.name.isdigit())
    # The step in flight finishes, is saved, and the process exits before reporting it.
    assert saved == [worker.last_step() + 1], (saved, worker.lines[-3:])
    rerun = Worker(args, tmp_path / "run1.log")
    assert rerun.finish() == 0, rerun._stderr()
    assert rerun.resumed_at() == saved[-1]
    _assert_same_result(out, reference)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_workers(args: list[str], logs: Path, name: str) -> list[Worker]:
    """Two MultiWorkerMirroredStrategy workers on localhost, configured by TF_CONFIG."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    return [Worker(args, logs / f"{name}_worker{i}.log",
                   env={"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
            for i in range(2)]


def test_two_process_save_restores_in_one_process(tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    workers = _two_workers(["mp_save", "--dir", str(ckpt_dir)], tmp_path, "save")
    codes = [w.finish() for w in workers]
    assert codes == [0, 0], "\n".join(w._stderr() for w in workers)
    assert [w.lines[-1] for w in workers] == ["saved process 0", "saved process 1"]

    expected = mp_expected()
    target = {
        "params": {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in expected["params"].items()},
        "fsdp_w": jax.ShapeDtypeStruct(expected["fsdp_w"].shape, expected["fsdp_w"].dtype),
        "step": jax.ShapeDtypeStruct((), jnp.int32),
        "rng": jax.random.key(0),
    }
    manager = CheckpointManager(ckpt_dir)
    assert manager.all_steps() == [5]
    for strategy in (jdist.MirroredStrategy(), jdist.OneDeviceStrategy("cpu:3")):
        with strategy.scope():
            restored = manager.restore(target=target)
        for got, want in ((restored["params"]["w"], expected["params"]["w"]),
                          (restored["params"]["b"], expected["params"]["b"]),
                          (restored["fsdp_w"], expected["fsdp_w"]), (restored["step"], expected["step"])):
            np.testing.assert_array_equal(np.asarray(got), want)
            assert got.sharding.device_set == set(strategy.worker_devices)
        np.testing.assert_array_equal(jax.random.key_data(restored["rng"]), [0, 42])

    # The two processes were at different input positions: one process cannot take both.
    class Iterator:
        def get_state(self):
            return {"position": 0}

        def set_state(self, state):
            raise AssertionError("must not be called")

    with pytest.raises(IteratorPositionError, match="saved by 2 processes"):
        manager.restore(target=target, iterator=Iterator())
    manager.close()


def test_sigterm_to_one_of_two_processes_saves_on_both_at_one_step(tmp_path):
    ckpt_dir, out = tmp_path / "ckpt", tmp_path / "final.npy"

    def start(run: int) -> list[Worker]:
        return _two_workers(["mp_preempt", "--dir", str(ckpt_dir), "--out", str(out)], tmp_path, f"run{run}")

    workers = start(0)
    signalled_at = workers[1].wait_for_step(random.Random(3).randint(4, 15))
    workers[1].kill(signal.SIGTERM)  # only one worker is told; JAX's preemption service tells the other
    codes = [w.finish() for w in workers]
    assert codes == [42, 42], "\n".join(w._stderr() for w in workers)
    saved = sorted(int(p.name) for p in ckpt_dir.iterdir() if p.name.isdigit())
    assert len(saved) == 1 and saved[0] > signalled_at, (saved, signalled_at)
    # Both processes stopped after the same step and saved it together.
    assert [w.last_step() for w in workers] == [saved[0] - 1] * 2

    workers = start(1)
    codes = [w.finish() for w in workers]
    assert codes == [0, 0], "\n".join(w._stderr() for w in workers)
    assert [w.resumed_at() for w in workers] == [saved[0]] * 2
    np.testing.assert_allclose(np.load(out), mp_reference(), rtol=1e-6)
