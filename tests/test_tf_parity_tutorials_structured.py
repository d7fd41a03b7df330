"""TensorFlow's structured-data tutorials (preprocessing_layers, Keras's FeatureSpace example) as a script sees them.

Every expected value is TF's, observed in TF 2.21 with Keras 3.15 (tensorflow-cpu, Keras 3 on TensorFlow) running
the same code: preprocessing layers adapted on a `tf.data` map of a feature dict, and a `FeatureSpace` adapted on
a dataset, called on a batch and on one example, mapped over a dataset, trained on, saved and reloaded. Data is
small and local (the tutorials download PetFinder and the Cleveland heart data).
"""
from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

AGES = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], np.int64)
KIND = np.array(["Cat", "Dog", "Dog", "Cat", "Dog", "Bird", "Dog", "Cat", "Dog", "Dog", "Cat"])


def _labelled() -> Any:
    features = {"Age": AGES[:, None], "Type": KIND[:, None]}
    return tf.data.Dataset.from_tensor_slices((features, AGES % 2)).batch(4)


def test_normalization_adapts_on_a_dataset_map() -> None:
    # preprocessing_layers: `normalizer.adapt(dataset.map(lambda x, y: x[name]))` (observed in TF 2.21, Keras 3.15)
    layer = tf.keras.layers.Normalization(axis=None)
    layer.adapt(_labelled().map(lambda x, y: x["Age"]))
    np.testing.assert_allclose(np.asarray(layer.mean), [[4.0]])
    np.testing.assert_allclose(np.asarray(layer.variance), [[5.090909481048584]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(layer(np.array([[3], [7]]))), [[-0.44320258], [1.32960773]], rtol=1e-5)


def test_normalization_batches_an_unbatched_rank1_dataset() -> None:
    # observed in TF 2.21, Keras 3.15: elements of shape (1,) are batched (by 128) before the moments
    layer = tf.keras.layers.Normalization()
    layer.adapt(tf.data.Dataset.from_tensor_slices(AGES[:, None].astype("float32")))
    np.testing.assert_allclose(np.asarray(layer.mean), [[4.0]])
    np.testing.assert_allclose(np.asarray(layer.variance), [[5.090909004211426]], rtol=1e-6)


def test_discretization_adapts_on_a_dataset_and_on_numpy() -> None:
    # observed in TF 2.21, Keras 3.15: the same quantile boundaries from batches of 4 as from one array
    from_dataset = tf.keras.layers.Discretization(num_bins=3)
    from_dataset.adapt(_labelled().map(lambda x, y: x["Age"]))
    assert from_dataset.bin_boundaries == pytest.approx([2.6666665077209473, 5.0])
    assert np.asarray(from_dataset(np.array([[0], [4], [8]]))).tolist() == [[0], [1], [2]]
    from_numpy = tf.keras.layers.Discretization(num_bins=3)
    from_numpy.adapt(AGES.astype("float32"))
    assert from_numpy.bin_boundaries == pytest.approx([2.6666665077209473, 5.0])


def test_string_lookup_adapts_on_a_dataset_map() -> None:
    # observed in TF 2.21, Keras 3.15: most frequent first, then the rest
    layer = tf.keras.layers.StringLookup()
    layer.adapt(_labelled().map(lambda x, y: x["Type"]))
    assert layer.get_vocabulary() == ["[UNK]", "Dog", "Cat", "Bird"]
    assert np.asarray(layer(np.array([["Cat"], ["Fish"]]))).tolist() == [[2], [0]]


def _columns(n: int | None = None) -> dict[str, Any]:
    values = {"a": AGES, "f": AGES * 1.5, "t": KIND, "d": AGES * 1.5, "r": AGES * 1.5, "h": KIND}
    return {k: v[:n] for k, v in values.items()}


def _space() -> Any:
    fs_class = tf.keras.utils.FeatureSpace
    space = fs_class(
        features={"a": fs_class.integer_categorical(num_oov_indices=0), "f": "float_normalized",
                  "t": "string_categorical", "d": fs_class.float_discretized(num_bins=3),
                  "r": fs_class.float_rescaled(scale=2.0), "h": fs_class.string_hashed(num_bins=4)},
        crosses=[fs_class.cross(("a", "t"), crossing_dim=4)], output_mode="concat")
    space.adapt(tf.data.Dataset.from_tensor_slices(_columns()).batch(4))
    return space


# observed in TF 2.21, Keras 3.15: columns are a(6) d(3) f(1) h(4) r(1) t(4), then the cross a_X_t(4)
TF_ROWS = [
    [0, 1, 0, 0, 0, 0, 0, 0, 1, 0, -0.4432, 0, 1, 0, 0, 9.0, 0, 0, 1, 0, 0, 1, 0, 0],
    [0, 0, 1, 0, 0, 0, 0, 1, 0, 0, -1.3296, 0, 0, 0, 1, 3.0, 0, 1, 0, 0, 1, 0, 0, 0],
    [0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0.0, 0, 0, 0, 1, 12.0, 0, 1, 0, 0, 0, 0, 0, 1]]
TF_SCALAR = [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, -0.8864, 0, 1, 0, 0, 2.0, 0, 0, 0, 1, 0, 1, 0, 0]


def test_feature_space_adapts_and_encodes_as_tf(tmp_path: Any) -> None:
    space = _space()
    out = space(_columns(3))
    assert out.shape == (3, 24) and out.dtype == tf.float32
    np.testing.assert_allclose(np.asarray(out), TF_ROWS, atol=1e-4)
    one = space({"a": 9, "f": 3.0, "t": "Bird", "d": 3.0, "r": 1.0, "h": "Cat"})  # one example: a vector
    assert one.shape == (24,)
    np.testing.assert_allclose(np.asarray(one), TF_SCALAR, atol=1e-4)
    inputs = space.get_inputs()
    assert sorted((k, v.dtype, tuple(v.shape)) for k, v in inputs.items()) == [
        ("a", "int32", (None, 1)), ("d", "float32", (None, 1)), ("f", "float32", (None, 1)),
        ("h", "string", (None, 1)), ("r", "float32", (None, 1)), ("t", "string", (None, 1))]
    encoded = space.get_encoded_features()
    assert (tuple(encoded.shape), encoded.dtype) == ((None, 24), "float32")

    # the tutorial's training: map the space over a labelled dataset, train a model on the encoded features
    mapped = tf.data.Dataset.from_tensor_slices(_columns()).batch(4).map(lambda x: (space(x), x["a"] % 2))
    assert mapped.element_spec == (tf.TensorSpec((None, 24), tf.float32), tf.TensorSpec((None,), tf.int64))
    model = keras.Model(encoded, keras.layers.Dense(1, activation="sigmoid")(encoded))
    model.compile("adam", "binary_crossentropy")
    history = model.fit(mapped, epochs=2, verbose=0)
    assert sorted(history.history) == ["loss"] and len(history.history["loss"]) == 2
    assert model.predict(np.asarray(out), verbose=0).shape == (3, 1)

    # save/load of the space (observed: the reloaded one is a FeatureSpace that encodes the same)
    space.save(str(tmp_path / "space.keras"))
    reloaded = keras.saving.load_model(str(tmp_path / "space.keras"))
    assert type(reloaded).__name__ == "FeatureSpace"
    batch = {"a": [9, 3], "f": [3.0, 1.0], "t": ["Bird", "Cat"], "d": [3.0, 9.0], "r": [1.0, 0.0], "h": ["Cat", "Dog"]}
    np.testing.assert_allclose(np.asarray(reloaded(batch)), np.asarray(space(batch)), atol=1e-6)


def test_feature_space_dict_mode_and_errors() -> None:
    fs_class = tf.keras.utils.FeatureSpace
    data = tf.data.Dataset.from_tensor_slices({"a": AGES, "f": AGES * 1.0}).batch(4)
    space = fs_class(features={"a": fs_class.integer_categorical(output_mode="int"), "f": "float"},
                     output_mode="dict")
    space.adapt(data)
    encoded = space({"a": AGES[:2], "f": AGES[:2] * 1.0})
    # observed in TF 2.21, Keras 3.15: an int feature keeps its int64 lookup ids, a float one its float32 values
    assert sorted((k, v.dtype, tuple(v.shape), np.asarray(v).tolist()) for k, v in encoded.items()) == [
        ("a", tf.int64, (2, 1), [[2], [3]]), ("f", tf.float32, (2, 1), [[3.0], [1.0]])]
    bad = fs_class(features={"a": fs_class.integer_categorical(output_mode="int")}, output_mode="concat")
    with pytest.raises(ValueError, match="Cannot concatenate features because feature 'a' has not been encoded"):
        bad.adapt(data.map(lambda x: {"a": x["a"]}))
    with pytest.raises(ValueError, match=r"`adapt\(\)` can only be called on a tf.data.Dataset or a dict"):
        space.adapt([1, 2])


def test_timeseries_dataset_from_array_windows_as_tf() -> None:
    # time_series: WindowGenerator.make_dataset (observed in TF 2.21, Keras 3.15)
    data = np.arange(40, dtype=np.float32).reshape(20, 2)
    windows = tf.keras.utils.timeseries_dataset_from_array(data, None, sequence_length=4, sequence_stride=2,
                                                           sampling_rate=2, batch_size=3)
    assert int(windows.cardinality()) == 3
    batches = [np.asarray(b) for b in windows]
    assert [b.shape for b in batches] == [(3, 4, 2), (3, 4, 2), (1, 4, 2)]
    assert batches[0][0].tolist() == [[0.0, 1.0], [4.0, 5.0], [8.0, 9.0], [12.0, 13.0]]
    assert batches[0].dtype == np.float32
    pairs = tf.keras.utils.timeseries_dataset_from_array(data[:, 0], np.arange(20) * 10, sequence_length=3,
                                                         batch_size=None, start_index=2, end_index=12)
    assert pairs.element_spec[1] == tf.TensorSpec((), tf.int64)
    got = [(np.asarray(x).tolist(), int(y)) for x, y in pairs]
    assert len(got) == 8 and got[:2] == [([4.0, 6.0, 8.0], 20), ([6.0, 8.0, 10.0], 30)]
    shuffled = tf.keras.utils.timeseries_dataset_from_array(data, None, sequence_length=5, shuffle=True, seed=3,
                                                            batch_size=4)
    firsts = sorted(v for b in shuffled for v in np.asarray(b)[:, 0, 0].tolist())
    assert firsts == [float(v) for v in range(0, 32, 2)]  # every window once per epoch

    def split(features: Any) -> Any:
        inputs, labels = features[:, :3, :], features[:, 3:, :1]
        inputs.set_shape([None, 3, None])
        labels.set_shape([None, 1, None])
        return inputs, labels

    mapped = tf.keras.utils.timeseries_dataset_from_array(data, None, sequence_length=4, batch_size=5).map(split)
    assert mapped.element_spec == (tf.TensorSpec((None, 3, 2), tf.float32), tf.TensorSpec((None, 1, 1), tf.float32))
    with pytest.raises(ValueError, match="`sequence_stride` must be higher than 0"):
        tf.keras.utils.timeseries_dataset_from_array(data, None, sequence_length=4, sequence_stride=0)


def test_tf_initializers_is_the_keras_initializers_module() -> None:
    # time_series: `Dense(..., kernel_initializer=tf.initializers.zeros())` (observed in TF 2.21, Keras 3.15:
    # `tf.initializers` is Keras's initializers module; `zeros()` is a Keras Zeros, there is no zeros_initializer)
    assert type(tf.initializers.zeros()).__name__ == "Zeros"
    assert hasattr(tf.initializers, "Zeros") and not hasattr(tf.initializers, "zeros_initializer")
    layer = tf.keras.layers.Dense(3, kernel_initializer=tf.initializers.zeros())
    assert np.asarray(layer(np.ones((2, 4), np.float32))).tolist() == [[0.0] * 3] * 2
    assert np.asarray(tf.zeros_initializer()((2,))).tolist() == [0.0, 0.0]  # TF2's own class stays
