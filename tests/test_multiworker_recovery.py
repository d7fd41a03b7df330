"""Multi-worker recovery with real worker processes on localhost: Keras's BackupAndRestore across a
killed worker, and how fast a survivor of a dead peer stops. Every wait is bounded."""
import os
import re
import time

import pytest

from test_multiworker import SCRIPTS, Running, launcher_cmd

# Worker processes that must meet in time (gloo collectives, signals, bounded waits): the README's command runs
# these in a second, serial pass, alone on the machine (pyproject.toml, marker `multiprocess`).
pytestmark = pytest.mark.multiprocess


def tutorial_cmd(tmp_path, *launcher_args, script_args=()):
    return launcher_cmd("--num-workers", "2", "--devices-per-worker", "2", *launcher_args,
                        script=SCRIPTS / "keras_tutorial_job.py",
                        script_args=["--backup-dir", str(tmp_path / "backup"), "--out", str(tmp_path),
                                     *script_args])


def test_keras_tutorial_killed_and_restarted_with_backup_and_restore_finishes(tmp_path):
    """TF's multi-worker Keras tutorial (CNN built in scope, fit outside it, Keras's BackupAndRestore):
    worker 1 is killed as epoch 1 begins, the launcher restarts the job, which resumes at epoch 1 from the
    chief's backup and ends with rc 0 on both workers holding the same weights; the chief alone removes
    the backup. Before only the chief wrote, two workers writing latest.weights.h5 at once failed with
    'BlockingIOError: unable to lock file', or with FileNotFoundError once the other had removed it."""
    run = Running(tutorial_cmd(tmp_path, "--timeout", "30", "--max-restarts", "1",
                               script_args=["--kill-process", "1", "--kill-at-epoch", "1"]))
    code = run.finish(240)
    out = run.output()
    assert code == 0, out
    assert "killing myself at epoch 1" in out and "all 2 worker(s) finished after 1 restart(s)" in out
    logs = [(tmp_path / f"epochs_{i}.txt").read_text().splitlines() for i in range(2)]
    assert logs[0][:2] == ["run 0 epoch 0", "run 0 epoch 1"] and logs[1][:1] == ["run 0 epoch 0"]
    for log in logs:  # the restarted job resumed where the backup (end of epoch 0) left off
        assert log[-3:-1] == ["run 1 epoch 1", "run 1 epoch 2"], log
    assert logs[0][-1] == logs[1][-1] and logs[0][-1].startswith("weights ")
    assert not (tmp_path / "backup").exists()


@pytest.mark.parametrize("victim", [1, 0])
def test_survivor_of_a_killed_worker_exits_within_seconds_naming_it(victim):
    """With the default failure timeout (60 s) a survivor whose collective broke because its peer was
    killed names that peer and exits within 15 s; it used to wait the whole 60 s. When the chief dies,
    the coordination service it hosts goes with it, and that is what the survivor reports."""
    survivor = 1 - victim
    run = Running(launcher_cmd("--num-workers", "2", "--devices-per-worker", "1", "--timeout", "120",
                               script_args=["--steps", "0", "--step-sleep", "0.05"]))
    started = run.wait_for(r"^\[launch\] started 2 worker\(s\): (.*)$", 60).group(1)
    pid = [int(p) for p in re.findall(r"\(pid (\d+)\)", started)][victim]
    run.wait_for(rf"^\[worker {victim}\] step 3 ", 120)
    killed_at = time.monotonic()
    os.kill(pid, 9)
    run.wait_for(rf"^\[launch\] worker {survivor} exited with code 3 \(stopped by itself\)", 40)
    elapsed = time.monotonic() - killed_at
    code = run.finish(30)
    out = run.output()
    assert code == 128 + 9, out
    assert elapsed < 15, f"the survivor exited {elapsed:.1f} s after the kill\n{out}"
    said = {1: r"worker:1 \(process 1\) stopped responding \(no liveness signal for \d+ s after a collective "
                  r"with it failed\)",
            0: r"worker:0 \(process 0\) is gone: the coordination service it hosts \(\S+\) refuses connections"}[victim]
    assert re.search(rf"\[worker {survivor}\] \[jdist\] {said}", out), out
