"""TF's tutorial "Using DTensors with Keras" (dtensor_keras_tutorial.ipynb): tf_keras's DTensor names in jdist.

TF 2.21's Keras 3 has no `tf.keras.dtensor` and refuses `Dense(kernel_layout=...)` (observed), so the tutorial
stops at its cell 11 there and in jdist; with TF_USE_LEGACY_KERAS=1 TF serves tf_keras, where the whole tutorial
runs, and so does jdist's (jdist/tf_compat/dtensor_keras.py). Every expected value is what TF 2.21's tf_keras 2.21
printed for the same call (TF_USE_LEGACY_KERAS=1, 8 logical CPUs), unless a test says it is a one-device result.
Tests in this process install the tf_keras names directly (tf.keras is built once per process); the last test runs
the tutorial's cells in a process of their own with TF_USE_LEGACY_KERAS=1, MNIST replaced by made-up arrays.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.tf_compat import dtensor_keras, dtensor_keras_names
from jdist.tf_compat.experimental import dtensor

U = dtensor.UNSHARDED


@pytest.fixture(scope="module")
def E():
    dtensor_keras.install()
    dtensor_keras_names.install_metric_meshes()
    return dtensor_keras_names.namespace().experimental


@pytest.fixture(scope="module")
def mesh():
    return dtensor.create_mesh([("batch", 2), ("model", 2)], devices=[f"CPU:{i}" for i in range(4)])


def _lay(mesh, *specs):
    return dtensor.Layout(list(specs), mesh)


class _Sub(tf.keras.Model):
    def __init__(self, sizes=(4, 6)):  # the tutorial's SubclassedModel: (16, 24) with dropout between
        super().__init__()
        self.feature = tf.keras.layers.Dense(sizes[0])
        self.feature_2 = tf.keras.layers.Dense(sizes[1])
        self.dropout = tf.keras.layers.Dropout(0.1)

    def call(self, x, training=None):
        return self.feature_2(self.dropout(self.feature(x), training=training))


def _specs(model):
    return [dtensor.fetch_layout(w).sharding_specs for w in model.weights]


def test_layout_map_keys(E, mesh):
    layout_map = E.LayoutMap(mesh=mesh)
    layout_map["feature.*"] = _lay(mesh, "model", U)
    layout_map["kernel"] = _lay(mesh, U, "model")
    # observed (tf_keras): re.match, so "kernel" does not name "feature.kernel"; no match is None
    assert layout_map["kernel"].sharding_specs == [U, "model"]
    assert layout_map["feature.kernel"].sharding_specs == ["model", U]
    assert layout_map["nothing"] is None
    assert list(layout_map.keys()) == ["feature.*", "kernel"] and len(layout_map) == 2
    assert layout_map.get_default_mesh() == mesh and E.LayoutMap().get_default_mesh() is None
    with pytest.raises(ValueError, match="kernel already exist in the LayoutMap with value Layout"):
        layout_map["kernel"] = _lay(mesh, U, U)
    with pytest.raises(ValueError, match=r"\('batch',\) should be a dtensor.Layout type, got <class 'tuple'>"):
        layout_map["x"] = ("batch",)
    assert not hasattr(E, "layout_map_scope")  # observed: tf_keras 2.21 has LayoutMap and optimizers only


@pytest.mark.parametrize("key, kernel", [(r"^feature\.kernel$", ["model", U]), (r"^feature/kernel$", [U, U]),
                                         ("kernel", [U, U])])
def test_a_functional_models_weights_are_named_layer_dot_weight(E, mesh, key, kernel):
    layout_map = E.LayoutMap(mesh=mesh)
    layout_map[key] = _lay(mesh, "model", U)
    with layout_map.scope():
        inputs = tf.keras.Input((4,), batch_size=4)
        model = tf.keras.Model(inputs, tf.keras.layers.Dense(6, name="feature")(inputs))
    assert _specs(model) == [kernel, [U]]  # observed; the unmatched bias is replicated on the map's mesh


@pytest.mark.parametrize("key, kernels", [(r"^feature\.kernel$", [["model", U], [U, U]]),
                                          (r"^feature_2\.kernel$", [[U, U], ["model", U]]),
                                          (r"feature\.kernel", [["model", U], [U, U]]),
                                          (r"^dense/kernel$", [[U, U], [U, U]]), ("kernel", [[U, U], [U, U]])])
def test_a_subclassed_models_weights_are_named_by_attribute(E, mesh, key, kernels):
    layout_map = E.LayoutMap(mesh=mesh)
    layout_map[key] = _lay(mesh, "model", U)
    with layout_map.scope():
        model = _Sub()
    model(dtensor.copy_to_mesh(tf.zeros((4, 4)), dtensor.Layout.replicated(mesh, 2)))  # built after the scope
    assert _specs(model) == [kernels[0], [U], kernels[1], [U]]  # observed


def test_the_tutorials_layout_map_cells(E):
    mesh = dtensor.create_mesh([("batch", 8)], devices=[f"CPU:{i}" for i in range(8)])
    layout_map = E.LayoutMap(mesh=mesh)
    layout_map["feature.*kernel"] = dtensor.Layout.batch_sharded(mesh, "batch", rank=2)
    layout_map["feature.*bias"] = dtensor.Layout.batch_sharded(mesh, "batch", rank=1)
    with layout_map.scope():
        model = _Sub((16, 24))
    out = model(dtensor.copy_to_mesh(tf.zeros((16, 16)), layout=dtensor.Layout.replicated(mesh, 2)))
    # observed (cell 42): feature_2 matches "feature.*" too; the output is laid out ['unsharded', 'batch']
    assert _specs(model) == [["batch", U], ["batch"]] * 2
    assert model.feature.kernel.layout == dtensor.Layout.batch_sharded(mesh, "batch", rank=2)
    assert dtensor.fetch_layout(out).sharding_specs == [U, "batch"] and out.shape == (16, 24)
    with layout_map.scope():
        sequential = tf.keras.Sequential([tf.keras.layers.Dense(16, name="feature", input_shape=(16,)),
                                          tf.keras.layers.Dropout(0.1), tf.keras.layers.Dense(32, name="feature_2")])
    assert _specs(sequential) == [["batch", U], ["batch"]] * 2  # observed (cell 48)


def test_layer_layout_arguments(E, mesh):
    dense = tf.keras.layers.Dense(6, kernel_layout=_lay(mesh, U, "model"))
    dense.build((None, 4))
    assert dense.kernel.layout.sharding_specs == [U, "model"]
    assert dtensor.fetch_layout(dense.kernel).sharding_specs == [U, "model"]
    with pytest.raises(AttributeError):  # observed: a weight given no layout is a regular variable
        dense.bias.layout  # noqa: B018
    embedding = tf.keras.layers.Embedding(8, 4, embeddings_layout=_lay(mesh, U, "model"))
    embedding.build((None,))
    assert embedding.embeddings.layout.sharding_specs == [U, "model"]  # observed
    conv = tf.keras.layers.Conv2D(4, 3, kernel_layout=_lay(mesh, U, U, U, "model"))
    conv.build((None, 5, 5, 2))
    assert dtensor.fetch_layout(conv.kernel).sharding_specs == [U, U, U, "model"]
    # TF raises UnknownError for both ("requires matching rank", "requires dimension 0 to be divisible"), from a
    # DTensorLayout op; jdist a ValueError saying which weight and what to change
    with pytest.raises(ValueError, match=r"rank 1 but the weight .* has shape \(4, 6\)"):
        tf.keras.layers.Dense(6, kernel_layout=_lay(mesh, "model")).build((None, 4))
    with pytest.raises(ValueError, match=r"size 3\) is split over mesh dimension 'model' of size 2"):
        tf.keras.layers.Dense(6, kernel_layout=_lay(mesh, "model", U)).build((None, 3))


def test_optimizers_and_metrics_take_a_mesh(E, mesh):
    assert sorted(vars(E.optimizers)) == ["Adadelta", "Adagrad", "Adam", "AdamW", "RMSprop", "SGD"]  # observed
    assert isinstance(E.optimizers.Adam(0.1), tf.keras.optimizers.Adam)  # mesh= is optional (observed)
    with pytest.raises(TypeError, match="mesh= takes a dtensor.Mesh"):  # TF: TypeError too
        E.optimizers.Adam(0.1, mesh=[1])
    auc = tf.keras.metrics.AUC(mesh=mesh)
    assert [dtensor.fetch_layout(v).sharding_specs for v in auc.variables] == [[U]] * 4  # observed
    metric = tf.keras.metrics.SparseCategoricalAccuracy(mesh=mesh)
    assert [dtensor.fetch_layout(v).sharding_specs for v in metric.variables] == [[], []]  # observed
    y = dtensor.copy_to_mesh(tf.constant([1, 0, 1, 1]), _lay(mesh, "batch"))
    p = dtensor.copy_to_mesh(tf.constant([[0.0, 1], [1, 0], [1, 0], [0, 1]]), _lay(mesh, "batch", U))
    metric.update_state(y, p)
    result = metric.result()
    assert float(result.numpy()) == 0.75 and dtensor.fetch_layout(result).sharding_specs == []  # observed
    plain = tf.keras.metrics.SparseCategoricalAccuracy()
    plain.update_state(tf.constant([1]), tf.constant([[0.0, 1]]))
    assert not dtensor.is_dtensor(plain.result())  # observed: without mesh= the result is a regular tensor


def test_legacy_keras_switch_and_backend_experimental(monkeypatch):
    for value, legacy in (("1", True), ("true", True), ("True", True), ("TRUE", False), ("yes", False),
                          ("0", False)):  # observed: tf.keras.__name__ is tf_keras's for the first three
        monkeypatch.setenv("TF_USE_LEGACY_KERAS", value)
        assert dtensor_keras_names.legacy_keras() is legacy
    experimental = dtensor_keras_names.backend_experimental()
    assert experimental.is_tf_random_generator_enabled() is False  # observed: tf_keras 2.21 starts disabled
    experimental.enable_tf_random_generator()
    assert experimental.is_tf_random_generator_enabled() is True
    experimental.disable_tf_random_generator()


# Three steps of the tutorial's train_step (reduce_sum of the per-example loss, Adam(0.01), batches of 32 packed
# over a batch=8 mesh) from fixed weights on 64 -> 16 -> 10: (loss per example, accuracy, sum of |weights|).
# tf_keras without DTensor (one device, the same step unpacked) printed TF_ONE_DEVICE; tf_keras with DTensor printed
# the same first loss and then other parameters (sum 206.94788 after the first update, losses 2.4659576 and
# 2.5697818), which its own one-device program does not give; jdist gives the one-device result.
TF_ONE_DEVICE = [(2.693671464920044, 0.0625, 206.9158477783203), (2.3803091049194336, 0.046875, 206.9566650390625),
                 (2.4595580101013184, 0.09375, 207.18099975585938)]


def test_the_tutorials_train_step_gives_the_one_device_result(E):
    mesh = dtensor.create_mesh([("batch", 8)], devices=[f"CPU:{i}" for i in range(8)])
    rs = np.random.RandomState(0)
    x_all, y_all = rs.rand(96, 8, 8, 1).astype(np.float32), rs.randint(0, 10, 96).astype(np.int64)
    weights = [rs.randn(64, 16).astype(np.float32) * 0.2, rs.randn(16).astype(np.float32) * 0.1,
               rs.randn(16, 10).astype(np.float32) * 0.3, rs.randn(10).astype(np.float32) * 0.1]
    layouts = dict(kernel_layout=dtensor.Layout.replicated(mesh, 2), bias_layout=dtensor.Layout.replicated(mesh, 1))
    model = tf.keras.models.Sequential([tf.keras.Input((8, 8)), tf.keras.layers.Flatten(),
                                        tf.keras.layers.Dense(16, activation="relu", name="d1", **layouts),
                                        tf.keras.layers.Dense(10, name="d2", **layouts)])
    model.set_weights(weights)
    optimizer = E.optimizers.Adam(0.01, mesh=mesh)
    metric = tf.keras.metrics.SparseCategoricalAccuracy(mesh=mesh)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_sum(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        metric.update_state(y_true=y, y_pred=logits)
        return loss / len(x)

    images, labels = dtensor.Layout.batch_sharded(mesh, "batch", 4), dtensor.Layout.batch_sharded(mesh, "batch", 1)
    for step, (loss, accuracy, total) in enumerate(TF_ONE_DEVICE):
        x, y = x_all[step * 32:(step + 1) * 32], y_all[step * 32:(step + 1) * 32]
        got = train_step(dtensor.pack(tf.split(x, 8), images), dtensor.pack(tf.split(y, 8), labels))
        assert dtensor.fetch_layout(got).sharding_specs == []
        np.testing.assert_allclose(float(got.numpy()), loss, rtol=1e-6)
        assert float(metric.result().numpy()) == accuracy
        np.testing.assert_allclose(sum(float(np.abs(np.asarray(w.numpy())).sum()) for w in model.weights), total,
                                   rtol=1e-6)
    assert [dtensor.fetch_layout(v).sharding_specs for v in optimizer.variables[:4]] == [[], [], [U, U], [U, U]]


_TUTORIAL = textwrap.dedent("""
    import numpy as np
    import jdist.tf_compat as tf
    from jdist.tf_compat.experimental import dtensor
    tf.config.set_logical_device_configuration(tf.config.list_physical_devices('CPU')[0],
                                               [tf.config.LogicalDeviceConfiguration()] * 8)
    tf.keras.backend.experimental.enable_tf_random_generator()
    tf.keras.utils.set_random_seed(1337)
    mesh = dtensor.create_mesh([("batch", 8)], devices=[f'CPU:{i}' for i in range(8)])
    model = tf.keras.models.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(16, activation='relu', name='d1', kernel_layout=dtensor.Layout.replicated(mesh, 2),
                              bias_layout=dtensor.Layout.replicated(mesh, 1)),
        tf.keras.layers.Dense(10, name='d2', kernel_layout=dtensor.Layout.replicated(mesh, 2),
                              bias_layout=dtensor.Layout.replicated(mesh, 1))])
    print(model.weights[0].layout.sharding_specs)
    optimizer = tf.keras.dtensor.experimental.optimizers.Adam(0.01, mesh=mesh)
    layout_map = tf.keras.dtensor.experimental.LayoutMap(mesh=mesh)
    layout_map['feature.*kernel'] = dtensor.Layout.batch_sharded(mesh, 'batch', rank=2)
    with layout_map.scope():
        inputs = tf.keras.Input((16,), batch_size=16)
        x = tf.keras.layers.Dense(16, name='feature')(inputs)
        functional = tf.keras.Model(inputs, tf.keras.layers.Dense(32, name='feature_2')(x))
    print(functional.layers[1].kernel.layout.sharding_specs, functional.layers[1].bias.layout.sharding_specs)
""")


def test_the_tutorial_runs_with_tf_use_legacy_keras(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_USE_LEGACY_KERAS="1")
    out = subprocess.run([sys.executable, "-c", _TUTORIAL], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    # observed (tf_keras): cell 22's layout and cell 47's, with the bias (no key) replicated
    assert out.stdout.splitlines() == ["['unsharded', 'unsharded']", "['batch', 'unsharded'] ['unsharded']"]


# Three updates of [1, -2, 0.5] by each optimizer at learning rate 0.1 (defaults otherwise), gradients below:
# printed by TF 2.21's tf_keras for tf.keras.dtensor.experimental.optimizers.<name>(0.1).
TF_OPTIMIZER_STEPS = {
    "Adadelta": [0.9999598264694214, -2.00004506111145, 0.5000343322753906],
    "Adagrad": [0.9754812717437744, -2.026611804962158, 0.5002845525741577],
    "Adam": [0.8212939500808716, -1.9784060716629028, 0.4622540771961212],
    "AdamW": [0.820209264755249, -1.9760693311691284, 0.46171945333480835],
    "RMSprop": [0.8361284732818604, -1.9794318675994873, 0.5231879353523254],
    "SGD": [1.0, -2.0299999713897705, 0.5000900030136108],
}


@pytest.mark.parametrize("name", sorted(TF_OPTIMIZER_STEPS))
def test_the_dtensor_optimizers_update_as_tf_keras(E, name):
    variable = tf.Variable(np.array([1.0, -2.0, 0.5], np.float32))
    optimizer = getattr(E.optimizers, name)(0.1)
    for gradient in ([0.3, -0.2, 1e-3], [0.1, 0.5, -2e-3], [-0.4, 0.0, 1e-4]):
        optimizer.apply_gradients([(tf.constant(np.array(gradient, np.float32)), variable)])
    np.testing.assert_allclose(np.asarray(variable.numpy()), TF_OPTIMIZER_STEPS[name], rtol=1e-6)
