"""TF's beginner tutorials (quickstart/beginner, quickstart/advanced, customization/basics, custom_layers,
custom_training_walkthrough) with `import jdist.tf_compat as tf`: what their cells print, against TF 2.21.

The walkthrough's penguins data is replaced by a small synthetic set (`_penguins`), identically for the
TF 2.21 (Keras 3.15) runs whose printed values these tests hold. Weights are set from a fixed numpy draw so
both sides start equal.
"""
import linecache
import os
import tempfile

import jax
import numpy as np
import pytest

import jdist.tf_compat as tf


def _penguins() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=120).astype("int64")
    x = (rng.random((120, 4)) * 0.3 + y[:, None] * 0.25).astype("float32")
    return x, y


def _fixed_weights(model) -> None:
    rng = np.random.default_rng(1)
    model.set_weights([(rng.standard_normal(w.shape) * 0.1).astype("float32") for w in model.get_weights()])


@pytest.fixture(scope="module")
def logits():
    """A Keras model's eager output: a JAX array under KERAS_BACKEND=jax, an EagerTensor in TF."""
    m = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    m.set_weights([np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5, np.zeros(3, np.float32)])
    out = m(np.array([[0.3, 0.8, 0.4, 0.5], [0.4, 0.1, 0.8, 0.5], [-2., -1, 0, 1]], np.float32), training=False)
    assert isinstance(out, jax.Array)
    return out


def test_argmax_of_model_output_is_int64(logits):
    # Observed in TF 2.21, Keras 3.15: tf.math.argmax(logits, axis=1, output_type=tf.int64) -> int64 [2 2 0];
    # the default output_type is int64 too, argmin likewise [0 0 2]; output_type=tf.int32 stays int32.
    # jdist gave int32 for the model's JAX output before.
    for found in (tf.math.argmax(logits, axis=1, output_type=tf.int64), tf.math.argmax(logits, axis=1)):
        assert found.dtype == tf.int64 and found.numpy().tolist() == [2, 2, 0]
    low = tf.math.argmin(logits, axis=1)
    assert low.dtype == tf.int64 and low.numpy().tolist() == [0, 0, 2]
    narrow = tf.math.argmax(logits, axis=1, output_type=tf.int32)
    assert narrow.dtype == tf.int32 and narrow.numpy().tolist() == [2, 2, 0]
    assert "dtype=int64" in repr(tf.math.argmax(logits, axis=1)) and "dtype=int32" in repr(narrow)


def test_cast_of_model_output_to_64_bits(logits):
    # Observed in TF 2.21: tf.cast(logits, tf.float64) is float64; tf.cast(logits * 3, tf.int64) is int64
    # [[0 0 0] [0 0 1] [4 4 3]] (truncation toward zero). jdist gave float32/int32 with a JAX warning before.
    wide = tf.cast(logits, tf.float64)
    assert wide.dtype == tf.float64
    np.testing.assert_allclose(wide.numpy(), [[-0.07, 0.13, 0.33], [0.06, 0.24, 0.42], [1.6, 1.4, 1.2]], atol=1e-6)
    ints = tf.cast(logits * 3, tf.int64)
    assert ints.dtype == tf.int64 and ints.numpy().tolist() == [[0, 0, 0], [0, 0, 1], [4, 4, 3]]


def test_cast_inside_compiled_code_keeps_jax_rule(logits):
    # Inside tf.function the value is traced, so JAX's 32-bit rule applies; the indices are TF's values.
    found = tf.function(lambda v: tf.math.argmax(v, axis=1, output_type=tf.int64))(logits)
    assert np.asarray(found).tolist() == [2, 2, 0]


def test_walkthrough_prediction_cells(logits):
    # custom_training_walkthrough: tf.stack([y, prediction], axis=1) of int64 tf.data labels and argmax
    # predictions (observed TF 2.21: dtype=int64), and the per-example loop's print.
    y = next(iter(tf.data.Dataset.from_tensor_slices(np.array([0, 1, 2], np.int64)).batch(3)))
    prediction = tf.math.argmax(logits, axis=1, output_type=tf.int64)
    pairs = tf.stack([y, prediction], axis=1)
    assert pairs.dtype == tf.int64 and pairs.numpy().tolist() == [[0, 2], [1, 2], [2, 0]]
    assert repr(pairs).startswith("<tf.Tensor: shape=(3, 2), dtype=int64, numpy=")
    back = tf.unstack(pairs, axis=1)
    assert [t.dtype for t in back] == [tf.int64, tf.int64] and back[1].numpy().tolist() == [2, 2, 0]
    lines = []
    for i, lg in enumerate(logits):
        class_idx = tf.math.argmax(lg).numpy()
        p = tf.nn.softmax(lg)[class_idx]
        lines.append(f"Example {i} prediction: {type(class_idx).__name__} ({100 * p:4.1f}%)")
    # Observed in TF 2.21: np.int64 indices and 40.2%, 39.5%, 40.2%.
    assert lines == ["Example 0 prediction: int64 (40.2%)", "Example 1 prediction: int64 (39.5%)",
                     "Example 2 prediction: int64 (40.2%)"]
    accuracy = tf.keras.metrics.Accuracy()  # observed in TF 2.21: 0.000%, after reset_state 66.667%
    accuracy(prediction, y)
    assert f"{accuracy.result():.3%}" == "0.000%"
    accuracy.reset_state()
    accuracy(prediction, np.array([2, 2, 1], np.int64))
    assert f"{accuracy.result():.3%}" == "66.667%"


def test_make_csv_dataset_packed_features():
    # Observed in TF 2.21: make_csv_dataset's columns float32 (an integer column int32), label int32, and
    # the packing map's tf.stack of the columns a (4, 4) float32 batch.
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "iris.csv")
    with open(path, "w") as f:
        f.write("a,b,c,d,species\n" + "\n".join(f"{i/10},{i/20},{i%3}.5,{i/7:.3f},{i%3}" for i in range(10)) + "\n")
    ds = tf.data.experimental.make_csv_dataset(path, batch_size=4, label_name="species", num_epochs=1, shuffle=False)
    features, labels = next(iter(ds))
    assert {k: v.dtype for k, v in features.items()} == dict.fromkeys("abcd", tf.float32)
    assert labels.dtype == tf.int32 and labels.numpy().tolist() == [0, 1, 2, 0]
    packed, _ = next(iter(ds.map(lambda f, y: (tf.stack(list(f.values()), axis=1), y))))
    assert packed.dtype == tf.float32 and packed.shape == (4, 4)
    np.testing.assert_allclose(packed.numpy()[1], [0.1, 0.05, 1.5, 0.143], rtol=1e-6)


def test_gradient_tape_in_notebook_cell():
    # A notebook defines the walkthrough's `grad` in a cell; IPython registers the cell's text in linecache.
    # Observed in TF 2.21, Keras 3.15 (same cell, same weights): loss 1.0808105, after one SGD(0.01) step 1.0801342.
    source = ("def grad(model, inputs, targets):\n"
              "  with tf.GradientTape() as tape:\n"
              "    loss_value = loss_object(y_true=targets, y_pred=model(inputs, training=True))\n"
              "  return loss_value, tape.gradient(loss_value, model.trainable_variables)\n")
    name = "<ipython-input-14-quickstart>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    scope = {"tf": tf, "loss_object": tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
    exec(compile(source, name, "exec"), scope)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    _fixed_weights(model)
    x, y = _penguins()
    loss_value, grads = scope["grad"](model, x[:32], y[:32])
    w, b = model.get_weights()
    expected = jax.grad(lambda w, b: scope["loss_object"](y[:32], x[:32] @ w + b))(w, b)
    np.testing.assert_allclose(np.asarray(grads[0]), np.asarray(expected), rtol=1e-5, atol=1e-7)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert optimizer.iterations.numpy() == 1
    after, _ = scope["grad"](model, x[:32], y[:32])
    np.testing.assert_allclose([float(loss_value), float(after)], [1.0808105, 1.0801342], rtol=2e-6)


def test_walkthrough_loop_under_mirrored_strategy():
    # custom_training_walkthrough's loop inside MirroredStrategy on 4 CPUs, the step in strategy.run with
    # compute_average_loss (TF's custom_training tutorial). Observed in TF 2.21, Keras 3.15 (CPU split into 4
    # logical devices): epoch losses 1.10043, 1.09882, 1.09841, accuracies 39.583%, 37.500%, 37.500%,
    # test accuracy 33.333%, tf.stack([y[:4], prediction[:4]], axis=1) int64 [[2 2] [1 2] [1 2] [0 2]].
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"])
    assert strategy.num_replicas_in_sync == 4
    x, y = _penguins()
    ds = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x[24:], y[24:])).batch(32))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(10, activation=tf.nn.relu),
                                     tf.keras.layers.Dense(10, activation=tf.nn.relu), tf.keras.layers.Dense(3)])
        _fixed_weights(model)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.5)
        epoch_loss_avg = tf.keras.metrics.Mean()
        epoch_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss_value = tf.nn.compute_average_loss(loss_object(yb, model(xb, training=True)), global_batch_size=32)
        grads = tape.gradient(loss_value, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        epoch_accuracy.update_state(yb, model(xb, training=True))
        return loss_value

    printed = []
    for epoch in range(3):
        epoch_loss_avg.reset_state()
        epoch_accuracy.reset_state()
        for xb, yb in ds:
            per_replica = strategy.run(step, args=(xb, yb))
            epoch_loss_avg.update_state(strategy.reduce("SUM", per_replica, axis=None))
        loss, accuracy = epoch_loss_avg.result(), epoch_accuracy.result()
        printed.append(f"Epoch {epoch:03d}: Loss: {loss:.5f}, Accuracy: {accuracy:.3%}")
    assert printed == ["Epoch 000: Loss: 1.10043, Accuracy: 39.583%", "Epoch 001: Loss: 1.09882, Accuracy: 37.500%",
                       "Epoch 002: Loss: 1.09841, Accuracy: 37.500%"]
    prediction = tf.math.argmax(model(x[:24], training=False), axis=1, output_type=tf.int64)
    accuracy = tf.keras.metrics.Accuracy()
    accuracy(prediction, y[:24])
    assert f"{accuracy.result():.3%}" == "33.333%"
    pairs = tf.stack([y[:4], prediction[:4]], axis=1)
    assert pairs.dtype == tf.int64 and pairs.numpy().tolist() == [[2, 2], [1, 2], [1, 2], [0, 2]]


def test_quickstart_advanced_loop_under_mirrored_strategy():
    # quickstart/advanced's MyModel (smaller) and its train/test steps under MirroredStrategy on 4 CPUs, each in a
    # tf.function around strategy.run; MNIST replaced by 128/64 of the bundled digits (data/digits.py), no
    # shuffle. Observed in TF 2.21, Keras 3.15 (CPU split into 4 logical devices, optimizer built in the scope):
    # "Epoch 1, Loss: 2.28951, Accuracy: 8.59, Test Loss: 2.25472, Test Accuracy: 20.31",
    # "Epoch 2, Loss: 2.24826, Accuracy: 21.09, Test Loss: 2.22543, Test Accuracy: 25.00", 8 Adam iterations.
    from data.digits import load_digits
    xtr, ytr = load_digits("train")
    xte, yte = load_digits("test")
    x_train, y_train = xtr[:128].astype("float32"), ytr[:128].astype("uint8")
    x_test, y_test = xte[:64].astype("float32"), yte[:64].astype("uint8")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"])
    train_dist = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(32))
    test_dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32))
    with strategy.scope():
        class MyModel(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.conv1 = tf.keras.layers.Conv2D(4, 3, activation="relu")
                self.flatten = tf.keras.layers.Flatten()
                self.d1 = tf.keras.layers.Dense(16, activation="relu")
                self.d2 = tf.keras.layers.Dense(10)

            def call(self, x):
                return self.d2(self.d1(self.flatten(self.conv1(x))))
        model = MyModel()
        model(x_train[:1])
        _fixed_weights(model)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        optimizer = tf.keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        test_loss = tf.keras.metrics.Mean(name="test_loss")
        test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = tf.nn.compute_average_loss(loss_object(labels, predictions), global_batch_size=32)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    def test_step(images, labels):
        predictions = model(images, training=False)
        test_loss.update_state(loss_object(labels, predictions))
        test_accuracy.update_state(labels, predictions)

    @tf.function
    def dist_train(images, labels):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(train_step, args=(images, labels)), axis=None)

    @tf.function
    def dist_test(images, labels):
        strategy.run(test_step, args=(images, labels))

    printed = []
    for epoch in range(2):
        train_accuracy.reset_state()
        test_loss.reset_state()
        test_accuracy.reset_state()
        total, n = 0.0, 0
        for images, labels in train_dist:
            total += dist_train(images, labels)
            n += 1
        for images, labels in test_dist:
            dist_test(images, labels)
        printed.append(f"Epoch {epoch + 1}, Loss: {total / n:0.5f}, Accuracy: {train_accuracy.result() * 100:0.2f}, "
                       f"Test Loss: {test_loss.result():0.5f}, Test Accuracy: {test_accuracy.result() * 100:0.2f}")
    assert printed == ["Epoch 1, Loss: 2.28951, Accuracy: 8.59, Test Loss: 2.25472, Test Accuracy: 20.31",
                       "Epoch 2, Loss: 2.24826, Accuracy: 21.09, Test Loss: 2.22543, Test Accuracy: 25.00"]
    assert optimizer.iterations.numpy() == 8
