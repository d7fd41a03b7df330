"""TensorFlow's Keras tutorials (classification, regression, overfit_and_underfit, save_and_load) as a script sees them.

Every expected value is TF's, observed in TF 2.21 with Keras 3.15 (tensorflow-cpu, Keras 3 on TensorFlow) running
the same code; the MirroredStrategy case was observed with TF's CPU split into 4 logical devices. Data is small
and local (the tutorials download Fashion-MNIST, Auto MPG and HIGGS).
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

_RS = np.random.default_rng(0)
X = _RS.random((16, 4, 4)).astype("float32")
Y = (np.arange(16) % 3).astype("uint8")


def _summary_tail(model: Any) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        model.summary()
    return [line.strip() for line in buf.getvalue().strip().splitlines()[-4:]]


def _classifier(scope: Any) -> Any:
    with scope:
        model = tf.keras.Sequential([
            tf.keras.Input((4, 4)), tf.keras.layers.Flatten(), tf.keras.layers.Dense(8, activation="relu"),
            tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(3)])
        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        history = model.fit(X, Y, epochs=2, batch_size=8, verbose=0, validation_split=0.25)
    return model, history


def _check_classifier(model: Any, history: Any) -> None:
    # observed in TF 2.21, Keras 3.15 (also under MirroredStrategy on 4 logical CPUs)
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert history.epoch == [0, 1]
    assert {type(v) for vs in history.history.values() for v in vs} == {float}
    assert history.params == {"verbose": 0, "epochs": 2, "steps": 2}
    assert all(0.0 <= v <= 1.0 for v in history.history["accuracy"] + history.history["val_accuracy"])
    result = model.evaluate(X, Y, verbose=0)
    assert isinstance(result, list) and [type(v) for v in result] == [float, float]
    assert sorted(model.evaluate(X, Y, verbose=0, return_dict=True)) == ["accuracy", "loss"]
    predictions = model.predict(X, verbose=0)
    assert type(predictions) is np.ndarray and predictions.dtype == np.float32 and predictions.shape == (16, 3)
    np.testing.assert_array_equal(predictions, model.predict(X, verbose=0))  # Dropout is off in predict
    probabilities = np.asarray(tf.nn.softmax(predictions))
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    assert type(np.argmax(probabilities[0])) is np.int64
    probability_model = tf.keras.Sequential([model, tf.keras.layers.Softmax()])
    single = probability_model.predict(X[:1], verbose=0)
    assert single.shape == (1, 3) and single.dtype == np.float32


def test_classification_fit_evaluate_predict() -> None:
    _check_classifier(*_classifier(contextlib.nullcontext()))


def test_classification_under_mirrored_strategy() -> None:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"])
    model, history = _classifier(strategy.scope())
    _check_classifier(model, history)


def test_normalization_count_is_int64_and_summary_sizes_it(tmp_path: Any) -> None:
    # TF: Normalization's weights are mean/variance float32 and count int64; summary counts int64 at 8 bytes.
    norm = tf.keras.layers.Normalization(axis=-1, name="normalization")  # named: Keras numbers unnamed layers
    norm.adapt(_RS.random((10, 3)))
    assert [(w.path, str(w.dtype)) for w in norm.weights] == [
        ("normalization/mean", "float32"), ("normalization/variance", "float32"), ("normalization/count", "int64")]
    one = tf.keras.layers.Normalization(axis=None)
    one.adapt(np.arange(10.0))  # the regression tutorial's horsepower normalizer: mean shape (1,)
    assert np.asarray(one.mean).shape == (1,) and float(np.asarray(one.mean)[0]) == 4.5
    assert [str(w.dtype) for w in one.weights] == ["float32", "float32", "int64"]
    model = tf.keras.Sequential([norm, tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.Adam(0.1), "mean_absolute_error")
    history = model.fit(_RS.random((10, 3)), np.ones(10), epochs=1, verbose=0)
    assert sorted(history.history) == ["loss"]
    assert _summary_tail(model) == [  # observed in TF 2.21, Keras 3.15
        "Total params: 21 (92.00 B)", "Trainable params: 4 (16.00 B)", "Non-trainable params: 7 (32.00 B)",
        "Optimizer params: 10 (44.00 B)"]
    model.save(str(tmp_path / "n.keras"))
    loaded = tf.keras.models.load_model(str(tmp_path / "n.keras"))
    assert [(w.path, str(w.dtype)) for w in loaded.layers[0].weights][2] == ("normalization/count", "int64")
    x = _RS.random((4, 3)).astype("float32")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    loaded.save_weights(str(tmp_path / "n.weights.h5"))
    model.load_weights(str(tmp_path / "n.weights.h5"))
    assert isinstance(model.evaluate(x, np.ones(4), verbose=0), float)  # no metrics: a float, as TF's


def test_early_stopping_stops_after_patience() -> None:
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.SGD(0.0), "mae")
    stop = tf.keras.callbacks.EarlyStopping(monitor="val_loss", patience=1)
    history = model.fit(_RS.random((8, 4)), np.ones(8), validation_split=0.5, epochs=6, callbacks=[stop], verbose=0)
    # observed in TF 2.21, Keras 3.15: epochs [0, 1], stopped_epoch 1, wait 1, best a float
    assert history.epoch == [0, 1] and stop.stopped_epoch == 1 and stop.wait == 1 and type(stop.best) is float


def test_model_checkpoint_weight_files_and_latest_checkpoint(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
    os.makedirs("ck")
    model.save_weights("ck/cp-0000.weights.h5")  # the tutorial's checkpoint_path.format(epoch=0)
    every = tf.keras.callbacks.ModelCheckpoint(filepath="ck/cp-{epoch:04d}.weights.h5", save_weights_only=True,
                                               save_freq=2 * 2, verbose=0)
    model.fit(_RS.random((8, 4)), np.arange(8) % 2, batch_size=4, epochs=5, callbacks=[every], verbose=0)
    # observed in TF 2.21, Keras 3.15: saves after batches 4 and 8 name epochs 2 and 4; no TF checkpoint state
    assert sorted(os.listdir("ck")) == ["cp-0000.weights.h5", "cp-0002.weights.h5", "cp-0004.weights.h5"]
    assert tf.train.latest_checkpoint("ck") is None
    each = tf.keras.callbacks.ModelCheckpoint(filepath="c1/cp.weights.h5", save_weights_only=True)
    history = model.fit(_RS.random((8, 4)), np.arange(8) % 2, epochs=1, callbacks=[each], verbose=0)
    assert os.listdir("c1") == ["cp.weights.h5"]
    assert sorted(history.history) == ["loss", "sparse_categorical_accuracy"]
    fresh = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    fresh.load_weights("c1/cp.weights.h5")
    for a, b in zip(fresh.weights, model.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_inverse_time_decay_and_l2() -> None:
    schedule = tf.keras.optimizers.schedules.InverseTimeDecay(0.001, decay_steps=20 * 1000, decay_rate=1,
                                                              staircase=False)
    rates = np.asarray(schedule(np.linspace(0, 100000)))
    # observed in TF 2.21, Keras 3.15: float32 (50,), last 0.0001666667, at step 25 0.0009987516
    assert rates.dtype == np.float32 and rates.shape == (50,)
    assert round(float(rates[-1]), 10) == 0.0001666667
    assert round(float(np.asarray(schedule(25))), 10) == 0.0009987516
    assert schedule.get_config() == {"initial_learning_rate": 0.001, "decay_steps": 20000, "decay_rate": 1,
                                     "staircase": False, "name": "InverseTimeDecay"}
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(
        3, kernel_regularizer=tf.keras.regularizers.l2(0.001), kernel_initializer="ones")])
    model(np.ones((1, 4), "float32"))
    assert len(model.losses) == 1 and round(float(tf.add_n(model.losses)), 6) == 0.012  # TF: [1, 0.012]


def test_overfit_tutorial_csv_pipeline_fit(tmp_path: Any) -> None:
    import gzip

    rows = np.random.default_rng(1).normal(size=(60, 5))
    rows[:, 0] = rows[:, 0] > 0
    path = str(tmp_path / "h.csv.gz")
    with gzip.open(path, "wt") as f:
        f.write("\n".join(",".join(f"{v:.6f}" for v in r) for r in rows) + "\n")
    ds = tf.data.experimental.CsvDataset(path, [0.0] * 5, compression_type="GZIP")

    def pack_row(*row: Any) -> Any:
        return tf.stack(row[1:], 1), row[0]

    packed = ds.batch(25).map(pack_row).unbatch()
    features, labels = next(iter(packed.batch(60)))
    assert tuple(features.shape) == (60, 4) and features.dtype == tf.float32 and tuple(labels.shape) == (60,)
    np.testing.assert_allclose(np.asarray(features), rows[:, 1:].astype("float32"), atol=1e-6)
    validate = packed.take(20).cache().batch(10)
    train = packed.skip(20).take(40).cache().shuffle(40).repeat().batch(10)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(4, activation="elu"),
                                 tf.keras.layers.Dense(1)])
    schedule = tf.keras.optimizers.schedules.InverseTimeDecay(0.001, decay_steps=4000, decay_rate=1)
    model.compile(optimizer=tf.keras.optimizers.Adam(schedule),
                  loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[tf.keras.metrics.BinaryCrossentropy(from_logits=True, name="binary_crossentropy"),
                           "accuracy"])
    history = model.fit(
        train.map(lambda x, y: (x, tf.expand_dims(y, axis=-1))), steps_per_epoch=4, epochs=3,
        validation_data=validate.map(lambda x, y: (x, tf.expand_dims(y, axis=-1))),
        callbacks=[tf.keras.callbacks.EarlyStopping(monitor="val_binary_crossentropy", patience=200),
                   tf.keras.callbacks.TensorBoard(str(tmp_path / "tb"))], verbose=0)
    # observed in TF 2.21, Keras 3.15
    assert sorted(history.history) == ["accuracy", "binary_crossentropy", "loss", "val_accuracy",
                                       "val_binary_crossentropy", "val_loss"]
    assert history.epoch == [0, 1, 2] and history.params == {"verbose": 0, "epochs": 3, "steps": 4}
    assert sorted(os.listdir(tmp_path / "tb")) == ["train", "validation"]
    assert int(model.optimizer.iterations.numpy()) == 12
    assert round(float(np.asarray(model.optimizer.learning_rate)), 9) == 0.000997009
