"""`tf.Variable` with `synchronization` and `aggregation` under `MirroredStrategy`: TF's MirroredVariable and
SyncOnReadVariable (jdist.tf_compat.distributed_variables).

Observed in TF 2.21 (tensorflow-cpu 2.21.0, MirroredStrategy on 4 logical CPUs): a variable made in the scope
with initial value 10.0, then one `tf.function` step `s.run(step)` where replica r (0..3) calls
`v.<op>(r + 1.0)` and returns what the op returned and `v.read_value()`; then `v.numpy()` and
`s.experimental_local_results(v)` outside. The tables below are TF's printed numbers.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

A, S = tf.VariableAggregation, tf.VariableSynchronization

# MirroredVariable (synchronization AUTO and ON_WRITE alike): (returned and read in every replica, read after)
TF_MIRRORED = {
    ("SUM", "assign"): 10.0, ("SUM", "assign_add"): 20.0, ("SUM", "assign_sub"): 0.0,
    ("MEAN", "assign"): 2.5, ("MEAN", "assign_add"): 12.5, ("MEAN", "assign_sub"): 7.5,
    ("ONLY_FIRST_REPLICA", "assign"): 1.0, ("ONLY_FIRST_REPLICA", "assign_add"): 11.0,
    ("ONLY_FIRST_REPLICA", "assign_sub"): 9.0,
}
# SyncOnReadVariable: each replica's copy after the step (also what it returned and read), and the read after
TF_SYNC_ON_READ_COPIES = {"assign": [1.0, 2.0, 3.0, 4.0], "assign_add": [11.0, 12.0, 13.0, 14.0],
                          "assign_sub": [9.0, 8.0, 7.0, 6.0]}
TF_SYNC_ON_READ_READ = {
    ("SUM", "assign"): 10.0, ("SUM", "assign_add"): 50.0, ("SUM", "assign_sub"): 30.0,
    ("MEAN", "assign"): 2.5, ("MEAN", "assign_add"): 12.5, ("MEAN", "assign_sub"): 7.5,
    ("ONLY_FIRST_REPLICA", "assign"): 1.0, ("ONLY_FIRST_REPLICA", "assign_add"): 11.0,
    ("ONLY_FIRST_REPLICA", "assign_sub"): 9.0,
}


@pytest.fixture(scope="module")
def four():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"])


def _replica_id():
    return tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)


def _floats(strategy, value):
    return [float(np.asarray(part)) for part in strategy.experimental_local_results(value)]


def _one_step(strategy, variable, op):
    def step():
        returned = getattr(variable, op)(_replica_id() + 1.0)
        return returned, variable.read_value()

    return tf.function(lambda: strategy.run(step))()


@pytest.mark.parametrize("synchronization", ["AUTO", "ON_WRITE"])
@pytest.mark.parametrize("aggregation,op", sorted(TF_MIRRORED))
def test_a_mirrored_variable_combines_each_assignment_as_its_aggregation_says(four, synchronization, aggregation,
                                                                            op):
    with four.scope():
        v = tf.Variable(10.0, synchronization=getattr(S, synchronization), aggregation=getattr(A, aggregation))
    returned, read = _one_step(four, v, op)
    expected = TF_MIRRORED[aggregation, op]
    assert _floats(four, returned) == _floats(four, read) == [expected] * 4
    assert float(v.numpy()) == expected and _floats(four, v) == [expected] * 4
    assert type(v).__name__ == "MirroredVariable" and v.trainable
    assert (v.synchronization, v.aggregation) == (S.ON_WRITE, getattr(A, aggregation))
    # One device computes the same: the combined value of the four replicas' operands 1, 2, 3, 4.
    operands = np.arange(1.0, 5.0)
    combined = {"SUM": operands.sum(), "MEAN": operands.mean(), "ONLY_FIRST_REPLICA": operands[0]}[aggregation]
    assert expected == {"assign": combined, "assign_add": 10.0 + combined, "assign_sub": 10.0 - combined}[op]


@pytest.mark.parametrize("aggregation,op", sorted(TF_SYNC_ON_READ_READ))
def test_a_sync_on_read_variable_keeps_a_copy_per_replica(four, aggregation, op):
    with four.scope():
        v = tf.Variable(10.0, synchronization=S.ON_READ, aggregation=getattr(A, aggregation))
    assert type(v).__name__ == "SyncOnReadVariable" and not v.trainable  # TF: not trainable unless asked
    returned, read = _one_step(four, v, op)
    copies = TF_SYNC_ON_READ_COPIES[op]
    assert _floats(four, returned) == _floats(four, read) == copies == _floats(four, v)
    assert float(v.numpy()) == TF_SYNC_ON_READ_READ[aggregation, op]
    # a second step goes on from each replica's own copy
    returned, _ = _one_step(four, v, "assign_add")
    assert _floats(four, returned) == [c + r + 1.0 for r, c in enumerate(copies)]


def test_a_sync_on_read_sum_reads_replicas_times_its_start_and_is_assigned_as_tf_does(four):
    with four.scope():
        total = tf.Variable(10.0, synchronization=S.ON_READ, aggregation=A.SUM)
        mean = tf.Variable(10.0, synchronization=S.ON_READ, aggregation=A.MEAN)
        first = tf.Variable(10.0, synchronization=S.ON_READ, aggregation=A.ONLY_FIRST_REPLICA)
        kept = tf.Variable(10.0, synchronization=S.ON_READ, aggregation=A.SUM, trainable=True)
    assert float(total.numpy()) == 40.0 and kept.trainable  # every copy starts at 10.0, as in TF
    # TF 2.21, outside run: assign gives each copy value / 4 (SUM) or the value; assign_add of a SUM one is refused
    total.assign(8.0)
    assert (float(total.numpy()), _floats(four, total)) == (8.0, [2.0] * 4)
    with pytest.raises(ValueError, match="does not support `assign_add` in cross-replica context"):
        total.assign_add(4.0)
    for v in (mean, first):
        v.assign(8.0)
        assert (float(v.numpy()), _floats(four, v)) == (8.0, [8.0] * 4)
        v.assign_add(4.0)
        assert (float(v.numpy()), _floats(four, v)) == (12.0, [12.0] * 4)
    # TF: reducing the variable reduces its copies (MEAN copies 0, 1, 2, 3 read 1.5 and sum to 6.0)
    tf.function(lambda: four.run(lambda: mean.assign(_replica_id())))()
    assert float(mean.numpy()) == 1.5 and float(four.reduce("SUM", mean, axis=None)) == 6.0


def test_a_sync_on_read_variable_without_aggregation_is_read_only_in_replicas(four):
    with four.scope():
        v = tf.Variable(10.0, synchronization=S.ON_READ, aggregation=A.NONE)
    with pytest.raises(ValueError, match="Could not convert from `tf.VariableAggregation`"):
        v.numpy()  # TF 2.21's error
    tf.function(lambda: four.run(lambda: v.assign_add(_replica_id())))()
    assert _floats(four, v) == [10.0, 11.0, 12.0, 13.0]  # TF's copies


def test_unaggregated_copies_that_differ_drift_apart_as_tfs(four):
    # TF 2.21 (ON_WRITE or AUTO, aggregation NONE): the copies become 1, 2, 3, 4 and a read gives replica 0's
    # (tests/test_tf_parity_variables.py holds the 2-replica observations).
    with four.scope():
        v = tf.Variable(10.0)
    assert (v.synchronization, v.aggregation) == (S.ON_WRITE, A.NONE)
    _one_step(four, v, "assign")
    assert _floats(four, v) == [1.0, 2.0, 3.0, 4.0] and float(v.numpy()) == 1.0


def test_checkpoints_hold_the_read_value_of_a_sync_on_read_variable(four, tmp_path):
    with four.scope():
        v = tf.Variable(0.0, synchronization=S.ON_READ, aggregation=A.SUM)
    tf.function(lambda: four.run(lambda: v.assign_add(_replica_id() + 1.0)))()
    path = tf.train.Checkpoint(v=v).save(str(tmp_path / "c"))
    plain = tf.Variable(0.0)
    tf.train.Checkpoint(v=plain).restore(path)
    assert float(plain.numpy()) == 10.0  # TF saved 10.0, the sum of the copies 1..4
    with four.scope():
        restored = tf.Variable(0.0, synchronization=S.ON_READ, aggregation=A.SUM)
    tf.train.Checkpoint(v=restored).restore(path)
    assert (float(restored.numpy()), _floats(four, restored)) == (10.0, [2.5] * 4)  # TF's


def test_distributed_variables_print_their_replicas_as_tf(four):
    with four.scope():
        v = tf.Variable([1.0, 2.0])
        r = tf.Variable(3.0, synchronization=S.ON_READ, aggregation=A.MEAN)
    # TF 2.21, 4 logical CPUs (str and repr alike)
    assert repr(v) == str(v) == (
        "MirroredVariable:{\n"
        "  0: <tf.Variable 'Variable:0' shape=(2,) dtype=float32, numpy=array([1., 2.], dtype=float32)>,\n"
        "  1: <tf.Variable 'Variable/replica_1:0' shape=(2,) dtype=float32, numpy=array([1., 2.], dtype=float32)>,\n"
        "  2: <tf.Variable 'Variable/replica_2:0' shape=(2,) dtype=float32, numpy=array([1., 2.], dtype=float32)>,\n"
        "  3: <tf.Variable 'Variable/replica_3:0' shape=(2,) dtype=float32, numpy=array([1., 2.], dtype=float32)>\n"
        "}")
    assert repr(r).startswith("SyncOnReadVariable:{\n  0: <tf.Variable 'Variable:0' shape=() dtype=float32, "
                              "numpy=3.0>,\n  1: <tf.Variable 'Variable/replica_1:0'")
    assert [np.asarray(part).tolist() for part in v.values] == [[1.0, 2.0]] * 4
    assert repr(tf.Variable(1.0)) == "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>"
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():  # TF: a plain variable
        assert tf.Variable(1.0).synchronization == S.AUTO


def test_tf_refusals_and_enums():
    with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
        with pytest.raises(ValueError, match="aggregation=MEAN and a non-floating dtype is not supported"):
            tf.Variable(0, aggregation=A.MEAN)
        with pytest.raises(ValueError, match="`NONE` variable synchronization mode is not supported"):
            tf.Variable(0.0, synchronization=S.NONE)
    assert tf.Variable(0, aggregation=A.MEAN).aggregation == A.MEAN  # outside a strategy TF accepts it
    with pytest.raises(ValueError, match="Invalid variable aggregation mode: mean"):
        tf.Variable(1.0, aggregation="mean")
    with pytest.raises(ValueError, match="Invalid variable synchronization mode: on_read"):
        tf.Variable(1.0, synchronization="on_read")
    plain = tf.Variable(1.0, synchronization=S.ON_READ, aggregation=A.SUM)  # TF: a plain variable outside
    assert type(plain).__name__ == "Variable" and float(plain.numpy()) == 1.0
    assert (S.AUTO.value, S.NONE.value, S.ON_WRITE.value, S.ON_READ.value) == (0, 1, 2, 3)
    assert tf.compat.v1.VariableAggregation.SUM == A.SUM and A.MEAN.value == 2
    assert [tf.distribute.ReduceOp.from_variable_aggregation(a) for a in (A.SUM, A.MEAN)] == [
        tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN]
    for a in (A.NONE, A.ONLY_FIRST_REPLICA):
        with pytest.raises(ValueError, match="Could not convert from `tf.VariableAggregation`"):
            tf.distribute.ReduceOp.from_variable_aggregation(a)
    assert len(jax.devices()) >= 4


def test_a_sync_on_read_count_of_a_short_batch_counts_each_replicas_real_rows(four):
    # 10 examples over 4 replicas: TF's rows 3, 3, 3, 1. Each replica adds its own count to its own copy (no
    # communication, so the replicas run apart on their real rows): the read is 10, as TF's sum of the copies.
    short = next(iter(four.experimental_distribute_dataset(tf.data.Dataset.range(10).batch(10))))
    with four.scope():
        count = tf.Variable(0.0, synchronization=S.ON_READ, aggregation=A.SUM)
        mirrored = tf.Variable(0.0, aggregation=A.SUM)
    four.run(lambda x: count.assign_add(tf.cast(tf.size(x), tf.float32)), args=(short,))
    assert (float(count.numpy()), _floats(four, count)) == (10.0, [3.0, 3.0, 3.0, 1.0])
    # A SUM mirrored variable communicates: the padded shards' count (12) would be returned, so it is refused.
    with pytest.raises(ValueError, match="row count of a short batch"):
        four.run(lambda x: mirrored.assign_add(tf.cast(tf.size(x), tf.float32)), args=(short,))
    assert float(mirrored.numpy()) == 0.0
