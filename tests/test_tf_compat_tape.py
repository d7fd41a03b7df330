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
        assert step.experimental_get_tracing_count() == 1
        (programs,) = [fn.__dict__["_jdist_programs"] for fn, _ in _replica_functions()]
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
