"""Keras losses, metrics and stateful layers in TF-style custom loops (`strategy.run` in a `tf.function`) under
`MirroredStrategy` on 4 and 3 replicas, against TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15, 4 or 3 logical CPUs)
run on the same data and weights; the observed values are recorded below."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

RTOL, ATOL = 2e-5, 2e-6  # float32, summation order differs


def _strategy(replicas):
    return tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])


def _local(strategy, value):
    return [np.asarray(v) for v in strategy.experimental_local_results(value)]


# ---------------------------------------------------------------------------------------------- losses
# observed, TF 2.21 (Keras 3): 10 examples over 4 replicas (3, 3, 3, 1 rows), each replica's value (printed
# rounded to 5 decimals).
_LOSSES_TF = {
    "sum": [3.030819892883301, 1.7000399827957153, 6.027400016784668, 0.8137099742889404],
    # a batch-averaged Keras loss is scaled by 1 / replicas in a replica function
    "sum_over_batch_size": [0.2525700032711029, 0.14167000353336334, 0.5022799968719482, 0.20342999696731567],
    "sum_over_batch_size_weighted": [0.18873000144958496, 0.02369000017642975, 0.24487000703811646,
                                     0.049720000475645065],
    "compute_average_loss_global": [0.3030799925327301, 0.17000000178813934, 0.6027399897575378,
                                    0.08137000352144241],
    "compute_average_loss_weighted": [0.2264699935913086, 0.028429999947547913, 0.29385000467300415,
                                      0.01988999918103218],
    # no global_batch_size: the replica's rows times the replicas (12, 12, 12 and 4)
    "compute_average_loss_default": [0.2525700032711029, 0.14167000353336334, 0.5022799968719482,
                                     0.20342999696731567],
}


def _loss_data():
    rs = np.random.RandomState(0)
    x = rs.randn(10, 3).astype("float32")
    yi = rs.randint(0, 3, size=(10,)).astype("int32")
    rs.randint(0, 2, size=(10, 1))
    sw = rs.rand(10).astype("float32")
    return x, yi, sw


def _softmax_ce(x, y):
    z = x - x.max(1, keepdims=True)
    return np.log(np.exp(z).sum(1)) - z[np.arange(len(y)), y]


@pytest.mark.parametrize("components", [True, False])
def test_keras_losses_and_compute_average_loss_per_replica(components):
    strategy = _strategy(4)
    x, yi, sw = _loss_data()
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, yi, sw)).batch(10))
    reduction = tf.keras.losses.Reduction
    with strategy.scope():
        none = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction.NONE)
        total = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction.SUM)
        mean = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                             reduction=reduction.SUM_OVER_BATCH_SIZE)

    def fn(x, y, w):
        per_example = none(y, x)
        return {"sum": total(y, x), "sum_over_batch_size": mean(y, x),
                "sum_over_batch_size_weighted": mean(y, x, sample_weight=w),
                "compute_average_loss_global": tf.nn.compute_average_loss(per_example, global_batch_size=10),
                "compute_average_loss_weighted": tf.nn.compute_average_loss(per_example, sample_weight=w,
                                                                            global_batch_size=10),
                "compute_average_loss_default": tf.nn.compute_average_loss(per_example),
                "per_example": per_example}

    @tf.function
    def step(batch):
        return strategy.run(fn, args=tuple(batch)) if components else strategy.run(lambda b: fn(*b), args=(batch,))

    out = step(next(iter(dist)))
    for name, expected in _LOSSES_TF.items():
        np.testing.assert_allclose([float(v) for v in _local(strategy, out[name])], expected, atol=6e-6,
                                   err_msg=name)
    per_example = np.concatenate(_local(strategy, out["per_example"]))
    np.testing.assert_allclose(per_example, _softmax_ce(x, yi), rtol=RTOL, atol=ATOL)  # one device's
    rows = [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 10)]
    np.testing.assert_allclose(_LOSSES_TF["sum_over_batch_size"],
                               [per_example[r].mean() / 4 for r in rows], rtol=1e-5)


# --------------------------------------------------------------------------------------------- metrics
# observed, TF 2.21 (Keras 3): 23 examples in batches of 8 over 4 replicas (the last split 2, 2, 2, 1).
_METRICS_TF = {"mean": 0.24126, "sum": 5.0322, "sca": 0.30435, "ca": 0.30435, "ba": 0.3913, "auc": 0.5,
               "auc_pr": 0.52063, "prec": 0.33333, "rec": 0.4, "mse": 0.17822, "miou": 0.17778,
               "topk": 0.47826, "stopk": 0.47826, "wmean": 0.26992, "scce": 1.67513, "acc": 0.30435}
_IN_FN_TF = [0.1666666716337204, 0.3333333432674408, 0.3333333432674408, 0.4000000059604645]


def _metrics():
    m = tf.keras.metrics
    return dict(mean=m.Mean(), sum=m.Sum(), sca=m.SparseCategoricalAccuracy(), ca=m.CategoricalAccuracy(),
                ba=m.BinaryAccuracy(), auc=m.AUC(), auc_pr=m.AUC(curve="PR", num_thresholds=50),
                prec=m.Precision(), rec=m.Recall(), mse=m.MeanSquaredError(), miou=m.MeanIoU(num_classes=4),
                topk=m.TopKCategoricalAccuracy(k=2), stopk=m.SparseTopKCategoricalAccuracy(k=2),
                wmean=m.Mean(name="wmean"), scce=m.SparseCategoricalCrossentropy(), acc=m.Accuracy())


@pytest.mark.parametrize("components", [True, False])
def test_metrics_updated_in_the_replica_function_on_uneven_batches(components):
    strategy = _strategy(4)
    rs = np.random.RandomState(1)
    logits = rs.randn(23, 4).astype("float32")
    probs = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype("float32")
    yi = rs.randint(0, 4, size=(23,)).astype("int32")
    yoh = np.eye(4, dtype="float32")[yi]
    yb = rs.randint(0, 2, size=(23, 1)).astype("float32")
    pb = rs.rand(23, 1).astype("float32")
    sw = rs.rand(23).astype("float32")
    dist = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((probs, yi, yoh, yb, pb, sw)).batch(8))
    with strategy.scope():
        ms = _metrics()

    def fn(probs, yi, yoh, yb, pb, sw):
        ms["mean"].update_state(probs[:, 0])
        ms["sum"].update_state(probs[:, 1])
        ms["sca"].update_state(yi, probs)
        ms["ca"].update_state(yoh, probs)
        for name in ("ba", "auc", "auc_pr", "prec", "rec"):
            ms[name].update_state(yb, pb)
        ms["mse"].update_state(yoh, probs, sample_weight=sw)
        ms["miou"].update_state(yi, tf.argmax(probs, axis=1))
        ms["topk"].update_state(yoh, probs)
        ms["stopk"].update_state(yi, probs)
        ms["wmean"].update_state(probs[:, 2], sample_weight=sw)
        ms["scce"].update_state(yi, probs)
        ms["acc"].update_state(yi, tf.argmax(probs, axis=1))
        return ms["sca"].result()

    @tf.function
    def step(batch):
        return strategy.run(fn, args=tuple(batch)) if components else strategy.run(lambda b: fn(*b), args=(batch,))

    for _ in range(2):  # reset_state between epochs: the same numbers again
        for batch in dist:
            in_fn = step(batch)
        np.testing.assert_allclose([float(v) for v in _local(strategy, in_fn)], _IN_FN_TF, rtol=1e-6)
        for name, expected in _METRICS_TF.items():
            assert float(ms[name].result()) == pytest.approx(expected, abs=1e-5), name
        for metric in ms.values():
            metric.reset_state()
    assert all(float(m.result()) == 0.0 for m in ms.values())
    # one device: the accuracy over all 23 examples
    assert float(np.mean(probs.argmax(1) == yi)) == pytest.approx(_METRICS_TF["sca"], abs=1e-5)


def test_a_custom_loop_over_unpacked_components_trains_on_a_short_batch():
    """`for x, y in dist_dataset: strategy.run(step, args=(x, y))` with `apply_gradients` (a collective) on 7
    examples over 4 replicas (2, 2, 2, 1): observed, TF 2.21 (Keras 3): loss 3.0459287, w [0.819712 1.157767
    0.583189]."""
    strategy = _strategy(4)
    rs = np.random.RandomState(1)
    x, y = rs.randn(7, 3).astype("float32"), rs.randn(7, 1).astype("float32")
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(7))
    with strategy.scope():
        w = tf.Variable(tf.ones((3, 1)))
        opt = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def step(x, y):
        def fn(x, y):
            with tf.GradientTape() as tape:
                per_example = tf.reduce_sum((tf.matmul(x, w) - y) ** 2, axis=1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=7)
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
            return loss
        return strategy.run(fn, args=(x, y))

    for xb, yb in dist:
        loss = step(xb, yb)
    assert float(strategy.reduce("SUM", loss, axis=None)) == pytest.approx(3.0459287, rel=1e-6)
    np.testing.assert_allclose(np.asarray(w.numpy()).ravel(), [0.819712, 1.157767, 0.583189], rtol=1e-5)
    one_device = np.ones((3, 1)) - 0.1 * 2 * x.T @ (x @ np.ones((3, 1)) - y) / 7
    np.testing.assert_allclose(np.asarray(w.numpy()), one_device, rtol=1e-5)


# -------------------------------------------------------------------------------------- batch normalization
# observed, TF 2.21 (Keras 3): BatchNormalization(momentum=0.5) called with training=True in two runs; each
# replica keeps its own moving statistics, the first replica's is read outside.
_BN_COPIES_TF = {
    4: dict(outside_mean=[35.445435, 39.002487], outside_var=[19.869476, 21.595257],
            inside_mean=[[35.4454345703125, 39.00248718261719], [50.99508285522461, 55.34712600708008],
                         [69.31877899169922, 74.25938415527344], [89.86375427246094, 95.31348419189453]],
            infer=[[-7.72730016708374, -8.177499771118164], [-9.680100440979004, -10.20460033416748],
                   [-11.816100120544434, -12.362299919128418], [-14.018799781799316, -14.575499534606934]]),
    3: dict(outside_mean=[39.20408, 42.972366], outside_var=[56.951157, 61.57317],
            inside_mean=[[39.204078674316406, 42.97236633300781], [64.63545227050781, 69.43363189697266],
                         [89.86375427246094, 95.31348419189453]],
            infer=[[-5.062399864196777, -5.348899841308594], [-6.936100006103516, -7.267099857330322]]),
}


@pytest.mark.parametrize("replicas", [4, 3])
def test_batch_norm_moving_statistics_are_kept_per_replica(replicas):
    strategy = _strategy(replicas)
    expected = _BN_COPIES_TF[replicas]
    x = np.arange(32, dtype="float32").reshape(16, 2) ** 1.5
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(8))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.BatchNormalization(momentum=0.5)])
    bn = model.layers[0]
    train = tf.function(lambda x: strategy.run(lambda v: model(v, training=True), args=(x,)))
    infer = tf.function(lambda x: strategy.run(lambda v: model(v, training=False), args=(x,)))
    read = tf.function(lambda: strategy.run(lambda: bn.moving_mean + 0.0))
    for batch in dist:
        train(batch)
    np.testing.assert_allclose(bn.moving_mean.numpy(), expected["outside_mean"], rtol=RTOL)
    np.testing.assert_allclose(bn.moving_variance.numpy(), expected["outside_var"], rtol=RTOL)
    np.testing.assert_allclose(_local(strategy, read()), expected["inside_mean"], rtol=RTOL)
    inferred = _local(strategy, infer(tf.constant(np.ones((4, 2), "float32"))))
    np.testing.assert_allclose([i[0] for i in inferred][:len(expected["infer"])], expected["infer"], rtol=1e-4)
    np.testing.assert_allclose(model.get_weights()[2], expected["outside_mean"], rtol=RTOL)  # the first replica's
    first = x[: -(-8 // replicas)]  # one device on replica 0's rows: two steps of momentum 0.5 from 0
    second = x[8: 8 + -(-8 // replicas)]
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.25 * first.mean(0) + 0.5 * second.mean(0), rtol=RTOL)
    model.set_weights(model.get_weights())  # assigned outside: the copies are equal again
    np.testing.assert_allclose(_local(strategy, read()), [expected["outside_mean"]] * replicas, rtol=RTOL)


# observed, TF 2.21 (Keras 3): Dense(4, ones) -> BatchNormalization(momentum=0.5) -> Dense(3, ones), SGD(0.1),
# 24 examples in batches of 8 (3 replicas: 3, 3, 2 rows each batch); the three losses, then the moving mean and
# variance, gamma and the first kernel's first entry (every feature equal).
_BN_TRAIN_TF = {
    (4, "train"): ([1.0986123, 1.073534, 1.1423709], 5.174344, 1.468382, 0.99935, 0.99998),
    (4, "eval"): ([1.0986123, 1.4554557, 2.4959126], 0.0, 1.0, 0.929189, 0.975604),
    (3, "train"): ([1.0986123, 1.124341, 1.1035097], 5.474945, 4.4181, 0.999181, 1.00018),
}


@pytest.mark.parametrize("replicas, mode", list(_BN_TRAIN_TF))
def test_batch_norm_trains_in_a_custom_loop(replicas, mode):
    strategy = _strategy(replicas)
    rs = np.random.RandomState(2)
    x = rs.randn(24, 5).astype("float32") * 2 + 1
    y = rs.randint(0, 3, size=(24,)).astype("int32")
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((5,)), tf.keras.layers.Dense(4, kernel_initializer="ones"),
                                     tf.keras.layers.BatchNormalization(momentum=0.5),
                                     tf.keras.layers.Dense(3, kernel_initializer="ones")])
        opt = tf.keras.optimizers.SGD(0.1)
        loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def step(x, y):
        def fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_obj(y, model(x, training=mode == "train")),
                                                  global_batch_size=8)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.run(fn, args=(x, y))

    losses = [float(strategy.reduce("SUM", step(xb, yb), axis=None)) for xb, yb in dist]
    expected_losses, mean, variance, gamma, kernel = _BN_TRAIN_TF[(replicas, mode)]
    np.testing.assert_allclose(losses, expected_losses, rtol=RTOL)
    bn = model.layers[1]
    np.testing.assert_allclose(bn.moving_mean.numpy(), [mean] * 4, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), [variance] * 4, rtol=RTOL)
    np.testing.assert_allclose(bn.gamma.numpy(), [gamma] * 4, rtol=RTOL)
    np.testing.assert_allclose(model.layers[0].kernel.numpy()[0], [kernel] * 4, rtol=RTOL)


# observed, TF 2.21 (Keras 3): BatchNormalization(momentum=0.5, synchronized=True) -> Dense(3, ones), SGD(0.1),
# 24 examples in batches of 8: moving mean and variance, gamma, beta after three steps.
_SYNC_TF = {
    4: ([75.245575, 78.31378], [231.06854, 236.48053], [0.999794, 0.99979], [-0.000134, -0.000129]),
    3: ([75.245575, 78.31378], [231.06854, 236.48175], [0.999794, 0.99979], [-0.000134, -0.000129]),
}


def _training_step(strategy, model, opt, loss_obj, global_batch):
    """TF's custom-loop step: `strategy.run` of a tape over `model(x, training=True)` and `apply_gradients`."""
    @tf.function
    def step(x, y):
        def fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_obj(y, model(x, training=True)),
                                                  global_batch_size=global_batch)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return strategy.run(fn, args=(x, y))
    return step


@pytest.mark.parametrize("replicas", [4, 3])
def test_synchronized_batch_norm_uses_the_global_batch(replicas):
    strategy = _strategy(replicas)
    x = (np.arange(48, dtype="float32").reshape(24, 2) ** 1.3).astype("float32")
    y = (np.arange(24) % 3).astype("int32")
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))
    with strategy.scope():
        bn = tf.keras.layers.BatchNormalization(momentum=0.5, synchronized=True)
        model = tf.keras.Sequential([tf.keras.Input((2,)), bn, tf.keras.layers.Dense(3, kernel_initializer="ones")])
        opt = tf.keras.optimizers.SGD(0.1)
        loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    assert bn.get_config()["synchronized"] is True
    assert tf.keras.layers.BatchNormalization.from_config(bn.get_config()).synchronized is True

    step = _training_step(strategy, model, opt, loss_obj, 8)

    for xb, yb in dist:
        step(xb, yb)
    mean, variance, gamma, beta = _SYNC_TF[replicas]
    np.testing.assert_allclose(bn.moving_mean.numpy(), mean, rtol=RTOL)
    np.testing.assert_allclose(bn.moving_variance.numpy(), variance, rtol=2e-5)
    np.testing.assert_allclose(bn.gamma.numpy(), gamma, rtol=RTOL)
    np.testing.assert_allclose(bn.beta.numpy(), beta, rtol=1e-2, atol=1e-6)
    # one device, momentum 0.5 over the three global batches' statistics
    expected = np.zeros(2)
    for i in range(3):
        expected = 0.5 * expected + 0.5 * x[8 * i: 8 * i + 8].astype(np.float64).mean(0)
    np.testing.assert_allclose(bn.moving_mean.numpy(), expected, rtol=1e-5)
    read = tf.function(lambda: strategy.run(lambda: bn.moving_mean + 0.0))
    np.testing.assert_allclose(_local(strategy, read()), [mean] * replicas, rtol=RTOL)  # equal copies


def test_synchronized_batch_norm_in_fit():
    """observed, TF 2.21 (Keras 3), 4 logical CPUs, the same model compiled and fit with batch_size=8: loss
    1.1004637479782104, moving mean [75.245575 78.31378], variance [231.06854 236.48053], gamma [0.999794 0.99979]
    (the global batch's statistics, as in the custom loop above)."""
    strategy = _strategy(4)
    x = (np.arange(48, dtype="float32").reshape(24, 2) ** 1.3).astype("float32")
    y = (np.arange(24) % 3).astype("int32")
    with strategy.scope():
        bn = tf.keras.layers.BatchNormalization(momentum=0.5, synchronized=True)
        model = tf.keras.Sequential([tf.keras.Input((2,)), bn, tf.keras.layers.Dense(3, kernel_initializer="ones")])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert history.history["loss"][0] == pytest.approx(1.1004637479782104, rel=1e-6)
    np.testing.assert_allclose(bn.moving_mean.numpy(), [75.245575, 78.31378], rtol=RTOL)
    np.testing.assert_allclose(bn.moving_variance.numpy(), [231.06854, 236.48053], rtol=2e-5)
    np.testing.assert_allclose(bn.gamma.numpy(), [0.999794, 0.99979], rtol=RTOL)


# ------------------------------------------------------------------------------------------ other layers
# observed, TF 2.21 (Keras 3), 3 replicas, 8 examples (3, 3, 2 rows): Flatten -> LayerNormalization -> Dense(1)
# from seeded weights, SGD(0.1), one step: the loss, then the first entries of each weight.
_LN_TF = (0.61314946, [[0.072673, 0.584801, -0.016305, -0.455874], [-0.277824, -0.053576, 0.335436, -0.433363],
                       [0.612312, 0.080387, -0.260238, -0.385917], [-0.329528]])


def test_layer_normalization_trains_on_an_uneven_split():
    strategy = _strategy(3)
    rs = np.random.RandomState(3)
    x = rs.randn(8, 5, 2).astype("float32")
    y = rs.randint(0, 2, size=(8, 1)).astype("float32")
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(8))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((5, 2)), tf.keras.layers.Flatten(),
                                     tf.keras.layers.LayerNormalization(), tf.keras.layers.Dense(1)])
        opt = tf.keras.optimizers.SGD(0.1)
        loss_obj = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction="none")
    model.set_weights([rs.randn(*w.shape).astype("float32") * 0.5 for w in model.get_weights()])

    step = _training_step(strategy, model, opt, loss_obj, 8)

    (xb, yb), = list(dist)
    assert float(strategy.reduce("SUM", step(xb, yb), axis=None)) == pytest.approx(_LN_TF[0], rel=1e-6)
    for weight, expected in zip(model.get_weights(), _LN_TF[1]):
        np.testing.assert_allclose(np.asarray(weight).ravel()[:4], expected, rtol=1e-4, atol=1e-6)


def test_activity_and_weight_regularization_losses_in_the_replica_function():
    """`model.losses` inside `run` holds the activity regularizer's loss of this call too. observed, TF 2.21
    (Keras 3), 4 logical CPUs, 8 examples: 2 losses; scale_regularization_loss(add_n(model.losses)) per replica
    below."""
    strategy = _strategy(4)
    x = np.random.RandomState(7).randn(8, 3).astype("float32")
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(8))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(
            2, kernel_initializer="ones", activity_regularizer=tf.keras.regularizers.l2(0.1),
            kernel_regularizer=tf.keras.regularizers.l1(0.01))])

    @tf.function
    def step(x):
        def fn(x):
            model(x, training=True)
            return tf.nn.scale_regularization_loss(tf.add_n(model.losses)), len(model.losses)
        return strategy.run(fn, args=(x,))

    (batch,) = list(dist)
    regularization, count = step(batch)
    assert int(count) == 2
    np.testing.assert_allclose([float(v) for v in _local(strategy, regularization)],
                               [0.05812438949942589, 0.02957959659397602, 0.030007146298885345,
                                0.09963721036911011], rtol=1e-6)
    out = x @ np.ones((3, 2))  # one device, each replica's two rows: (l1 of the kernel + activity l2 / rows) / 4
    expected = [(0.01 * 6 + 0.1 * np.sum(out[i:i + 2] ** 2) / 2) / 4 for i in range(0, 8, 2)]
    np.testing.assert_allclose([float(v) for v in _local(strategy, regularization)], expected, rtol=1e-5)
