"""TF's migration guides on feature columns, numerical debugging and Estimators (site/en/guide/migrate:
migrating_feature_columns, migration_debugging, migrating_estimator), their TF2 parts run under jdist with
`import jdist.tf_compat as tf`, against TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) run on the same data; the
observed values are recorded below. The TF1 parts (feature columns, Estimators, tf.compat.v1.keras) raise
jdist's error naming the TF2 replacement (TF 2.21 itself has no tf.compat.v1.estimator, no
tf1.keras.layers.DenseFeatures and no DeterministicRandomTestTool: observed AttributeErrors)."""
import math
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
import jdist.tf_compat.compat.v1 as tf1  # noqa: E402

FEATURES = {"type": [0, 1, 1], "size": ["small", "small", "medium"], "weight": [2.7, 1.8, 1.6]}
LABELS = [1, 1, 0]
PREDICT_FEATURES = {"type": [0], "size": ["foo"], "weight": [-0.7]}
VOCAB = ["small", "medium", "large"]


# ----------------------------------------------------------------------------------- feature-column layers
def test_guide_preprocessing_layers_match_feature_columns():
    one_hot = tf.keras.layers.CategoryEncoding(num_tokens=3, output_mode="one_hot")([0, 1, 2])
    np.testing.assert_array_equal(one_hot.numpy(), np.eye(3, dtype=np.float32))  # observed
    norm = tf.keras.layers.Normalization(mean=2.0, variance=1.0)(tf.constant([[0.], [1.], [2.]]))
    np.testing.assert_array_equal(norm.numpy(), [[-2.], [-1.], [0.]])  # observed
    bins = tf.keras.layers.Discretization(bin_boundaries=[1, 4, 5])([1., 2., 3., 4., 5.])
    bucketized = tf.keras.layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")(bins)
    np.testing.assert_array_equal(bucketized.numpy(), np.eye(4, dtype=np.float32)[[1, 1, 1, 2, 3]])  # observed
    lookup = tf.keras.layers.StringLookup(vocabulary=VOCAB, num_oov_indices=0, output_mode="one_hot")
    out = lookup(["small", "medium", "large"])
    assert out.dtype == tf.int64  # observed: int64 one-hot rows
    np.testing.assert_array_equal(out.numpy(), np.eye(3))


def test_guide_sparse_count_encoding_to_dense():
    """A Keras layer's sparse output goes into tf.sparse ops (TF's is a SparseTensor; Keras JAX's a BCOO)."""
    ids = tf.constant([[5, 11, 5, 17, 17]])
    weights = tf.constant([[0.5, 1.5, 0.7, 1.8, 0.2]])
    count_layer = tf.keras.layers.CategoryEncoding(num_tokens=20, output_mode="count", sparse=True)
    sparse = count_layer(ids, count_weights=weights)
    dense = tf.sparse.to_dense(sparse)
    expected = np.zeros((1, 20), np.float32)
    expected[0, [5, 11, 17]] = [1.2, 1.5, 2.0]  # observed in TF 2.21, Keras 3.15 (repeats summed)
    assert dense.shape == (1, 20) and dense.dtype == tf.float32
    np.testing.assert_allclose(dense.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(tf.sparse.reduce_sum(sparse).numpy(), 4.7, rtol=1e-6)  # observed


def _preprocessing_model():
    inputs = {"type": tf.keras.Input(shape=(), dtype="int64"), "size": tf.keras.Input(shape=(), dtype="string"),
              "weight": tf.keras.Input(shape=(), dtype="float32")}
    outputs = {"type": tf.keras.layers.CategoryEncoding(3, output_mode="one_hot")(inputs["type"]),
               "size": tf.keras.layers.StringLookup(vocabulary=VOCAB)(inputs["size"]),
               "weight": tf.keras.layers.Normalization(axis=None, mean=2.0, variance=1.0)(inputs["weight"])}
    return tf.keras.Model(inputs, outputs)


def test_guide_mixed_string_and_numeric_preprocessing_model_in_dataset_map():
    preprocessing_model = _preprocessing_model()
    dataset = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS)).batch(1)
    dataset = dataset.map(lambda x, y: (preprocessing_model(x), y), num_parallel_calls=tf.data.AUTOTUNE)
    x, y = next(dataset.take(1).as_numpy_iterator())
    # observed in TF 2.21, Keras 3.15: ({'type': [[1., 0., 0.]] float32, 'size': [1], 'weight': [0.70000005]
    # float32}, [1] int32)
    np.testing.assert_array_equal(x["type"], [[1., 0., 0.]])
    assert x["type"].dtype == np.float32
    np.testing.assert_array_equal(x["size"], [1])
    assert np.asarray(x["size"]).dtype == np.int64
    np.testing.assert_allclose(x["weight"], [0.70000005], rtol=1e-6)
    assert np.asarray(x["weight"]).dtype == np.float32
    np.testing.assert_array_equal(y, [1])
    assert preprocessing_model(preprocessing_model.input) is preprocessing_model.outputs


def test_guide_inference_model_over_preprocessing_fits_and_predicts():
    preprocessing_model = _preprocessing_model()
    dataset = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS)).batch(1)
    dataset = dataset.map(lambda x, y: (preprocessing_model(x), y))
    inputs = {"type": tf.keras.Input(shape=(3,), dtype="float32"), "size": tf.keras.Input(shape=(), dtype="int64"),
              "weight": tf.keras.Input(shape=(), dtype="float32")}
    embedding = tf.keras.layers.Embedding(len(VOCAB), 4)
    # The guide's tf.expand_dims on a KerasTensor fails in TF 2.21 too (observed ValueError); a Reshape layer
    # is the working form.
    joined = tf.keras.layers.Concatenate()([inputs["type"], embedding(inputs["size"]),
                                           tf.keras.layers.Reshape((1,))(inputs["weight"])])
    training_model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(joined))
    training_model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
    history = training_model.fit(dataset, verbose=0)
    assert np.isfinite(history.history["loss"][0])

    inference_model = tf.keras.Model(preprocessing_model.input,
                                     training_model(preprocessing_model(preprocessing_model.input)))
    predicted = inference_model.predict(tf.data.Dataset.from_tensor_slices(PREDICT_FEATURES).batch(1))
    assert isinstance(predicted, np.ndarray) and predicted.shape == (1, 1)  # observed: (1, 1) float32 array
    assert predicted.dtype == np.float32
    direct = training_model({"type": np.array([[1., 0., 0.]], np.float32), "size": np.array([0]),  # "foo": OOV 0
                             "weight": np.array([(-0.7 - 2.0) / math.sqrt(1.0)], np.float32)})
    np.testing.assert_allclose(predicted, np.asarray(direct), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="Save the numeric model"):  # TF saves it; jdist cannot
        inference_model.save("unused.keras")


# ------------------------------------------------------------------------------------------ HashedCrossing
def test_hashed_crossing_matches_tf_bins():
    layer = tf.keras.layers.HashedCrossing
    out = layer(num_bins=5)((tf.constant([1, 2, 3]), tf.constant(["a", "b", "c"])))
    np.testing.assert_array_equal(np.asarray(out), [0, 4, 3])  # observed in TF 2.21, Keras 3.15
    assert np.asarray(out).dtype == np.int64
    out = layer(num_bins=100)((tf.constant([1, 2, -3, 40]), tf.constant(["a", "bb", "c", "d" * 21])))
    np.testing.assert_array_equal(np.asarray(out), [45, 28, 41, 69])  # observed
    out = layer(num_bins=1000, dtype="int32")((tf.constant(["x", "y"]), tf.constant(["u", "v"])))
    np.testing.assert_array_equal(np.asarray(out), [989, 134])  # observed, int32
    assert np.asarray(out).dtype == np.int32
    out = layer(num_bins=1000)((tf.constant([[5], [6]]), tf.constant([[7], [8]])))
    np.testing.assert_array_equal(np.asarray(out), [[929], [171]])  # observed, shape (2, 1)
    three = layer(num_bins=10)((tf.constant([1, 2]), tf.constant(["a", "b"]), tf.constant([3, 4])))
    np.testing.assert_array_equal(np.asarray(three), [5, 9])  # observed
    assert int(np.asarray(layer(num_bins=10)((tf.constant(1), tf.constant("a"))))) == 5  # observed, shape ()
    one_hot = layer(num_bins=4, output_mode="one_hot")((tf.constant([1, 2]), tf.constant(["a", "b"])))
    np.testing.assert_array_equal(np.asarray(one_hot), [[0., 1., 0., 0.], [0., 1., 0., 0.]])  # observed
    assert np.asarray(one_hot).dtype == np.float32


def test_hashed_crossing_refuses_as_keras_does():
    layer = tf.keras.layers.HashedCrossing(num_bins=10)
    with pytest.raises(ValueError, match="integer or string dtype"):  # observed ValueError, same text
        layer((tf.constant([1.0, 2.0]), tf.constant(["a", "b"])))
    with pytest.raises(ValueError, match="should be called on a list or tuple of inputs"):  # observed
        layer(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"should have shape `\(\)`, `\(batch_size\)` or `\(batch_size, 1\)`"):
        layer((tf.constant([[1, 2]]), tf.constant([["a", "b"]])))  # observed


# -------------------------------------------------------------------------------- migration_debugging (TF2)
def _three_steps():
    tf.keras.utils.set_random_seed(1)
    dense = tf.keras.layers.Dense(2)
    optimizer = tf.keras.optimizers.SGD(tf.keras.optimizers.schedules.PolynomialDecay(1e-3, 1000, 0.0, 1.0))
    loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
    x = np.ones((2, 3), np.float32)
    y = np.array([[1, 0], [0, 1]], np.int32)
    losses, rates = [], []
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, dense(x))
        grads = tape.gradient(loss, dense.trainable_weights)
        rates.append(float(optimizer.learning_rate.numpy()))
        losses.append(float(loss.numpy()))
        optimizer.apply_gradients(zip(grads, dense.trainable_weights))
    return losses, rates, int(optimizer.iterations.numpy())


def test_guide_seeded_training_is_reproducible():
    tf.config.experimental.enable_op_determinism()
    first, second = _three_steps(), _three_steps()
    np.testing.assert_allclose(first[0], second[0])  # same seed, same losses (TF's guide check)
    np.testing.assert_allclose(first[1], [0.001, 0.000999, 0.000998], rtol=1e-6)  # observed decayed rates
    assert first[2] == 3  # observed
    assert first[0][0] != first[0][2]  # the steps did train


def test_guide_debugging_checks():
    tf.debugging.assert_near(tf.constant([1.0]), tf.constant([1.0 + 1e-7]))  # observed: passes
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad : Tensor had NaN values"):  # observed text
        tf.debugging.check_numerics(tf.constant([1.0, np.nan]), "bad")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Condition x == y did not hold"):  # observed
        tf.debugging.assert_equal(tf.constant([1, 2]), tf.constant([1, 3]))


# --------------------------------------------------------------------------------------------- TF1 halves
@pytest.mark.parametrize("name, alternative", [
    ("feature_column", "Keras preprocessing layers"),  # TF 2.21 has it (deprecated) but no DenseFeatures
    ("estimator", "model.fit"),  # observed: TF 2.21's tf.compat.v1 has no attribute 'estimator'
    ("keras", "set_random_seed"),  # observed: keras.utils has no attribute 'DeterministicRandomTestTool'
])
def test_tf1_halves_name_the_tf2_alternative(name, alternative):
    with pytest.raises(AttributeError, match=alternative):
        getattr(tf1, name)
