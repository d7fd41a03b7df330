"""A Keras model saved with `model.save` under one strategy, loaded with `keras.models.load_model` without one, in
the same kind of strategy and in others: each evaluates to the saved model's numbers and trains on as the model
loaded without a strategy does (TF's Keras tutorial loads its saved model both ways)."""
import contextlib
import os

os.environ["KERAS_BACKEND"] = "jax"  # before Keras is imported

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype("float32"), rng.integers(0, 3, n).astype("int32")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A model trained and saved under MirroredStrategy on 8 devices, and its evaluation there."""
    x, y = _data()
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
        model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        evaluation = model.evaluate(x, y, batch_size=16, verbose=0)
    path = tmp_path_factory.mktemp("saved") / "model.keras"
    model.save(path)
    return path, evaluation


def _load_evaluate_fit(path, strategy):
    x, y = _data()
    x_more, y_more = _data(seed=1)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = keras.models.load_model(path)
        evaluation = model.evaluate(x, y, batch_size=16, verbose=0)
        history = model.fit(x_more, y_more, batch_size=16, epochs=1, shuffle=False, verbose=0)
    kernel = model.trainable_variables[0].value
    return model, evaluation, history.history["loss"][0], len(kernel.sharding.device_set)


def test_saved_under_mirrored_loads_anywhere_with_its_numbers(saved):
    path, saved_evaluation = saved
    plain, plain_eval, plain_loss, plain_devices = _load_evaluate_fit(path, None)
    assert plain_eval[0] == pytest.approx(saved_evaluation[0], rel=1e-5) and plain_eval[1] == saved_evaluation[1]
    devices = jax.devices()
    for strategy, expected_devices in [(jdist.MirroredStrategy(), 8), (jdist.OneDeviceStrategy(devices[3]), 1),
                                       (jdist.MirroredStrategy(devices[:2]), 2)]:
        model, evaluation, loss, placed_on = _load_evaluate_fit(path, strategy)
        assert placed_on == expected_devices, strategy  # loaded into the strategy's devices
        assert evaluation[0] == pytest.approx(saved_evaluation[0], rel=1e-5), strategy
        assert evaluation[1] == saved_evaluation[1], strategy
        # the saved optimizer state came along: one more epoch trains as the model loaded without a strategy
        assert int(model.optimizer.iterations.value) == 2 * 4 + 4  # the saved steps, then this epoch's
        assert loss == pytest.approx(plain_loss, rel=1e-5), strategy
        for a, b in zip(model.get_weights(), plain.get_weights()):
            np.testing.assert_allclose(a, b, atol=2e-6)


def test_loads_compiled_after_parameter_server_hooks_are_installed(tmp_path):
    """Once a process has used ParameterServerStrategy, Keras's `compile` is wrapped (a fit of a model compiled
    in its scope trains through the workers); Keras's loading still sees the model's own `compile` and loads a
    saved compiled model compiled, with its optimizer."""
    from jdist.interop import keras_variables

    keras_variables.install_remote_hooks()
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.compiled and isinstance(loaded.optimizer, keras.optimizers.Adam)
