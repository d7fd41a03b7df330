"""`tf.saved_model.save` / `load` of Keras models (jdist.saved_model), checked against the model itself.

TF 2.21 with its Keras 3, observed (`tf.saved_model.save` of a Sequential of Conv2D, Flatten, Dense under
MirroredStrategy on 2 logical CPUs, then `tf.saved_model.load`): `signatures` has the one key
"serving_default"; its `structured_input_signature` is `((), {'inputs': TensorSpec(shape=(None, 6, 6, 1),
dtype=tf.float32, name='inputs')})` and `structured_outputs` `{'output_0': TensorSpec(shape=(None, 3), ...)}`;
the outputs equal the model's (max difference 0.0), for any batch size; an unknown keyword is a TypeError; a
subclassed model never called saves with no signatures (`_SignatureMap({})`), and after `fit` with
`inputs` / `output_0` of shape (None, 5). (tf_keras names them after the layers: `conv2d_input` / `dense`.)
"""
import os

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402

keras = pytest.importorskip("keras")


def _model():
    return tf.keras.Sequential([tf.keras.Input((6, 6, 1)), tf.keras.layers.Conv2D(4, 3, activation="relu"),
                                tf.keras.layers.Flatten(), tf.keras.layers.Dense(3)])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A model made under MirroredStrategy, saved; its single-device predictions on 16 inputs."""
    with jdist.MirroredStrategy().scope():
        model = _model()
        model.compile(loss="mse", optimizer="adam")
    x = np.random.RandomState(0).rand(16, 6, 6, 1).astype("float32")
    path = tmp_path_factory.mktemp("saved") / "model"
    tf.saved_model.save(model, str(path))
    expected = np.asarray(model.predict(x, verbose=0))
    return path, x, expected


def test_directory_and_signature_as_tf_keras3(saved):
    path, x, expected = saved
    assert sorted(os.listdir(path)) == ["functions", "model.keras", "saved_model.json", "variables"]
    assert tf.saved_model.contains_saved_model(path)
    loaded = tf.saved_model.load(str(path))
    assert list(loaded.signatures) == [tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY] == ["serving_default"]
    f = loaded.signatures["serving_default"]
    assert repr(f.structured_input_signature) == (
        "((), {'inputs': TensorSpec(shape=(None, 6, 6, 1), dtype=tf.float32, name='inputs')})")
    assert repr(f.structured_outputs) == "{'output_0': TensorSpec(shape=(None, 3), dtype=tf.float32, name='output_0')}"
    np.testing.assert_allclose(np.asarray(f(inputs=x)["output_0"]), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(f(x[:5])["output_0"]), expected[:5], rtol=1e-6, atol=1e-6)  # any batch
    np.testing.assert_allclose(np.asarray(loaded(x)), expected, rtol=1e-6, atol=1e-6)  # tf_keras's callable
    assert len(loaded.trainable_variables) == 4


@pytest.mark.parametrize("make", [None, lambda: jdist.OneDeviceStrategy("cpu:0"), jdist.MirroredStrategy],
                         ids=["no_strategy", "one_device", "mirrored"])
def test_load_in_any_scope_and_run_per_replica(saved, make):
    path, x, expected = saved
    if make is None:
        f = tf.saved_model.load(str(path)).signatures["serving_default"]
        np.testing.assert_allclose(np.asarray(f(x)["output_0"]), expected, rtol=1e-6, atol=1e-6)
        return
    strategy = make()
    with strategy.scope():
        options = tf.saved_model.LoadOptions(experimental_io_device="/job:localhost")
        f = tf.saved_model.load(str(path), options=options).signatures["serving_default"]
        dist = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(16))
        (batch,) = list(dist)
        result = strategy.run(f, args=(batch,))
    rows = np.concatenate([np.asarray(r) for r in strategy.experimental_local_results(result["output_0"])])
    np.testing.assert_allclose(rows, expected, rtol=1e-6, atol=1e-6)


def test_keras_load_model_of_the_directory_and_extensionless_save(saved, tmp_path):
    path, x, expected = saved
    with jdist.MirroredStrategy().scope():
        model = tf.keras.models.load_model(str(path), options=tf.saved_model.LoadOptions())
    np.testing.assert_allclose(np.asarray(model.predict(x, verbose=0)), expected, rtol=1e-6, atol=1e-6)
    assert model.optimizer is not None  # compiled, as saved
    model.save(str(tmp_path / "again"), options=tf.saved_model.SaveOptions(experimental_io_device="/job:localhost"))
    f = tf.saved_model.load(str(tmp_path / "again")).signatures["serving_default"]
    np.testing.assert_allclose(np.asarray(f(inputs=x)["output_0"]), expected, rtol=1e-6, atol=1e-6)


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(5)

    def call(self, inputs):
        return self.dense(inputs)


def test_subclassed_model_saves_a_signature_once_it_has_seen_an_input(tmp_path):
    model = Subclassed()
    _ = tf.keras  # installs tf_keras's save / save_spec
    assert model.save_spec() is None
    with pytest.raises(ValueError, match="cannot be saved either because the input shape is not available"):
        model.save(str(tmp_path / "unbuilt"))
    tf.saved_model.save(model, str(tmp_path / "unbuilt"))  # TF 2.21 saves it too, with no signatures
    loaded = tf.saved_model.load(str(tmp_path / "unbuilt"))
    assert len(loaded.signatures) == 0
    with pytest.raises(KeyError, match="call or fit it once"):
        loaded.signatures["serving_default"]
    x = np.arange(20, dtype="float32").reshape(4, 5) / 20
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, x, epochs=1, batch_size=4, verbose=0)
    assert repr(model.save_spec()) == "([TensorSpec(shape=(None, 5), dtype=tf.float32, name='inputs')], {})"
    model.save(str(tmp_path / "built"))
    f = tf.saved_model.load(str(tmp_path / "built")).signatures["serving_default"]
    assert list(f.structured_outputs) == ["output_0"]
    np.testing.assert_allclose(np.asarray(f(inputs=x[:3])["output_0"]), np.asarray(model(x[:3])), rtol=1e-6)


def test_bad_calls_and_unsupported_objects_name_the_fix(saved, tmp_path):
    path, x, _ = saved
    f = tf.saved_model.load(str(path)).signatures["serving_default"]
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'extra'.*\['inputs'\]"):
        f(inputs=x, extra=1)
    with pytest.raises(ValueError, match=r"must match TensorSpec\(shape=\(None, 6, 6, 1\).*got shape \(16, 5, 6, 1\)"):
        f(x[:, :5])
    with pytest.raises(ValueError, match="dtype float64"):
        f(x.astype("float64"))
    with pytest.raises(TypeError, match="takes a Keras 3 model.*tf.train.Checkpoint.*jax.export"):
        tf.saved_model.save(object(), str(tmp_path / "x"))
    with pytest.raises(ValueError, match="experimental_io_device.*'/job:localhost'"):
        tf.saved_model.LoadOptions(experimental_io_device="/job:worker/task:1")
    (tmp_path / "tf").mkdir()
    (tmp_path / "tf" / "saved_model.pb").write_bytes(b"")
    with pytest.raises(ValueError, match="TensorFlow SavedModel.*load it with TensorFlow"):
        tf.saved_model.load(str(tmp_path / "tf"))
    with pytest.raises(AttributeError, match="tf.saved_model.builder.*saves and loads Keras models"):
        tf.saved_model.builder  # noqa: B018
    assert jax.device_count() == 8
