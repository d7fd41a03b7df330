"""TF's `tf.distribute.experimental.PreemptionCheckpointHandler` with `tf.train.Checkpoint` and its manager.

TF observations (TF 2.21 with Keras 3, MultiWorkerMirroredStrategy in one process, `w = tf.Variable(0.)` in the
scope, `handler.run(train_step)` where `train_step` is a `tf.function` of `strategy.run(w.assign_add(1.))`, 12
runs, SIGTERM sent from a timer during the sleep after run 5):
- the process exits with code 42 before printing run 6; the directory holds `checkpoint`, `ckpt-1.index`,
  `ckpt-1.data-00000-of-00001` (the manager's own numbering); the checkpoint's variables are
  `checkpointed_runs`, `save_counter`, and the user's (`w`, `step`);
- rerun: `total_run_calls` 5, `w` 5.0, the manager's `latest_checkpoint` `.../ckpt-1`; it runs on to 12 and
  exits 0;
- with `train_step(); handler.save_checkpoint_if_preempted()` inside `watch_preemption_scope()` and the notice
  after the 6th call: exit 42; rerun `total_run_calls` 6 and `w` 7.0 (the step ran before the check);
- reading `total_run_calls` logs TF's deprecation warning ("Track steps using a tf.Variable saved in checkpoint
  instead"); jdist does not warn.
"""
import os
import signal

os.environ.setdefault("KERAS_BACKEND", "jax")

import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


class Exited(Exception):
    pass


def _exit():
    raise Exited()


def _job(directory, strategy):
    with strategy.scope():
        w = tf.Variable(0.0)
    checkpoint = tf.train.Checkpoint(w=w)
    manager = tf.train.CheckpointManager(checkpoint, directory=str(directory), max_to_keep=3)
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, manager, termination_config=tf.distribute.experimental.TerminationConfig(
            exit_fn=_exit))
    return w, manager, handler


@pytest.mark.parametrize("loop", ["run", "save_checkpoint_if_preempted"])
def test_sigterm_saves_through_the_manager_and_the_rerun_resumes(tmp_path, loop):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    previous = signal.getsignal(signal.SIGTERM)
    w, manager, handler = _job(tmp_path, strategy)
    step = lambda: strategy.run(lambda: w.assign_add(1.0))  # noqa: E731
    assert handler.total_run_calls == 0 and manager.latest_checkpoint is None
    with pytest.raises(Exited), handler.watch_preemption_scope():
        while handler.total_run_calls < 12:
            if loop == "run":
                handler.run(step)
            else:
                step()
                handler.save_checkpoint_if_preempted()
            if handler.total_run_calls == 5:
                os.kill(os.getpid(), signal.SIGTERM)  # handled before the next bytecode, before the 6th call
    handler.close()
    assert signal.getsignal(signal.SIGTERM) is previous
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-1.npz"]  # TF: ckpt-1.index and .data
    names = {name for name, _ in tf.train.list_variables(str(tmp_path / "ckpt-1"))}
    assert {"checkpointed_runs/.ATTRIBUTES/VARIABLE_VALUE", "w/.ATTRIBUTES/VARIABLE_VALUE"} <= names

    w2, manager2, rerun = _job(tmp_path, strategy)
    try:
        # run: saved before its 6th call (5 runs, w 5); the explicit check: after its 6th step (5 counted, w 6)
        assert rerun.total_run_calls == 5
        assert w2.numpy() == (5.0 if loop == "run" else 6.0)
        assert manager2.latest_checkpoint == str(tmp_path / "ckpt-1")
        while rerun.total_run_calls < 12:
            rerun.run(lambda: strategy.run(lambda: w2.assign_add(1.0)))
        assert w2.numpy() == (12.0 if loop == "run" else 13.0)
    finally:
        rerun.close()


def test_a_checkpoint_needs_a_directory_and_other_objects_are_refused(tmp_path):
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
    with pytest.raises(ValueError, match="checkpoint_dir"):
        tf.distribute.experimental.PreemptionCheckpointHandler(None, checkpoint)
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(None, checkpoint, checkpoint_dir=str(tmp_path))
    handler.close()
    with pytest.raises(TypeError, match="tf.train.Checkpoint or tf.train.CheckpointManager"):
        tf.distribute.experimental.PreemptionCheckpointHandler(None, {"v": 1})
