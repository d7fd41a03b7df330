"""TF's migration guides on metrics, TensorBoard and hooks (site/en/guide/migrate: metrics_optimizers,
tensorboard, logging_stop_hook, sessionrunhook_callback, validate_correctness), their TF2 parts run under jdist
with `import jdist.tf_compat as tf`, against TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) run on the same
in-memory data; the observed values are recorded below. The TF1 parts (Estimators, sessions, hooks) raise
jdist's error naming the TF2 replacement."""
import glob
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.callbacks.event_file import iter_records, read_scalars, read_tensors  # noqa: E402

FEATURES = [[1., 1.5], [2., 2.5], [3., 3.5]]
REGRESSION_LABELS = [[0.3], [0.5], [0.7]]


# ------------------------------------------------------------------------------------- metrics_optimizers
def test_guide_accuracy_metric_accumulates_and_resets():
    accuracy = tf.keras.metrics.Accuracy()
    accuracy.update_state(y_true=[0, 0, 1, 1], y_pred=[0, 0, 0, 1])
    assert accuracy.result().numpy() == np.float32(0.75)  # observed in TF 2.21, Keras 3.15
    accuracy.update_state(y_true=[0, 0, 1, 1], y_pred=[0, 0, 0, 0])
    accuracy.update_state(y_true=[0, 0, 1, 1], y_pred=[1, 1, 0, 0])
    assert accuracy.result().numpy() == np.float32(0.41666666)  # observed: 5 of 12
    assert str(accuracy.result()) == "tf.Tensor(0.41666666, shape=(), dtype=float32)"  # observed
    accuracy.reset_state()
    assert accuracy.result().numpy() == 0.0


def test_auc_and_weighted_mean():
    auc = tf.keras.metrics.AUC()
    auc.update_state([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    assert float(auc.result()) == pytest.approx(0.75, abs=1e-6)  # observed in TF 2.21, Keras 3.15: 0.75
    mean = tf.keras.metrics.Mean()
    mean.update_state([1, 3, 5, 7])
    mean.update_state([2.0], sample_weight=[3.0])
    assert float(mean.result()) == pytest.approx(3.142857074737549, rel=1e-6)  # observed: 22 / 7
    assert [v.path.split("/")[-1] for v in mean.variables] == ["total", "count"]  # observed: mean/total, mean/count


def test_guide_functional_model_evaluate_with_accuracy():
    inputs = tf.keras.Input((2,))
    logits = tf.keras.layers.Dense(2, kernel_initializer="ones")(inputs)
    # The guide's tf.math.argmax on a KerasTensor: TF 2.21 with Keras 3 raises ValueError too (observed:
    # "A KerasTensor cannot be used as input to a TensorFlow function"); wrapped in a layer it runs.
    with pytest.raises(ValueError, match="KerasTensor cannot be used as input"):
        tf.math.argmax(input=logits, axis=1)
    predictions = tf.keras.layers.Lambda(lambda x: tf.math.argmax(input=x, axis=1))(logits)
    model = tf.keras.models.Model(inputs, predictions)
    model.compile(tf.keras.optimizers.Adagrad(learning_rate=0.05), loss="mse",
                  metrics=[tf.keras.metrics.Accuracy()])
    eval_dataset = tf.data.Dataset.from_tensor_slices(([[4., 4.5], [5., 5.5], [6., 6.5]], [0, 1, 1])).batch(1)
    result = model.evaluate(eval_dataset, return_dict=True, verbose=0)
    # observed in TF 2.21, Keras 3.15: {'accuracy': 0.3333333432674408, 'loss': 0.6666666865348816}
    assert sorted(result) == ["accuracy", "loss"]
    assert result["accuracy"] == pytest.approx(0.3333333432674408, rel=1e-6)
    assert result["loss"] == pytest.approx(0.6666666865348816, rel=1e-6)


def test_learning_rate_schedules():
    decay = tf.keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5, staircase=True)
    # observed in TF 2.21, Keras 3.15
    np.testing.assert_allclose([float(decay(i)) for i in (0, 9, 10, 25)],
                               [0.10000000149011612, 0.10000000149011612, 0.05000000074505806, 0.02500000037252903])
    piecewise = tf.keras.optimizers.schedules.PiecewiseConstantDecay([5, 10], [1.0, 0.5, 0.1])
    np.testing.assert_allclose([float(piecewise(i)) for i in (0, 5, 6, 10, 11)], [1.0, 1.0, 0.5, 0.5, 0.1],
                               rtol=1e-7)
    assert float(tf.keras.optimizers.SGD(learning_rate=decay).learning_rate) == pytest.approx(0.1)


# -------------------------------------------------------------------------------------- logging_stop_hook
class _StopAtStep(tf.keras.callbacks.Callback):
    def __init__(self, stop_step):
        super().__init__()
        self._stop_step = stop_step

    def on_batch_end(self, batch, logs=None):
        if self.model.optimizer.iterations >= self._stop_step:
            self.model.stop_training = True


class _LogRecorder(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_begin(self, logs=None):
        self.seen.append(("train_begin", dict(logs or {})))

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(("batch_begin", dict(logs or {})))

    def on_batch_end(self, batch, logs=None):
        self.seen.append(("batch_end", {k: (type(v).__name__, v) for k, v in logs.items()}))


def _regression_model():
    model = tf.keras.models.Sequential([tf.keras.layers.Dense(1, kernel_initializer="ones")])
    model.compile(tf.keras.optimizers.Adagrad(learning_rate=0.05), "mse")
    return model


def test_guide_stop_at_step_and_logging_callbacks():
    dataset = tf.data.Dataset.from_tensor_slices((FEATURES, REGRESSION_LABELS)).batch(1)
    model = _regression_model()
    recorder = _LogRecorder()
    history = model.fit(dataset, callbacks=[_StopAtStep(stop_step=2), recorder], verbose=0)
    # observed in TF 2.21, Keras 3.15: stops after the 2nd of 3 batches; logs hold Python floats, 'loss' only
    assert recorder.seen[0] == ("train_begin", {})
    ends = [logs for kind, logs in recorder.seen if kind == "batch_end"]
    assert [kind for kind, _ in recorder.seen[1:]] == ["batch_begin", "batch_end"] * 2
    assert [logs["loss"][0] for logs in ends] == ["float", "float"]
    np.testing.assert_allclose([logs["loss"][1] for logs in ends], [4.840000152587891, 9.359782218933105],
                               rtol=1e-6)
    assert history.history.keys() == {"loss"} and history.epoch == [0]
    assert history.history["loss"] == pytest.approx([9.359782218933105], rel=1e-6)
    assert history.params == {"verbose": 0, "epochs": 1, "steps": 3}
    # observed: kernel [[0.90218514], [0.9029341]], bias -0.0928963 (TF's non-XLA Adagrad; XLA, as Keras on
    # JAX compiles, rounds the bias 1 ulp away: -0.09289631)
    np.testing.assert_allclose(np.asarray(model.layers[0].weights[0]), [[0.90218514], [0.9029341]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(model.layers[0].weights[1]), [-0.0928963], rtol=1e-6)
    assert int(model.optimizer.iterations) == 2


def test_guide_session_run_hook_as_callback():
    dataset = tf.data.Dataset.from_tensor_slices((FEATURES, REGRESSION_LABELS)).batch(1).repeat(10)
    model = _regression_model()
    recorder = _LogRecorder()
    result = model.fit(dataset, callbacks=[recorder], verbose=0)
    ends = [logs for kind, logs in recorder.seen if kind == "batch_end"]
    assert len(ends) == 30 and all(logs.keys() == {"loss"} for logs in ends)
    assert all(logs == {} for kind, logs in recorder.seen if kind == "batch_begin")  # observed: {}
    assert result.history["loss"] == pytest.approx([7.7150559425354], rel=1e-5)  # observed in TF 2.21


# ------------------------------------------------------------------------------------------- tensorboard
def _events(path):
    return [(step, tag, plugin, value.dtype, value.shape) for step, tag, plugin, value in read_tensors(path)]


def test_keras_tensorboard_callback_writes_tf2_summaries(tmp_path):
    x = np.arange(16, dtype="float32").reshape(8, 2) / 16
    y = (x.sum(1, keepdims=True) > 0.9).astype("float32")
    writer = tf.summary.create_file_writer(str(tmp_path / "own"))
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
        1, activation="sigmoid", kernel_initializer="ones", name="d")], name="seq")
    schedule = tf.keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    model.compile(tf.keras.optimizers.SGD(schedule), "binary_crossentropy",
                  metrics=["accuracy", tf.keras.metrics.AUC(name="auc")])
    board = tf.keras.callbacks.TensorBoard(str(tmp_path / "logs"), update_freq=2, histogram_freq=1)
    history = model.fit(x, y, batch_size=4, epochs=2, validation_data=(x, y), callbacks=[board], verbose=0,
                        shuffle=False)
    writer.close()
    (own,) = glob.glob(str(tmp_path / "own" / "*"))
    (train,) = glob.glob(str(tmp_path / "logs" / "train" / "*"))
    (val,) = glob.glob(str(tmp_path / "logs" / "validation" / "*"))
    # observed in TF 2.21: events.out.tfevents.<time>.<host>.<pid>.<n>.v2, n counting the process's event files
    # (a tf.summary writer's and the callback's alike): here n, n + 1, n + 2
    numbers = [int(p.split(".")[-2]) for p in (own, train, val)]
    assert all(p.endswith(".v2") for p in (own, train, val)) and numbers == [numbers[0] + i for i in range(3)]
    # observed (read back with TensorFlow's summary_iterator): each scalar a float32 0-d tensor of the "scalars"
    # plugin in its own event, the epoch's scalars before the weight histograms
    metrics = ["accuracy", "auc", "loss"]
    f32 = np.dtype("float32")
    expected_train = [(0, "keras", "graph_keras_model", np.dtype(object), ())]
    for epoch, step in ((0, 2), (1, 4)):
        expected_train += [(step, f"batch_{m}", "scalars", f32, ()) for m in metrics]
        expected_train += [(epoch, f"epoch_{m}", "scalars", f32, ()) for m in [*metrics, "learning_rate"]]
        expected_train += [(epoch, f"seq/d/{w}/histogram", "histograms", np.dtype("float64"), (30, 3))
                           for w in ("kernel", "bias")]
    assert _events(train) == expected_train
    expected_val = []
    for epoch, step in ((0, 2), (1, 4)):
        expected_val += [(step, f"evaluation_{m}_vs_iterations", "scalars", f32, ()) for m in metrics]
        expected_val += [(epoch, f"epoch_{m}", "scalars", f32, ()) for m in metrics]
    assert _events(val) == expected_val
    assert len(list(iter_records(train))) == 1 + len(expected_train)  # file_version, then one value per event
    # the values TF 2.21 wrote for this model (shuffle=False, kernel ones)
    scalars = {(step, tag): v for step, tag, v in read_scalars(train)}
    np.testing.assert_allclose([scalars[(2, "batch_loss")], scalars[(0, "epoch_loss")], scalars[(1, "epoch_loss")]],
                               [0.5901378, 0.5901378, 0.57690644], rtol=2e-6)
    assert [scalars[(0, "epoch_learning_rate")], scalars[(1, "epoch_learning_rate")]] == pytest.approx([0.05, 0.025])
    val_scalars = {(step, tag): v for step, tag, v in read_scalars(val)}
    np.testing.assert_allclose([val_scalars[(2, "evaluation_loss_vs_iterations")],
                                val_scalars[(4, "evaluation_accuracy_vs_iterations")]], [0.57283235, 0.625],
                               rtol=2e-6)
    assert history.history["val_accuracy"] == pytest.approx([0.5, 0.625])


def test_summary_calls_return_bool_tensors(tmp_path):
    # observed in TF 2.21: <tf.Tensor: shape=(), dtype=bool, numpy=False> without a default writer, True when
    # written, False inside record_if(False)
    assert repr(tf.summary.scalar("a", 1.0, step=1)) == "<tf.Tensor: shape=(), dtype=bool, numpy=False>"
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=3):
        written = tf.summary.scalar("x", 1.5)
        assert repr(written) == "<tf.Tensor: shape=(), dtype=bool, numpy=True>"
        assert written.numpy() and tf.summary.histogram("h", [1.0, 2.0]).numpy()
        with tf.summary.record_if(False):
            assert not tf.summary.scalar("y", 2).numpy()
    writer.close()
    (path,) = glob.glob(str(tmp_path / "*"))
    assert read_scalars(path) == [(3, "x", 1.5)]


def test_summaries_in_a_custom_loop_take_variables_as_step_and_data(tmp_path):
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1, kernel_initializer="ones")])
    optimizer = tf.keras.optimizers.SGD(0.1)
    writer = tf.summary.create_file_writer(str(tmp_path))
    loss_metric = tf.keras.metrics.Mean("train_loss")
    x, y = tf.constant([[1., 2.]]), tf.constant([[1.]])

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        loss_metric.update_state(loss)
        with writer.as_default(step=optimizer.iterations):  # a variable as the step, inside tf.function
            tf.summary.scalar("loss_in_fn", loss)
        return loss

    for i in range(3):
        train_step(x, y)
        with writer.as_default():
            tf.summary.scalar("mean_loss", loss_metric.result(), step=optimizer.iterations)
            tf.summary.scalar("lr", optimizer.learning_rate, step=i)  # a variable as the data
    writer.close()
    (path,) = glob.glob(str(tmp_path / "*"))
    # observed in TF 2.21, Keras 3.15 (the in-function step is the iteration count after apply_gradients)
    expected = [(1, "loss_in_fn", 4.0), (1, "mean_loss", 4.0), (0, "lr", 0.1), (2, "loss_in_fn", 0.16),
                (2, "mean_loss", 2.08), (1, "lr", 0.1), (3, "loss_in_fn", 0.0064), (3, "mean_loss", 1.3888),
                (2, "lr", 0.1)]
    got = read_scalars(path)
    assert [(s, t) for s, t, _ in got] == [(s, t) for s, t, _ in expected]
    np.testing.assert_allclose([v for _, _, v in got], [v for _, _, v in expected], rtol=1e-5)


# --------------------------------------------------------------------------------- validate_correctness
def test_seeds_repeat_random_values():
    tf.random.set_seed(5)
    a, b = tf.random.uniform((3,)), tf.random.uniform((3,))
    tf.random.set_seed(5)
    np.testing.assert_array_equal(a, tf.random.uniform((3,)))  # observed in TF 2.21: same op sequence, same values
    assert not np.allclose(a, b)
    kernels = []
    for _ in range(2):
        tf.keras.utils.set_random_seed(7)
        layer = tf.keras.layers.Dense(2)
        layer.build((None, 2))
        kernels.append(np.asarray(layer.kernel))
    np.testing.assert_array_equal(*kernels)


# -------------------------------------------------------------------------------- TF1 parts: clear errors
@pytest.mark.parametrize("get, names", [
    (lambda: tf.compat.v1.estimator.Estimator, ["model.fit"]),
    (lambda: tf.compat.v1.metrics.accuracy, ["tf.keras.metrics.Accuracy", "update_state", "model.compile"]),
    (lambda: tf.compat.v1.train.AdagradOptimizer, ["tf.keras.optimizers"]),
    # StopAtStepHook, LoggingTensorHook and SessionRunHook: tf.compat.v1.train is refused as a whole
    (lambda: tf.compat.v1.train.StopAtStepHook, ["SessionRunHook -> a tf.keras.callbacks.Callback"]),
    (lambda: tf.compat.v1.layers.Dense, ["tf.keras.layers"]),
    (lambda: tf.compat.v1.losses.mean_squared_error, ["tf.keras.losses"]),
    (lambda: tf.compat.v1.feature_column.numeric_column, ["preprocessing layers"]),
    (lambda: tf.compat.v1.Session, ["x.numpy()", "tf.function"]),
    (lambda: tf.compat.v1.keras.utils.DeterministicRandomTestTool, ["set_random_seed"]),
    (lambda: tf.Graph, ["tf.function"]),
    (lambda: tf.variable_creator_scope, ["layer.variables"]),
])
def test_tf1_parts_name_their_tf2_replacement(get, names):
    with pytest.raises(AttributeError) as raised:
        get()
    for name in names:
        assert name in str(raised.value)
