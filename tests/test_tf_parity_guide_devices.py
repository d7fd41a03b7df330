"""TF's "Use a GPU" and "Graph optimization" guides on a machine without a GPU, cell by cell: what a script
sees from tf.config's devices, memory switches, placement and optimizer options.

Every expected value was observed under TensorFlow 2.21 (tensorflow-cpu, Keras 3.15) on this machine, where
`tf.config.list_physical_devices('GPU')` is empty and the guide's multi-GPU cells take TF's CPU-only paths.
"""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.tf_compat import config_switches

CPU = tf.config.list_physical_devices("CPU")[0]
HOST = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture
def optimizer_state():
    """The optimizer switches are process-wide: each test puts back what it found."""
    saved = dict(config_switches._STATE["options"]), config_switches._STATE["jit"]
    yield
    config_switches._STATE["options"].clear()
    config_switches._STATE["options"].update(saved[0])
    config_switches._STATE["jit"] = saved[1]


def test_the_guides_gpu_cells_see_no_gpu_and_run_on_the_cpu():
    # Observed in TF 2.21, Keras 3.15: "Num GPUs Available:  0"; list_logical_devices('GPU') []; the guide's
    # `if gpus:` cells do nothing; set_visible_devices([], 'GPU') is accepted after the runtime started and
    # get_visible_devices() stays [PhysicalDevice('/physical_device:CPU:0', 'CPU')]; matmul's value
    # [[22, 28], [49, 64]] on '/job:localhost/replica:0/task:0/device:CPU:0', also under tf.device('/CPU:0').
    assert tf.config.list_physical_devices("GPU") == []
    assert tf.config.list_logical_devices("GPU") == []
    tf.config.set_visible_devices([], "GPU")
    assert tf.config.get_visible_devices() == [CPU]
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with tf.device("/CPU:0"):
        c = tf.matmul(a, b)
    np.testing.assert_allclose(np.asarray(c), [[22.0, 28.0], [49.0, 64.0]])
    assert c.device == HOST


def test_an_absent_gpu_is_soft_placed_on_the_cpu():
    # Observed in TF 2.21: `with tf.device('/device:GPU:2')` raises nothing; the matmul runs, on CPU:0.
    tf.config.set_soft_device_placement(True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tf.device("/device:GPU:2"):
            c = tf.matmul(tf.constant([[1.0, 2.0]]), tf.constant([[3.0], [4.0]]))
    assert c.device == HOST
    np.testing.assert_allclose(np.asarray(c), [[11.0]])
    assert tf.config.get_soft_device_placement() is True


def test_without_soft_placement_an_absent_device_is_an_error():
    # Observed in TF 2.21 after set_soft_device_placement(False): an op under tf.device('/GPU:0') (also
    # '/device:GPU:2', '/CPU:1' on one CPU) is InvalidArgumentError "Could not satisfy device specification
    # '/job:localhost/replica:0/task:0/device:GPU:0'. enable_soft_placement=0. Supported device types [CPU]. All
    # available devices [/job:localhost/replica:0/task:0/device:CPU:0]."; a device the machine has still works.
    tf.config.set_soft_device_placement(False)
    try:
        for name, full in (("/GPU:0", "GPU:0"), ("/device:GPU:2", "GPU:2"), ("/CPU:99", "CPU:99")):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=f"^Could not satisfy device specification '/job:localhost/replica:0/task:0/"
                                     f"device:{full}'. enable_soft_placement=0. Supported device types \\[CPU\\]. "
                                     f"All available devices \\[{HOST}, "):
                with tf.device(name):
                    tf.constant(1.0)
        with tf.device("/CPU:0"):
            assert tf.constant(1.0).device == HOST
    finally:
        tf.config.set_soft_device_placement(True)


def test_mirrored_strategy_over_no_logical_gpu_uses_the_cpus():
    # Observed in TF 2.21 with the CPU split in 2: MirroredStrategy(list_logical_devices('GPU')) (an empty list)
    # mirrors over every CPU device: worker_devices ('/job:localhost/replica:0/task:0/device:CPU:0', '...CPU:1').
    strategy = tf.distribute.MirroredStrategy(tf.config.list_logical_devices("GPU"))
    cpus = tf.config.list_logical_devices("CPU")
    assert strategy.num_replicas_in_sync == len(cpus) > 1
    assert list(strategy.extended.worker_devices) == [
        f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(len(cpus))]


def test_memory_growth_is_refused_on_the_cpu():
    # Observed in TF 2.21: set_memory_growth(cpu, True or False) ValueError "Cannot set memory growth on non-GPU
    # and non-Pluggable devices", or, once the CPU has a logical device configuration, "Cannot set memory growth
    # on device when virtual devices configured" (the fresh-process test below); get_memory_growth(cpu) KeyError.
    expected = ("^Cannot set memory growth on non-GPU and non-Pluggable devices$"
                if tf.config.get_logical_device_configuration(CPU) is None
                else "^Cannot set memory growth on device when virtual devices configured$")
    for enable in (True, False):
        with pytest.raises(ValueError, match=expected):
            tf.config.experimental.set_memory_growth(CPU, enable)
    with pytest.raises(KeyError):
        tf.config.experimental.get_memory_growth(CPU)


def test_cpu_logical_devices_take_no_memory_limit_priority_or_ordinal():
    # Observed in TF 2.21, before and after the runtime started: ValueError "Setting memory limit on CPU virtual
    # devices is currently not supported" (also "experimental_priority"/"experimental_device_ordinal", with TF's
    # double space); None is TypeError "'NoneType' object is not iterable"; the configuration is left as it was.
    before = tf.config.get_logical_device_configuration(CPU)
    config = tf.config.LogicalDeviceConfiguration
    with pytest.raises(ValueError, match="^Setting memory limit on CPU virtual devices is currently not supported$"):
        tf.config.set_logical_device_configuration(CPU, [config(memory_limit=1024)])
    with pytest.raises(ValueError, match="Setting experimental_priority on CPU virtual  devices"):
        tf.config.set_logical_device_configuration(CPU, [config(experimental_priority=1)] * 2)
    with pytest.raises(ValueError, match="Setting experimental_device_ordinal on CPU virtual  devices"):
        tf.config.set_logical_device_configuration(CPU, [config(experimental_device_ordinal=1)] * 2)
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        tf.config.set_logical_device_configuration(CPU, None)
    # jdist always runs on a CPU: TF accepts [] and then fails every op ("No CPU devices are available").
    with pytest.raises(ValueError, match=r"cannot hide the CPU.*at least one LogicalDeviceConfiguration"):
        tf.config.set_logical_device_configuration(CPU, [])
    assert tf.config.get_logical_device_configuration(CPU) == before


def test_cpu_memory_statistics_are_refused_as_tf_refuses_them():
    # Observed in TF 2.21 (one CPU, and the CPU split in 2): get_memory_info / get_memory_usage("CPU:0")
    # ValueError "Allocator stats not available for device 'CPU:0'" (also '/device:CPU:0', '/CPU:0', 'CPU:1'
    # when split); reset_memory_stats ValueError "Cannot reset memory stats for device 'CPU:0'"; 'cpu:0',
    # 'GPU:0', 'XLA_CPU:0' "No matching devices found for ..."; 'CPU' and 'foo' "Failed parsing device name".
    for name in ("CPU:0", "/device:CPU:0", "/CPU:0", HOST, "CPU:1"):
        with pytest.raises(ValueError, match=f"^Allocator stats not available for device '{name}'$"):
            tf.config.experimental.get_memory_info(name)
        with pytest.raises(ValueError, match=f"^Cannot reset memory stats for device '{name}'$"):
            tf.config.experimental.reset_memory_stats(name)
    with pytest.raises(ValueError, match="Allocator stats not available for device 'CPU:0'"):
        tf.config.experimental.get_memory_usage("CPU:0")
    for name in ("cpu:0", "GPU:0", "XLA_CPU:0", "CPU:99"):
        with pytest.raises(ValueError, match=f"^No matching devices found for '{name}'$"):
            tf.config.experimental.get_memory_info(name)
    for name in ("CPU", "foo", "device:CPU:0"):
        with pytest.raises(ValueError, match=f"^Failed parsing device name: '{name}'. Note a valid device string"):
            tf.config.experimental.get_memory_info(name)


def test_optimizer_options_keep_tfs_names_order_and_values(optimizer_state):
    # Observed in TF 2.21: get_experimental_options() lists the options set in Grappler's order, with
    # disable_model_pruning / disable_meta_optimizer always; an unknown name ('nonsense', 'auto_parallel') is
    # ignored; a truthy value ('yes') is True; None unsets an option; min_graph_nodes keeps its int; a None
    # argument is TypeError.
    tf.config.optimizer.set_experimental_options({"nonsense": True, "auto_parallel": True, "debug_stripper": 1,
                                                  "constant_folding": False, "min_graph_nodes": 5})
    assert list(tf.config.optimizer.get_experimental_options().items()) == [
        ("constant_folding", False), ("debug_stripper", True), ("disable_model_pruning", False),
        ("disable_meta_optimizer", False), ("min_graph_nodes", 5)]
    tf.config.optimizer.set_experimental_options({"constant_folding": "yes", "debug_stripper": None})
    assert tf.config.optimizer.get_experimental_options() == {
        "constant_folding": True, "disable_model_pruning": False, "disable_meta_optimizer": False,
        "min_graph_nodes": 5}
    with pytest.raises(TypeError, match="'NoneType' object is not iterable"):
        tf.config.optimizer.set_experimental_options(None)
    with pytest.raises(TypeError, match="min_graph_nodes: Expected an int, got a boolean"):
        tf.config.optimizer.set_experimental_options({"min_graph_nodes": True})


def test_the_guides_options_context_leaves_a_set_option_behind(optimizer_state):
    # Observed in TF 2.21, graph_optimization.ipynb: the guide's `options` context restores the old options by
    # setting them, so after `with options({'constant_folding': False})` TF still reports
    # {'constant_folding': False, 'disable_model_pruning': False, 'disable_meta_optimizer': False}.
    config_switches._STATE["options"].clear()
    old = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"constant_folding": False})
    assert tf.config.optimizer.get_experimental_options() == {
        "constant_folding": False, "disable_model_pruning": False, "disable_meta_optimizer": False}
    tf.config.optimizer.set_experimental_options(old)
    assert tf.config.optimizer.get_experimental_options() == {
        "constant_folding": False, "disable_model_pruning": False, "disable_meta_optimizer": False}


def test_set_jit_turns_on_for_true_or_autoclustering_only(optimizer_state):
    # Observed in TF 2.21: get_jit() "" at first; True, 1 and "autoclustering" give "autoclustering"; False,
    # None and "foo" give "".
    for value, expected in ((True, "autoclustering"), (False, ""), (1, "autoclustering"), ("foo", ""),
                            ("autoclustering", "autoclustering"), (None, "")):
        tf.config.optimizer.set_jit(value)
        assert tf.config.optimizer.get_jit() == expected, value


def test_run_functions_eagerly_runs_the_python_body():
    # Observed in TF 2.21: with run_functions_eagerly(True) a tf.function's body sees executing_eagerly() True
    # on every call; after False it is traced once (False) and not run again; the value is 2.0 either way.
    seen = []

    @tf.function
    def add_one(x):
        seen.append(tf.executing_eagerly())
        return x + 1

    tf.config.run_functions_eagerly(True)
    try:
        assert tf.config.functions_run_eagerly() is True
        assert float(add_one(tf.constant(1.0))) == 2.0
        add_one(tf.constant(1.0))
    finally:
        tf.config.run_functions_eagerly(False)
    assert float(add_one(tf.constant(1.0))) == 2.0
    add_one(tf.constant(1.0))
    assert seen == [True, True, False]


_FRESH = textwrap.dedent("""
    import jdist.tf_compat as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    C = tf.config.LogicalDeviceConfiguration
    def attempt(fn):
        try:
            return repr(fn())
        except Exception as e:
            return type(e).__name__ + ": " + str(e).split(":")[0]
    print(attempt(lambda: tf.config.set_logical_device_configuration(cpu, [C(memory_limit=1024)] * 2)))
    print(attempt(lambda: tf.config.get_logical_device_configuration(cpu)))
    print(attempt(lambda: tf.config.set_logical_device_configuration(cpu, [])))
    print(attempt(lambda: tf.config.set_logical_device_configuration(cpu, [C()] * 2)))
    print(attempt(lambda: [d.name for d in tf.config.list_logical_devices("CPU")]))
    print(attempt(lambda: tf.config.set_logical_device_configuration(cpu, [C()] * 2)))
    print(attempt(lambda: tf.config.set_logical_device_configuration(cpu, [C()] * 3)))
    print(attempt(lambda: tf.config.experimental.set_memory_growth(cpu, True)))
    print(attempt(lambda: tf.config.set_visible_devices([], "CPU")))
""")


def test_a_fresh_process_splits_the_cpu_with_tfs_rules():
    # Observed in TF 2.21 in a fresh process: a memory limit on CPU logical devices ValueError and the
    # configuration stays None; the split into 2 gives /device:CPU:0 and /device:CPU:1; the same split again
    # after the runtime started is accepted, 3 is RuntimeError "Virtual devices cannot be modified after being
    # initialized"; set_memory_growth then ValueError "Cannot set memory growth on device when virtual devices
    # configured"; set_visible_devices([], 'CPU') after the start RuntimeError "Visible devices cannot be
    # modified after being initialized". Before the start TF accepts an empty configuration (no CPU device) and
    # then fails every op ("No CPU devices are available in this process"); jdist refuses it with a ValueError.
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", _FRESH], env=env, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "ValueError: Setting memory limit on CPU virtual devices is currently not supported",
        "None",
        "ValueError: jdist cannot hide the CPU",  # TF accepts [] and then fails every op
        "None",
        "['/device:CPU:0', '/device:CPU:1']",
        "None",
        "RuntimeError: Virtual devices cannot be modified after being initialized",
        "ValueError: Cannot set memory growth on device when virtual devices configured",
        "RuntimeError: Visible devices cannot be modified after being initialized",
    ]
