"""`tf.keras` names that Keras 3 runs only with TensorFlow: jdist's TensorBoard callback and StringLookup layer."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402
from jdist.callbacks.event_file import read_scalars, read_tensors  # noqa: E402


def _scalars(directory):
    (path,) = [os.path.join(directory, f) for f in os.listdir(directory)]
    return read_scalars(path)


def test_tensorboard_writes_kerass_layout_without_tensorflow(tmp_path):
    strategy = jdist.MirroredStrategy(jax.devices()[:2])
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 4)).astype(np.float32), rng.integers(0, 3, 32)
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(3)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), metrics=["accuracy"],
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), verbose=0,
                            callbacks=[tf.keras.callbacks.TensorBoard(log_dir=str(tmp_path), update_freq=2)])
    train, validation = _scalars(tmp_path / "train"), _scalars(tmp_path / "validation")
    epoch_loss = [(step, value) for step, tag, value in train if tag == "epoch_loss"]
    assert [s for s, _ in epoch_loss] == [0, 1]
    np.testing.assert_allclose([v for _, v in epoch_loss], history.history["loss"], rtol=1e-6)
    assert [v for s, t, v in train if t == "epoch_learning_rate"] == pytest.approx([0.1, 0.1])
    assert [s for s, t, _ in train if t == "batch_loss"] == [2, 4, 6, 8]  # every 2 of the 8 steps
    np.testing.assert_allclose([v for _, t, v in validation if t == "epoch_accuracy"], history.history["val_accuracy"],
                               rtol=1e-6)
    # Keras writes each validation's result at the optimizer step as it ends.
    assert [s for s, t, _ in validation if t == "evaluation_loss_vs_iterations"] == [4, 8]


def test_tensorboard_writes_weight_histograms_and_the_model_config(tmp_path):
    """TF 2.21 with Keras 3 (observed: the tensorboard migration guide's model, with BatchNormalization, fit 3
    epochs with `histogram_freq=2`): in `train/`, one `<weight path>/histogram` per weight of every layer,
    trainable or not (`sequential/layers_dense/kernel/histogram`, ..., `sequential/bn/moving_variance/histogram`),
    at epochs 0 and 2; each a float64 (30, 3) array equal to numpy's 30-bin histogram of the weight after that
    epoch in float64 (counts, and edges from its min to its max); and at step 0 the tag `keras`, plugin
    `graph_keras_model` with content b"1", holding `model.to_json()`."""
    strategy = jdist.MirroredStrategy(jax.devices()[:2])
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 6)).astype(np.float32), rng.integers(0, 3, 32)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Input((6,)), tf.keras.layers.Dense(4, name="layers_dense"),
                                     tf.keras.layers.BatchNormalization(name="bn"),
                                     tf.keras.layers.Dense(3, name="layers_dense_2")])
        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        seen = {}

        class Keep(tf.keras.callbacks.Callback):  # each epoch's weights, to compare with what was written
            def on_epoch_end(self, epoch, logs=None):
                seen[epoch] = {w.path: np.asarray(w.value) for w in self.model.weights}

        model.fit(x, y, batch_size=8, epochs=3, verbose=0,
                  callbacks=[Keep(), tf.keras.callbacks.TensorBoard(log_dir=str(tmp_path), histogram_freq=2)])
    (path,) = [os.path.join(tmp_path, "train", f) for f in os.listdir(tmp_path / "train")]
    written = read_tensors(path)
    graph = [(step, value) for step, tag, plugin, value in written if tag == "keras"]
    assert [(step, plugin) for step, tag, plugin, _ in written if tag == "keras"] == [(0, "graph_keras_model")]
    assert graph[0][1].item().decode() == model.to_json()
    histograms = [(step, tag, value) for step, tag, plugin, value in written if plugin == "histograms"]
    paths = [w.path for layer in model.layers for w in layer.weights]
    assert "bn/moving_variance" in " ".join(paths) and len(paths) == 8
    assert [(step, tag) for step, tag, _ in histograms] == [(e, f"{p}/histogram") for e in (0, 2) for p in paths]
    for step, tag, value in histograms:
        weight = seen[step][tag[: -len("/histogram")]]
        counts, edges = np.histogram(weight.astype(np.float64), bins=30)  # TF bins in float64
        assert value.shape == (30, 3) and value.dtype == np.float64
        np.testing.assert_array_equal(value[:, 2], counts)
        np.testing.assert_allclose(value[:, 0], edges[:-1], rtol=1e-12, atol=1e-12)
        assert value[-1, 1] == weight.max()


def test_tensorboard_refuses_what_needs_tensorflow():
    with pytest.raises(ValueError, match="write_steps_per_second"):
        tf.keras.callbacks.TensorBoard(write_steps_per_second=True)
    with pytest.raises(ValueError, match="histogram_freq must be a non-negative int"):
        tf.keras.callbacks.TensorBoard(histogram_freq=-1)


# Observed, TF 2.21 with its Keras 3, the script of the test below: per epoch and weight, the image summary's
# width, height, image count and each image's pixel sum (decoded PNG).
TF_WEIGHT_IMAGES = {
    0: {"conv/kernel/image": (3, 3, [1237, 597]), "conv/bias/image": (1, 2, [0]),
        "dense/kernel/image": (32, 3, [12736]), "dense/bias/image": (1, 3, [495])},
    1: {"conv/kernel/image": (3, 3, [933, 394]), "conv/bias/image": (1, 2, [510]),
        "dense/kernel/image": (32, 3, [10551]), "dense/bias/image": (1, 3, [510])},
}


def test_tensorboard_write_images_draws_the_weights_as_keras_does(tmp_path):
    import io

    from PIL import Image

    inputs = keras.Input((6, 6, 1))
    hidden = keras.layers.Flatten()(keras.layers.Conv2D(2, 3, name="conv")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(3, name="dense")(hidden))
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(-0.2, 1.2, w.shape).astype(np.float32) for w in model.get_weights()])
    model.compile("sgd", "mse")
    x, y = rng.normal(size=(8, 6, 6, 1)).astype(np.float32), rng.normal(size=(8, 3)).astype(np.float32)
    board = tf.keras.callbacks.TensorBoard(str(tmp_path), histogram_freq=1, write_images=True)
    model.fit(x, y, epochs=2, verbose=0, callbacks=[board])
    seen: dict = {0: {}, 1: {}}
    for path in sorted((tmp_path / "train").iterdir()):
        for step, tag, plugin, value in read_tensors(path):
            if plugin == "images":
                pixels = [np.asarray(Image.open(io.BytesIO(png))) for png in value[2:]]
                seen[step][tag] = (int(value[0]), int(value[1]), [int(p.sum()) for p in pixels])
    assert seen == TF_WEIGHT_IMAGES


def test_string_lookup_matches_tf():
    layer = tf.keras.layers.StringLookup(vocabulary=["a", "b", "c", "d", "f"])
    # TF 2.21: layer(tf.constant(["a", "c", "e"])) -> [1 3 0] int64; [["a","f"],["z","b"]] -> [[1 5] [0 2]]
    out = layer(np.array([b"a", b"c", b"e"], dtype=object))
    assert out.numpy().tolist() == [1, 3, 0] and out.dtype == np.int64
    assert layer(np.array([["a", "f"], ["z", "b"]])).numpy().tolist() == [[1, 5], [0, 2]]
    # TF: 6, ['[UNK]', 'a', 'b', 'c', 'd', 'f']
    assert layer.vocabulary_size() == 6 and layer.get_vocabulary() == ["[UNK]", "a", "b", "c", "d", "f"]
    # TF: invert=True on [0, 1, 2] -> [b'[UNK]' b'a' b'b']; one_hot of ["a", "x"] -> [[0 1 0] [1 0 0]]
    inverse = tf.keras.layers.StringLookup(vocabulary=["a", "b"], invert=True)
    assert inverse(np.array([0, 1, 2])).numpy().tolist() == [b"[UNK]", b"a", b"b"]
    one_hot = tf.keras.layers.StringLookup(vocabulary=["a", "b"], output_mode="one_hot")
    assert one_hot(["a", "x"]).numpy().tolist() == [[0, 1, 0], [1, 0, 0]]
    # TF: mask_token="" -> ["", "a", "x"] gives [0 2 1], vocabulary ['', '[UNK]', 'a', 'b']
    masked = tf.keras.layers.StringLookup(vocabulary=["a", "b"], mask_token="")
    assert masked(["", "a", "x"]).numpy().tolist() == [0, 2, 1] and masked.get_vocabulary() == ["", "[UNK]", "a", "b"]
    # TF: adapt(["b", "a", "b", "c"]) -> ['[UNK]', 'b', 'c', 'a']
    adapted = tf.keras.layers.StringLookup()
    adapted.adapt(["b", "a", "b", "c"])
    assert adapted.get_vocabulary() == ["[UNK]", "b", "c", "a"]
    with pytest.raises(ValueError, match="num_oov_indices=0"):
        tf.keras.layers.StringLookup(vocabulary=["a"], num_oov_indices=0)(["x"])
    # TF: two OOV indices -> vocabulary ['[UNK]', '[UNK]', 'a', 'b'] (size 4), ['a', 'b', 'zz'] -> [2 3 0],
    # invert of [0 1 2 3] -> [b'[UNK]' b'[UNK]' b'a' b'b'], multi_hot of [['a', 'zz']] -> [[1 0 1 0]]
    two = tf.keras.layers.StringLookup(vocabulary=["a", "b"], num_oov_indices=2)
    assert two.get_vocabulary() == ["[UNK]", "[UNK]", "a", "b"] and two.vocabulary_size() == 4
    assert two(["a", "b", "zz"]).numpy().tolist() == [2, 3, 0]
    assert tf.keras.layers.StringLookup(vocabulary=["a", "b"], num_oov_indices=2, invert=True)(
        np.array([0, 1, 2, 3])).numpy().tolist() == [b"[UNK]", b"[UNK]", b"a", b"b"]
    assert tf.keras.layers.StringLookup(vocabulary=["a", "b"], num_oov_indices=2, output_mode="multi_hot")(
        [["a", "zz"]]).numpy().tolist() == [[1, 0, 1, 0]]
    # TF: unknown strings spread over the OOV indices by FarmHash (to_hash_bucket_fast % num_oov_indices):
    # three OOV indices, ['zz', 'yy', 'a', 'b', 'q', 'hello world'] -> [1 1 3 4 2 0]; with mask_token '' as well,
    # ['zz', '', 'a', 'q'] -> [2 0 4 3]
    three = tf.keras.layers.StringLookup(vocabulary=["a", "b"], num_oov_indices=3)
    assert three(["zz", "yy", "a", "b", "q", "hello world"]).numpy().tolist() == [1, 1, 3, 4, 2, 0]
    assert tf.keras.layers.StringLookup(vocabulary=["a", "b"], num_oov_indices=3, mask_token="")(
        ["zz", "", "a", "q"]).numpy().tolist() == [2, 0, 4, 3]


def test_string_lookup_in_a_distributed_input_pipeline():
    """TF's distributed-input tutorial: a StringLookup in the map of distribute_datasets_from_function."""
    strategy = jdist.MirroredStrategy(jax.devices()[:2])
    layer = tf.keras.layers.StringLookup(vocabulary=["a", "b", "c", "d", "f"])

    def dataset_fn(ctx):
        batch = ctx.get_per_replica_batch_size(4)
        ds = tf.data.Dataset.from_tensor_slices(["a", "c", "e"]).repeat().batch(batch)
        return ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).map(layer)

    # TF 2.21 on 2 logical CPUs, the tutorial's cell: [[1, 3], [0, 1]], [[3, 0], [1, 3]], [[0, 1], [3, 0]]
    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    got = [[np.asarray(v).tolist() for v in strategy.experimental_local_results(next(iterator).value)]
           for _ in range(3)]
    assert got == [[[1, 3], [0, 1]], [[3, 0], [1, 3]], [[0, 1], [3, 0]]]


def test_arrays_have_tfs_numpy():
    """TF's distributed-input tutorial: `rindices.extend(a.numpy())` over experimental_local_results."""
    strategy = jdist.MirroredStrategy(jax.devices()[:2])
    ds = tf.data.Dataset.range(8).enumerate().batch(4)
    result = {}
    for index, inputs in strategy.experimental_distribute_dataset(ds):
        output_index, outputs = strategy.run(lambda i, x: (i, 2 * x), args=(index, inputs))
        rindices, routputs = [], []
        for a in strategy.experimental_local_results(output_index):
            rindices.extend(a.numpy())
        for a in strategy.experimental_local_results(outputs):
            routputs.extend(a.numpy())
        result.update(zip(rindices, routputs))
    assert result == {i: 2 * i for i in range(8)}
    assert type(jax.numpy.float32(2.5).numpy()) is np.float32 and jax.numpy.ones(2).numpy().tolist() == [1.0, 1.0]


def test_importing_tf_compat_leaves_jax_unstarted():
    """The guide splits the CPU after `import tensorflow as tf`: the import must not start JAX's backend."""
    import subprocess
    import sys
    probe = ("import jdist.tf_compat as tf\n"
             "from jax._src import xla_bridge\n"
             "print(len(xla_bridge._backends))\n"
             "tf.config.set_logical_device_configuration(tf.config.list_physical_devices('CPU')[0],\n"
             "    [tf.config.LogicalDeviceConfiguration()] * 3)\n"
             "print(len(tf.config.list_logical_devices('CPU')), type(tf.constant([1.0]) + 0).__name__)\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**env, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "3", "HostTensor"]  # computed on the host (numpy, with TF's .numpy())


def test_compiled_mse_expands_a_rank_1_label_as_tf_keras_does():
    # TF 2.21 with TF_USE_LEGACY_KERAS=1: this model compiled with loss="mse" and fit on labels [0.1, 0.5, 0.9]
    # of shape (3,) against (3, 2) predictions [0.1, 0.3] reported loss 0.20666664838790894, the mean of
    # (y_i - p_ij) ** 2 over i and j; tf.keras.losses.MeanSquaredError()(y, p) called directly raised
    # "Incompatible shapes: [3,2] vs. [3]" (as Keras 3's does).
    y = np.array([0.1, 0.5, 0.9], np.float32)
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, kernel_initializer="zeros",
                                                       bias_initializer=tf.keras.initializers.Constant([0.1, 0.3]))])
    model.compile(tf.keras.optimizers.legacy.SGD(0.0), loss="mse")
    history = model.fit(np.ones((3, 1), np.float32), y, epochs=1, batch_size=3, verbose=0)
    np.testing.assert_allclose(history.history["loss"], [0.20666664838790894], rtol=1e-6)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        tf.keras.losses.MeanSquaredError()(y, np.zeros((3, 2), np.float32))


def test_string_input_preprocessing_model_runs_on_the_host_in_a_data_map():
    """TF's parameter-server tutorial, cell 32: StringLookup on a tf.keras.Input(dtype=tf.string) in a functional
    model, called inside a tf.data map on dicts of strings."""
    lookup = tf.keras.layers.StringLookup(vocabulary=["avenger", "ironman", "batman"], mask_token=None)
    labels = tf.keras.layers.StringLookup(vocabulary=["yes", "no"], num_oov_indices=0, mask_token=None)
    raw = tf.keras.layers.Input(shape=(3,), dtype=tf.string, name="feature")
    features = tf.keras.Model({"features": raw}, lookup(raw))
    raw_label = tf.keras.Input(shape=(1,), dtype=tf.string, name="label")
    label_stage = tf.keras.Model({"label": raw_label}, labels(raw_label))
    assert tf.string == tf.as_dtype("string") and tf.string.name == "string"
    assert not isinstance(features, keras.Model) and raw.shape == (None, 3)
    # TF 2.21 with TF_USE_LEGACY_KERAS=1, these cells: features(["batman", "hulk", "avenger"]) -> [3 0 1];
    # features({"features": [["ironman", "x", "batman"]]}) -> [[2 0 3]]; the mapped, batched dataset gave features
    # [[3, 0, 1], [2, 2, 0]] and labels [[[0]], [[1]]] (the (1,) label grows to (1, 1), tf_keras's functional
    # rule), both int64; the string Input's shape (None, 3), tf.string.name "string".
    np.testing.assert_array_equal(features(np.array([b"batman", b"hulk", b"avenger"], object)), [3, 0, 1])
    np.testing.assert_array_equal(features({"features": [["ironman", "x", "batman"]]}), [[2, 0, 3]])
    examples = {"features": [["batman", "hulk", "avenger"], ["ironman", "ironman", "x"]], "label": [["yes"], ["no"]]}
    dataset = tf.data.Dataset.from_tensor_slices(examples).map(
        lambda x: ({"features": features(x["features"])}, label_stage(x["label"]))).batch(2)
    (got_features, got_labels), = list(dataset)
    np.testing.assert_array_equal(got_features["features"], [[3, 0, 1], [2, 2, 0]])
    np.testing.assert_array_equal(got_labels, [[[0]], [[1]]])
    assert got_features["features"].dtype == got_labels.dtype == np.int64
    # Numeric inputs stay Keras's own, a tf dtype taken by name; a Keras layer on a string input is refused.
    ids = tf.keras.layers.Input(shape=(3,), dtype=tf.int64)
    assert isinstance(tf.keras.Model(ids, tf.keras.layers.Dense(1)(ids)), keras.Model)
    with pytest.raises(TypeError, match="only host layers"):
        tf.keras.layers.Dense(1)(raw)


def test_reductions_on_a_functional_models_symbolic_tensor_become_part_of_the_model():
    """TF's parameter-server tutorial: `tf.reduce_mean(emb_layer(model_input), axis=1)` between Keras layers (TF
    records it as a layer of the model; Keras 3's ops do the same on its symbolic tensors)."""
    ids = tf.keras.layers.Input(shape=(3,), dtype=tf.int64)
    embedded = tf.keras.layers.Embedding(input_dim=4, output_dim=2)
    model = tf.keras.Model(ids, tf.reduce_mean(embedded(ids), axis=1))
    x = np.array([[0, 1, 3], [2, 2, 2]])
    want = embedded.get_weights()[0][x].mean(axis=1)
    np.testing.assert_allclose(np.asarray(model(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(tf.reduce_mean(want, axis=1)), want.mean(axis=1), rtol=1e-6)


# TF 2.21, tf_keras (TF_USE_LEGACY_KERAS=1) and its Keras 3 alike: Dense(1, activation="sigmoid", kernel "ones",
# bias "zeros") on x = [[30], [-2]], y = [[0], [1]]: BinaryCrossentropy() gave 16.06346321105957 (from the logits:
# softplus(30) and softplus(2), averaged) and gradients kernel 15.880797386169434, bias 0.05960145592689514 (a
# saturated prediction keeps its gradient); of tf.identity(p), which drops the logits, 8.73 (tf_keras), 9.03 (Keras 3).
TF_SIGMOID_BCE = 16.06346321105957
TF_SIGMOID_BCE_GRADS = [15.880797386169434, 0.05960145592689514]


def test_binary_crossentropy_of_a_sigmoid_output_uses_its_logits_as_tfs_keras():
    layer = tf.keras.layers.Dense(1, activation="sigmoid", kernel_initializer="ones", bias_initializer="zeros")
    layer.build((None, 1))
    x = np.array([[30.0], [-2.0]], np.float32)
    y = np.array([[0.0], [1.0]], np.float32)
    bce = tf.keras.losses.BinaryCrossentropy()

    def loss_of(weights):
        p, _ = layer.stateless_call(weights, [], x)
        return bce(y, p)

    weights = [v.value for v in layer.trainable_variables]
    value, grads = jax.jit(jax.value_and_grad(loss_of))(weights)  # traced, as inside a step
    np.testing.assert_allclose(float(value), TF_SIGMOID_BCE, rtol=1e-6)
    np.testing.assert_allclose([float(np.ravel(g)[0]) for g in grads], TF_SIGMOID_BCE_GRADS, rtol=1e-6)
    # A probability that did not come out of a sigmoid is clipped as Keras clips it.
    p = np.asarray(layer(x)) * 1.0
    clipped = np.clip(p, 1e-7, 1 - 1e-7)
    expected = -np.mean(y * np.log(clipped) + (1 - y) * np.log(1 - clipped))
    np.testing.assert_allclose(float(bce(y, p)), expected, rtol=1e-5)


# TF 2.21 with TF_USE_LEGACY_KERAS=1: a (5, 1) variable of ones, two apply_gradients of these gradients with
# tf.keras.optimizers.legacy.X(0.1); its values after (the same with the gradient an IndexedSlices of
# tf.gather). tf_keras's RMSprop without momentum divides by sqrt(rms) + epsilon, Keras 3's by
# sqrt(rms + epsilon): the small gradients' steps differ. SGD, Adam, Adagrad, Adadelta, Adamax, Ftrl and RMSprop
# with momentum 0.9 gave Keras 3's values to float32 rounding; Nadam differed in the third digit (its schedule).
LEGACY_GRADIENTS = [[1e-5, 1e-4, 1e-3, 1e-2, 1.0], [-3e-5, 2e-4, -1e-3, 5e-2, -0.5]]
TF_LEGACY_RMSPROP = {
    "plain": [0.9919768571853638, 0.39946249127388, 0.9132353067398071, 0.37309929728507996, 0.831214189529419],
    "centered": [0.9827398657798767, 0.35434505343437195, 0.8962011933326721, 0.3327450752258301,
                 0.8151452541351318],
    "momentum": [1.0034741163253784, 0.8784641623497009, 0.7608424425125122, 0.09152412414550781,
                 0.5466095209121704],
}


@pytest.mark.parametrize("name,kwargs", [("plain", {}), ("centered", {"centered": True}),
                                         ("momentum", {"momentum": 0.9})])
def test_legacy_rmsprop_takes_tf_kerass_steps(name, kwargs):
    optimizer = tf.keras.optimizers.legacy.RMSprop(0.1, **kwargs)
    variable = keras.Variable(np.ones((5, 1), np.float32))
    for grad in LEGACY_GRADIENTS:
        optimizer.apply_gradients([(np.array(grad, np.float32)[:, None], variable)])
    np.testing.assert_allclose(np.asarray(variable).ravel(), TF_LEGACY_RMSPROP[name], rtol=2e-6, atol=1e-6)
    # TF computes the update without momentum from its reads and assigns it; with momentum in one op
    assert optimizer.applied_from_step_reads is (name != "momentum")
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is type(optimizer) and restored.get_config() == optimizer.get_config()


# TF 2.21 with TF_USE_LEGACY_KERAS=1: tf.keras.optimizers.legacy.Nadam(learning_rate=0.1) on v = [1, -2, 0.5] and
# w = [[0.3]], the loss sum(v**2 * [1, 3, 0.1]) + sum(exp(w)), four apply_gradients; v and w after each step.
# Keras 3's Nadam differs from the second step (momentum schedule 0.96**step, tf_keras's 0.96**(0.004*step)).
TF_LEGACY_NADAM = [
    ([0.8943548202514648, -1.8943548202514648, 0.39435499906539917], 0.1943548023700714),
    ([0.8199734091758728, -1.8178977966308594, 0.3246710002422333], 0.11975370347499847),
    ([0.7527292966842651, -1.7475086450576782, 0.26472729444503784], 0.051875099539756775),
    ([0.6877163052558899, -1.6781890392303467, 0.20995579659938812], -0.014355200342833996),
]


def test_legacy_nadam_takes_tf_kerass_steps():
    optimizer = tf.keras.optimizers.legacy.Nadam(learning_rate=0.1)
    v, w = keras.Variable(np.array([1.0, -2.0, 0.5], np.float32)), keras.Variable(np.array([[0.3]], np.float32))
    scale = np.array([1.0, 3.0, 0.1], np.float32)
    for expected_v, expected_w in TF_LEGACY_NADAM:
        grads = [2 * np.asarray(v) * scale, np.exp(np.asarray(w))]
        optimizer.apply_gradients(zip(grads, [v, w]))
        np.testing.assert_allclose(np.asarray(v), expected_v, rtol=5e-6, atol=2e-6)
        np.testing.assert_allclose(float(np.asarray(w)[0, 0]), expected_w, rtol=5e-6, atol=2e-6)
    assert int(optimizer.iterations) == 4 and optimizer.get_config()["schedule_decay"] == 0.004
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is type(optimizer) and restored.get_config() == optimizer.get_config()
    with pytest.raises(ValueError, match="does not support tf.keras.optimizers.LearningRateSchedules"):
        tf.keras.optimizers.legacy.Nadam(keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9))
