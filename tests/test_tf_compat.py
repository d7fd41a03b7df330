"""jdist.tf_compat: TensorFlow's names bound to jdist's objects, and a clear error for the rest."""
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402


def test_names_are_jdist_objects():
    # jdist's, except that devices the machine lacks warn and give a strategy that refuses use (TF moves them)
    assert issubclass(tf.distribute.MirroredStrategy, jdist.MirroredStrategy)
    assert isinstance(tf.distribute.MirroredStrategy(), jdist.MirroredStrategy)
    with pytest.warns(UserWarning, match="gpu:0"):
        absent = tf.distribute.MirroredStrategy(devices=["/gpu:0", "/gpu:1"])
    with pytest.raises(ValueError, match="Unknown device '/gpu:0'"):
        absent.scope()
    assert tf.distribute.OneDeviceStrategy is jdist.OneDeviceStrategy
    # subclasses whose run returns TF's PerReplica results (tests/test_tf_compat_run_results.py)
    assert issubclass(tf.distribute.MultiWorkerMirroredStrategy, jdist.MultiWorkerMirroredStrategy)
    assert issubclass(tf.distribute.TPUStrategy, jdist.TPUStrategy)
    assert tf.distribute.ParameterServerStrategy is jdist.ParameterServerStrategy
    assert issubclass(tf.distribute.experimental.CentralStorageStrategy, jdist.CentralStorageStrategy)
    assert tf.distribute.experimental.coordinator.ClusterCoordinator is jdist.ClusterCoordinator
    assert tf.distribute.coordinator.ClusterCoordinator is jdist.ClusterCoordinator
    assert tf.distribute.coordinator.experimental_get_current_worker_index is jdist.get_current_worker_index
    assert tf.distribute.cluster_resolver.TFConfigClusterResolver is jdist.cluster.TFConfigClusterResolver
    assert tf.distribute.cluster_resolver.SimpleClusterResolver is jdist.cluster.SimpleClusterResolver
    assert tf.distribute.ReduceOp is jdist.ReduceOp
    # outside any scope TF's default strategy (jdist.tf_compat.default_strategy: TF's reduce results), a
    # jdist DefaultStrategy on the same devices; inside a scope the scope's strategy, as jdist.get_strategy()
    default = tf.distribute.get_strategy()
    assert isinstance(default, jdist.DefaultStrategy) and default is tf.distribute.get_strategy()
    assert not tf.distribute.has_strategy() and default.num_replicas_in_sync == 1
    with jdist.MirroredStrategy(jax.devices()[:2]).scope():
        assert tf.distribute.get_strategy() is jdist.get_strategy()
        assert tf.distribute.get_strategy().num_replicas_in_sync == 2
    assert tf.distribute.get_replica_context is jdist.get_replica_context
    assert tf.distribute.InputContext is jdist.InputContext
    # jdist's own, behind TF 2.21's argument checks (jdist.tf_compat.replica_losses)
    assert tf.nn.compute_average_loss.__module__ == tf.nn.scale_regularization_loss.__module__ == (
        "jdist.tf_compat.replica_losses")
    assert tf.GradientTape is jdist.GradientTape
    assert tf.function is jdist.function
    assert tf.data.Dataset is jdist.data.Dataset and tf.data.experimental.AUTOTUNE == jdist.data.AUTOTUNE
    assert tf.train.Checkpoint is jdist.train.Checkpoint and tf.train.CheckpointManager is jdist.train.CheckpointManager


def test_keras_is_tf_2_21s_keras_namespace_on_jax():
    import keras
    from keras._tf_keras import keras as tf_keras_namespace

    # Observed, TF 2.21 with Keras 3.15: tf.keras.__name__ == "keras._tf_keras.keras",
    # tf.keras.losses.Reduction.NONE == "none" (also AUTO, SUM, SUM_OVER_BATCH_SIZE).
    # tf.keras is that namespace (its name, its objects), with TensorBoard and StringLookup served by jdist
    # (and tf_keras's legacy optimizers, extension-less ModelCheckpoint paths and Metric.reset_states).
    assert tf.keras.__name__ == tf_keras_namespace.__name__ == "keras._tf_keras.keras"
    assert keras.backend.backend() == "jax" and tf.keras is tf.keras
    assert tf.keras.Sequential is keras.Sequential and tf.keras.layers.Dense is keras.layers.Dense
    assert tf.keras.callbacks.EarlyStopping is keras.callbacks.EarlyStopping
    # ModelCheckpoint is Keras's, also taking tf_keras's extension-less path (test_tf_compat_cluster.py)
    assert issubclass(tf.keras.callbacks.ModelCheckpoint, keras.callbacks.ModelCheckpoint)
    assert tf.keras.callbacks.TensorBoard is not keras.callbacks.TensorBoard  # Keras 3's needs TensorFlow
    reduction = tf.keras.losses.Reduction
    assert (reduction.NONE, reduction.SUM, reduction.AUTO, reduction.SUM_OVER_BATCH_SIZE) == (
        "none", "sum", "auto", "sum_over_batch_size")
    assert tf.metrics.Mean is keras.metrics.Mean and tf.optimizers.SGD is keras.optimizers.SGD
    assert tf.losses.SparseCategoricalCrossentropy is keras.losses.SparseCategoricalCrossentropy


def test_add_n_adds_in_order_and_checks_its_input():
    a, b = np.float32(0.1), np.float32(0.7)
    assert float(tf.add_n([a, b, a])) == float((a + b) + a)
    np.testing.assert_array_equal(tf.add_n([np.ones(3), 2 * np.ones(3)]), 3 * np.ones(3))
    # TF 2.21: a Python list among the inputs is converted as tf.constant converts it, on the host and in JAX:
    # tf.add_n([tf.ones(2), [1.0, 2.0]]) and tf.add_n([np.ones(2, np.float32), [1.0, 2.0]]) are float32 [2, 3].
    import jax.numpy as jnp

    for first in (np.ones(2, np.float32), jnp.ones(2)):
        total = tf.add_n([first, [1.0, 2.0]])
        assert total.dtype == np.float32
        np.testing.assert_array_equal(total, [2.0, 3.0])
    with pytest.raises(ValueError, match="at least one"):
        tf.add_n([])
    with pytest.raises(ValueError, match="same shape"):
        tf.add_n([np.ones(3), np.ones(2)])


@pytest.mark.parametrize("get, name", [
    (lambda: tf.raw_ops, "tf.raw_ops"),
    (lambda: tf.distribute.experimental.rpc, "tf.distribute.experimental.rpc"),
    (lambda: tf.nn.fractional_max_pool, "tf.nn.fractional_max_pool"),
    (lambda: tf.math.sobol_sample, "tf.math.sobol_sample"),
])
def test_unknown_name_is_an_error_naming_it(get, name):
    with pytest.raises(AttributeError, match=rf"jdist does not provide `{name}`.*docs/tf_mapping.md"):
        get()


def _without_backend(code: str, backend: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    if backend:
        env["KERAS_BACKEND"] = backend
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_the_import_picks_keras_on_jax_when_nothing_else_was_asked_for():
    """A ported script keeps its own later `import keras` (TF's Keras tutorials write both imports)."""
    out = _without_backend("import jdist.tf_compat as tf\nimport keras\nprint(keras.backend.backend(), "
                           "tf.keras.layers.Dense is keras.layers.Dense)\n")
    assert out.split() == ["jax", "True"]


@pytest.mark.parametrize("keras_first", [False, True])
def test_keras_on_another_backend_is_an_error_naming_the_fix(keras_first):
    """An explicit KERAS_BACKEND, or Keras imported first on another backend, is the user's: never overridden."""
    code = ("import sys\n" + ("import keras\n" if keras_first else "") + "import jdist.tf_compat as tf\n"
            "try:\n    tf.keras\nexcept RuntimeError as e:\n    print(e)\n"
            "print('keras imported:', 'keras' in sys.modules)\n")
    out = _without_backend(code, backend="numpy")
    assert "backend is numpy: set the environment variable KERAS_BACKEND=jax" in out, out
    assert f"keras imported: {keras_first}" in out
