"""`tf.train.CheckpointManager`, `tf.train.Checkpoint`, `tf.io.gfile`, `tf.errors` and the `tf.Variable` counters of
TF's multi-worker custom-loop tutorial, against what TF 2.21 did (tensorflow-cpu 2.21.0; these names do not depend
on which Keras TF uses)."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _counter(name: str = "epoch"):
    return tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name=name)


def test_int64_counters_are_tfs(recwarn):
    epoch = _counter()
    epoch.assign_add(1)
    epoch.assign_add(1)
    step = _counter("step_in_epoch")
    step.assign(5)
    # TF 2.21: numpy() of an int64 scalar variable is numpy.int64; the repr below is TF's.
    assert type(epoch.numpy()) is np.int64 and epoch.numpy() == 2 and "%d" % step.numpy() == "5"  # noqa: UP031
    assert repr(epoch) == "<tf.Variable 'epoch:0' shape=() dtype=int64, numpy=2>"
    assert epoch.dtype == tf.int64
    assert not [w for w in recwarn if "Explicitly requested dtype" in str(w.message)]  # held in 32 bits, quietly
    with pytest.raises(ValueError, match="does not fit in int32.*jax_enable_x64"):
        tf.Variable(2**40, dtype=tf.int64)


def test_checkpoint_manager_names_keeps_and_restores_as_tf(tmp_path, monkeypatch):
    """The values in the comments were printed by TF 2.21 for the same calls."""
    monkeypatch.chdir(tmp_path)
    epoch = _counter()
    checkpoint = tf.train.Checkpoint(epoch=epoch)
    manager = tf.train.CheckpointManager(checkpoint, directory="ck/sub", max_to_keep=2)
    assert (manager.latest_checkpoint, manager.checkpoints, tf.train.latest_checkpoint("ck/sub")) == (None, [], None)
    saved = []
    for _ in range(3):
        epoch.assign_add(1)
        saved.append(manager.save())
    assert saved == ["ck/sub/ckpt-1", "ck/sub/ckpt-2", "ck/sub/ckpt-3"]  # TF: the same prefixes
    assert manager.checkpoints == ["ck/sub/ckpt-2", "ck/sub/ckpt-3"] and manager.latest_checkpoint == "ck/sub/ckpt-3"
    assert tf.train.latest_checkpoint("ck/sub") == "ck/sub/ckpt-3" and tf.train.latest_checkpoint("ck") is None
    assert sorted(os.listdir("ck/sub")) == ["checkpoint", "ckpt-2.npz", "ckpt-3.npz"]  # TF: .index + .data files
    index = open("ck/sub/checkpoint").read().splitlines()
    assert index[:3] == ['model_checkpoint_path: "ckpt-3"', 'all_model_checkpoint_paths: "ckpt-2"',
                         'all_model_checkpoint_paths: "ckpt-3"']  # TF's first three lines
    assert checkpoint.save_counter == 3
    epoch.assign(100)
    checkpoint.restore(manager.latest_checkpoint)
    assert epoch.numpy() == 3
    checkpoint.restore(manager.checkpoints[0])
    assert epoch.numpy() == 2
    # TF: a new manager over the directory takes over its list; restoring brings the save counter back, so the
    # next save is ckpt-4; a given checkpoint_number names the file.
    fresh = tf.train.Checkpoint(epoch=epoch)
    again = tf.train.CheckpointManager(fresh, directory="ck/sub", max_to_keep=2)
    assert again.checkpoints == ["ck/sub/ckpt-2", "ck/sub/ckpt-3"] and again.latest_checkpoint == "ck/sub/ckpt-3"
    assert again.restore_or_initialize() == "ck/sub/ckpt-3" and epoch.numpy() == 3
    assert again.save() == "ck/sub/ckpt-4"
    assert sorted(os.listdir("ck/sub")) == ["checkpoint", "ckpt-3.npz", "ckpt-4.npz"]
    assert again.save(checkpoint_number=10) == "ck/sub/ckpt-10" and again.checkpoints == ["ck/sub/ckpt-4",
                                                                                            "ck/sub/ckpt-10"]
    keep_all = tf.train.CheckpointManager(tf.train.Checkpoint(epoch=epoch), directory="ck/none", max_to_keep=None)
    keep_all.save()
    keep_all.save()
    assert keep_all.checkpoints == ["ck/none/ckpt-1", "ck/none/ckpt-2"]
    named = tf.train.CheckpointManager(tf.train.Checkpoint(epoch=epoch), "ck/p", max_to_keep=1, checkpoint_name="model")
    assert named.save() == "ck/p/model-1"
    with pytest.raises(ValueError, match=r"Expected a positive integer or `None` for `max_to_keep`, got 0\."):
        tf.train.CheckpointManager(checkpoint, directory="ck/z", max_to_keep=0)  # TF's message
    assert tf.train.latest_checkpoint("nonexistent") is None
    tf.train.Checkpoint(epoch=epoch).restore(None)  # TF: an InitializationOnlyStatus, nothing restored
    assert epoch.numpy() == 3
    with pytest.raises(FileNotFoundError, match="no checkpoint at 'ck/sub/ckpt-1'"):
        checkpoint.restore("ck/sub/ckpt-1")  # deleted beyond max_to_keep


def test_checkpoint_manager_interval_and_hourly_keep(tmp_path):
    step = _counter("step")
    checkpoint = tf.train.Checkpoint(step=step)
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "i"), max_to_keep=5, step_counter=step,
                                         checkpoint_interval=3)
    saved = []
    for _ in range(7):
        saved.append(manager.save())
        step.assign_add(1)
    assert [s and os.path.basename(s) for s in saved] == ["ckpt-1", None, None, "ckpt-2", None, None, "ckpt-3"]
    with pytest.raises(ValueError, match="step_counter"):
        tf.train.CheckpointManager(checkpoint, str(tmp_path / "j"), max_to_keep=1, checkpoint_interval=2)
    # Every checkpoint is more than a tiny period after the last one kept: all stay on disk, one is listed.
    hourly = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path / "h"), max_to_keep=1,
                                        keep_checkpoint_every_n_hours=1e-9)
    for _ in range(3):
        hourly.save()
    assert len(hourly.checkpoints) == 1 and len(list((tmp_path / "h").glob("ckpt-*.npz"))) == 3


def test_checkpoint_of_a_model_and_counters_made_in_a_strategy_restores_without_one(tmp_path):
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    epoch, step_in_epoch = _counter(), _counter("step_in_epoch")
    step_in_epoch.assign(70)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=model, epoch=epoch, step_in_epoch=step_in_epoch), str(tmp_path), max_to_keep=1)
    manager.save()
    new_model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    new_epoch, new_step = _counter(), _counter("step_in_epoch")
    checkpoint = tf.train.Checkpoint(model=new_model, epoch=new_epoch, step_in_epoch=new_step)
    status = checkpoint.restore(tf.train.latest_checkpoint(str(tmp_path)))
    status.assert_consumed().expect_partial()
    assert (new_epoch.numpy(), new_step.numpy()) == (0, 70)
    for a, b in zip(new_model.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_gfile_follows_tfs_rules(tmp_path, monkeypatch):
    """Each result and error class below is what TF 2.21's tf.io.gfile gave for the same call."""
    gfile = tf.io.gfile
    monkeypatch.chdir(tmp_path)
    assert gfile.exists("g/a") is False
    gfile.makedirs("g/a/b")
    gfile.makedirs("g/a/b")
    gfile.mkdir("g/a")
    with pytest.raises(tf.errors.NotFoundError, match="g/x/y; No such file or directory"):
        gfile.mkdir("g/x/y")
    gfile.mkdir("g/c")
    with gfile.GFile("g/a/f.txt", "w") as f:
        f.write("hello\n")
    assert gfile.GFile("g/a/f.txt").read() == "hello\n" and gfile.GFile("g/a/f.txt", "rb").read() == b"hello\n"
    assert sorted(gfile.listdir("g")) == ["a", "c"] and sorted(gfile.listdir("g/a")) == ["b", "f.txt"]
    with pytest.raises(tf.errors.NotFoundError, match="Could not find directory g/zz"):
        gfile.listdir("g/zz")
    assert (gfile.isdir("g/a"), gfile.isdir("g/a/f.txt"), gfile.isdir("nope")) == (True, False, False)
    assert sorted(gfile.glob("g/a/*")) == ["g/a/b", "g/a/f.txt"] and gfile.glob("zz/*") == []
    gfile.copy("g/a/f.txt", "g/c/f.txt")
    with pytest.raises(tf.errors.AlreadyExistsError, match="file already exists"):
        gfile.copy("g/a/f.txt", "g/c/f.txt")
    gfile.copy("g/a/f.txt", "g/c/f.txt", overwrite=True)
    with pytest.raises(tf.errors.NotFoundError):
        gfile.copy("g/a/none", "g/c/n")
    gfile.rename("g/c/f.txt", "g/c/g.txt")
    with pytest.raises(tf.errors.AlreadyExistsError):
        gfile.rename("g/a/f.txt", "g/c/g.txt")
    gfile.rename("g/a/f.txt", "g/c/g.txt", overwrite=True)
    gfile.rename("g/a", "g/a2")
    gfile.remove("g/c/g.txt")
    with pytest.raises(FileNotFoundError):  # tf.errors.NotFoundError is also Python's
        gfile.remove("g/c/g.txt")
    with pytest.raises(tf.errors.FailedPreconditionError, match="Is a directory"):
        gfile.remove("g/c")
    gfile.rmtree("g/a2")
    with pytest.raises(tf.errors.NotFoundError, match="g/a2 not found"):
        gfile.rmtree("g/a2")
    open("g/ff", "w").close()
    gfile.rmtree("g/ff")  # TF removes a file given to rmtree
    assert gfile.stat("g/c").is_directory and list(gfile.walk("g")) == [("g", ["c"], []), ("g/c", [], [])]
    assert gfile.join("a", "b", "c") == "a/b/c"
    missing = gfile.GFile("g/none")  # TF opens lazily: the error comes with the read
    with pytest.raises(tf.errors.NotFoundError):
        missing.read()
    gfile.GFile("g/h", "a").write("x")
    gfile.GFile("g/h", "a").write(b"y")
    assert gfile.GFile("g/h").read() == "xy" and gfile.GFile("g/h").size() == 2
    with gfile.GFile("g/lines", "w") as f:
        f.write("a\nb\n")
    assert gfile.GFile("g/lines").readlines() == ["a\n", "b\n"] == list(gfile.GFile("g/lines"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="mode is not 'r' or 'w'"):
        gfile.GFile("g/lb", "z")
    assert gfile.exists(f"file://{tmp_path}/g/c")
    with pytest.raises(tf.errors.UnimplementedError, match="scheme 'gs' not implemented.*fsspec"):
        gfile.exists("gs://bucket/a")


def test_io_beyond_gfile_is_refused_with_the_way_forward():
    with pytest.raises(AttributeError, match=r"tf.io.decode_proto.*provides gfile.*TFRecordWriter"):
        tf.io.decode_proto  # noqa: B018


def test_metric_reset_states_is_tf_kerass_reset_state():
    accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
    accuracy.update_state(np.array([1, 0]), np.array([[0.1, 0.9], [0.2, 0.8]], np.float32))
    assert float(accuracy.result()) == 0.5
    accuracy.reset_states()  # tf_keras's name (TF 2.21 with its Keras 3 raises AttributeError here)
    assert float(accuracy.result()) == 0.0


def test_checkpoint_status_checks_what_was_used_and_restores_late(tmp_path):
    """TF's object-graph rules (observed in TF 2.21 with tf_keras, guide/checkpoint.ipynb): values are found by
    attribute path, an object attached after `restore` takes its saved value, `assert_consumed` fails while a saved
    value is unused, `assert_existing_objects_matched` while an attached object had no saved value."""
    a, b = tf.Variable([1.0, 2.0]), tf.Variable(3.0)
    inner = tf.train.Checkpoint(b=b)
    prefix = tf.train.Checkpoint(a=a, inner=inner, listed=[a, b]).save(str(tmp_path / "c"))
    assert [k for k, _ in tf.train.list_variables(str(tmp_path))] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH", "a/.ATTRIBUTES/VARIABLE_VALUE", "inner/b/.ATTRIBUTES/VARIABLE_VALUE",
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE"]  # the list's items are named once, by their first path
    a2, b2 = tf.Variable([0.0, 0.0]), tf.Variable(0.0)
    later = tf.train.Checkpoint()
    status = tf.train.Checkpoint(a=a2, inner=later).restore(prefix)
    np.testing.assert_array_equal(a2.numpy(), [1.0, 2.0])
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match=r"Unrestored values.*inner/b/\.ATTRIBUTES"):
        status.assert_consumed()
    later.b = b2  # delayed restoration
    assert float(b2.numpy()) == 3.0
    status.assert_consumed()
    c = tf.Variable(0.0)
    extra = tf.train.Checkpoint(a=tf.Variable([0.0, 0.0]), c=c).restore(prefix)
    with pytest.raises(AssertionError, match=r"no value in the checkpoint.*'c/\.ATTRIBUTES/VARIABLE_VALUE'"):
        extra.assert_existing_objects_matched()
    assert extra.expect_partial() is extra
    aliased = tf.Variable(0.0)
    tf.train.Checkpoint(listed=[tf.Variable([0.0, 0.0]), aliased]).restore(prefix)
    assert float(aliased.numpy()) == 3.0  # 'listed/1' is the object saved as 'inner/b'
    reader = tf.train.load_checkpoint(prefix)
    assert reader.get_variable_to_shape_map()["a/.ATTRIBUTES/VARIABLE_VALUE"] == [2]
    assert reader.get_variable_to_dtype_map()["a/.ATTRIBUTES/VARIABLE_VALUE"].name == "float32"
    with pytest.raises(TypeError, match="a checkpoint cannot hold.*tf.Variables"):
        tf.train.Checkpoint(x="text")


def test_extensionless_save_weights_is_a_checkpoint_rooted_at_the_model(tmp_path):
    class Net(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.l1 = tf.keras.layers.Dense(5)

        def call(self, x):
            return self.l1(x)

    net = Net()
    x = np.ones((2, 3), "float32")
    net(x)
    net.save_weights(str(tmp_path / "w"))
    assert [k for k, _ in tf.train.list_variables(str(tmp_path / "w"))][1:3] == [
        "l1/bias/.ATTRIBUTES/VARIABLE_VALUE", "l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"]  # tf_keras's keys
    fresh = Net()
    fresh.load_weights(str(tmp_path / "w"))  # unbuilt: restored when built
    np.testing.assert_allclose(np.asarray(fresh(x)), np.asarray(net(x)), rtol=1e-6)
