"""MultiWorkerMirroredStrategy and the local launcher, with real worker processes on localhost.

Every wait on a subprocess is bounded. Worker processes come from
`python -m jdist.launch`, so the launcher is tested by the same runs.
"""
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import jdist
from jdist import launch

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "multiworker_scripts"
sys.path.insert(0, str(SCRIPTS))
import mlp_job  # noqa: E402

# Worker processes that must meet in time (gloo collectives, signals, bounded waits): the README's command runs
# these in a second, serial pass, alone on the machine (pyproject.toml, marker `multiprocess`).
pytestmark = pytest.mark.multiprocess

TOLERANCE = dict(rtol=1e-5, atol=1e-6)  # float32: the reduction order differs between meshes


def launcher_cmd(*args, script_args=(), script=SCRIPTS / "worker.py"):
    return [sys.executable, "-m", "jdist.launch", *args, "--", sys.executable, str(script), *script_args]


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


class Running:
    """A launcher run whose merged output is read line by line without blocking the test."""

    def __init__(self, cmd):
        self.started = time.monotonic()
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        self.kill()
        raise AssertionError(f"no line matching {pattern!r} within {seconds} s:\n" + self.output())

    def finish(self, seconds):
        try:
            code = self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"launcher still running after {seconds} s:\n" + self.output())
        while True:
            try:
                line = self._queue.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        return code

    def kill(self):
        """Stops the launcher and the workers it reported (each leads its own process group)."""
        for line in self.lines:
            if line.startswith("[launch] started"):
                for pid in re.findall(r"\(pid (\d+)\)", line):
                    try:
                        os.killpg(int(pid), 9)
                    except (ProcessLookupError, PermissionError):
                        pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def output(self):
        return "\n".join(self.lines)


# ------------------------------------------------------------ single worker, in process
def test_without_cluster_it_is_a_single_worker_over_local_devices(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy = jdist.MultiWorkerMirroredStrategy()
    assert strategy.num_replicas_in_sync == len(jax.local_devices()) == 8
    assert (strategy.num_workers, strategy.worker_index) == (1, 0)
    assert strategy.is_chief and strategy.should_checkpoint and strategy.should_save_summary
    assert strategy.cluster_resolver is not None and strategy.cluster_resolver.num_workers == 1
    assert strategy.local_batch_slice(32) == slice(0, 32)
    batch = strategy.distribute_batch(np.arange(32.0).reshape(16, 2))
    assert batch.sharding == strategy.data_sharding()
    np.testing.assert_array_equal(np.asarray(batch), np.arange(32.0).reshape(16, 2))
    with pytest.raises(ValueError, match="does not divide among 8 replicas"):
        strategy.local_batch_slice(12)


def test_one_worker_and_evaluator_configs_stay_local(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:1"]},
                                                "task": {"type": "worker", "index": 0}}))
    assert jdist.MultiWorkerMirroredStrategy().num_replicas_in_sync == 8
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                                                "task": {"type": "evaluator", "index": 0}}))
    evaluator = jdist.MultiWorkerMirroredStrategy()
    assert evaluator.num_workers == 1 and evaluator.is_chief
    assert not jax.distributed.is_initialized()


def test_bad_arguments(monkeypatch):
    with pytest.raises(ValueError, match="communication_options must be an instance of jdist.CommunicationOptions"):
        jdist.MultiWorkerMirroredStrategy(communication_options={"timeout_seconds": 3})
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"], "ps": ["p:1"]},
                                                "task": {"type": "ps", "index": 0}}))
    with pytest.raises(ValueError, match="task ps:0; MultiWorkerMirroredStrategy runs on chief and worker tasks"):
        jdist.MultiWorkerMirroredStrategy()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["a:1", "b:1"]},
                                                "task": {"type": "chief", "index": 0}}))
    with pytest.raises(ValueError, match="There must be at most one 'chief' job"):
        jdist.MultiWorkerMirroredStrategy()


# ------------------------------------------------------------ real processes
def test_two_workers_match_one_process_and_one_device(tmp_path):
    """2 processes x 4 devices = 1 process x 8 devices = 1 device, each worker reading only its share.

    The workers also start JAX before the strategy (late construction) and
    initialise with different seeds: the chief's parameters are broadcast, as in TF.
    """
    steps = 5
    run = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "4", "--timeout", "30",
                               script_args=["--steps", str(steps), "--out", str(tmp_path),
                                            "--init-before-strategy", "--seed-by-worker"]))
    code = run.finish(120)
    assert code == 0, run.output()
    out = run.output()
    assert "[worker 1] joined as worker:1: worker 1 of 2, 8 replicas, chief=False" in out
    # strategy.run / reduce across processes: TF's global replica numbering (worker * 4 + local).
    assert "[worker 0] replica ids [0, 1, 2, 3] sum of doubled ids 56" in out
    assert "[worker 1] replica ids [4, 5, 6, 7] sum of doubled ids 56" in out
    # strategy.extended: this worker's devices by TF's names, in a multi-worker job. TF 2.21 (observed, two
    # processes with TF_CONFIG, one CPU each): worker 1's worker_devices and parameter_devices are
    # ('/job:worker/replica:0/task:1/device:CPU:0',), _in_multi_worker_mode() True, should_checkpoint False.
    for i in range(2):
        assert f"[worker {i}] extended /job:worker/replica:0/task:{i}/device:CPU:0 x4 multi-worker True" in out
    assert (tmp_path / "chief.txt").read_text() == "0"  # only the chief writes

    rows = [json.loads((tmp_path / f"rows_{i}.json").read_text()) for i in range(2)]
    batch = mlp_job.GLOBAL_BATCH
    for step in range(steps):  # each worker read one half of every global batch, no overlap
        assert rows[0][step] == [step * batch, step * batch + batch // 2]
        assert rows[1][step] == [step * batch + batch // 2, (step + 1) * batch]

    workers = [dict(np.load(tmp_path / f"params_{i}.npz")) for i in range(2)]
    references = {
        "1 process x 8 devices": jdist.MirroredStrategy(),
        "1 device": jdist.OneDeviceStrategy("cpu:0"),
    }
    for name, strategy in references.items():
        state, _ = mlp_job.train(strategy, mlp_job.init_params(0), steps)
        expected = mlp_job.flat_params(state.params)
        initial = mlp_job.flat_params(mlp_job.init_params(0))
        for key, value in expected.items():
            assert not np.allclose(value, initial[key]), f"{key} did not train"
            for i, got in enumerate(workers):
                np.testing.assert_allclose(got[key], value, **TOLERANCE, err_msg=f"worker {i} vs {name}: {key}")


def test_trainer_fit_on_two_workers_matches_one_process(tmp_path, monkeypatch):
    """Trainer.fit / evaluate / predict on 2 processes x 4 devices (each placing its own shards of every
    padded global batch, 2 steps per execution, optimizer state sharded over all 8 replicas) equal one
    process with 8 devices and plain Mirrored. Worker 1 seeds its parameters and its Trainer (shuffle
    order, dropout key) differently: the chief's seed and values are used on both."""
    import trainer_job

    run = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "4", "--timeout", "30",
                               script=SCRIPTS / "trainer_job.py",
                               script_args=["--out", str(tmp_path), "--shard-optimizer-state", "--seed-by-worker"]))
    code = run.finish(180)
    assert code == 0, run.output()
    monkeypatch.setattr(jdist.layout, "WEIGHT_UPDATE_MIN_BYTES", 0)
    trainer, history, evaluation, predictions = trainer_job.fit(jdist.MirroredStrategy())
    logs = json.loads((tmp_path / "logs.json").read_text())
    np.testing.assert_allclose(logs["history"]["loss"], history["loss"], rtol=1e-5)
    np.testing.assert_allclose(logs["history"]["accuracy"], history["accuracy"], rtol=1e-6)
    np.testing.assert_allclose([logs["evaluation"][k] for k in ("loss", "accuracy")],
                               [evaluation[k] for k in ("loss", "accuracy")], rtol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "predictions.npy"), predictions, rtol=1e-5, atol=1e-5)
    got = dict(np.load(tmp_path / "params.npz"))
    for key, value in mlp_job.flat_params(trainer.params).items():
        np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=key)


def test_killed_worker_stops_launcher_and_survivor_with_its_name():
    """Also: the workers start JAX's runtime themselves (as on a TPU pod) and jdist still guards them."""
    # --timeout 12: the survivor's watchdog gives a silent peer 6 s.
    run = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "1", "--timeout", "12",
                               script_args=["--steps", "0", "--step-sleep", "0.05", "--self-initialize"]))
    pid = int(run.wait_for(r"\[launch\] started 2 worker\(s\): .*worker 1 \(pid (\d+)\)", 30).group(1))
    run.wait_for(r"^\[worker 1\] joined as worker:1: worker 1 of 2, 2 replicas", 90)
    run.wait_for(r"^\[worker 1\] step 3 ", 60)
    killed_at = time.monotonic()
    os.kill(pid, 9)
    code = run.finish(60)
    elapsed = time.monotonic() - killed_at
    out = run.output()
    assert code == 128 + 9, out
    assert elapsed < 60, out
    assert "[launch] FAILED: worker 1 was killed by SIGKILL; exit code 137." in out
    # The survivor stops by itself (exit code 3) and says which worker died.
    assert re.search(r"\[worker 0\] \[jdist\] worker:1 \(process 1\) stopped responding", out), out
    assert "Stopping worker:0 (process 0)" in out
    assert "[launch] worker 0 exited with code 3 (stopped by itself)." in out


def test_failing_chief_stops_its_peers_promptly():
    run = Running(launcher_cmd("--num-workers", "2", "--chief", "--devices-per-worker", "1", "--timeout", "30",
                               script_args=["--steps", "0", "--crash-process", "0", "--crash-at", "2"]))
    run.wait_for(r"^\[chief 0\] RuntimeError: deliberate failure at step 2", 120)
    failed_at = time.monotonic()
    code = run.finish(60)
    out = run.output()
    assert code == 1, out
    assert time.monotonic() - failed_at < 15, out  # told through the coordination service, not a timeout
    assert ("[worker 0] [jdist] chief:0 (process 0) failed: RuntimeError: deliberate failure at step 2. "
            "Stopping worker:0 (process 1)") in out
    assert "[launch] FAILED: chief 0 exited with code 1; exit code 1." in out


FAILURE_TIMEOUT = 10  # the launcher's --timeout in the failure tests: workers' watchdogs use 5 s


def group_alive(pid):
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _inject_failure(case, run, results):
    """Waits for step 3 of the case's worker, then kills / stops it (or it exits by itself), and times the end."""
    action, index = case
    try:
        # Generous bounds for start-up: twelve processes import JAX at once on a shared machine.
        started = run.wait_for(r"^\[launch\] started 2 worker\(s\): (.*)$", 240).group(1)
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", started)]
        run.wait_for(rf"^\[worker {index}\] step 3 ", 300)
        happened = time.monotonic()
        if action in ("SIGKILL", "SIGSTOP"):
            os.kill(pids[index], {"SIGKILL": 9, "SIGSTOP": 19}[action])
        code = run.finish(launch.MIN_COLLECTIVE_TIMEOUT + FAILURE_TIMEOUT + 40)
        results[case] = (code, time.monotonic() - happened, [pid for pid in pids if group_alive(pid)])
    except BaseException as err:  # reported by the test thread
        results[case] = err


def test_the_launcher_names_the_worker_that_stopped_first():
    """SIGKILL, SIGSTOP (alive but silent) and an early sys.exit(0) of each worker in turn, six jobs at once:
    the FAILED line names that worker (not the peer that noticed it first and exited with code 3 or was
    aborted by JAX), with its last output line, and every process is gone within --timeout + 15 s.
    A seventh job: worker 1 alive but never joining the next collective (it sleeps). The collective times out
    on worker 0 (the launcher bounds it for CPU workers) and the job ends; it is worker 0 that is named."""
    cases = [(action, index) for action in ("SIGKILL", "SIGSTOP", "exit0") for index in (0, 1)] + [("sleep", 1)]
    runs = {}
    for action, index in cases:
        script_args = ["--steps", "0", "--step-sleep", "0.05"]
        if action == "exit0":
            script_args += ["--exit-process", str(index), "--exit-at", "3", "--exit-code", "0"]
        if action == "sleep":
            script_args += ["--sleep-process", str(index), "--sleep-at", "3"]
        runs[action, index] = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "1",
                                                   "--timeout", str(FAILURE_TIMEOUT), script_args=script_args))
    results = {}
    threads = [threading.Thread(target=_inject_failure, args=(case, runs[case], results)) for case in cases]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=700)
    finally:
        for run in runs.values():
            run.kill()
    expected = {"SIGKILL": ("was killed by SIGKILL", 137),
                "SIGSTOP": ("stopped responding: no heartbeat for", 124),
                "exit0": ("ended its program while the other workers were still running", 125)}
    for case in cases:
        result = results.get(case, "no result (the test thread is still waiting)")
        out = runs[case].output()
        assert isinstance(result, tuple), f"{case}: {result!r}\n{out}"
        code, elapsed, left = result
        assert not left, f"{case}: processes of groups {left} still running\n{out}"
        if case == ("sleep", 1):
            assert "[worker 1] sleeping for good" in out and "Timed out waiting" in out, out
            assert "[launch] FAILED: worker 0 exited with code 1; exit code 1." in out, out
            assert elapsed < launch.MIN_COLLECTIVE_TIMEOUT + FAILURE_TIMEOUT + 15, f"ended after {elapsed:.0f} s\n{out}"
            continue
        action, index = case
        text, exit_code = expected[action]
        assert f"[launch] FAILED: worker {index} {text}" in out, f"{case}\n{out}"
        assert re.search(rf"\[launch\] FAILED: worker {index} .*exit code {exit_code}\. "
                         r"Its last line: '(step \d+ loss|\[jdist\])", out), f"{case}\n{out}"
        assert code == exit_code, f"{case}: exit code {code}\n{out}"
        assert elapsed < FAILURE_TIMEOUT + 15, f"{case}: the job ended {elapsed:.0f} s after the failure\n{out}"


ELASTIC_STEPS = 12


def _kill_at_random_steps(run, victims, rng, log):
    """For each victim: waits for the next attempt to resume, kills that worker a few saved steps later."""
    for victim in victims:
        started = run.wait_for(r"^\[launch\] started \d worker\(s\): (.*)$", 240).group(1)
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", started)]
        resumed = int(run.wait_for(r"^\[worker 0\] attempt \d+ resumed at step (\d+)", 240).group(1))
        target = resumed + rng.randint(1, 3)
        run.wait_for(rf"^\[worker \d\] step {target} saved", 240)
        index = rng.randrange(len(pids)) if victim is None else victim
        log.append((target, index))
        os.kill(pids[index], 9)


def _drive(run, victims, rng, log, results, name):
    try:
        _kill_at_random_steps(run, victims, rng, log)
        results[name] = run.finish(240)
    except BaseException as err:
        results[name] = err


def test_elastic_restarts_resume_exactly(tmp_path):
    """--max-restarts 3: a 2-worker job killed 3 times at random steps (a random worker each time) ends
    bit-identical to an uninterrupted run of the same job. --min-workers 1: worker 1 killed twice is left out, and the job
    finishes on one worker, equal to one device continuing from the checkpoint it resumed from."""
    import elastic_job

    seed = int(time.time())
    rng = random.Random(seed)
    common = ["--num-workers", "2", "--devices-per-worker", "1", "--timeout", "8"]

    def job(name, *extra):
        (tmp_path / name).mkdir()
        return Running(launcher_cmd(*common, *extra, script=SCRIPTS / "elastic_job.py",
                                    script_args=["--dir", str(tmp_path / name / "ckpt"), "--steps",
                                                 str(ELASTIC_STEPS), "--out", str(tmp_path / name / "params.npz"),
                                                 "--step-sleep", "0.1"]))

    runs = {"restarts": job("restarts", "--max-restarts", "3"),
            "shrink": job("shrink", "--max-restarts", "2", "--min-workers", "1"),
            "uninterrupted": job("uninterrupted")}
    logs = {"restarts": [], "shrink": [], "uninterrupted": []}
    results = {}
    threads = [threading.Thread(target=_drive, args=(runs["restarts"], [None] * 3, rng, logs["restarts"], results,
                                                     "restarts")),
               threading.Thread(target=_drive, args=(runs["shrink"], [1, 1], random.Random(seed + 1),
                                                     logs["shrink"], results, "shrink")),
               threading.Thread(target=_drive, args=(runs["uninterrupted"], [], rng, logs["uninterrupted"], results,
                                                     "uninterrupted"))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=900)
    finally:
        for run in runs.values():
            run.kill()
    for name, run in runs.items():
        assert results.get(name) == 0, f"{name} (seed {seed}, kills {logs[name]}): {results.get(name)!r}\n" + run.output()

    # Every restart is logged with its cause; the program sees the attempt number.
    out = runs["restarts"].output()
    for attempt, (_, index) in enumerate(logs["restarts"], start=1):
        assert f"[launch] restart {attempt} of 3 on 2 worker(s), after: worker {index} was killed by SIGKILL" in out, out
    assert "[worker 1] attempt 3 resumed at step" in out and "[launch] all 2 worker(s) finished after 3 restart(s)." in out
    # The reference is the same job on 2 workers x 1 device, uninterrupted: bit-identical. Against 2 devices in
    # one process (another compiled program) it agrees to float32 rounding: XLA:CPU may round that program's
    # fused update differently (bit-identical on some CPUs, one unit in the last place apart on an AMD EPYC
    # without AVX-512).
    uninterrupted = dict(np.load(tmp_path / "uninterrupted" / "params.npz"))
    got = dict(np.load(tmp_path / "restarts" / "params.npz"))
    for key, value in uninterrupted.items():
        np.testing.assert_array_equal(got[key], value, err_msg=f"{key} (seed {seed}, kills {logs['restarts']})")
    reference = jdist.MirroredStrategy(["cpu:0", "cpu:1"])
    in_process = mlp_job.flat_params(
        elastic_job.train_from(reference, elastic_job.initial_state(reference), 0, ELASTIC_STEPS).params)
    assert sorted(in_process) == sorted(uninterrupted)
    for key, value in in_process.items():
        np.testing.assert_allclose(uninterrupted[key], value, rtol=1e-6, atol=1e-7, err_msg=key)

    out = runs["shrink"].output()
    assert ("[launch] restart 2 of 2 on 1 worker(s), after: worker 1 was killed by SIGKILL (exit code 137); it "
            "failed 2 times, so the job continues without it (--min-workers 1).") in out, out
    resumed = int(re.search(r"\[worker 0\] attempt 2 resumed at step (\d+) on 1 worker\(s\), 1 replica",
                            out).group(1))
    one = jdist.OneDeviceStrategy("cpu:0")
    with jdist.checkpoint.CheckpointManager(tmp_path / "shrink" / "ckpt") as manager:
        start = manager.restore(resumed, elastic_job.initial_state(one), strategy=one)
    expected = mlp_job.flat_params(elastic_job.train_from(one, start, resumed, ELASTIC_STEPS).params)
    got = dict(np.load(tmp_path / "shrink" / "params.npz"))
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=f"{key} (resumed at step {resumed})")


# ------------------------------------------------------------ the launcher on its own
def test_launcher_sets_tf_config_and_prefixes_output(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import json, os\nc = json.loads(os.environ['TF_CONFIG'])\n"
                      "print(c['task']['type'], c['task']['index'], len(c['cluster']['worker']), "
                      "os.environ['JAX_NUM_CPU_DEVICES'], os.environ['XLA_FLAGS'].count('device_count'))\n")
    result = subprocess.run(launcher_cmd("--num-workers", "3", "--devices-per-worker", "2", script=script),
                            cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["[worker 0] worker 0 3 2 1", "[worker 1] worker 1 3 2 1",
                                                  "[worker 2] worker 2 3 2 1"]


def test_launcher_kills_a_worker_that_will_not_stop(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text("import json, os, signal, sys, time\n"
                      "index = json.loads(os.environ['TF_CONFIG'])['task']['index']\n"
                      "if index == 1:\n    sys.exit(7)\n"
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('waiting', flush=True)\n"
                      "time.sleep(600)\n")
    started = time.monotonic()
    result = subprocess.run(launcher_cmd("--num-workers", "2", "--timeout", "3", script=script),
                            cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 7, result.stderr
    assert time.monotonic() - started < 20
    assert "[launch] worker 0 was killed by SIGKILL (stopped by the launcher)." in result.stderr
    assert "[launch] FAILED: worker 1 exited with code 7; exit code 7." in result.stderr


def test_launcher_helpers():
    env = launch.worker_env({"XLA_FLAGS": "--foo --xla_force_host_platform_device_count=8"},
                            launch.cluster_config(2, True, [1, 2]), ("worker", 0), 4, 10.0)
    assert env["XLA_FLAGS"] == "--foo --xla_force_host_platform_device_count=4"
    assert json.loads(env["TF_CONFIG"]) == {"cluster": {"chief": ["localhost:1"], "worker": ["localhost:2"]},
                                            "task": {"type": "worker", "index": 0}}
    assert env["JDIST_FAILURE_TIMEOUT"] == "10"
    assert launch.describe_exit(-9) == "was killed by SIGKILL" and launch.shell_code(-9) == 137
    with pytest.raises(SystemExit):
        launch.parse_args(["--num-workers", "2"])  # no command


def test_root_cause_is_the_first_worker_that_stopped_on_its_own():
    """The naming rule on its own: consequences (exit 3, SIGABRT, stopped by the launcher) never win over a
    worker that failed, hung or ended early, even when they were seen first."""
    def worker(label, code=None, ended_at=None, **extra):
        w = launch.Worker(label, 0, None, "")
        w.code, w.ended_at = code, ended_at
        for key, value in extra.items():
            setattr(w, key, value)
        return w

    launcher = launch.Launcher(["true"], 3, None, 10.0, False)
    launcher.workers = [worker("worker 0", 3, 5.0), worker("worker 1", hung_at=2.0, hang_seconds=3.0),
                        worker("worker 2", -9, 6.0, stopped_by_launcher=True)]
    assert launcher.root_cause().label == "worker 1"
    assert launcher.root_cause().failure()[1] == launch.EXIT_HUNG
    launcher.workers = [worker("worker 0", -9, 1.0), worker("worker 1", -6, 1.0)]  # chief killed, JAX aborts
    assert launcher.root_cause().label == "worker 0"
    launcher.workers = [worker("worker 0", 1, 9.0), worker("worker 1", program_ended_at=3.0, ended_early=True)]
    assert launcher.root_cause().failure() == ("worker 1 ended its program while the other workers were still "
                                               "running (an early return or sys.exit)", launch.EXIT_ENDED_EARLY)
    launcher.workers = [worker("worker 0", 3, 4.0), worker("worker 1", 3, 5.0)]  # only consequences: the first
    assert launcher.root_cause().label == "worker 0"
    with pytest.raises(ValueError, match="--min-workers must be between 1 and --num-workers \\(2\\), got 3"):
        launch.Launcher(["true"], 2, None, 10.0, False, min_workers=3)
    with pytest.raises(ValueError, match="--max-restarts must be 0 or more, got -1"):
        launch.Launcher(["true"], 2, None, 10.0, False, max_restarts=-1)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_stops_every_worker(tmp_path, inherited):
    """SIGINT stops the job with 130, also when the launcher was started with SIGINT ignored (what a
    non-interactive shell does to a command run with `&`, e.g. `nohup ... &`); the workers then get
    SIGINT's default action back and stop at once, not at the SIGKILL 5 s later."""
    script = tmp_path / "sleepy.py"
    script.write_text("import time\nprint('waiting', flush=True)\ntime.sleep(600)\n")
    cmd = launcher_cmd("--num-workers", "2", script=script)
    if inherited == "ignored":  # SIG_IGN survives exec: start the launcher through a shim that ignores SIGINT
        shim = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "os.execv(sys.argv[1], sys.argv[1:])")
        cmd = [sys.executable, "-c", shim, *cmd]
    run = Running(cmd)
    for _ in range(2):  # both workers are past Python's start-up, which swallows a KeyboardInterrupt it catches
        assert run.wait_for(r"^\[worker \d\] waiting", 30), run.output()
    run.process.send_signal(signal.SIGINT)  # as Ctrl-C in a terminal
    assert run.finish(30) == 130, run.output()
    assert "[launch] interrupted: stopping every worker." in run.output()
    assert "killed by SIGKILL" not in run.output(), run.output()


def test_workers_seeded_differently_hold_the_chiefs_values(tmp_path):
    """Flax parameters, Adam state, PRNG keys and a Keras model (weights, optimizer, metrics) made in the
    scope of 2 workers seeded differently are bit-identical after creation and after every step, and are
    the chief's (TF broadcasts initial values from the chief). Without the broadcast the two workers'
    Keras weights, flax parameters and keys all differed."""
    # --timeout also bounds each cross-process collective: at 30 s one worker compiling Keras's steps that much
    # later than the other on a loaded machine failed the job once ("Gloo ... Application timeout").
    run = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "2", "--timeout", "120",
                               script=SCRIPTS / "initial_values_job.py", script_args=["--out", str(tmp_path)]))
    code = run.finish(180)
    assert code == 0, run.output()
    chief, other = (json.loads((tmp_path / f"digests_{i}.json").read_text()) for i in range(2))
    assert chief["flax/own"] != other["flax/own"]  # the seeds did differ
    assert chief["flax/params"] == chief["flax/own"]  # every worker holds the chief's initial values
    own = {"flax/own"}
    assert set(chief) == set(other) and len(chief) == 15
    assert {k: chief[k] for k in chief if k not in own} == {k: other[k] for k in other if k not in own}


@pytest.mark.parametrize("loss,zero1", [("plain", False), ("centered", False), ("plain", True)],
                         ids=["row-local", "rows-mixed", "zero1"])
def test_cpu_workers_update_whole_leaves_after_one_all_reduce(tmp_path, monkeypatch, loss, zero1):
    """Across CPU processes every replica applies the whole Adam update to the all-reduced gradients, as TF's
    MultiWorkerMirroredStrategy does: no all-gather of new parameters or Adam slots through gloo. When the
    forward is provably row-local each replica differentiates its own rows and the gradient is summed as one
    buffer (one all-reduced array holding every parameter); when rows mix (a batch mean), the global view
    stays (one all-reduced array per parameter). ZeRO-1 keeps its split optimizer state and all-gathers the
    new parameters. Each way, 2 workers x 2 devices train as one device."""
    import adam_job

    run = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "2", "--timeout", "30",
                               script=SCRIPTS / "adam_job.py",
                               script_args=["--out", str(tmp_path), "--loss", loss]
                               + (["--shard-optimizer-state"] if zero1 else [])))
    code = run.finish(120)
    out = run.output()
    assert code == 0, out
    reports = [json.loads(m) for m in re.findall(r"\[worker \d\] worker \d collectives (.*)", out)]
    assert len(reports) == 2, out
    monkeypatch.setattr(jdist.layout, "WEIGHT_UPDATE_MIN_BYTES", 0)
    state, _ = adam_job.train(jdist.OneDeviceStrategy("cpu:0"), loss)
    expected = mlp_job.flat_params(state.params)
    sizes = sorted(v.size for v in expected.values())
    for found in reports:
        kinds = {kind for kind, _ in found}
        all_reduces = [[n for n in arrays if n > 1] for kind, arrays in found if kind == "all-reduce"]
        if zero1:
            assert kinds == {"all-gather", "all-reduce"}, found
        else:
            assert kinds == {"all-reduce"}, found
            packed, per_leaf = [sum(sizes)] in all_reduces, sizes in all_reduces
            assert (packed, per_leaf) == ((True, False) if loss == "plain" else (False, True)), found
    for i in range(2):
        got = dict(np.load(tmp_path / f"params_{i}.npz"))
        for key, value in expected.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=f"worker {i}: {key}")
