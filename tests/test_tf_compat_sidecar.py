"""tf_keras's `tf.keras.utils.SidecarEvaluator` and the checkpoints it reads (`ModelCheckpoint(save_weights_only=True)`
to an extension-less path, `model.save_weights(prefix)`), against TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1)."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# TF 2.21, tf_keras: model.save_weights(d + "/ckpt-1") left ['checkpoint', 'ckpt-1.data-00000-of-00001',
# 'ckpt-1.index'] and this `checkpoint` file; a later save_weights(d + "/other") rewrote it naming "other" alone.
TF_SAVE_WEIGHTS_INDEX = 'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n'


def _model(seed=0):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def _data(n=40):
    rng = np.random.default_rng(1)
    return rng.normal(size=(n, 4)).astype("float32"), rng.integers(0, 3, n)


def test_save_weights_to_a_prefix_names_it_in_the_checkpoint_file(tmp_path):
    model = _model()
    model.save_weights(str(tmp_path / "ckpt-1"))
    assert (tmp_path / "checkpoint").read_text() == TF_SAVE_WEIGHTS_INDEX
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-1")
    model.save_weights(str(tmp_path / "other"))
    assert (tmp_path / "checkpoint").read_text() == TF_SAVE_WEIGHTS_INDEX.replace("ckpt-1", "other")


def test_model_checkpoint_weights_to_an_extension_less_path_are_tf_format_weights(tmp_path):
    x, y = _data()
    model = _model()
    path = str(tmp_path / "ckpt-{epoch}")
    model.fit(x, y, epochs=2, verbose=0, callbacks=[tf.keras.callbacks.ModelCheckpoint(path, save_weights_only=True)])
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-1.npz", "ckpt-2.npz"]  # TF: .index / .data each
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-2")
    fresh = _model(seed=5)
    fresh.load_weights(str(tmp_path / "ckpt-2"))
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_sidecar_evaluator_scores_the_checkpoint_as_evaluate_does(tmp_path):
    """Each checkpoint's evaluation is `evaluate` of its weights; it stops after ckpt-<max_evaluations>."""
    x, y = _data()
    trained = _model()
    trained.fit(x, y, epochs=2, verbose=0, callbacks=[
        tf.keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt-{epoch}"), save_weights_only=True)])
    expected = trained.evaluate(x, y, verbose=0, return_dict=True)
    evaluator_model = _model(seed=7)
    seen = []

    class Record(tf.keras.callbacks.Callback):
        def on_test_end(self, logs=None):
            seen.append(dict(logs))

    tf.keras.utils.SidecarEvaluator(evaluator_model, tf.data.Dataset.from_tensor_slices((x, y)).batch(8),
                                    checkpoint_dir=str(tmp_path), max_evaluations=2, callbacks=[Record()]).start()
    assert len(seen) == 1  # the newest checkpoint, ckpt-2, and 2 >= max_evaluations: it stops
    assert seen[0]["loss"] == pytest.approx(expected["loss"], rel=1e-6)
    assert seen[0]["accuracy"] == expected["accuracy"]


def test_sidecar_evaluator_restores_a_checkpoint_of_model_and_optimizer(tmp_path):
    """tf.train.CheckpointManager's checkpoints (a `model` child) are restored through tf.train.Checkpoint."""
    x, y = _data()
    trained = _model()
    trained.fit(x, y, epochs=1, verbose=0)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=trained, optimizer=trained.optimizer),
                                         str(tmp_path), max_to_keep=1)
    manager.save()
    evaluator_model = _model(seed=3)
    evaluator_model.fit(x[:8], y[:8], epochs=1, verbose=0)  # builds its optimizer, as a training copy would be
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    tf.keras.utils.SidecarEvaluator(evaluator_model, data, checkpoint_dir=str(tmp_path), max_evaluations=1).start()
    for a, b in zip(trained.get_weights(), evaluator_model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(evaluator_model.optimizer.iterations.numpy()) == int(trained.optimizer.iterations.numpy())


def test_sidecar_evaluator_needs_a_compiled_model(tmp_path):
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="compiled model"):
        tf.keras.utils.SidecarEvaluator(model, _data(), checkpoint_dir=str(tmp_path))


def test_checkpoints_iterator_follows_tf(tmp_path):
    """TF 2.21 (observed): after two CheckpointManager saves, list(checkpoints_iterator(d, timeout=1)) was
    [d/ckpt-2] at once (a poll would pass the timeout); a missing directory gave []; with timeout=0.5 and a
    timeout_fn returning True on its second call, [d/ckpt-2] and two calls."""
    import threading
    import time

    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path), max_to_keep=3)
    manager.save()
    manager.save()
    start = time.time()
    assert list(tf.train.checkpoints_iterator(str(tmp_path), timeout=1)) == [str(tmp_path / "ckpt-2")]
    assert time.time() - start < 0.5
    assert list(tf.train.checkpoints_iterator(str(tmp_path / "missing"), timeout=1)) == []
    calls = []

    def timeout_fn():
        calls.append(1)
        return len(calls) >= 2

    assert list(tf.train.checkpoints_iterator(str(tmp_path), timeout=0.5, timeout_fn=timeout_fn)) == [
        str(tmp_path / "ckpt-2")]
    assert calls == [1, 1]
    # A checkpoint written while it waits is the next one yielded.
    seen = []
    later = threading.Timer(0.3, manager.save)
    later.start()
    for path in tf.train.checkpoints_iterator(str(tmp_path), timeout=3):
        seen.append(os.path.basename(path))
        if len(seen) == 2:
            break
    later.join()
    assert seen == ["ckpt-2", "ckpt-3"]
