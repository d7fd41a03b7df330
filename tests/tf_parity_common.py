"""What several TF-parity test files share: the small regression data their Keras cases fit (the same arrays
TF 2.21 was given when their values were observed), one MirroredStrategy per device count, and replica reads."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

_RS = np.random.RandomState(0)
X = (_RS.normal(size=(22, 3)) * 3).astype("float32")
Y = (_RS.normal(size=(22, 2)) * 5).astype("float32")
W = np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]], "float32")
B = np.array([0.05, -0.05], "float32")
_STRATEGIES: dict = {}


def mirrored(replicas: int):
    """One MirroredStrategy over the first `replicas` CPUs per process (compiled programs are reused)."""
    if replicas not in _STRATEGIES:
        _STRATEGIES[replicas] = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    return _STRATEGIES[replicas]


def replica_id():
    """The replica's id as a float32 tensor (inside `strategy.run`)."""
    return tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)


def local_lists(strategy, value):
    """Each replica's part of `value` as a nested list."""
    return [np.asarray(part).tolist() for part in strategy.experimental_local_results(value)]


def counted(fn):
    """`fn` with a call counter: `(counted_fn, calls)`, `calls[0]` the number of calls so far (how the tf.data
    tests see how many times TF, or jdist, runs a function's Python body)."""
    calls = [0]

    def counting(*args):
        calls[0] += 1
        return fn(*args)
    return counting, calls


@pytest.fixture
def no_global_seed():
    """No global `tf.random` seed during the test: once one is set, unseeded draws repeat per pass and per
    function trace (TF's rule), so a seed left by another test in the process would change what is observed."""
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)
