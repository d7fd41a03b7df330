"""Keras 3 models under jdist: the Trainer, custom loops, and Keras's own fit in a strategy's scope.

Every distributed result is checked against Keras 3 itself on one device.
"""
import os

os.environ["KERAS_BACKEND"] = "jax"  # before Keras is imported (it otherwise picks TensorFlow)

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jdist  # noqa: E402
from jdist.interop import keras_distribution  # noqa: E402

ATOL = 2e-6


def _data(n, features=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, features)).astype("float32"), rng.integers(0, classes, n).astype("int32")


def _mlp(kind="mlp", seed=1):
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((6,)), keras.layers.Dense(8, activation="relu", name="hidden")]
    if kind == "bn":
        layers.append(keras.layers.BatchNormalization(name="norm"))
    layers.append(keras.layers.Dense(3, name="logits"))
    model = keras.Sequential(layers, name="mlp")
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def _assert_same_weights(expected, actual, atol=ATOL):
    assert len(expected) == len(actual)
    for a, b in zip(expected, actual):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=atol, rtol=0)


def _strategy(n):
    return jdist.MirroredStrategy(devices=jax.devices()[:n])


# -------------------------------------------------------------------- Trainer
@pytest.mark.parametrize("kind,n", [("mlp", 40), ("mlp", 42), ("bn", 42)], ids=["even", "uneven", "bn-uneven"])
def test_trainer_equals_keras_fit_on_one_device(kind, n):
    """Mirrored(4), compile()'s loss / metric / optimizer, against Keras's own fit on one device. With
    42 examples in batches of 8 the last batch holds 2: jdist pads it to 4 and masks the padding (also
    out of BatchNormalization's statistics); Keras averages over the 2 real examples."""
    x, y = _data(n)
    reference = _mlp(kind)
    initial = reference.get_weights()
    history = reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history

    model = _mlp(kind)
    model.set_weights(initial)
    trainer = jdist.Trainer(model, strategy=_strategy(4))
    ours = trainer.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history

    _assert_same_weights(reference.get_weights(), model.get_weights())  # written back, BN statistics too
    np.testing.assert_allclose(ours["loss"], history["loss"], rtol=1e-5)
    np.testing.assert_allclose(ours["accuracy"], history["accuracy"], rtol=1e-6)
    assert int(model.optimizer.iterations.value) == int(reference.optimizer.iterations.value) == 2 * -(-n // 8)
    _assert_same_weights([v.value for v in reference.optimizer.variables[2:]],
                         [v.value for v in model.optimizer.variables[2:]])
    # Keras's own predict / evaluate on the written-back model agree with the Trainer's.
    np.testing.assert_allclose(model.predict(x, verbose=0), trainer.predict(x, verbose=0), atol=1e-5)
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), trainer.evaluate(x, y, verbose=0), rtol=1e-5)


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.norm = keras.layers.BatchNormalization()
        self.drop = keras.layers.Dropout(0.3)
        self.out = keras.layers.Dense(3)

    def call(self, x, training=False):
        return self.out(self.drop(self.norm(self.hidden(x), training=training), training=training))


def _functional():
    inputs = keras.Input((6,))
    h = keras.layers.Dense(16, activation="relu", name="dense")(inputs)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Dropout(0.3)(h)
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(h))


@pytest.mark.parametrize("build", [_Subclassed, _functional], ids=["subclassed", "functional"])
def test_functional_and_subclassed_with_dropout_and_batch_norm(build):
    """Dropout draws from the model's seed state (carried as a non-trainable value), BatchNormalization
    updates its moving statistics: Mirrored(8) gives the one-device values; the seed state advances."""
    x, y = _data(64)
    results = []
    for strategy in (jdist.OneDeviceStrategy(jax.devices()[0]), _strategy(8)):
        keras.utils.set_random_seed(3)
        model = build()
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model(x[:1])
        before = [np.asarray(v.value) for v in model.non_trainable_variables]
        jdist.Trainer(model, strategy=strategy).fit(x, y, batch_size=16, epochs=1, verbose=0)
        after = [np.asarray(v.value) for v in model.non_trainable_variables]
        assert all(not np.array_equal(a, b) for a, b in zip(before, after))  # statistics and seed moved
        results.append(model.get_weights())
    _assert_same_weights(results[0], results[1], atol=1e-5)


def test_layouts_and_other_strategies_equal_one_device():
    """A Keras LayoutMap on a data=2 x model=4 mesh (kernels split over "model", Adam's moments follow
    them), central storage and FSDP: training equals Keras's fit on one device."""
    x, y = _data(48)
    reference = _mlp()
    initial = reference.get_weights()
    reference.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)

    mesh = keras.distribution.DeviceMesh((2, 4), ["data", "model"], devices=jax.devices())
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map["hidden/kernel"] = (None, "model")
    layout_map["logits/kernel"] = ("model", None)
    layout_map["bias"] = (None,)
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=layout_map)
    model = _mlp()
    model.set_weights(initial)
    trainer = jdist.Trainer(model, strategy=strategy)
    trainer.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    params, opt_state = trainer.state.params, trainer.state.opt_state
    assert params["mlp/hidden/kernel"].sharding.spec == P(None, "model")
    assert opt_state["momentum/mlp/hidden/kernel"].sharding.spec == P(None, "model")
    assert params["mlp/logits/kernel"].sharding.spec == P("model", None)
    _assert_same_weights(reference.get_weights(), model.get_weights())
    for other in (jdist.CentralStorageStrategy(), jdist.FSDPStrategy()):  # the update apart / sharded
        model = _mlp()
        model.set_weights(initial)
        jdist.Trainer(model, strategy=other).fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        _assert_same_weights(reference.get_weights(), model.get_weights())


def test_save_load_and_errors(tmp_path):
    x, y = _data(32)
    model = _mlp()
    trainer = jdist.Trainer(model, strategy=_strategy(8))
    trainer.fit(x, y, batch_size=8, epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), trainer.predict(x, verbose=0), atol=1e-5)

    with pytest.raises(ValueError, match="Compile the Keras model first"):
        jdist.Trainer(keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)]))
    regularized = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, kernel_regularizer="l2")])
    regularized.compile(optimizer="sgd", loss="mse")
    with pytest.raises(NotImplementedError, match="kernel_regularizer"):
        jdist.Trainer(regularized, strategy=_strategy(8)).fit(x, np.zeros((32, 3), "float32"), verbose=0)


# ---------------------------------------------------------------- custom loop
def test_custom_loop_run_over_stateless_call_equals_one_device():
    """TF's custom loop with a Keras model: per-replica loss over the global batch, gradients summed,
    Keras's optimizer through stateless_apply; 3 steps under Mirrored(4) equal Keras's fit."""
    x, y = _data(48)
    reference = _mlp()
    initial = reference.get_weights()
    reference.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    reference.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)

    strategy = _strategy(4)
    with strategy.scope():
        model = _mlp()
        model.set_weights(initial)
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def replica_step(trainable, non_trainable, opt_vars, images, labels):
        def loss_of(trainable):
            logits, _ = model.stateless_call(trainable, non_trainable, images, training=True)
            return jdist.compute_average_loss(loss_fn(labels, logits), global_batch_size=16)

        loss, grads = jax.value_and_grad(loss_of)(trainable)
        grads = jdist.get_replica_context().all_reduce("sum", grads)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return trainable, opt_vars, loss

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    opt_vars = [v.value for v in optimizer.variables]
    for i in range(0, 48, 16):
        batch = strategy.distribute_batch((x[i:i + 16], y[i:i + 16]))
        trainable, opt_vars, loss = strategy.run(replica_step, args=(trainable, non_trainable, opt_vars, *batch))
        float(strategy.reduce("sum", loss, axis=None))
    assert all(not isinstance(v, jdist.PerReplica) for v in trainable)  # mirrored after the all-reduce
    for var, value in zip(model.trainable_variables, trainable):
        var.assign(value)
    _assert_same_weights(reference.get_weights(), model.get_weights())


# ------------------------------------------------------ Keras's own fit in scope
def test_keras_fit_in_scope_is_data_parallel_and_equals_one_device():
    x, y = _data(44)  # batches of 8; the last holds 4, which 8 replicas do not divide
    reference = _mlp()
    initial = reference.get_weights()
    rows = np.ones(44, np.float32)
    rows[40:] = 0.5  # TF splits the last 4 rows 1, 1, 1, 1, 0, 0, 0, 0 and averages the 8 replicas' means
    reference.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, sample_weight=rows)

    strategy = _strategy(8)
    layouts = []
    with strategy.scope():
        distribution = keras.distribution.distribution()
        assert isinstance(distribution, keras_distribution.strategy_distribution(strategy).__class__)
        distribution.get_data_layout = _recording(distribution.get_data_layout, layouts)
        model = _mlp()
        kernel = model.trainable_variables[0].value
        assert kernel.sharding.mesh.devices.size == 8 and all(a is None for a in kernel.sharding.spec)
        model.set_weights(initial)
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert keras.distribution.distribution() is None  # the scope restores Keras's own
    assert layouts and all(layout.axes[0] == "data" for layout in layouts)  # batches split over replicas
    _assert_same_weights(reference.get_weights(), model.get_weights())



# TF 2.21 (both its Keras 3.15 and tf_keras), a model made and compiled in a 4-replica MirroredStrategy's scope:
# `fit`, `evaluate` and `predict` called after the scope closed traced their steps with
# `get_replica_context().num_replicas_in_sync == 4` (a probe layer's record: [None, 4, 4, ...]).
def test_keras_fit_after_the_scope_keeps_the_models_strategy():
    """The Keras tutorial calls `model.fit` after `with strategy.scope():` closed. The model keeps its strategy,
    as TF's do: each batch is split over the replicas (before, it went unsplit to every replica, each
    computing the whole batch), with the numbers of a fit inside the scope."""
    x, y = _data(48)
    strategy = _strategy(8)
    with strategy.scope():
        inside = _mlp()
        outside = _mlp()
        outside.set_weights(inside.get_weights())
        inside.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        distribution = keras.distribution.distribution()
    layouts = []
    distribution.get_data_layout = _recording(distribution.get_data_layout, layouts)
    assert keras.distribution.distribution() is None
    outside.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    _assert_same_weights(inside.get_weights(), outside.get_weights())
    assert layouts and all(layout.axes[0] == "data" for layout in layouts)
    for run in (lambda: outside.evaluate(x, y, batch_size=16, verbose=0),
                lambda: outside.predict(x, batch_size=16, verbose=0)):
        layouts.clear()
        run()
        assert layouts and all(layout.axes[0] == "data" for layout in layouts)
    assert keras.distribution.distribution() is None  # Keras's own again after each call
    np.testing.assert_allclose(outside.predict(x, batch_size=16, verbose=0), inside.predict(x, verbose=0),
                               atol=ATOL)


def test_compile_outside_the_scope_of_a_built_model_uses_its_strategy():
    """TF's migration guide (guide/migrate/mirrored_strategy.ipynb) makes the model and optimizer in the scope and
    calls `compile` and `fit` after it closed. With a built model `compile` makes the loss tracker's variables
    at once: they are the model's strategy's (before, they were one device's, and the first step failed with
    "Received incompatible devices for jitted computation"). The numbers are one device's."""
    x, y = _data(48)

    def made(strategy):
        keras.utils.set_random_seed(1)
        with strategy.scope():
            model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
            optimizer = keras.optimizers.Adagrad(learning_rate=0.05)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    mirrored, single = made(_strategy(8)), made(jdist.OneDeviceStrategy(jax.devices()[0]))
    assert all(len(v.value.sharding.device_set) == 8 for v in mirrored.metrics_variables)
    losses = [model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history["loss"]
              for model in (mirrored, single)]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    _assert_same_weights(single.get_weights(), mirrored.get_weights())
    assert all(len(v.value.sharding.device_set) == 8 for v in mirrored.optimizer.variables)


def _recording(fn, into):
    def wrapped(shape):
        layout = fn(shape)
        into.append(layout)
        return layout

    return wrapped


def test_seed_keras_cnn_script_mirrored_equals_one_device():
    """scripts/keras_cnn.py: the seed's CNN in Keras. Under Mirrored(8) and OneDeviceStrategy, three
    steps (batches of 64, 64 and a short 24, 3 rows a replica) give the same weights; two
    epochs under Mirrored(8) reach >= 90% held-out. (Over the 46 steps of two epochs Adam amplifies
    the float noise of the different reduction order: 2.5e-4 at most, observed.)"""
    import importlib.util

    from jdist import datasets

    spec = importlib.util.spec_from_file_location(
        "keras_cnn", os.path.join(os.path.dirname(__file__), "..", "scripts", "keras_cnn.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    x, y = datasets.load_digits("train")
    x_test, y_test = datasets.load_digits("test")
    short = [script.build_and_fit(strategy, x[:152], y[:152], epochs=1, verbose=0)
             for strategy in (jdist.MirroredStrategy(), jdist.OneDeviceStrategy(jax.devices()[0]))]
    _assert_same_weights(short[1].get_weights(), short[0].get_weights(), atol=1e-5)
    mirrored = script.build_and_fit(jdist.MirroredStrategy(), x, y, epochs=2, verbose=0)
    assert mirrored.evaluate(x_test, y_test, verbose=0)[1] >= 0.9
