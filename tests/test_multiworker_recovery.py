"""Multi-worker recovery with real worker processes on localhost: Keras's BackupAndRestore across a
killed worker, and how fast a survivor of a dead peer stops. Every wait is bounded."""
import re
import time

from test_multiworker import SCRIPTS, Running, launcher_cmd


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
