"""Keras's `compile`/`fit`/`evaluate`/`predict` under `tf.distribute.MirroredStrategy`, as TF 2.21 runs them.

Each case starts from the same fixed weights on fixed data, unshuffled; the values recorded are TF's (tensorflow-cpu
2.21, Keras 3.15 on TensorFlow, CPU split into as many logical devices as replicas). A batch the replicas do not
divide trains as TF trains it: split in chunks of ceil(rows / replicas), the gradient the mean of the replicas' means.
"""
from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.input.split import chunk_sizes  # noqa: E402
from jdist.interop.keras_replica_means import replica_weights  # noqa: E402

keras = tf.keras

_RS = np.random.RandomState(0)
X = _RS.randn(22, 5).astype("float32")
Y = _RS.randint(0, 3, 22)
YR = _RS.randn(22, 1).astype("float32")
W0 = [_RS.randn(5, 4).astype("float32") * 0.5, _RS.randn(4).astype("float32") * 0.1,
      _RS.randn(4, 3).astype("float32") * 0.5, _RS.randn(3).astype("float32") * 0.1]


@pytest.mark.parametrize("rows, replicas, observed", [
    # observed, TF 2.21: per-replica rows of each batch of `strategy.experimental_distribute_dataset`
    (8, 4, [2, 2, 2, 2]), (6, 4, [2, 2, 2, 0]), (5, 4, [2, 2, 1, 0]), (7, 4, [2, 2, 2, 1]), (3, 4, [1, 1, 1, 0]),
    (1, 4, [1, 0, 0, 0]), (8, 3, [3, 3, 2]), (6, 3, [2, 2, 2]), (2, 3, [1, 1, 0]), (4, 3, [2, 2, 0]),
])
def test_rows_weigh_as_tfs_mean_of_replica_means(rows, replicas, observed):
    assert chunk_sizes(rows, replicas) == observed
    weights = replica_weights(rows, replicas)
    expected = np.concatenate([np.full(n, 1 / (replicas * n)) for n in observed if n]) * rows
    if np.allclose(expected, 1.0):
        assert weights is None
    else:
        assert weights is not None
        np.testing.assert_allclose(weights, expected, rtol=1e-6)
        assert weights.sum() == pytest.approx(rows * sum(1 for n in observed if n) / replicas)


def _strategy(replicas) -> Any:
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)]) if replicas else None


def _classifier(strategy, lr=0.1, optimizer="sgd", **compile_kwargs):
    with strategy.scope() if strategy else _nothing():
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        model.set_weights(W0)
        opt = keras.optimizers.SGD(lr) if optimizer == "sgd" else keras.optimizers.Adam(lr)
        model.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"], **compile_kwargs)
    return model


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_SW = np.linspace(0.5, 2.0, 22).astype("float32")

# observed, TF 2.21 (Keras 3): history, final output bias, evaluate(return_dict=True)
_OBSERVED_4 = {
    "plain": ({"accuracy": [0.3636363744735718, 0.3636363744735718, 0.4545454680919647],
               "loss": [1.148160457611084, 1.1090710163116455, 1.08128023147583]},
              [-0.07643140852451324, -0.020678751170635223, 0.01790544018149376],
              {"accuracy": 0.4545454680919647, "loss": 1.0527615547180176}),
    "sample_weight": ({"accuracy": [0.3636363744735718, 0.3636363744735718],
                       "loss": [1.3457021713256836, 1.2937628030776978],
                       "weighted_accuracy": [0.425974041223526, 0.425974041223526]},
                      [-0.08862730860710144, 0.009362505748867989, 6.007961928844452e-05],
                      {"accuracy": 0.3636363744735718, "loss": 1.243618130683899,
                       "weighted_accuracy": 0.4025973975658417}),
    "class_weight": ({"accuracy": [0.3636363744735718, 0.3636363744735718],
                      "loss": [1.123122215270996, 1.093240737915039]},
                     [-0.06583528965711594, 0.07983361929655075, -0.09320305287837982], None),
}


@pytest.mark.parametrize("case", sorted(_OBSERVED_4))
def test_fit_with_a_short_last_batch_on_4_replicas_matches_tf(case):
    """22 rows at batch_size=8: the last batch of 6 is split 2, 2, 2, 0, so TF's gradient weighs it 6 / 8."""
    history_observed, bias_observed, evaluated_observed = _OBSERVED_4[case]
    compile_kwargs: dict[str, Any] = {"weighted_metrics": ["accuracy"]} if case == "sample_weight" else {}
    fit_kwargs: dict[str, Any] = {"sample_weight": _SW} if case == "sample_weight" else {}
    if case == "class_weight":
        fit_kwargs["class_weight"] = {0: 1.0, 1: 2.0, 2: 0.5}
    epochs = len(history_observed["loss"])
    model = _classifier(_strategy(4), **compile_kwargs)
    history = model.fit(X, Y, batch_size=8, epochs=epochs, shuffle=False, verbose=0, **fit_kwargs)
    assert sorted(history.history) == sorted(history_observed)
    for key, values in history_observed.items():
        np.testing.assert_allclose(history.history[key], values, rtol=2e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(model.get_weights()[3], bias_observed, rtol=1e-4, atol=1e-6)
    assert model.metrics_names == ["loss", "compile_metrics"]
    if evaluated_observed is not None:
        evaluated = model.evaluate(X, Y, batch_size=8, verbose=0, return_dict=True,
                                   sample_weight=fit_kwargs.get("sample_weight"))
        assert evaluated == pytest.approx(evaluated_observed, rel=2e-5)

    if case == "plain":  # one device, the last 6 rows' gradient weighted 0.75, trains to the same weights
        twin = _classifier(None)
        row_weights = np.ones(22, np.float32)
        row_weights[16:] = 0.75
        twin.fit(X, Y, batch_size=8, epochs=epochs, shuffle=False, verbose=0, sample_weight=row_weights)
        for got, want in zip(model.get_weights(), twin.get_weights()):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_every_batch_split_unevenly_on_3_replicas_matches_tf():
    """batch_size=8 on 3 replicas: every batch is split 3, 3, 2 (the last, of 6, 2, 2, 2). TF 2.21's Keras 3 fails
    this script ("Inputs to operation AddN ... must have the same size and shape", building the model's metrics on
    the first batch); tf_keras runs it."""
    model = _classifier(_strategy(3))
    history = model.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    # observed, TF 2.21 (tf_keras)
    np.testing.assert_allclose(history.history["loss"], [1.1511603593826294, 1.1083426475524902, 1.0777570009231567],
                               rtol=2e-5)
    np.testing.assert_allclose(history.history["accuracy"],
                               [0.3636363744735718, 0.40909090638160706, 0.40909090638160706], rtol=2e-5)
    np.testing.assert_allclose(model.get_weights()[3],
                               [-0.07506094127893448, -0.02307652309536934, 0.018932737410068512], rtol=1e-4)
    evaluated = model.evaluate(X, Y, batch_size=8, verbose=0, return_dict=True)
    assert evaluated == pytest.approx({"loss": 1.046739101409912, "accuracy": 0.4545454680919647}, rel=2e-5)


def test_tf_data_repeat_steps_per_epoch_and_validation_steps_match_tf():
    """`batch(8).repeat()` with steps_per_epoch=2: the second epoch starts on the short batch of 6."""
    model = _classifier(_strategy(4))
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(8).repeat()
    validation = tf.data.Dataset.from_tensor_slices((X[:12], Y[:12])).batch(4).repeat()
    history = model.fit(ds, epochs=2, steps_per_epoch=2, validation_data=validation, validation_steps=2, verbose=0)
    observed = {"accuracy": [0.25, 0.4285714328289032], "loss": [1.2096281051635742, 1.147072434425354],
                "val_accuracy": [0.25, 0.375], "val_loss": [1.2718429565429688, 1.2204976081848145]}
    # observed, TF 2.21 (Keras 3)
    assert sorted(history.history) == sorted(observed)
    for key, values in observed.items():
        np.testing.assert_allclose(history.history[key], values, rtol=2e-5, err_msg=key)
    np.testing.assert_allclose(model.get_weights()[3],
                               [-0.05028311908245087, -0.025702156126499176, -0.003219442442059517],
                               rtol=1e-4, atol=1e-6)  # observed, TF 2.21 (Keras 3)
    evaluated = model.evaluate(validation, steps=3, verbose=0, return_dict=True)
    assert evaluated == pytest.approx({"accuracy": 0.3333333432674408, "loss": 1.1344919204711914}, rel=2e-5)


def test_batch_normalization_uses_each_replicas_statistics_as_tf():
    """TF normalizes each replica's 2 rows (batch_size=8, 4 replicas) by their own moments."""
    with _strategy(4).scope():
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4), keras.layers.BatchNormalization(),
                                  keras.layers.Activation("relu"), keras.layers.Dense(3, activation="softmax")])
        model.set_weights([W0[0], W0[1]] + model.get_weights()[2:6] + [W0[2], W0[3]])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    history = model.fit(X[:16], Y[:16], batch_size=8, epochs=2, shuffle=False, verbose=0)
    # observed, TF 2.21 (Keras 3)
    np.testing.assert_allclose(history.history["loss"], [1.2294622659683228, 1.2074617147445679], rtol=2e-5)
    assert history.history["accuracy"] == pytest.approx([0.3125, 0.3125])
    weights = model.get_weights()
    np.testing.assert_allclose(weights[4], [0.0001338208094239235, -0.021579580381512642, 0.005874010268598795,
                                            0.005046417471021414], atol=2e-6)  # moving mean
    np.testing.assert_allclose(weights[5], [0.9622496962547302, 1.0232940912246704, 1.0739866495132446,
                                            0.9767009615898132], rtol=1e-5)  # moving variance
    np.testing.assert_allclose(weights[7], [-0.040442679077386856, -0.01235936488956213, -0.026402683928608894],
                               rtol=1e-4)


def test_batch_normalization_moving_statistics_are_the_first_replicas():
    """TF's moving statistics keep the first replica's update (observed, TF 2.21 with Keras 3: momentum=0, lr=0,
    8 rows on 4 replicas: the moving mean and variance are rows 0 and 1's)."""
    x = np.arange(16, dtype="float32").reshape(8, 2) ** 1.5
    with _strategy(4).scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.BatchNormalization(momentum=0.0)])
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    model.fit(x, np.zeros((8, 2), "float32"), batch_size=8, epochs=1, verbose=0, shuffle=False)
    layer = model.layers[0]
    # observed, TF 2.21 (Keras 3)
    np.testing.assert_allclose(np.asarray(layer.moving_mean), [1.4142135381698608, 3.098076343536377], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(layer.moving_variance), [1.9999998807907104, 4.401924133300781], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(layer.moving_mean), x[:2].mean(0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(layer.moving_variance), x[:2].var(0), rtol=1e-5)
    outputs = model(x, training=True)  # called directly, as on TF: one call over the whole batch
    expected = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3)
    np.testing.assert_allclose(np.asarray(outputs), expected, rtol=1e-4, atol=1e-5)


def _two_outputs(strategy):
    with strategy.scope() if strategy else _nothing():
        a, b = keras.Input((5,), name="a"), keras.Input((2,), name="b")
        hidden = keras.layers.Dense(4, activation="relu", name="hid")(keras.layers.Concatenate()([a, b]))
        model = keras.Model({"a": a, "b": b}, {"cls": keras.layers.Dense(3, activation="softmax", name="cls")(hidden),
                                               "reg": keras.layers.Dense(1, name="reg")(hidden)})
        rs = np.random.RandomState(1)
        model.set_weights([rs.randn(*w.shape).astype("float32") * 0.3 for w in model.get_weights()])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss_weights={"cls": 1.0, "reg": 0.5},
                      loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
                      metrics={"cls": ["accuracy"], "reg": ["mae"]})
    return model


def test_dict_losses_with_a_short_batch_equal_one_device_with_tfs_row_weights():
    """Two outputs, dict losses and loss_weights, 22 rows at batch_size=8 on 4 replicas (the last 6 split 2, 2, 2,
    0): the same weights as one device whose last 6 rows weigh 0.75 in every output's loss."""
    inputs = {"a": X, "b": np.random.RandomState(2).randn(22, 2).astype("float32")}
    targets = {"cls": Y, "reg": YR}
    weights = {"cls": _SW, "reg": _SW[::-1].copy()}  # one sample weight per output
    model = _two_outputs(_strategy(4))
    history = model.fit(inputs, targets, sample_weight=weights, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert sorted(history.history) == ["cls_accuracy", "cls_loss", "loss", "reg_loss", "reg_mae"]
    assert model.metrics_names == ["loss", "compile_metrics", "cls_loss", "reg_loss"]

    rows = np.ones(22, np.float32)
    rows[16:] = 0.75
    twin = _two_outputs(None)
    twin_weights = {k: w * rows for k, w in weights.items()}
    twin.fit(inputs, targets, sample_weight=twin_weights, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for got, want in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_train_on_batch_gives_every_replica_the_whole_batch_as_tf():
    """TF 2.21's `train_on_batch` under a strategy does not split the batch (its `predict_on_batch` of 5 rows on 4
    replicas returns 20 rows, observed): 6 rows train as on one device, and BatchNormalization takes the statistics
    of the whole batch."""
    strategy = _strategy(4)
    model = _classifier(strategy)
    with strategy.scope():
        first = model.train_on_batch(X[:6], Y[:6], return_dict=True)
        second = model.train_on_batch(X[6:11], Y[6:11])
        tested = model.test_on_batch(X[:5], Y[:5], return_dict=True)
        normalized = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4),
                                       keras.layers.BatchNormalization(momentum=0.5),
                                       keras.layers.Dense(3, activation="softmax")])
        normalized.set_weights([W0[0], W0[1]] + normalized.get_weights()[2:6] + [W0[2], W0[3]])
        normalized.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
        normalized_loss = normalized.train_on_batch(X[:8], Y[:8])
    # observed, TF 2.21 (Keras 3)
    assert first == pytest.approx({"accuracy": 0.3333333432674408, "loss": 1.3378924131393433}, rel=2e-5)
    assert second == pytest.approx([1.080873727798462, 0.20000000298023224], rel=2e-5)
    assert tested == pytest.approx({"accuracy": 0.4000000059604645, "loss": 1.2950122356414795}, rel=2e-5)
    np.testing.assert_allclose(model.get_weights()[3],
                               [-0.057476550340652466, -0.03897863253951073, 0.017250455915927887], rtol=1e-4)
    assert float(normalized_loss) == pytest.approx(1.676831603050232, rel=2e-5)
    np.testing.assert_allclose(normalized.get_weights()[4], [-0.3395165503025055, 0.22545388340950012,
                                                             -0.6114234924316406, 0.07912580668926239], rtol=1e-5)


def test_train_on_batch_after_fit_on_the_same_shape_keeps_its_own_step():
    """`fit` weighs a batch of 6 rows as 4 replicas split it; `train_on_batch` of 6 rows afterwards does not."""
    strategy = _strategy(4)
    model = _classifier(strategy)
    twin = _classifier(None)
    with strategy.scope():
        model.fit(X[:6], Y[:6], batch_size=6, epochs=1, shuffle=False, verbose=0)
        for _ in range(2):
            model.train_on_batch(X[6:12], Y[6:12])
        model.fit(X[:6], Y[:6], batch_size=6, epochs=1, shuffle=False, verbose=0)
    rows = np.full(6, 0.75, np.float32)  # 6 rows on 4 replicas: 2, 2, 2, 0
    twin.fit(X[:6], Y[:6], batch_size=6, epochs=1, shuffle=False, verbose=0, sample_weight=rows)
    for _ in range(2):
        twin.train_on_batch(X[6:12], Y[6:12])
    twin.fit(X[:6], Y[:6], batch_size=6, epochs=1, shuffle=False, verbose=0, sample_weight=rows)
    for got, want in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
