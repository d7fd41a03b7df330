"""Keras 3's vocabulary in jdist: each loss, metric and optimizer name gives Keras's own value.

Reference: Keras 3 itself (JAX backend), run on the same inputs in this process. Tolerances: float32
arithmetic done in a different order (rtol 1e-5); the optimizers follow Keras's update line by line.
"""
import functools
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
if keras.backend.backend() != "jax":  # pragma: no cover - the suite sets KERAS_BACKEND=jax first
    pytest.skip("these tests compare with Keras on its JAX backend", allow_module_level=True)

from keras.src.trainers.compile_utils import get_loss, get_metric  # noqa: E402  (compile's name resolution)

import jdist  # noqa: E402
from jdist import losses, metrics, optimizers  # noqa: E402

N, C = 24, 5
_rng = np.random.default_rng(0)
LOGITS = _rng.normal(size=(N, C)).astype(np.float32)
PROBS = np.asarray(jax.nn.softmax(LOGITS)).astype(np.float32)
LABELS = _rng.integers(0, C, size=N).astype(np.int32)
ONE_HOT = np.eye(C, dtype=np.float32)[LABELS]
BIN_PROBS = _rng.uniform(0.01, 0.99, size=(N, 1)).astype(np.float32)
BIN_LOGITS = _rng.normal(size=(N, 1)).astype(np.float32)
BIN_LABELS = _rng.integers(0, 2, size=(N, 1)).astype(np.float32)
REG_PRED = _rng.normal(size=(N, 3)).astype(np.float32)
REG_TRUE = _rng.normal(size=(N, 3)).astype(np.float32) * 2
WEIGHTS = _rng.uniform(0, 2, size=N).astype(np.float32)

# (jdist identifier, a maker of the Keras loss object or None for the name, y_true, y_pred)
LOSS_CASES = [
    ("mse", None, REG_TRUE, REG_PRED),
    ("mean_squared_error", None, REG_TRUE, REG_PRED),
    ("mae", None, REG_TRUE, REG_PRED),
    ("mean_absolute_error", None, REG_TRUE, REG_PRED),
    ("huber", None, REG_TRUE, REG_PRED),
    ("binary_crossentropy", None, BIN_LABELS, BIN_PROBS),
    ("binary_crossentropy", None, BIN_LABELS[:, 0], BIN_PROBS),  # (batch,) labels, (batch, 1) outputs
    ("categorical_crossentropy", None, ONE_HOT, PROBS),
    ("sparse_categorical_crossentropy", None, LABELS, PROBS),
    ("sparse_categorical_crossentropy", None, LABELS[:, None], PROBS),
    ("sparse_categorical_crossentropy", None, LABELS, LOGITS),  # a string takes probabilities: Keras's value on logits
    ("crossentropy", None, ONE_HOT, PROBS),
    ("crossentropy", None, LABELS, PROBS),
    ("crossentropy", None, BIN_LABELS, BIN_PROBS),
    (losses.Huber(delta=0.5), functools.partial(keras.losses.Huber, delta=0.5), REG_TRUE, REG_PRED),
    (losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.2),
     functools.partial(keras.losses.BinaryCrossentropy, from_logits=True, label_smoothing=0.2),
     BIN_LABELS, BIN_LOGITS),
    (losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
     functools.partial(keras.losses.CategoricalCrossentropy, from_logits=True, label_smoothing=0.1),
     ONE_HOT, LOGITS),
    (losses.CategoricalCrossentropy(label_smoothing=0.1),
     functools.partial(keras.losses.CategoricalCrossentropy, label_smoothing=0.1), ONE_HOT, PROBS),
    (losses.SparseCategoricalCrossentropy(from_logits=True),
     functools.partial(keras.losses.SparseCategoricalCrossentropy, from_logits=True), LABELS, LOGITS),
    (losses.MeanSquaredError(), functools.partial(keras.losses.MeanSquaredError), REG_TRUE, REG_PRED),
    (losses.MeanAbsoluteError(), functools.partial(keras.losses.MeanAbsoluteError), REG_TRUE, REG_PRED),
]


def _keras_per_example(identifier, keras_loss, y_true, y_pred):
    """Keras's per-example losses, from the loss `compile` builds (a name wrapped as compile wraps it)."""
    if keras_loss is None:
        loss = get_loss(identifier, y_true, y_pred)
        loss.reduction = None
    else:
        loss = keras_loss(reduction=None)
    return np.asarray(loss(y_true, y_pred))


@pytest.mark.parametrize("identifier,keras_obj,y_true,y_pred", LOSS_CASES,
                         ids=[f"{c[0] if isinstance(c[0], str) else c[0]!r}-{i}" for i, c in enumerate(LOSS_CASES)])
def test_loss_equals_keras(identifier, keras_obj, y_true, y_pred):
    expected = _keras_per_example(identifier, keras_obj, y_true, y_pred)
    got = np.asarray(jax.jit(losses.get(identifier))(y_true, y_pred))
    assert got.shape == expected.shape == (N,)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    if keras_obj is not None:  # a Keras loss object given to jdist directly
        np.testing.assert_allclose(np.asarray(jax.jit(losses.get(keras_obj()))(y_true, y_pred)), expected,
                                   rtol=1e-6, atol=1e-7)
    # Keras's reduction ("sum_over_batch_size") of the weighted losses is what the Trainer minimises.
    keras_loss = get_loss(identifier, y_true, y_pred) if keras_obj is None else keras_obj()
    np.testing.assert_allclose(np.sum(got * WEIGHTS) / N, float(keras_loss(y_true, y_pred, sample_weight=WEIGHTS)),
                               rtol=1e-5)


# (metric name or (jdist metric, Keras metric), y_true, y_pred)
METRIC_CASES = [
    ("accuracy", LABELS, LOGITS),
    ("accuracy", LABELS[:, None], LOGITS),
    ("accuracy", ONE_HOT, LOGITS),
    ("acc", BIN_LABELS, BIN_PROBS),
    ("binary_accuracy", BIN_LABELS, BIN_PROBS),
    ("categorical_accuracy", ONE_HOT, LOGITS),
    ("sparse_categorical_accuracy", LABELS, LOGITS),
    ("top_k_categorical_accuracy", ONE_HOT, LOGITS),
    ("sparse_top_k_categorical_accuracy", LABELS, LOGITS),
    ("mse", REG_TRUE, REG_PRED),
    ("mae", REG_TRUE, REG_PRED),
    ("auc", BIN_LABELS, BIN_PROBS),
    ("precision", BIN_LABELS, BIN_PROBS),
    ("recall", BIN_LABELS, BIN_PROBS),
    ((metrics.TopKCategoricalAccuracy(k=2), keras.metrics.TopKCategoricalAccuracy(k=2)), ONE_HOT, LOGITS),
    ((metrics.SparseTopKCategoricalAccuracy(k=3), keras.metrics.SparseTopKCategoricalAccuracy(k=3)), LABELS, LOGITS),
    ((metrics.BinaryAccuracy(threshold=0.3), keras.metrics.BinaryAccuracy(threshold=0.3)), BIN_LABELS, BIN_PROBS),
]


def _keras_metric(identifier, y_true, y_pred):
    if isinstance(identifier, tuple):
        return identifier[1].__class__.from_config(identifier[1].get_config())
    return get_metric(identifier, y_true, y_pred)


@pytest.mark.parametrize("identifier,y_true,y_pred", METRIC_CASES,
                         ids=[c[0] if isinstance(c[0], str) else type(c[0][0]).__name__ for c in METRIC_CASES])
def test_metric_equals_keras(identifier, y_true, y_pred):
    """Two batches, the second weighted, through Keras's stateful API and jdist's pure one."""
    k = _keras_metric(identifier, y_true, y_pred)
    k.update_state(y_true[:10], y_pred[:10])
    k.update_state(y_true[10:], y_pred[10:], sample_weight=WEIGHTS[10:])
    ours = identifier[0] if isinstance(identifier, tuple) else metrics.get(identifier)
    update = jax.jit(ours.update)
    state = update(ours.init(), y_true[:10], y_pred[:10])
    state = update(state, y_true[10:], y_pred[10:], sample_weight=WEIGHTS[10:])
    np.testing.assert_allclose(float(ours.result(state)), float(k.result()), rtol=1e-5)
    if isinstance(identifier, str):
        assert ours.name == identifier
    # A Keras metric object given to jdist directly, through its stateless API.
    direct = metrics.get(_keras_metric(identifier, y_true, y_pred))
    state = direct.update(direct.init(), y_true[:10], y_pred[:10])
    state = direct.update(state, y_true[10:], y_pred[10:], sample_weight=WEIGHTS[10:])
    np.testing.assert_allclose(float(direct.result(state)), float(k.result()), rtol=1e-6)


def test_keras_metric_objects_are_replica_aware():
    """Keras's AUC inside strategy.run: each replica keeps its own confusion counts (SyncOnRead), summed
    when read, so the result equals Keras's AUC over the whole (padded-and-masked) batch."""
    strategy = jdist.MirroredStrategy(["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    auc = metrics.get(keras.metrics.AUC(num_thresholds=50))
    mask = np.ones(N, np.float32)
    mask[-3:] = 0.0  # padding rows never count
    batch = strategy.distribute_batch((BIN_LABELS, BIN_PROBS, mask))
    state = strategy.run(lambda s, y, p, m: auc.update(s, y, p, sample_weight=m), args=(auc.init(), *batch))
    assert isinstance(state[0], jdist.PerReplica) and state[0].num_replicas == 4
    reference = keras.metrics.AUC(num_thresholds=50)
    reference.update_state(BIN_LABELS[:-3], BIN_PROBS[:-3])
    np.testing.assert_allclose(float(auc.result(state)), float(reference.result()), rtol=1e-6)


@pytest.mark.parametrize("name,config", [
    ("adam", {}), ("sgd", {}), ("rmsprop", {}), ("adamw", {}), ("adagrad", {}), ("adamax", {}), ("nadam", {}),
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True}),
    ("rmsprop", {"momentum": 0.5, "centered": True}),
    ("adam", {"amsgrad": True, "weight_decay": 0.1, "clipnorm": 0.5}),
    ("adamw", {"learning_rate": 0.01, "global_clipnorm": 0.5}),
])
def test_optimizer_steps_equal_keras(name, config):
    """Four steps on the same gradients: jdist's name (or its Keras config) and Keras's optimizer agree."""
    rng = np.random.default_rng(1)
    params = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]
    grads = [[rng.normal(size=p.shape).astype(np.float32) for p in params] for _ in range(4)]
    k = keras.optimizers.get({"class_name": name, "config": config})
    variables = [keras.Variable(p) for p in params]
    k.build(variables)
    for g in grads:
        k.apply(g, variables)
    txs = [optimizers.get(k)] + ([optimizers.get(name)] if not config else [])
    for tx in txs:
        p, state = [jnp.asarray(a) for a in params], None
        state = tx.init(p)
        for g in grads:
            updates, state = tx.update(g, state, p)
            p = optax.apply_updates(p, updates)
        for ours, theirs in zip(p, variables):
            # Identical maths; weight decay rounds once differently (applied with the step's update).
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs.value), rtol=1e-6, atol=3e-7)


def test_unknown_names_are_errors_naming_the_choices():
    with pytest.raises(ValueError, match="known names.*adam"):
        optimizers.get("adamm")
    with pytest.raises(ValueError, match="known names.*mse"):
        losses.get("mean_sqared_error")
    with pytest.raises(ValueError, match="reduction"):
        losses.get(keras.losses.MeanSquaredError(reduction="sum"))


def _keras_linear(w, b, loss):
    model = keras.Sequential([keras.Input((w.shape[0],)), keras.layers.Dense(w.shape[1])])
    model.set_weights([w, b])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss, metrics=["accuracy"], weighted_metrics=["accuracy"])
    return model


@pytest.mark.parametrize("one_hot", [False, True])
def test_fit_metrics_and_weighted_metrics_equal_keras(one_hot):
    """fit(sample_weight=w, metrics=["accuracy"], weighted_metrics=["accuracy"]) under Mirrored(4) reports
    Keras 3's loss, unweighted and weighted accuracies, epoch by epoch, and ends at Keras's weights
    (one device, same initial weights, a short last batch). One-hot labels resolve "accuracy" to
    categorical accuracy, integer labels to sparse categorical accuracy."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(44, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=44).astype(np.int32)
    w = rng.uniform(0, 2, size=44).astype(np.float32)
    kernel = rng.normal(size=(6, 3)).astype(np.float32) * 0.3
    bias = np.zeros(3, np.float32)
    labels = np.eye(3, dtype=np.float32)[y] if one_hot else y
    keras_loss = (keras.losses.CategoricalCrossentropy(from_logits=True) if one_hot
                  else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model = _keras_linear(kernel, bias, keras_loss)
    expected = model.fit(x, labels, sample_weight=w, batch_size=16, epochs=2, shuffle=False, verbose=0).history

    def apply_fn(params, inputs):
        return inputs @ params["kernel"] + params["bias"]

    trainer = jdist.Trainer(apply_fn, keras.optimizers.SGD(0.5), loss=keras_loss, metrics=["accuracy"],
                            weighted_metrics=["accuracy"], params={"kernel": kernel, "bias": bias},
                            strategy=jdist.MirroredStrategy(["cpu:0", "cpu:1", "cpu:2", "cpu:3"]))
    got = trainer.fit(x, labels, sample_weight=w, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    assert sorted(got) == sorted(expected) == ["accuracy", "loss", "weighted_accuracy"]
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-5, err_msg=key)
    assert not np.allclose(got["accuracy"], got["weighted_accuracy"])  # the weights matter here
    k_kernel, k_bias = model.get_weights()
    np.testing.assert_allclose(np.asarray(trainer.params["kernel"]), k_kernel, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(trainer.params["bias"]), k_bias, rtol=1e-5, atol=1e-6)


_FLOAT64_FIT = r"""
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import jdist

rng = np.random.default_rng(0)
x = rng.normal(size=(30, 4)) + 1e4          # large values: float32 would lose the small differences
params = {"w": rng.normal(size=(4, 2)) * 1e-3}
y = x @ params["w"] + rng.normal(size=(30, 2)) * 1e-4
apply_fn = lambda p, x: x @ p["w"]
trainer = jdist.Trainer(apply_fn, "sgd", loss="mse", metrics=["mae"], params=params,
                        strategy=jdist.MirroredStrategy(["cpu:0", "cpu:1"]))
logs = trainer.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
err = x @ params["w"] - y
np.testing.assert_allclose(logs["loss"], np.mean(err ** 2), rtol=1e-10)
np.testing.assert_allclose(logs["mae"], np.mean(np.abs(err)), rtol=1e-10)
states = trainer._fresh_states()
assert {str(a.dtype) for a in jax.tree.leaves(states)} == {"float64"}, states
print("float64 ok")
"""


def test_float64_model_keeps_float64_losses_and_metrics():
    """With jax_enable_x64, a float64 model's loss and metric states stay float64 (no float32 cast)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FLOAT64_FIT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "float64 ok" in out.stdout, out.stderr[-3000:]


def test_trainer_evaluates_keras_metric_objects_per_replica():
    """Keras's AUC / Precision / Recall objects in the Trainer under Mirrored(4), a short last batch and
    sample weights: equal to the Keras objects fed the same predictions (weighted ones with the weights)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(37, 4)).astype(np.float32)
    y = (x[:, :1] + 0.5 * rng.normal(size=(37, 1)) > 0).astype(np.float32)
    w = rng.uniform(0, 2, size=37).astype(np.float32)
    params = {"w": rng.normal(size=(4, 1)).astype(np.float32)}

    def apply_fn(p, inputs):
        return jax.nn.sigmoid(inputs @ p["w"])

    trainer = jdist.Trainer(apply_fn, "sgd", loss="binary_crossentropy",
                            metrics=[keras.metrics.AUC(num_thresholds=100, name="auc"), "precision"],
                            weighted_metrics=["recall"], params=params,
                            strategy=jdist.MirroredStrategy(["cpu:0", "cpu:1", "cpu:2", "cpu:3"]))
    got = trainer.evaluate(x, y, sample_weight=w, batch_size=16, verbose=0, return_dict=True)
    probs = np.asarray(apply_fn(params, x))
    auc, precision, recall = keras.metrics.AUC(num_thresholds=100), keras.metrics.Precision(), keras.metrics.Recall()
    auc.update_state(y, probs)
    precision.update_state(y, probs)
    recall.update_state(y, probs, sample_weight=w)
    assert sorted(got) == ["auc", "loss", "precision", "recall"]
    np.testing.assert_allclose([got["auc"], got["precision"], got["recall"]],
                               [float(auc.result()), float(precision.result()), float(recall.result())], rtol=1e-6)
    bce = keras.losses.BinaryCrossentropy()
    np.testing.assert_allclose(got["loss"], float(bce(y, probs, sample_weight=w)), rtol=1e-5)
