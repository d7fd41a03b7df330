"""A Keras model whose `train_step(self, data)` / `test_step` / `predict_step` is written for TensorFlow (a
`tf.GradientTape`, `self.optimizer.apply`, metrics updated statefully), run by Keras's `fit`, `evaluate` and
`predict` (jdist.interop.keras_tf_steps).

Observed with TF 2.21 (tensorflow-cpu 2.21.0, its Keras 3.15), 4 logical CPUs: the model below (one Dense unit,
kernel ones, bias zeros), SGD(0.05), `compile(loss="mse", metrics=["mae"])`, 62 examples of
`np.random.default_rng(0).normal(size=(62, 4))` with y = x @ [1, -2, 0.5, 3] + 0.1, `fit(epochs=2,
batch_size=16, shuffle=False)` (the last batch of 14 splits 4, 4, 4, 2), then `evaluate(batch_size=16)` and
`predict(batch_size=16)`; "four" under MirroredStrategy on the 4 CPUs, "none" without a strategy. Under the
strategy TF's Keras scales a batch-mean loss by 1/4 (so the reported loss is a quarter of one device's) and sums
the replicas' gradients.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

keras = tf.keras

TF_OBSERVED = {
    "four": {"loss": [2.19816, 1.05715], "mae": [2.30232, 1.62053], "kernel": [0.85918, -0.32189, 0.73242, 2.24964],
             "bias": [0.18876], "evaluate": [0.65531, 1.29637], "last_predictions": [-5.86533, 0.94022, 7.09963]},
    "none": {"loss": [8.93373, 4.23904], "mae": [2.30332, 1.60641], "kernel": [0.79657, -0.37218, 0.72067, 2.22585],
             "bias": [0.17891], "evaluate": [2.59664, 1.26702], "last_predictions": [-5.65229, 0.86815, 6.91329]},
}
# The same, 64 examples, a step whose loss is tf.reduce_mean(keras.losses.MSE(y, y_pred)) (not scaled by TF),
# its own Mean and MeanAbsoluteError metrics, fit for 3 epochs, under the strategy (TF with apply_gradients and
# with apply alike).
TF_OWN_LOSS = {"loss": [4.92019, 0.24442, 0.01322], "mae": [1.69021, 0.37268, 0.08504],
               "evaluate": [0.00151, 0.03035], "kernel": [0.98020, -1.96797, 0.51051, 2.99468]}
# A model without a call of its own stepping two sub-models with two SGD optimizers, 48 examples, no strategy
# (TF refuses it under a strategy: "Unable to automatically build the model"; jdist runs it).
TF_PAIR = {"a_loss": [8.2626, 6.97015], "b_loss": [7.71189, 6.52103], "a_kernel": [0.90193, 0.57571, 1.00111, 1.33871],
           "b_kernel": [1.00102]}


def _data(rows):
    x = np.random.default_rng(0).normal(size=(rows, 4)).astype("float32")
    return x, (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None] + 0.1


class Stepped(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(grads, self.trainable_variables)
        return self.updated_metrics(loss, y, y_pred)

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        return self.updated_metrics(self.compute_loss(y=y, y_pred=y_pred), y, y_pred)

    def updated_metrics(self, loss, y, y_pred):
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def predict_step(self, data):
        x = data[0] if isinstance(data, tuple) else data
        out = self(x, training=False)
        return {"y": out, "twice": 2.0 * out}


class OwnLoss(keras.Model):
    def __init__(self, *args, apply_gradients=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
        self.use_apply_gradients = apply_gradients

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = tf.reduce_mean(keras.losses.MSE(y, y_pred))
        grads = tape.gradient(loss, self.trainable_variables)
        if self.use_apply_gradients:
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        else:
            self.optimizer.apply(grads, self.trainable_variables)
        self.loss_tracker.update_state(loss)
        self.mae_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        self.loss_tracker.update_state(tf.reduce_mean(keras.losses.MSE(y, y_pred)))
        self.mae_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric]


class Pair(keras.Model):
    def __init__(self):
        super().__init__()
        self.a = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1, kernel_initializer="ones")])
        self.b = keras.Sequential([keras.Input(shape=(1,)), keras.layers.Dense(1, kernel_initializer="ones")])
        self.a_loss = keras.metrics.Mean(name="a_loss")
        self.b_loss = keras.metrics.Mean(name="b_loss")

    @property
    def metrics(self):
        return [self.a_loss, self.b_loss]

    def compile(self, a_optimizer, b_optimizer):
        super().compile()
        self.a_optimizer, self.b_optimizer = a_optimizer, b_optimizer

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            la = tf.reduce_mean(tf.square(self.a(x) - y))
        self.a_optimizer.apply(tape.gradient(la, self.a.trainable_weights), self.a.trainable_weights)
        with tf.GradientTape() as tape:
            lb = tf.reduce_mean(tf.square(self.b(self.a(x)) - y))
        self.b_optimizer.apply(tape.gradient(lb, self.b.trainable_weights), self.b.trainable_weights)
        self.a_loss.update_state(la)
        self.b_loss.update_state(lb)
        return {"a_loss": self.a_loss.result(), "b_loss": self.b_loss.result()}


def _dense(model_class, **kwargs):
    inputs = keras.Input(shape=(4,))
    outputs = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")(inputs)
    return model_class(inputs, outputs, **kwargs)


@pytest.fixture(scope="module")
def four():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"])


@pytest.mark.parametrize("where", ["four", "none"])
def test_fit_evaluate_predict_run_a_tf_style_step_as_tf(four, where):
    x, y = _data(62)
    with four.scope() if where == "four" else tf.distribute.get_strategy().scope():
        model = _dense(Stepped)
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False).history
    observed = TF_OBSERVED[where]
    np.testing.assert_allclose(history["loss"], observed["loss"], rtol=2e-5)
    np.testing.assert_allclose(history["mae"], observed["mae"], rtol=2e-5)
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(kernel.ravel(), observed["kernel"], atol=2e-5)
    np.testing.assert_allclose(bias, observed["bias"], atol=2e-5)
    np.testing.assert_allclose(model.evaluate(x, y, batch_size=16, verbose=0), observed["evaluate"], rtol=2e-5)
    predicted = model.predict(x, batch_size=16, verbose=0)
    assert sorted(predicted) == ["twice", "y"] and predicted["y"].shape == (62, 1)
    np.testing.assert_allclose(predicted["y"][-3:].ravel(), observed["last_predictions"], atol=2e-5)
    np.testing.assert_allclose(predicted["y"], x @ kernel + bias, atol=1e-5)  # every row, in order
    np.testing.assert_allclose(predicted["twice"], 2 * predicted["y"], rtol=1e-6)


@pytest.mark.parametrize("apply_gradients", [True, False], ids=["apply_gradients", "apply"])
def test_a_step_with_its_own_loss_and_metrics_trains_as_tf(four, apply_gradients):
    x, y = _data(64)
    with four.scope():
        model = _dense(OwnLoss, apply_gradients=apply_gradients)
        model.compile(optimizer=keras.optimizers.SGD(0.05))
    history = model.fit(x, y, epochs=3, batch_size=16, verbose=0, shuffle=False).history
    np.testing.assert_allclose(history["loss"], TF_OWN_LOSS["loss"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(history["mae"], TF_OWN_LOSS["mae"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0].ravel(), TF_OWN_LOSS["kernel"], atol=2e-5)
    np.testing.assert_allclose(model.evaluate(x, y, batch_size=16, verbose=0), TF_OWN_LOSS["evaluate"],
                               rtol=1e-3, atol=2e-5)


def test_a_model_without_call_steps_its_sub_models_with_two_optimizers(four):
    x, y = _data(48)
    pair = Pair()
    pair.compile(keras.optimizers.SGD(0.02), keras.optimizers.SGD(0.01))
    history = pair.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False).history
    np.testing.assert_allclose(history["a_loss"], TF_PAIR["a_loss"], rtol=2e-5)
    np.testing.assert_allclose(history["b_loss"], TF_PAIR["b_loss"], rtol=2e-5)
    np.testing.assert_allclose(pair.a.get_weights()[0].ravel(), TF_PAIR["a_kernel"], atol=2e-5)
    np.testing.assert_allclose(pair.b.get_weights()[0].ravel(), TF_PAIR["b_kernel"], atol=2e-5)
    # Under 4 replicas each replica's mean loss is differentiated and the gradients summed: on even batches
    # that is one device's step with 4 times the learning rates.
    with four.scope():
        replicated = Pair()
        replicated.compile(keras.optimizers.SGD(0.02), keras.optimizers.SGD(0.01))
    replicated.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    single = Pair()
    single.compile(keras.optimizers.SGD(0.08), keras.optimizers.SGD(0.04))
    single.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    for got, want in zip(replicated.get_weights(), single.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_plain_keras_import_after_the_port_import_gets_tf_style_steps(tmp_path):
    """Keras's own guide imports `keras` beside `tensorflow`: the step must work after a plain `import keras`."""
    script = tmp_path / "guide.py"
    script.write_text(textwrap.dedent("""
        import jdist.tf_compat as tf
        import keras
        import numpy as np

        class Model(keras.Model):
            def train_step(self, data):
                x, y = data
                with tf.GradientTape() as tape:
                    loss = self.compute_loss(y=y, y_pred=self(x, training=True))
                self.optimizer.apply(tape.gradient(loss, self.trainable_variables), self.trainable_variables)
                return {"step_loss": loss}

        inputs = keras.Input(shape=(2,))
        model = Model(inputs, keras.layers.Dense(1, kernel_initializer="zeros")(inputs))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        x = np.ones((8, 2), "float32")
        history = model.fit(x, 2 * np.ones((8, 1), "float32"), batch_size=8, epochs=2, verbose=0).history
        print("losses", history["step_loss"])
    """))
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    # One device: loss 4 at zero weights; SGD moves w and b by 0.1 * 2 * 2 each: prediction 1.2, loss 0.64.
    losses = [float(v) for v in out.stdout.split("losses")[1].strip(" []\n").split(",")]
    np.testing.assert_allclose(losses, [4.0, 0.64], rtol=1e-5)
