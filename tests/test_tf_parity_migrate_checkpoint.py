"""TF's migration guides on fault tolerance, checkpoint saving and early stopping (guide/migrate/
fault_tolerance, checkpoint_saver, early_stopping), their TF2 parts run through `jdist.tf_compat` against what
TF 2.21 (Keras 3.15, and tf_keras where named) printed and wrote for the same script on the same in-memory data:
BackupAndRestore's files and resumption, ModelCheckpoint's file names and errors, EarlyStopping's stopping
epoch, CheckpointManager's interval saving, the keys of a `tf.train.Checkpoint` of a model with random layers,
and the guides' tf.compat.v1 / tf.estimator cells refused naming the alternative."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import jdist.tf_compat as tf

RNG = np.random.RandomState(0)
X = RNG.rand(32, 4).astype("float32")
Y = RNG.randint(0, 3, 32)


def _model(random_layers: bool = False):
    layers = [tf.keras.Input((4,)), tf.keras.layers.Dense(3)]
    if random_layers:
        layers += [tf.keras.layers.Dropout(0.2), tf.keras.layers.GaussianNoise(0.1)]
    model = tf.keras.Sequential(layers + [tf.keras.layers.Dense(3)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


class _InterruptAtStep(tf.keras.callbacks.Callback):
    """The guide's InterruptAtStep: counts batches, raises at the given count."""

    def __init__(self, step: int):
        super().__init__()
        self.count, self.step = 0, step

    def on_train_batch_end(self, batch, logs=None):
        self.count += 1
        if self.count == self.step:
            raise RuntimeError("Interruption")


def _fit(model, callbacks, epochs=3):
    return model.fit(X, Y, batch_size=8, epochs=epochs, verbose=0, callbacks=callbacks)


def test_checkpoint_of_a_model_with_random_layers_holds_no_seed_state(tmp_path):
    # observed, TF 2.21 (tf_keras): keys of Checkpoint(model=...) for Dense, Dropout, GaussianNoise, Dense;
    # TF's Keras 3 likewise saves no seed_generator_state (its keys: the two kernels and biases only)
    path = tf.train.Checkpoint(model=_model(random_layers=True)).save(str(tmp_path / "c"))
    assert [key for key, _ in tf.train.list_variables(path)] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH",
        "model/layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE",
        "model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE",
        "model/layer_with_weights-1/bias/.ATTRIBUTES/VARIABLE_VALUE",
        "model/layer_with_weights-1/kernel/.ATTRIBUTES/VARIABLE_VALUE",
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE"]
    # observed, TF 2.21 (tf_keras): both directions consumed
    plain = _model()
    tf.train.Checkpoint(model=plain).restore(path).assert_consumed()
    source = tf.train.load_checkpoint(path).get_tensor("model/layer_with_weights-1/kernel/.ATTRIBUTES/VARIABLE_VALUE")
    np.testing.assert_array_equal(np.asarray(plain.layers[-1].kernel), source)
    back = tf.train.Checkpoint(model=plain).save(str(tmp_path / "n"))
    tf.train.Checkpoint(model=_model(random_layers=True)).restore(back).assert_consumed()


def test_backup_and_restore_resumes_at_the_saved_epoch_and_removes_its_files(tmp_path):
    backup = str(tmp_path / "backup")
    callback = tf.keras.callbacks.BackupAndRestore(backup)
    with pytest.raises(RuntimeError, match="Interruption"):
        _fit(_model(), [callback, _InterruptAtStep(10)])  # 4 steps an epoch: in the third epoch
    # observed, TF 2.21 (Keras 3.15)
    assert sorted(os.listdir(backup)) == ["latest.weights.h5", "training_metadata.json"]
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f) == {"epoch": 2, "batch": 0}
    model = _model()
    history = _fit(model, [callback])
    assert history.epoch == [2] and int(model.optimizer.iterations.numpy()) == 12  # observed, TF 2.21
    assert not os.path.exists(backup)  # observed, TF 2.21: delete_checkpoint=True removes the directory


@pytest.mark.parametrize("kwargs, files, metadata", [  # observed, TF 2.21 (Keras 3.15), interrupted at step 10
    ({"delete_checkpoint": False}, ["latest.weights.h5", "training_metadata.json"], {"epoch": 2, "batch": 0}),
    ({"save_freq": 3, "double_checkpoint": True}, ["latest.weights.h5", "latest.weights.h5.bkp",
                                                   "training_metadata.json", "training_metadata.json.bkp"],
     {"epoch": 2, "batch": 0}),
])
def test_backup_and_restore_options(tmp_path, kwargs, files, metadata):
    backup = str(tmp_path / "b")
    callback = tf.keras.callbacks.BackupAndRestore(backup, **kwargs)
    with pytest.raises(RuntimeError):
        _fit(_model(), [callback, _InterruptAtStep(10)])
    assert sorted(os.listdir(backup)) == files
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f) == metadata
    assert _fit(_model(), [callback]).epoch == [2]
    assert os.path.exists(backup) == (kwargs.get("delete_checkpoint") is False)  # observed, TF 2.21


def test_backup_and_restore_bad_arguments():
    # observed, TF 2.21 (Keras 3.15): each a ValueError with these texts
    with pytest.raises(ValueError, match=r"Invalid value for argument `save_freq`. Received: save_freq=batch. "
                                         r"Expected either 'epoch' or an integer value."):
        tf.keras.callbacks.BackupAndRestore("b", save_freq="batch")
    for empty in (None, ""):
        with pytest.raises(ValueError, match="Empty `backup_dir` argument passed"):
            tf.keras.callbacks.BackupAndRestore(empty)


def test_model_checkpoint_file_names_and_errors(tmp_path):
    model = _model()
    callback = tf.keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt-{epoch:02d}.weights.h5"),
                                                  save_weights_only=True)
    _fit(model, [callback])
    # observed, TF 2.21 (Keras 3.15)
    assert sorted(os.listdir(tmp_path)) == ["ckpt-01.weights.h5", "ckpt-02.weights.h5", "ckpt-03.weights.h5"]
    # observed, TF 2.21: ValueError "When using `save_weights_only=True` in `ModelCheckpoint`, the filepath
    # provided must end in `.weights.h5` (Keras weights format). Received: filepath=.../w.keras"
    with pytest.raises(ValueError, match=r"must end in `.weights.h5` \(Keras weights format\)"):
        tf.keras.callbacks.ModelCheckpoint(str(tmp_path / "w.keras"), save_weights_only=True)
    with pytest.raises(ValueError, match="Unrecognized save_freq: batch. Expected save_freq are 'epoch' or "
                                         "integer values"):  # observed, TF 2.21
        tf.keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras"), save_freq="batch")


def test_early_stopping_epochs():
    # observed, TF 2.21 (Keras 3.15): (history.epoch, stopped_epoch, wait) for each, 6 epochs of the same data in
    # the same order (shuffle=False), the same under seeds 0-4. Shuffled, SGD's epoch loss can rise by chance and
    # patience=0 then stops early, in TF as here: the order is fixed so the first case holds for every init.
    cases = [({"monitor": "loss", "patience": 0}, [0, 1, 2, 3, 4, 5], 0, 0),
             ({"monitor": "loss", "patience": 1, "min_delta": 10.0}, [0, 1], 1, 1),
             ({"monitor": "loss", "baseline": 0.0, "patience": 1}, [0, 1, 2, 3, 4, 5], 0, 6),
             ({"monitor": "loss", "start_from_epoch": 2, "patience": 0, "min_delta": 10.0}, [0, 1, 2, 3], 3, 1)]
    for kwargs, epochs, stopped, wait in cases:
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])  # the observed script's
        model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        callback = tf.keras.callbacks.EarlyStopping(**kwargs)
        history = model.fit(X, Y, batch_size=8, epochs=6, verbose=0, callbacks=[callback], shuffle=False)
        assert (history.epoch, callback.stopped_epoch, callback.wait) == (epochs, stopped, wait), \
            (kwargs, history.history["loss"])
        if kwargs.get("patience") == 0 and "min_delta" not in kwargs:  # the premise of "never stops"
            assert np.all(np.diff(history.history["loss"]) < 0), history.history["loss"]
    # observed, TF 2.21: the ValueError at the end of the first epoch
    with pytest.raises(ValueError, match="EarlyStopping callback received monitor=nonexistent, but Keras isn't "
                                         "able to automatically determine"):
        _fit(model, [tf.keras.callbacks.EarlyStopping(monitor="nonexistent")], epochs=1)


def test_checkpoint_manager_interval_and_max_to_keep(tmp_path):
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path), max_to_keep=2,
                                         step_counter=step, checkpoint_interval=2)
    saved = []
    for _ in range(6):
        step.assign_add(1)
        path = manager.save()
        saved.append(None if path is None else os.path.basename(path))
    # observed, TF 2.21: a save every 2 steps of the counter, numbered by save_counter; the last two kept
    assert saved == ["ckpt-1", None, "ckpt-2", None, "ckpt-3", None]
    assert os.path.basename(manager.save(check_interval=False)) == "ckpt-4"
    assert [os.path.basename(p) for p in manager.checkpoints] == ["ckpt-3", "ckpt-4"]
    with open(tmp_path / "checkpoint") as f:
        assert f.read().startswith('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-3"\n'
                                   'all_model_checkpoint_paths: "ckpt-4"\n')  # observed, TF 2.21
    with pytest.raises(ValueError, match="`step_counter` should be passed if `checkpoint_interval` is not None."):
        tf.train.CheckpointManager(tf.train.Checkpoint(), str(tmp_path / "x"), max_to_keep=1, checkpoint_interval=2)
    fresh = tf.train.CheckpointManager(tf.train.Checkpoint(), str(tmp_path / "fresh"), max_to_keep=1)
    assert fresh.restore_or_initialize() is None and fresh.latest_checkpoint is None  # observed, TF 2.21


@pytest.mark.parametrize("name, alternative", [
    ("estimator", "Keras model trained with model.fit"),
    ("train", "a SessionRunHook -> a tf.keras.callbacks.Callback"),
    ("feature_column", "via the `tf.keras.utils.FeatureSpace` utility"),  # TF 2.21's deprecation text (observed)
    ("layers", "from tf.keras.layers"),
    ("losses", r"tf.keras.losses.SparseCategoricalCrossentropy\(from_logits=True\)"),
])
def test_guides_tf1_cells_are_refused_naming_the_alternative(name, alternative):
    # observed, TF 2.21: `tf.compat.v1.estimator` is an AttributeError too ("module 'tensorflow.compat.v1' has
    # no attribute 'estimator'"); the TF1 session-based rest has no JAX counterpart, refused the same way
    with pytest.raises(AttributeError, match=rf"`tf.compat.v1.{name}`.*{alternative}"):
        getattr(tf.compat.v1, name)


def test_seed_state_of_a_custom_layer_is_not_saved_but_a_listed_one_is(tmp_path):
    import keras

    class Scaled(tf.keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.generator = keras.random.SeedGenerator(3)
            self.w = self.add_weight(shape=(2,), initializer="ones", name="w")

        def call(self, x):
            return x * self.w

    # observed, TF 2.21 (Keras 3.15 and tf_keras): the layer's weight only
    path = tf.train.Checkpoint(layer=Scaled()).save(str(tmp_path / "c"))
    assert [key for key, _ in tf.train.list_variables(path)] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH", "layer/w/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"]
    # observed, TF 2.21 (Keras 3.15): a list of a Dense + Dropout model's `variables` holds the seed state as v/2
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(2), tf.keras.layers.Dropout(0.5)])
    path = tf.train.Checkpoint(v=model.variables).save(str(tmp_path / "v"))
    assert [key for key, _ in tf.train.list_variables(path)][2:] == [
        f"v/{i}/.ATTRIBUTES/VARIABLE_VALUE" for i in range(3)]


def test_model_checkpoint_to_an_extension_less_path_keeps_the_path_given(tmp_path):
    # the checkpoint_saver guide's ModelCheckpoint(filepath=log_dir), then `%ls {callback.filepath}`. observed,
    # TF 2.21 with tf_keras: `filepath` is the directory given (a SavedModel written in it; TF's Keras 3 refuses
    # the path with ValueError "The filepath provided must end in `.keras`"); jdist writes model.keras there
    directory = str(tmp_path / "log")
    callback = tf.keras.callbacks.ModelCheckpoint(filepath=directory)
    assert callback.filepath == directory
    _fit(_model(), [callback], epochs=1)
    assert os.listdir(callback.filepath) == ["model.keras"]
    # observed, tf_keras: a weights prefix stays as given too ("ckpt-{epoch}"), ckpt-1.* written
    prefix = str(tmp_path / "w" / "ckpt-{epoch}")
    callback = tf.keras.callbacks.ModelCheckpoint(filepath=prefix, save_weights_only=True)
    assert callback.filepath == prefix
    _fit(_model(), [callback], epochs=1)
    assert tf.train.latest_checkpoint(str(tmp_path / "w")) == str(tmp_path / "w" / "ckpt-1")


def test_subclassed_model_with_dropout_saves_its_weights_only(tmp_path):
    class Net(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = tf.keras.layers.Dense(2)
            self.drop = tf.keras.layers.Dropout(0.1)

        def call(self, x, training=False):
            return self.drop(self.dense(x), training=training)

    net = Net()
    net(tf.zeros([1, 3]))
    path = tf.train.Checkpoint(model=net).save(str(tmp_path / "c"))
    # observed, TF 2.21 with tf_keras (TF's Keras 3: `model/dense/_kernel`, `model/dense/bias`; no seed state either)
    assert [key for key, _ in tf.train.list_variables(path)] == [
        "_CHECKPOINTABLE_OBJECT_GRAPH", "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE",
        "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"]
