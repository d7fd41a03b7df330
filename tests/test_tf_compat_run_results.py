"""`strategy.run`'s results through `jdist.tf_compat`: TF's `PerReplica` for every result of a strategy with 2+
replicas, also when the replicas agree; the value itself with one replica; jdist's own strategies unchanged.

TF observations (TF 2.21, tensorflow-cpu 2.21.0 with Keras 3, MirroredStrategy on 8 logical CPUs,
`tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 8)`):
- TF's TPU guide cell `z = strategy.run(matmul_fn, args=(a, b)); print(z)` with plain tensors prints
  `PerReplica:{\n  0: tf.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32),\n  1: ...,\n  7: ...\n}`;
  `len(z.values) == 8`; `experimental_local_results(z)` has 8 parts, one per device.
- `reduce(SUM, z, axis=None)` = 8 x the value, MEAN the value; with `axis=0`: SUM 8 x the column sums, MEAN the
  column means.
- The result of an `all_reduce` of the replica ids, nested results (a tuple with a dict), a constant and
  `v.read_value()` of a variable made in the scope: all PerReplica.
- OneDeviceStrategy and MirroredStrategy over one device return the tensor itself.
- Also observed, and not what jdist does: `run(lambda: v)` returns the MirroredVariable itself (jdist: a PerReplica
  of its value); `run(lambda: 3)` returns the int 3 (jdist too: tests/test_tf_parity_strategy_api.py);
  MultiWorkerMirroredStrategy in
  one process without TF_CONFIG has 1 replica (CPU:0 only) where jdist's takes the 8 local devices.
- CentralStorageStrategy over the 8 CPUs: `run(lambda x: x * 2, args=(tf.constant(1.),))` is a PerReplica of 8
  tensors 2.0, `reduce(SUM, axis=None)` 16.0.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402
from jdist.strategy.values import PerReplica  # noqa: E402

A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
B = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
PRODUCT = [[22.0, 28.0], [49.0, 64.0]]  # TF 2.21's printed value of each replica (TPU guide cell)

STRATEGIES = {
    "mirrored": lambda: tf.distribute.MirroredStrategy(),
    "mirrored_4": lambda: tf.distribute.MirroredStrategy(devices=[f"/cpu:{i}" for i in range(4)]),
    "tpu": lambda: tf.distribute.TPUStrategy(devices=jax.devices("cpu")),
    "tpu_2_cores_per_replica": lambda: tf.distribute.TPUStrategy(devices=jax.devices("cpu"),
                                                                 num_logical_devices_per_replica=2),
    "multi_worker": lambda: tf.distribute.MultiWorkerMirroredStrategy(),
    "central_storage": lambda: tf.distribute.experimental.CentralStorageStrategy(),
    "one_device": lambda: tf.distribute.OneDeviceStrategy("/cpu:0"),
    "mirrored_1": lambda: tf.distribute.MirroredStrategy(devices=["/cpu:0"]),
}


def _matmul(strategy):
    return (lambda x, y: tf.matmul(x, y)), (tf.constant(A), tf.constant(B)), np.asarray(PRODUCT)


def _all_reduced_ids(strategy):
    def fn():
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce("SUM", tf.cast(ctx.replica_id_in_sync_group, tf.float32) * tf.ones((3,)))
    n = strategy.num_replicas_in_sync
    return fn, (), np.full(3, n * (n - 1) / 2, np.float32)


def _nested(strategy):
    fn = lambda x: (x * 2, {"k": x + 1, "i": tf.constant([3, 4])})  # noqa: E731
    return fn, (tf.constant([1.0, 2.0]),), (np.array([2.0, 4.0]), {"k": np.array([2.0, 3.0]), "i": np.array([3, 4])})


def _variable_read(strategy):
    with strategy.scope():
        v = tf.Variable([2.0, 5.0])
    return (lambda: v.read_value()), (), np.array([2.0, 5.0], np.float32)


RESULTS = {"matmul": _matmul, "all_reduce": _all_reduced_ids, "nested": _nested, "variable_read": _variable_read}


@pytest.mark.parametrize("result", sorted(RESULTS))
@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_run_results_are_tfs(name, result, capsys):
    strategy = STRATEGIES[name]()
    n = strategy.num_replicas_in_sync
    fn, args, expected = RESULTS[result](strategy)
    with strategy.scope():
        out = strategy.run(fn, args=args)
    got, want = jax.tree.leaves(out, is_leaf=lambda x: isinstance(x, PerReplica)), jax.tree.leaves(expected)
    assert jax.tree.structure(jax.tree.map(lambda _: 0, out, is_leaf=lambda x: isinstance(x, PerReplica))) \
        == jax.tree.structure(jax.tree.map(lambda _: 0, expected))
    for value, single in zip(got, want):  # against the single-device value of each replica
        single = np.asarray(single)
        if n == 1:  # TF 2.21: the tensor itself
            assert isinstance(value, jax.Array) and not isinstance(value, PerReplica)
            np.testing.assert_allclose(np.asarray(value), single)
            continue
        assert isinstance(value, PerReplica) and len(value.values) == n
        local = strategy.experimental_local_results(value)
        assert len(local) == n
        mesh = strategy.mesh  # each part on a device of its replica (its slice of the data axis)
        grid = np.moveaxis(mesh.devices, mesh.axis_names.index(strategy.data_axis), 0).reshape(n, -1)
        for i, part in enumerate(value.values):
            np.testing.assert_allclose(np.asarray(part), single)
            assert len(part.devices()) == 1 and part.devices() <= set(grid[i])
        for part in local:
            np.testing.assert_allclose(np.asarray(part), single)
        with strategy.scope():
            np.testing.assert_allclose(np.asarray(strategy.reduce("SUM", value, axis=None)), n * single, rtol=1e-6)
            np.testing.assert_allclose(np.asarray(strategy.reduce("MEAN", value, axis=None)), single, rtol=1e-6)
            if single.ndim:
                np.testing.assert_allclose(np.asarray(strategy.reduce("SUM", value, axis=0)), n * single.sum(0),
                                           rtol=1e-6)
                np.testing.assert_allclose(np.asarray(strategy.reduce("MEAN", value, axis=0)), single.mean(0),
                                           rtol=1e-6)
                np.testing.assert_allclose(np.asarray(strategy.gather(value, axis=0)),
                                           np.concatenate([single] * n), rtol=1e-6)
    if n > 1 and result == "matmul":  # TF's layout: one line per replica
        print(out)
        shown = capsys.readouterr().out
        part = "tf.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)"  # TF 2.21's text (module doc)
        assert shown == "PerReplica:{\n  " + ",\n  ".join(f"{i}: {part}" for i in range(n)) + "\n}\n"


def test_jdist_strategies_keep_plain_replicated_results():
    """jdist's own API is unchanged: a result that agrees on every replica is one replicated array."""
    for strategy in (jdist.MirroredStrategy(), jdist.TPUStrategy(devices=jax.devices("cpu"))):
        out = strategy.run(lambda x, y: jnp.matmul(x, y), args=(A, B))
        assert isinstance(out, jax.Array) and out.sharding.is_fully_replicated
        np.testing.assert_array_equal(np.asarray(out), PRODUCT)


def test_tf_strategies_are_jdists_classes():
    assert isinstance(tf.distribute.MirroredStrategy(), jdist.MirroredStrategy)
    assert isinstance(tf.distribute.MirroredStrategy(), tf.distribute.MirroredStrategy)
    assert isinstance(tf.distribute.TPUStrategy(devices=jax.devices("cpu")), jdist.TPUStrategy)
    assert tf.distribute.experimental.TPUStrategy is tf.distribute.TPUStrategy
    assert tf.distribute.experimental.MultiWorkerMirroredStrategy is tf.distribute.MultiWorkerMirroredStrategy
    assert issubclass(tf.distribute.MultiWorkerMirroredStrategy, jdist.MultiWorkerMirroredStrategy)
    assert issubclass(tf.distribute.experimental.CentralStorageStrategy, jdist.CentralStorageStrategy)
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        assert tf.distribute.get_strategy() is strategy
        assert isinstance(tf.distribute.get_strategy().run(lambda: tf.ones(2)), PerReplica)


def test_results_flow_into_the_next_run_and_keras_updates_stay_mirrored():
    """A PerReplica result is split into the next run (each replica its own part, as TF's); a function that
    updates Keras variables (which runs `run` again for their new values) still updates them once."""
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        v = tf.Variable(1.0)
        first = strategy.run(lambda x: x * 2, args=(tf.constant([1.0, 2.0]),))
        second = strategy.run(lambda x: x + 1, args=(first,))

        def step():
            v.assign_add(2.0)
            return v.read_value() * 10

        read = strategy.run(step)
    for part in second.values:
        np.testing.assert_array_equal(np.asarray(part), [3.0, 5.0])
    assert isinstance(read, PerReplica) and [float(p) for p in read.values] == [30.0] * 8
    assert float(v.numpy()) == 3.0 and v.value().sharding.is_fully_replicated


def test_run_in_a_tf_function():
    strategy = tf.distribute.MirroredStrategy()

    @tf.function
    def tf_step(x):
        return strategy.run(lambda x: tf.matmul(x, x), args=(x,))

    out = tf_step(tf.constant(np.ones((4, 4), np.float32)))
    assert isinstance(out, PerReplica) and len(out.values) == 8
    for part in out.values:
        np.testing.assert_array_equal(np.asarray(part), np.full((4, 4), 4.0))


def test_mirrored_state_stays_a_variable():
    """jdist's functional variable is returned as itself, as TF returns a MirroredVariable (`run(lambda: v)`)."""
    strategy = tf.distribute.MirroredStrategy()
    counter = jdist.MirroredState(5.0, aggregation=jdist.VariableAggregation.SUM)
    counter = strategy.run(lambda c: c.assign_add(1.0), args=(counter,))
    assert isinstance(counter, jdist.MirroredState) and not isinstance(counter.value, PerReplica)
    assert float(counter.value) == 13.0  # 5 + 8 replicas x 1 (SUM)
