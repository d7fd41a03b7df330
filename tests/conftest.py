"""Test setup: 8 simulated CPU devices, configured before JAX starts, and the `every_strategy`
fixture: one test run under each preset strategy."""
import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# Many tests compile the same program afresh: the same model under the same strategy from a new `jit`, and every
# worker process of the multi-process tests the train step its peers and the workers before it compiled. Two XLA
# compilation caches for the session turn the repeats into loads: one for the pytest processes (set below through
# jax.config) and one that the processes the tests start inherit through the environment. The second keeps only
# programs that took 0.3 s or more to compile. Neither has a size bound: with one, JAX lists the whole folder at
# every write. Without it, a process that reads an entry while another writes it gets a warning and compiles the
# program itself; in a multi-process job only process 0 writes. The first pytest process makes both folders and
# removes them at its exit; pytest-xdist's workers (`-n 2`, the README's command) find them in the environment.
import atexit  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

_CACHES_ENV = "JDIST_TESTS_XLA_CACHES"
if _CACHES_ENV in os.environ:
    _xla_caches = json.loads(os.environ[_CACHES_ENV])
else:
    _xla_caches = {name: tempfile.mkdtemp(prefix=f"jdist-tests-xla-cache-{name}-") for name in ("main", "children")}
    for _folder in _xla_caches.values():
        atexit.register(shutil.rmtree, _folder, True)
    os.environ[_CACHES_ENV] = json.dumps(_xla_caches)
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _xla_caches["children"])
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_compilation_cache_dir", _xla_caches["main"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

if jax.default_backend() == "cpu" and jax.device_count() != 8:
    # Every multi-replica test assumes 8 devices; without them they would test less, silently.
    raise RuntimeError(
        f"The tests need 8 simulated CPU devices but JAX has {jax.device_count()}: JAX was initialised "
        "before tests/conftest.py set XLA_FLAGS / jax_num_cpu_devices (import nothing that starts JAX "
        "before the tests, e.g. in a pytest plugin)."
    )


def _data_x_model():
    from jax.sharding import PartitionSpec as P

    import jdist

    # Kernels of layers named dense* split on their output axis over "model" (4-way), the rest replicated.
    layout = jdist.Layout([(r"dense[^/]*/kernel", P(None, "model"))], default=P())
    return jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=layout)


def _presets() -> dict:
    import jdist

    return {
        "one_device": lambda: jdist.OneDeviceStrategy("cpu:0"),
        "mirrored": lambda: jdist.MirroredStrategy(),
        "data2_model4": _data_x_model,
        "fsdp": lambda: jdist.FSDPStrategy(min_size_bytes=0),  # every leaf split, however small
        "central_storage": lambda: jdist.CentralStorageStrategy(),
    }


@pytest.fixture(params=["one_device", "mirrored", "data2_model4", "fsdp", "central_storage"])
def every_strategy(request):
    """Each preset strategy in turn: one device, mirrored (8), a data x model layout (2 x 4),
    FSDP (8, every leaf split) and central storage (parameters in host memory)."""
    return _presets()[request.param]()


# The longest files first (seconds in one serial run on 2 cores, summed from junit): with `-n 2`, a long file
# taken last would leave the other worker idle at the end. A stale entry changes the order, never a result.
SLOWEST_FILES = {"test_tf_tutorials.py": 270, "test_multiworker.py": 171, "test_docs.py": 131, "test_pipeline.py": 66,
                 "test_checkpoint_crash.py": 49, "test_benchmark_tools.py": 44, "test_parameter_server.py": 43,
                 "test_tf_tpu_guide.py": 35}


def pytest_collection_modifyitems(config, items):
    if "PYTEST_XDIST_WORKER" in os.environ:  # a serial run keeps pytest's own order
        items.sort(key=lambda item: -SLOWEST_FILES.get(item.path.name, 0))


@pytest.fixture
def clears_failed_effects():
    """For a test that makes a compiled check fail on purpose (`jax.debug.callback` raising): JAX raises that
    error again at every later effects barrier (`jax.effects_barrier()`, a compiled `tf.print`) until the device
    runs another program with effects, so a later test on the same process would inherit it. Afterwards, one
    effectful no-op runs on every device."""
    yield
    import numpy as np

    noop = jax.jit(lambda x: (jax.debug.callback(lambda *_: None, x), x)[1])
    for device in jax.devices():
        jax.block_until_ready(noop(jax.device_put(np.float32(0), device)))
    jax.effects_barrier()
