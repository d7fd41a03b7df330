"""A failed `tf.debugging` check inside Keras `fit`/`evaluate`/`predict` (and jdist's own train step) raises TF's
InvalidArgumentError after the step, never inside the compiled program.

Observed in TF 2.21 (tensorflow-cpu, Keras 3.15), CPU split into 2 logical devices, a Sequential of
`Input((3,))`, a layer whose `call` runs `tf.debugging.check_numerics(x, "bad input")` (result unused) and returns
`x * 2.`, and `Dense(1, kernel_initializer="ones")`, compiled with `SGD(0.01)` and "mse"; x = ones((4 or 6, 3))
with x[3, 1] = NaN, y = ones, batch_size=2, shuffle=False:
- with `MirroredStrategy(["/cpu:0", "/cpu:1"])` and without a strategy, `fit`, `evaluate` and `predict` each raise
  `tf.errors.InvalidArgumentError` whose text holds "bad input : Tensor had NaN values"; only batch 0's
  `on_*_batch_end` runs (training stops at the failing step, batch 1), no `on_epoch_end`.
- under the strategy the kernel after the failed `fit` is [0.8, 0.8, 0.8] and the bias -0.1 (batch 0's update
  only); a later `fit` on clean data (ones((4, 3))) runs: loss 10.593323707580566, kernel 0.5424799919128418.
  (Without a strategy TF applies the failing step's update too: the kernel becomes NaN. jdist keeps the model
  as after the last step that passed, with or without a strategy.)
- a TF-style `train_step(self, data)` that runs `tf.debugging.check_numerics(x, "custom step")` raises
  InvalidArgumentError "custom step : Tensor had NaN values" from `fit`, with and without the strategy.
Before: under the strategy the process aborted after 40 s (XLA:CPU "Termination timeout for all reduce"): the
check raised inside the program on one device while the other waited at the gradient all-reduce.
"""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import jdist.tf_compat as tf

ERR = tf.errors.InvalidArgumentError
X_BAD = np.ones((6, 3), np.float32)
X_BAD[3, 1] = np.nan
Y = np.ones((6, 1), np.float32)

_LAYER_SOURCE = '''
class CheckedLayer(tf.keras.layers.Layer):
    def call(self, x):
        tf.debugging.check_numerics(x, "bad input")
        return x * 2.


class CustomStep(tf.keras.Model):
    def train_step(self, data):
        x, y = data
        tf.debugging.check_numerics(x, "custom step")
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((self(x, training=True) - y) ** 2)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {"loss": loss}


class Ends(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(["train", batch])

    def on_test_batch_end(self, batch, logs=None):
        self.ends.append(["test", batch])

    def on_predict_batch_end(self, batch, logs=None):
        self.ends.append(["predict", batch])

    def on_epoch_end(self, epoch, logs=None):
        self.ends.append(["epoch", epoch])


def make(strategy, custom=False, check=True):
    with strategy.scope():
        if custom:
            inputs = tf.keras.Input((3,))
            model = CustomStep(inputs, tf.keras.layers.Dense(1, kernel_initializer="ones")(inputs))
        else:
            model = tf.keras.Sequential([tf.keras.Input((3,))] + ([CheckedLayer()] if check else [])
                                        + [tf.keras.layers.Dense(1, kernel_initializer="ones")])
        model.compile(tf.keras.optimizers.SGD(0.01), "mse")
    return model
'''
_NAMES: dict = {"tf": tf, "__name__": __name__}
exec(_LAYER_SOURCE, _NAMES)  # the same layer and models in this process and in the strategy script below
make, Ends = _NAMES["make"], _NAMES["Ends"]

_STRATEGY_SCRIPT = '''
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
os.environ["KERAS_BACKEND"] = "jax"
import jax, jax.numpy as jnp, numpy as np, optax
import jdist, jdist.tf_compat as tf
''' + _LAYER_SOURCE + '''
x = np.ones((6, 3), np.float32); x[3, 1] = np.nan; y = np.ones((6, 1), np.float32)
out = {}
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
model, ends = make(strategy), Ends()
for name, call in [("fit", lambda: model.fit(x, y, epochs=2, batch_size=2, shuffle=False, verbose=0, callbacks=[ends])),
                   ("evaluate", lambda: model.evaluate(x, y, batch_size=2, verbose=0, callbacks=[ends])),
                   ("predict", lambda: model.predict(x, batch_size=2, verbose=0, callbacks=[ends]))]:
    try:
        call()
        out[name] = ["no error"]
    except Exception as error:
        out[name] = [type(error).__name__, str(error), ends.ends]
    ends.ends = []
    if name == "fit":
        out["after_fit"] = [model.layers[-1].kernel.numpy().tolist(), float(model.layers[-1].bias.numpy()[0])]
jax.effects_barrier()
history = model.fit(np.ones((4, 3), np.float32), y[:4], batch_size=2, shuffle=False, verbose=0).history
out["clean"] = [history["loss"][0], model.layers[-1].kernel.numpy().tolist()]
custom = make(strategy, custom=True)
try:
    custom.fit(x, y, batch_size=2, shuffle=False, verbose=0)
    out["custom"] = ["no error"]
except Exception as error:
    out["custom"] = [type(error).__name__, str(error)]

def loss_fn(params, batch):
    inputs = tf.debugging.check_numerics(batch["x"], "native step")
    return jnp.mean((inputs @ params["w"] - batch["y"]) ** 2)

native = jdist.MirroredStrategy(["cpu:0", "cpu:1"])
step = jdist.make_train_step(loss_fn, native)
def fresh():
    with native.scope():
        return jdist.TrainState.create(apply_fn=None, params={"w": jnp.ones((3, 1))}, tx=optax.sgd(0.01))
try:
    jax.block_until_ready(step(fresh(), native.distribute_batch({"x": x[:4], "y": y[:4]})))
    out["native"] = ["no error"]
except Exception as error:
    out["native"] = [type(error).__name__, str(error)]
state, _ = step(fresh(), native.distribute_batch({"x": np.ones((4, 3), np.float32), "y": y[:4]}))
out["native_clean"] = np.asarray(state.params["w"]).ravel().tolist()
one = jdist.OneDeviceStrategy("cpu:0")
with one.scope():
    alone = jdist.TrainState.create(apply_fn=None, params={"w": jnp.ones((3, 1))}, tx=optax.sgd(0.01))
alone, _ = jdist.make_train_step(loss_fn, one)(alone, one.distribute_batch({"x": np.ones((4, 3), np.float32),
                                                                             "y": y[:4]}))
out["native_one_device"] = np.asarray(alone.params["w"]).ravel().tolist()
jax.effects_barrier()
print("RESULT" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def under_strategy() -> dict:
    """The strategy cases, run in a process of their own with a timeout: a regression aborts that process (40 s
    all-reduce timeout), not the test session."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", KERAS_BACKEND="jax")
    try:
        done = subprocess.run([sys.executable, "-c", _STRATEGY_SCRIPT], capture_output=True, text=True,
                              timeout=150, env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"the strategy script did not finish in 150 s: {timeout.stderr!s:.2000}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert done.returncode == 0 and lines, f"rc={done.returncode}\n{done.stderr[-3000:]}"
    assert "CpuCallback" not in done.stderr and "Traceback" not in done.stderr  # nothing raised again at exit
    return json.loads(lines[-1][len("RESULT"):])


@pytest.mark.parametrize("name,ends", [("fit", [["train", 0]]), ("evaluate", [["test", 0]]),
                                       ("predict", [["predict", 0]])])
def test_check_in_layer_under_mirrored_strategy_raises_invalid_argument(under_strategy, name, ends):
    kind, text, seen = under_strategy[name]
    assert kind == "InvalidArgumentError"
    assert "bad input : Tensor had NaN values" in text
    assert seen == ends  # batch 0 done, stopped at batch 1 (TF 2.21, Keras 3.15: the same)


def test_failed_fit_under_strategy_keeps_the_last_passing_step_then_trains(under_strategy):
    kernel, bias = under_strategy["after_fit"]
    np.testing.assert_allclose(np.ravel(kernel), [0.8] * 3, rtol=1e-6)  # TF 2.21, Keras 3.15 (strategy)
    np.testing.assert_allclose(bias, -0.1, rtol=1e-6)
    loss, kernel = under_strategy["clean"]
    np.testing.assert_allclose(loss, 10.593323707580566, rtol=1e-5)  # TF 2.21's next clean fit
    np.testing.assert_allclose(np.ravel(kernel), [0.5424799919128418] * 3, rtol=1e-5)


def test_check_in_custom_train_step_under_strategy_raises_invalid_argument(under_strategy):
    kind, text = under_strategy["custom"]
    assert kind == "InvalidArgumentError" and "custom step : Tensor had NaN values" in text


def test_check_in_jdist_train_step_under_strategy_raises_then_next_step_runs(under_strategy):
    kind, text = under_strategy["native"]
    assert kind == "InvalidArgumentError" and "native step : Tensor had NaN values" in text
    # the next step (clean batch, fresh state) is the step computed on one device
    np.testing.assert_allclose(under_strategy["native_clean"], under_strategy["native_one_device"], rtol=1e-6)
    assert under_strategy["native_clean"] != [1.0] * 3  # it trained


def test_check_in_layer_without_strategy_raises_and_stops_at_the_step():
    model, ends = make(tf.distribute.get_strategy()), Ends()
    with pytest.raises(ERR, match="bad input : Tensor had NaN values"):
        model.fit(X_BAD, Y, epochs=2, batch_size=2, shuffle=False, verbose=0, callbacks=[ends])
    assert ends.ends == [["train", 0]]  # TF 2.21, Keras 3.15: the same
    ends.ends = []
    with pytest.raises(ERR, match="bad input : Tensor had NaN values"):
        model.evaluate(X_BAD, Y, batch_size=2, verbose=0, callbacks=[ends])
    with pytest.raises(ERR, match="bad input : Tensor had NaN values"):
        model.predict(X_BAD, batch_size=2, verbose=0, callbacks=[ends])
    assert ends.ends == [["test", 0], ["predict", 0]]
    jax.effects_barrier()  # the failures are not kept for a later wait
    history = model.fit(np.ones((4, 3), np.float32), Y[:4], batch_size=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(history["loss"][0], 10.593323707580566, rtol=1e-5)  # as after batch 0 (see top)


def test_check_in_custom_train_step_without_strategy_raises_invalid_argument():
    model = make(tf.distribute.get_strategy(), custom=True)
    with pytest.raises(ERR, match="custom step : Tensor had NaN values"):
        model.fit(X_BAD, Y, batch_size=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(model.layers[-1].kernel.numpy().ravel(), [0.96] * 3, rtol=1e-6)  # batch 0 only


def test_step_without_checks_is_not_waited_for():
    model = make(tf.distribute.get_strategy(), check=False)
    model.fit(np.ones((4, 3), np.float32), Y[:4], batch_size=2, verbose=0)
    assert model.train_function.boundary.has_checks is False  # no wait, no state copy after its first call


def test_check_in_a_plain_jax_jit_still_fails_the_call():
    # a program jdist did not compile has no boundary: the check raises in its callback, as JAX reports it
    with pytest.raises(Exception, match="plain jit : Tensor had NaN values"):
        jax.block_until_ready(jax.jit(lambda v: tf.debugging.check_numerics(v, "plain jit"))(X_BAD))
