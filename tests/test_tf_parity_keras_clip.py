"""Keras's `fit` and `train_on_batch` under `tf.distribute.MirroredStrategy` where the replicas' gradient sum is not
the whole batch's gradient: clipping optimizers, `mixed_float16`, a loss function that returns a scalar.

The values recorded are observed in TF 2.21, Keras 3.15 (tensorflow-cpu, CPU split into as many logical devices
as replicas), from the same fixed weights on the same data, unshuffled: 22 rows at batch_size=8, so the last batch
of 6 goes to 4 replicas as 2, 2, 2, 0 and to 2 replicas as 3, 3. `train_on_batch` runs outside the scope, where TF
still gives every replica the whole batch.
"""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tf_parity_common import B, W, X, Y, mirrored  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

keras = tf.keras

_strategy = mirrored


def _model(strategy, optimizer, loss="mse"):
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.set_weights([W, B])
        model.compile(optimizer=optimizer(), loss=loss)
    return model


def _flat(model) -> np.ndarray:
    kernel, bias = model.get_weights()
    return np.concatenate([kernel.ravel(), bias])


_OPTIMIZERS = {
    "sgd_clipnorm": lambda: keras.optimizers.SGD(0.1, clipnorm=1.0),
    "sgd_clipvalue": lambda: keras.optimizers.SGD(0.1, clipvalue=0.5),
    "sgd_global": lambda: keras.optimizers.SGD(0.1, global_clipnorm=1.0),
    "adam_clipnorm": lambda: keras.optimizers.Adam(0.1, clipnorm=0.5),
    "adam_global": lambda: keras.optimizers.Adam(0.1, global_clipnorm=0.5),
}


# Observed in TF 2.21, Keras 3.15: weights (kernel then bias) and epoch losses after fit(epochs=2); weights and
# loss after two train_on_batch(X[:6], Y[:6]) from the initial weights. Before, jdist clipped the whole batch's
# gradient: up to 0.49 off in fit and 0.37 in train_on_batch (4 replicas).
@pytest.mark.parametrize("replicas, name, fit_weights, fit_losses, tob_weights, tob_loss", [
    (2, "sgd_clipnorm", [-0.149995, -0.395461, 0.100111, 0.303658, -0.361258, 0.37503, -0.001404, 0.413385],
     [30.777809, 28.324402],
     [-0.137084, -0.206645, 0.047359, 0.349386, -0.36382, 0.463907, -0.14603, -0.394246], 25.008211),
    (2, "adam_global", [-0.317959, -0.412991, -0.121159, 0.063483, -0.159596, 0.146602, -0.174673, 0.226765],
     [31.369013, 27.277132],
     [-0.099868, -0.252577, 0.099988, 0.208358, -0.29989, 0.399869, -0.148443, -0.248777], 25.174646),
    (4, "sgd_clipvalue", [-0.115072, -0.5, 0.18274, 0.299911, -0.223028, 0.49437, 0.048059, 0.34341],
     [30.682922, 28.059349],
     [-0.3, -0.079783, -0.1, 0.168619, -0.1, 0.2, -0.148406, -0.359776], 21.74218),
    (4, "sgd_global", [-0.077758, -0.476811, 0.093754, 0.220325, -0.309265, 0.321831, 0.023162, 0.14177],
     [30.657562, 28.422319],
     [-0.348977, -0.214533, -0.196749, 0.28647, -0.219164, 0.307242, 0.013852, -0.138677], 22.150244),
    (4, "adam_clipnorm", [-0.151577, -0.634967, -0.053157, -0.099591, -0.146501, 0.18708, 0.013581, 0.144309],
     [30.524717, 27.463728],
     [-0.099858, -0.252657, 0.099994, 0.208399, -0.299892, 0.39987, -0.149095, -0.249356], 25.174631),
])
def test_clipping_optimizers_clip_each_replicas_gradients_before_the_sum(replicas, name, fit_weights, fit_losses,
                                                                        tob_weights, tob_loss):
    strategy = _strategy(replicas)
    model = _model(strategy, _OPTIMIZERS[name])
    history = model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(_flat(model), fit_weights, atol=3e-6)
    np.testing.assert_allclose(history.history["loss"], fit_losses, rtol=1e-5)

    model = _model(strategy, _OPTIMIZERS[name])
    for _ in range(2):
        loss = model.train_on_batch(X[:6], Y[:6])
    np.testing.assert_allclose(_flat(model), tob_weights, atol=3e-6)
    assert float(loss) == pytest.approx(tob_loss, rel=1e-5)


def test_clipvalue_bounds_each_replica_so_a_step_moves_up_to_replicas_times_the_clip():
    # Observed in TF 2.21, Keras 3.15 on 4 replicas: SGD(0.1, clipvalue=0.5), two train_on_batch steps on large
    # gradients move the first kernel entry by 2 * 0.1 * 4 * 0.5 (one device would move it by 2 * 0.1 * 0.5).
    model = _model(_strategy(4), _OPTIMIZERS["sgd_clipvalue"])
    for _ in range(2):
        model.train_on_batch(X[:6], Y[:6])
    assert _flat(model)[0] == pytest.approx(0.1 - 2 * 0.1 * 4 * 0.5, abs=1e-6)


@pytest.mark.parametrize("replicas", [2, 4])
def test_mixed_float16_sums_each_replicas_float16_gradient_in_float32(replicas):
    # 8 rows whose float16 weight gradient (at LossScaleOptimizer's initial scale 2**15) overflows over the whole
    # batch, not over 4 (2 replicas) or 2 (4 replicas). Observed in TF 2.21, Keras 3.15, on 2 and 4 replicas: the
    # step is applied (kernel -0.03) and the scale stays 32768; the loss 0.0225. Before, jdist skipped the step and
    # halved the scale to 16384.
    x = np.full((8, 1), 10.0, "float32")
    y = np.full((8, 1), -0.15, "float32")
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with _strategy(replicas).scope():
            model = keras.Sequential([keras.Input((1,)),
                                      keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
            model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        assert isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer)
        history = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert float(model.get_weights()[0].ravel()[0]) == pytest.approx(-0.03, abs=1e-6)
    assert float(np.asarray(model.optimizer.dynamic_scale)) == 32768.0
    assert history.history["loss"] == pytest.approx([0.0225], rel=1e-4)


_SW = np.linspace(0.2, 2.0, 22).astype("float32")
_SCALAR_LOSSES = {
    "scalar_mean": lambda t, p: tf.reduce_mean(tf.square(t - p)),
    "scalar_sum": lambda t, p: tf.reduce_sum(tf.abs(t - p)),
}


def _scalar_data():
    rs = np.random.RandomState(0)
    return rs.normal(size=(22, 3)).astype("float32"), rs.normal(size=(22, 2)).astype("float32")


# Observed in TF 2.21, Keras 3.15: a loss that returns a scalar is not scaled by 1 / replicas (Keras scales only
# what it reduces), so the replicas' gradients add up and the logged loss is replicas times theirs; with a
# sample_weight Keras reduces the weighted value and scales it. Weights after fit(epochs=2), the epochs' losses;
# then train_on_batch(x[:6], y[:6], sample_weight[:6]) on the trained model (every replica the whole batch).
# Before, jdist logged 1.46675 where TF logs 2.92554 (unweighted, 2 replicas), and trained accordingly.
@pytest.mark.parametrize("replicas, name, weighted, fit_weights, fit_losses, tob", [
    (2, "scalar_mean", False,
     [-0.15869, -0.324958, 0.047805, 0.260537, -0.173603, 0.259788, 0.000499, 0.316779], [2.92554, 2.25673],
     ([-0.237715, -0.341038, -0.059796, 0.210369, -0.103931, 0.168863, -0.000311, 0.214133], 1.96948)),
    (4, "scalar_mean", True,
     [-0.026173, -0.30921, 0.210878, 0.275658, -0.365022, 0.422348, 0.017886, 0.273395], [1.53529, 1.32507],
     ([-0.058046, -0.312588, 0.174568, 0.26686, -0.343761, 0.399308, 0.008826, 0.251037], 0.54923)),
    (2, "scalar_sum", True,
     [-0.012506, -0.223044, -0.050604, 0.383095, -0.043464, 0.601373, -0.072857, 0.478571], [7.7709, 6.86701],
     None),
    (4, "scalar_sum", False,
     [0.069138, 0.001342, 0.014552, 0.241874, -0.137718, 0.285436, 0.25, 0.55], [16.77183, 17.12129], None),
])
def test_a_loss_that_returns_a_scalar_counts_per_replica_as_tfs(replicas, name, weighted, fit_weights, fit_losses,
                                                                  tob):
    x, y = _scalar_data()
    strategy = _strategy(replicas)
    model = _model(strategy, lambda: keras.optimizers.SGD(0.1), loss=_SCALAR_LOSSES[name])
    history = model.fit(x, y, sample_weight=_SW if weighted else None, batch_size=8, epochs=2, shuffle=False,
                        verbose=0)
    np.testing.assert_allclose(_flat(model), fit_weights, atol=3e-6)
    np.testing.assert_allclose(history.history["loss"], fit_losses, rtol=1e-5)
    if tob is not None:  # a batch of the shape of fit's last one: its own trace, every replica the whole batch
        loss = model.train_on_batch(x[:6], y[:6], sample_weight=_SW[:6] if weighted else None)
        np.testing.assert_allclose(_flat(model), tob[0], atol=3e-6)
        assert float(loss) == pytest.approx(tob[1], rel=1e-5)
