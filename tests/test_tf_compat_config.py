"""`tf.config`'s switches and TF's device objects in strategies (jdist.tf_compat.config_switches).

TF observations: TF 2.21 (tensorflow-cpu 2.21.0) on a machine without GPUs, one process per case where the order
matters (before or after the runtime starts)."""
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

CPU = tf.config.list_physical_devices("CPU")[0]


@pytest.fixture(autouse=True)
def _started():
    jax.devices()  # these tests are of the runtime after it started (as every test in this process)


def test_functions_run_eagerly_makes_tf_function_bodies_eager():
    # TF 2.21: functions_run_eagerly() False, then True after run_functions_eagerly(True); inside a tf.function
    # tf.executing_eagerly() is False, and True while functions run eagerly.
    seen = []

    @tf.function
    def f(x):
        seen.append(tf.executing_eagerly())
        return x + 1

    assert tf.config.functions_run_eagerly() is False
    f(tf.constant(1.0))
    tf.config.run_functions_eagerly(True)
    try:
        assert tf.config.functions_run_eagerly() is True
        assert float(f(tf.constant(1.0))) == 2.0
    finally:
        tf.config.run_functions_eagerly(False)
    assert seen == [False, True]


def test_switches_keep_tfs_defaults_and_values():
    # TF 2.21: soft placement True (then False after setting it, also after the runtime started), threads 0 and 0,
    # optimizer.get_jit() "" and its options {'disable_model_pruning': False, 'disable_meta_optimizer': False},
    # TF32 True, synchronous execution True, device policy "silent".
    assert tf.config.get_soft_device_placement() is True
    tf.config.set_soft_device_placement(False)
    assert tf.config.get_soft_device_placement() is False
    tf.config.set_soft_device_placement(True)
    assert tf.config.threading.get_inter_op_parallelism_threads() == 0
    assert tf.config.threading.get_intra_op_parallelism_threads() == 0
    assert tf.config.optimizer.get_jit() == ""
    assert tf.config.optimizer.get_experimental_options() == {"disable_model_pruning": False,
                                                              "disable_meta_optimizer": False}
    assert tf.config.experimental.get_synchronous_execution() is True
    assert tf.config.experimental.get_device_policy() == "silent"


def test_thread_counts_cannot_change_after_the_runtime_starts():
    # TF 2.21 after the runtime started: RuntimeError "Inter op parallelism cannot be modified after initialization."
    with pytest.raises(RuntimeError, match="Inter op parallelism cannot be modified after initialization"):
        tf.config.threading.set_inter_op_parallelism_threads(3)
    with pytest.raises(RuntimeError, match="Intra op parallelism cannot be modified after initialization"):
        tf.config.threading.set_intra_op_parallelism_threads(3)


def test_thread_counts_and_hidden_cpu_before_the_runtime_starts():
    # TF 2.21 in a fresh process: set_inter_op_parallelism_threads(2) then get gives 2; set_visible_devices([],
    # "CPU") then get_visible_devices() gives [].
    code = ("import jdist.tf_compat as tf\n"
            "tf.config.threading.set_inter_op_parallelism_threads(2)\n"
            "print(tf.config.threading.get_inter_op_parallelism_threads())\n"
            "tf.config.set_visible_devices([], 'CPU')\n"
            "print(tf.config.get_visible_devices())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "KERAS_BACKEND": "jax"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["2", "[]"]


def test_tensor_float_32_switch_sets_jaxs_matmul_precision():
    # TF 2.21: tensor_float_32_execution_enabled() True, False after enable_tensor_float_32_execution(False).
    assert tf.config.experimental.tensor_float_32_execution_enabled() is True
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        assert tf.config.experimental.tensor_float_32_execution_enabled() is False
        assert jax.config.jax_default_matmul_precision == "highest"
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(True)
    assert jax.config.jax_default_matmul_precision is None


def test_visible_devices_follow_tfs_rules():
    # TF 2.21 after the runtime started: the same CPU again is accepted; hiding it is RuntimeError "Visible devices
    # cannot be modified after being initialized"; a CPU given for "GPU" is ValueError "Unrecognized device: ...".
    tf.config.set_visible_devices(CPU, "CPU")
    tf.config.set_visible_devices([], "GPU")  # no GPUs here: nothing changes
    assert tf.config.get_visible_devices("CPU") == [CPU]
    with pytest.raises(RuntimeError, match="Visible devices cannot be modified after being initialized"):
        tf.config.set_visible_devices([], "CPU")
    with pytest.raises(ValueError, match="Unrecognized device"):
        tf.config.set_visible_devices(CPU, "GPU")


def test_device_details_memory_info_and_the_virtual_device_aliases():
    # TF 2.21: get_device_details(cpu) {}; get_memory_info("CPU:0") ValueError "Allocator stats not available for
    # device 'CPU:0'" (observed again in TF 2.21, tests/test_tf_parity_guide_devices.py); "GPU:0" without
    # GPUs ValueError "No matching devices found for 'GPU:0'"; VirtualDeviceConfiguration is
    # LogicalDeviceConfiguration and set_virtual_device_configuration is set_logical_device_configuration.
    assert tf.config.experimental.get_device_details(CPU) == {}
    with pytest.raises(ValueError, match="Allocator stats not available for device 'CPU:0'"):
        tf.config.experimental.get_memory_info("CPU:0")
    with pytest.raises(ValueError, match="No matching devices found for 'GPU:0'"):
        tf.config.experimental.get_memory_info("GPU:0")
    assert tf.config.experimental.VirtualDeviceConfiguration is tf.config.LogicalDeviceConfiguration
    count = len(jax.devices("cpu"))  # the count JAX has is accepted again, as TF's guides call it
    tf.config.experimental.set_virtual_device_configuration(
        CPU, [tf.config.experimental.VirtualDeviceConfiguration()] * count)
    assert len(tf.config.experimental.get_virtual_device_configuration(CPU)) == count
    with pytest.raises(RuntimeError, match="cannot be modified after being initialized"):
        tf.config.experimental.set_virtual_device_configuration(
            CPU, [tf.config.LogicalDeviceConfiguration()] * (count + 1))


def test_mirrored_strategy_takes_tfs_logical_devices_and_an_empty_list():
    # TF 2.21: MirroredStrategy([]) runs on every local device (TF's GPU guide passes its empty list of GPUs on a
    # machine without them: 1 replica on its one CPU), and MirroredStrategy(tf.config.list_logical_devices("CPU"))
    # on those devices.
    every = tf.distribute.MirroredStrategy([])
    assert every.num_replicas_in_sync == len(jax.local_devices())
    logical = tf.config.list_logical_devices("CPU")[:2]
    two = tf.distribute.MirroredStrategy(logical)
    assert two.num_replicas_in_sync == 2
    with two.scope():
        out = two.reduce("SUM", two.run(lambda: tf.constant(1.5)), axis=None)
    np.testing.assert_allclose(np.asarray(out), 3.0)
