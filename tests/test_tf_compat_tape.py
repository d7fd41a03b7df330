"""`tf.GradientTape` outside `strategy.run`: in a `tf.function` (compiled through the default strategy) and
eager (the block replayed under `jax.grad`), and `tf.Module`'s variable discovery; each against TF 2.21."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# TF 2.21 with its Keras 3, no strategy: the model below from these weights, Adam(0.01), 3 epochs of 4 steps of 16
# rows, the quickstart's train step (a tape, apply_gradients, Mean and SparseCategoricalAccuracy metrics). Per epoch:
# mean loss, accuracy, the last step's loss; the same numbers with `@tf.function` and eager (the step a plain
# function taking the model and optimizer as arguments, as TF's checkpoint guide writes it). Then
# optimizer.iterations 12 and the first kernel's sum -2.566670.
TF_EPOCHS = [(0.894233, 0.484375, 0.695928), (0.822880, 0.468750, 0.690128), (0.769389, 0.531250, 0.666550)]
TF_KERNEL_SUM = -2.566670


def _setup():
    rs = np.random.RandomState(0)
    x = rs.rand(64, 8).astype("float32")
    y = (x.sum(1) > 4).astype("int32")
    keras = tf.keras
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    model.set_weights([rs.normal(0, 0.5, w.shape).astype("float32") for w in model.get_weights()])
    return x, y, model


@pytest.mark.parametrize("compiled", [True, False], ids=["tf_function", "eager"])
def test_quickstart_train_step_outside_strategies_equals_tf(compiled):
    x, y, model = _setup()
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam(0.01)
    train_loss = tf.keras.metrics.Mean(name="train_loss")
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")

    def train_step(net, images, labels, optimizer):
        with tf.GradientTape() as tape:
            predictions = net(images, training=True)
            loss = loss_object(labels, predictions)
        gradients = tape.gradient(loss, net.trainable_variables)
        optimizer.apply_gradients(zip(gradients, net.trainable_variables))
        train_loss(loss)
        train_accuracy(labels, predictions)
        return loss

    step = tf.function(train_step) if compiled else train_step
    epochs = []
    for _ in range(3):
        train_loss.reset_state()
        train_accuracy.reset_state()
        for i in range(0, 64, 16):
            last = step(model, x[i:i + 16], y[i:i + 16], optimizer)
        epochs.append((float(train_loss.result()), float(train_accuracy.result()), float(last)))
    np.testing.assert_allclose(epochs, TF_EPOCHS, atol=2e-6)
    assert int(optimizer.iterations.numpy()) == 12
    assert float(np.sum(model.get_weights()[0])) == pytest.approx(TF_KERNEL_SUM, abs=1e-5)
    if compiled:
        # observed in TF 2.21, Keras 3.15: 2, the first call builds the optimizer's variables and traces twice
        assert step.experimental_get_tracing_count() == 2
        (programs,) = [fn.__dict__["_jdist_programs"] for fn, *_ in _replica_functions()]
        assert len(programs) == 1  # one compiled program for the 12 calls of one signature


def _replica_functions():
    from jdist.strategy.default import default_strategy

    return list(default_strategy().__dict__.get("_keras_run_fns", {}).values())[-1:]


# TF 2.21, the autodiff guide's eager cases: d(x**2)/dx at 3 -> 6; a watched constant c = [1, 2], z = 3 c**2 and
# w = sum(z)**2 from one persistent tape -> [6, 12] and [180, 360] (both read on one line); a tf.Module y = w x + b
# (w 5, b 0) after 3 steps of 0.1 * gradient of the mean squared error on y = 3x + 2, x in linspace(-1, 1, 8):
# w 4.528536, b 0.976000.
def test_autodiff_guides_eager_cases_equal_tf():
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = x**2
    assert float(tape.gradient(y, x)) == 6.0

    c = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(c)
        z = c * c * 3.0
        w = tf.reduce_sum(z) ** 2
    both = (np.asarray(t.gradient(z, c)).tolist(), np.asarray(t.gradient(w, c)).tolist())
    assert both == ([6.0, 12.0], [180.0, 360.0])

    class Linear(tf.Module):
        def __init__(self):
            super().__init__()
            self.w, self.b = tf.Variable(5.0), tf.Variable(0.0)

        def __call__(self, v):
            return self.w * v + self.b

    model = Linear()
    xs = np.linspace(-1, 1, 8).astype("float32")
    ys = 3 * xs + 2
    for _ in range(3):
        with tf.GradientTape() as tape:
            current_loss = tf.reduce_mean(tf.square(ys - model(xs)))
        dw, db = tape.gradient(current_loss, [model.w, model.b])
        model.w.assign_sub(0.1 * dw)
        model.b.assign_sub(0.1 * db)
    assert (float(model.w.numpy()), float(model.b.numpy())) == pytest.approx((4.528536, 0.976000), abs=2e-6)


def test_a_non_persistent_eager_tape_gives_one_set_of_gradients():
    v = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        y = v * v
    tape.gradient(y, v)
    with pytest.raises(RuntimeError, match="persistent=True"):
        tape.gradient(y, v)


def test_an_eager_tape_without_source_or_with_an_unknown_source_names_the_fix():
    v = tf.Variable(2.0)
    with pytest.raises(RuntimeError, match="no source|has none"):
        exec("with tf.GradientTape() as tape:\n    y = v * v\n", {"tf": tf, "v": v})
    with tf.GradientTape() as tape:
        y = v * 3.0
    with pytest.raises(ValueError, match="neither variables nor values bound to a name"):
        tape.gradient(y, np.ones(2, np.float32))


# TF 2.21: a Module with attributes w, b, sub (a Module with z non-trainable, a), lst = [v3, {"k": v4}] lists its
# variables as [b, lst's 3.0 and 4.0, w, then sub's a and z] -> [0.0, 3.0, 4.0, 5.0, 2.0, 1.0]; trainable ones
# without z; one submodule, named "sub"; tf.Module().name == "module".
def test_module_finds_variables_in_tfs_order():
    class Sub(tf.Module):
        def __init__(self):
            super().__init__()
            self.z = tf.Variable(1.0, trainable=False)
            self.a = tf.Variable(2.0)

    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.w, self.b, self.sub = tf.Variable(5.0), tf.Variable(0.0), Sub()
            self.lst = [tf.Variable(3.0), {"k": tf.Variable(4.0)}]

    m = M()
    assert [float(v.numpy()) for v in m.variables] == [0.0, 3.0, 4.0, 5.0, 2.0, 1.0]
    assert [float(v.numpy()) for v in m.trainable_variables] == [0.0, 3.0, 4.0, 5.0, 2.0]
    assert [float(v.numpy()) for v in m.non_trainable_variables] == [1.0]
    assert [s.name for s in m.submodules] == ["sub"] and m.name == "m" and tf.Module().name == "module"
    with pytest.raises(ValueError, match="not a valid module name"):
        tf.Module(name="a b")


def test_gradient_called_inside_the_tapes_block_replays_only_up_to_it():
    """TF's fault-tolerance migration guide calls tape.gradient and apply_gradients inside the `with` block (TF
    allows it); the replay stops at the gradient call, so the update is applied once, eagerly."""
    x, y, model = _setup()
    twin = tf.keras.models.clone_model(model)
    twin.set_weights(model.get_weights())
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer, twin_optimizer = tf.keras.optimizers.SGD(0.1), tf.keras.optimizers.SGD(0.1)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss_value = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss_value, model.trainable_weights)
            optimizer.apply_gradients(zip(grads, model.trainable_weights))
        with tf.GradientTape() as tape:
            twin_loss = loss_fn(y, twin(x, training=True))
        twin_grads = tape.gradient(twin_loss, twin.trainable_weights)
        twin_optimizer.apply_gradients(zip(twin_grads, twin.trainable_weights))
        assert float(loss_value) == pytest.approx(float(twin_loss), abs=1e-7)
    for a, b in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-7)
    assert int(optimizer.iterations.numpy()) == 2


def test_a_subclassed_model_is_built_by_the_first_tf_function_call():
    """TF's quickstart for experts: an unbuilt subclassed Model, first called in a `tf.function` train step (TF
    builds it in the first trace). Its first step equals the same step, eager, on a twin built from the same seed."""
    import keras

    class MyModel(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.d1 = tf.keras.layers.Dense(16, activation="relu")
            self.d2 = tf.keras.layers.Dense(2)

        def call(self, x):
            return self.d2(self.d1(x))

    x, y, _ = _setup()
    assert x[..., tf.newaxis].shape == (64, 8, 1)  # the quickstart's `x_train[..., tf.newaxis]`
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    trained = []
    for compiled in (True, False):
        keras.utils.set_random_seed(0)
        model, optimizer = MyModel(), tf.keras.optimizers.SGD(0.1)

        def train_step(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_object(labels, model(images, training=True))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        if not compiled:
            model(x[:1])  # built eagerly first, from the same seed
        step = tf.function(train_step) if compiled else train_step
        losses = [float(step(x[i:i + 16], y[i:i + 16])) for i in range(0, 64, 16)]
        trained.append((losses, model.get_weights()))
    (compiled_losses, compiled_weights), (eager_losses, eager_weights) = trained
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=1e-6)
    for a, b in zip(compiled_weights, eager_weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_unconnected_source_gets_none_or_zeros_as_in_tf():
    # TF 2.21, eager: y = w*w + stop_gradient(u)*2 with x watched -> [4.0, None, None, None] for [w, u, int i, x];
    # with UnconnectedGradients.ZERO (or "zero") [4.0, 0.0, 0.0]; an int source gets int32 0; "bogus" raises.
    w, u, i = tf.Variable(2.0), tf.Variable(3.0), tf.Variable(3)
    x = tf.constant(4.0)
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        y = w * w + tf.stop_gradient(u) * 2.0
    grads = t.gradient(y, [w, u, i, x])
    assert float(grads[0]) == 4.0 and grads[1:] == [None, None, None]
    zero = t.gradient(y, [w, u, i, x], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert [float(g) for g in zero] == [4.0, 0.0, 0.0, 0.0] and np.asarray(zero[2]).dtype == np.int32
    assert [float(g) for g in t.gradient(y, [w, u], unconnected_gradients="zero")] == [4.0, 0.0]
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients: 'bogus'"):
        t.gradient(y, [w], unconnected_gradients="bogus")

    @tf.function
    def compiled():
        with tf.GradientTape() as tape:
            target = w * 3.0
        return tape.gradient(target, [w, u])

    grads = compiled()  # TF 2.21: [3.0, None]
    assert float(grads[0]) == 3.0 and grads[1] is None


# TF 2.21 (Keras 3, MirroredStrategy on 2 logical CPUs): two Dense(1) heads on one input, Adam(0.1) built in the
# scope, three steps of a tf.function that runs the step; the loss reads head b on the first step only. On the
# next two b's gradients are None, so Adam leaves b where step 1 put it (zeros would move it on by momentum, to
# kernel -0.018800, bias 0.781200). Weights after the three steps, and iterations 3:
TF_HEADS = {"dense/kernel": [0.095293045, 0.094479136, 0.093774602], "dense/bias": [-0.015987020],
            "dense_1/kernel": [0.100000784, 0.100000776, 0.100000761], "dense_1/bias": [0.900000811]}


@pytest.mark.parametrize("make", [lambda: tf.distribute.MirroredStrategy(),
                                  lambda: tf.distribute.OneDeviceStrategy("cpu:0")], ids=["mirrored", "one_device"])
def test_adam_skips_a_variable_whose_gradient_is_none_inside_run(make):
    keras = tf.keras
    x = np.arange(24, dtype=np.float32).reshape(8, 3) / 10
    y = np.arange(8, dtype=np.float32).reshape(8, 1) / 8
    strategy = make()
    replicas = strategy.num_replicas_in_sync
    with strategy.scope():
        inputs = keras.Input((3,))
        a = keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.1), name="dense")
        b = keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.2), bias_initializer="ones",
                               name="dense_1")
        model = keras.Model(inputs, [a(inputs), b(inputs)])
        optimizer = keras.optimizers.Adam(0.1)
        optimizer.build(model.trainable_variables)

    @tf.function
    def train(use_b):
        def step():
            with tf.GradientTape() as tape:
                pa, pb = model(x)
                loss = tf.reduce_mean((pa - y) ** 2) / replicas  # every replica holds the whole batch
                if use_b:
                    loss = loss + tf.reduce_mean((pb - y) ** 2) / replicas
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return strategy.run(step)

    with pytest.warns(UserWarning, match=r"Gradients do not exist for variables \['dense_1/kernel', 'dense_1/bias'\]"):
        for use_b in (True, False, False):
            train(use_b)
    got = {v.path: np.asarray(v.numpy()).ravel().tolist() for v in model.trainable_variables}
    assert got.keys() == TF_HEADS.keys()
    for path, expected in TF_HEADS.items():
        np.testing.assert_allclose(got[path], expected, atol=2e-7, err_msg=path)
    assert int(optimizer.iterations.numpy()) == 3


def test_a_print_in_an_eager_tapes_block_prints_once(capsys):
    v = tf.Variable(2.0)
    seen = []
    with tf.GradientTape() as tape:
        y = v * v
        print("inside the block")
        seen.append(1)  # other side effects happen again in the replay (documented)
    assert float(tape.gradient(y, v)) == 4.0
    assert capsys.readouterr().out == "inside the block\n"
    assert seen == [1, 1]


def test_a_host_read_in_an_eager_tapes_block_names_the_line_and_the_fix():
    v = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        y = v * v
        ratio = float(y) / 2  # TF reads it eagerly; the replay has no value to give
    line = test_a_host_read_in_an_eager_tapes_block_names_the_line_and_the_fix.__code__.co_firstlineno + 4
    with pytest.raises(RuntimeError, match=rf"reads one on the host at .*test_tf_compat_tape.py:{line} .*"
                                           r"move that read after the block"):
        tape.gradient(y, v)
    assert ratio == 2.0
