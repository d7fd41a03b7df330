"""What `run`, `reduce`, `gather`, `experimental_local_results`, distributed datasets and
`experimental_distribute_values_from_function` hand back through `jdist.tf_compat`, against TF 2.21.

Every expected value below was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15), MirroredStrategy over 2
logical CPUs (`tf.config.set_logical_device_configuration(cpus[0], [LogicalDeviceConfiguration()] * 2)`), and
OneDeviceStrategy("/cpu:0"), unless a test says it compares with a computation on one device.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

FIX = "using a PerReplica object while not inside a replica context"  # TF 2.21's ValueError text (observed)
X = np.arange(10, dtype=np.float32).reshape(5, 2)
Y = np.arange(5, dtype=np.int32)


@pytest.fixture(scope="module")
def strategy():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.fixture(scope="module")
def batches(strategy):
    """The two batches of 5 examples in global batches of 4: the second short (replica 1 gets none)."""
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    it = iter(strategy.experimental_distribute_dataset(ds))
    return next(it), next(it)


def test_a_component_taken_out_of_a_batch_refuses_ops_outside_run(strategy, batches):
    x, y = batches[0]
    # observed, TF 2.21: operators a TypeError naming PerReplica; tf ops a ValueError
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'PerReplica' and 'int'"):
        x + 1  # noqa: B018
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \*: 'PerReplica' and 'int'"):
        x * 2  # noqa: B018
    for op in (lambda: tf.reduce_sum(x), lambda: tf.add(x, 1.0), lambda: tf.reduce_sum(batches[1][0])):
        with pytest.raises(ValueError, match=FIX) as error:
            op()
        assert "strategy.run" in str(error.value) and "experimental_local_results" in str(error.value)
    with pytest.raises(AttributeError, match="'PerReplica' object has no attribute 'shape'"):
        x.shape  # noqa: B018
    with pytest.raises(TypeError, match="'PerReplica' object is not subscriptable"):
        x[0]  # noqa: B018
    assert isinstance(x, tf.distribute.DistributedValues) and isinstance(y, tf.distribute.DistributedValues)


def test_a_component_still_feeds_run_reduce_gather_and_local_results(strategy, batches):
    x, y = batches[1]  # 1 real example on replica 0, none on replica 1
    # observed, TF 2.21: local results (array([[8., 9.]]), shape (0, 2)); reduce(SUM, axis=0) [8, 9]; gather [[8, 9]]
    parts = strategy.experimental_local_results(x)
    assert [p.numpy().tolist() for p in parts] == [[[8.0, 9.0]], []]
    assert parts[1].shape == (0, 2)
    np.testing.assert_array_equal(strategy.reduce("SUM", x, axis=0).numpy(), [8.0, 9.0])
    np.testing.assert_array_equal(strategy.gather(x, axis=0).numpy(), [[8.0, 9.0]])
    assert [p.numpy().tolist() for p in x.values] == [[[8.0, 9.0]], []]
    assert str(x) == ("PerReplica:{\n  0: tf.Tensor([[8. 9.]], shape=(1, 2), dtype=float32),\n"
                      "  1: tf.Tensor([], shape=(0, 2), dtype=float32)\n}")
    # `run` hands each replica its rows, as a computation on one device gives them
    x0, y0 = batches[0]
    out = strategy.run(lambda a, b: tf.reduce_sum(a, axis=1) * tf.cast(b, tf.float32), args=(x0, y0))
    np.testing.assert_allclose(strategy.gather(out, axis=0).numpy(), X[:4].sum(1) * Y[:4])


def test_one_device_components_stay_tensors():
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    x, _ = next(iter(one.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((X, Y)).batch(4))))
    np.testing.assert_array_equal((x + 1).numpy(), X[:4] + 1)  # observed, TF 2.21: a plain tensor there


def test_per_replica_results_refuse_tf_ops_and_are_atoms_of_tf_nest(strategy):
    pr = strategy.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32))
    with pytest.raises(ValueError, match=FIX):  # observed, TF 2.21
        tf.reduce_sum(pr)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'PerReplica' and 'int'"):
        pr + 1  # noqa: B018
    # observed, TF 2.21: `tf.nest.flatten({"a": pr, "b": (pr, 3)})` is `[pr, pr, 3]`; map_structure gets pr
    flat = tf.nest.flatten({"a": pr, "b": (pr, 3)})
    assert flat[0] is pr and flat[1] is pr and flat[2] == 3
    seen = tf.nest.map_structure(lambda t: [v.numpy().tolist() for v in t.values], {"a": pr})
    assert seen == {"a": [0.0, 1.0]}


def test_values_from_function_keep_numpy_arrays_and_python_numbers(strategy):
    arrays = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.array([ctx.replica_id_in_sync_group, 1.5]))
    # observed, TF 2.21: the components are the numpy arrays themselves
    assert [type(v) for v in arrays.values] == [np.ndarray, np.ndarray]
    assert repr(arrays) == "PerReplica:{\n  0: array([0. , 1.5]),\n  1: array([1. , 1.5])\n}"
    ints = strategy.experimental_distribute_values_from_function(lambda ctx: ctx.replica_id_in_sync_group)
    assert ints.values == (0, 1) and all(type(v) is int for v in ints.values)
    assert repr(ints) == "PerReplica:{\n  0: 0,\n  1: 1\n}"
    assert strategy.experimental_local_results(ints) == (0, 1)
    # TF 2.21 fails here (AttributeError: 'int' object has no attribute 'device'); jdist combines them as one
    # device does: 0 + 1, and each replica's value doubled
    assert int(strategy.reduce("SUM", ints, axis=None)) == 1
    doubled = strategy.run(lambda a: a * 2, args=(ints,))
    assert [int(v) for v in doubled.values] == [0, 2]  # observed, TF 2.21: 0 and 2


def test_one_device_integer_mean():
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    # observed, TF 2.21: reduce(MEAN, int32 [3, 4], axis=None) is the value itself, int32; axis=0 gives 3.5
    same = one.reduce("MEAN", tf.constant([3, 4]), axis=None)
    assert str(same.dtype) == "int32" and same.numpy().tolist() == [3, 4]
    assert float(one.reduce("MEAN", tf.constant([3, 4]), axis=0)) == 3.5


def test_integer_mean_across_replicas_is_a_true_mean(strategy):
    pr = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group + 2)
    # observed, TF 2.21: 2.5 (float64: jdist without 64-bit types gives float32), SUM stays int32 5
    assert float(strategy.reduce("MEAN", pr, axis=None)) == 2.5
    total = strategy.reduce("SUM", pr, axis=None)
    assert str(total.dtype) == "int32" and int(total) == 5


@pytest.mark.parametrize("n,batch,drop,rows", [
    # observed, TF 2.21, 2 replicas: the per-replica TensorSpec's batch dimension
    (8, 4, True, 2), (9, 5, True, None), (9, 3, True, None), (9, 5, False, None),
])
def test_element_spec_splits_a_static_batch(strategy, n, batch, drop, rows):
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(n).batch(batch, drop_remainder=drop))
    spec = dist.element_spec
    assert type(spec).__name__ == "PerReplicaSpec" and len(spec.specs) == 2
    assert all(tuple(s.shape) == (rows,) for s in spec.specs)
    assert all(tuple(s.shape) == (rows,) for s in iter(dist).element_spec.specs)


def test_per_replica_datasets_keep_their_static_batch_and_cardinality_is_numpy(strategy):
    dist = strategy.distribute_datasets_from_function(
        lambda ctx: tf.data.Dataset.range(8).batch(2, drop_remainder=True))
    assert all(tuple(s.shape) == (2,) for s in dist.element_spec.specs)  # observed, TF 2.21: (2,) each
    # observed, TF 2.21: `cardinality` is a property holding a numpy int64 (3 for range(9).batch(4))
    count = strategy.experimental_distribute_dataset(tf.data.Dataset.range(9).batch(4)).cardinality
    assert type(count) is np.int64 and count == 3
    assert type(dist.cardinality) is np.int64 and dist.cardinality == 4


def test_gather_along_axis_1(strategy):
    pm = strategy.run(lambda: tf.reshape(tf.range(6, dtype=tf.float32), [2, 3]) + 10.0 * tf.cast(
        tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32))
    # observed, TF 2.21
    np.testing.assert_array_equal(strategy.gather(pm, axis=1).numpy(),
                                  [[0, 1, 2, 10, 11, 12], [3, 4, 5, 13, 14, 15]])


def test_tf_nest_sees_a_batch_as_its_per_replica_components(strategy, batches):
    batch = batches[0]
    # observed, TF 2.21: `tf.nest.flatten(batch)` of an (x, y) element is [PerReplica, PerReplica] (no mask), and
    # map_structure gives each PerReplica to the function
    flat = tf.nest.flatten(batch)
    assert [type(t).__name__ for t in flat] == ["PerReplica", "PerReplica"]
    assert [p.numpy().tolist() for p in flat[1].values] == [[0, 1], [2, 3]]
    assert tf.nest.map_structure(lambda t: type(t).__name__, batch) == ("PerReplica", "PerReplica")
    # a dict keeps its key order through map_structure (observed, TF 2.21)
    assert list(tf.nest.map_structure(lambda t: t, {"b": 1, "a": 2})) == ["b", "a"]
