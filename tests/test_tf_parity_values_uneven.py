"""A short last batch whose replicas hold different numbers of real rows, given to a replica function that
communicates, against TF 2.21.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) with MirroredStrategy over 4
logical CPUs (2 where a test says so), one strategy per TF process: `range(10).batch(8)`'s last batch gives the
replicas [8.], [9.], [] and [] (float32, shapes (1,), (1,), (0,), (0,)).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tests.tf_parity_common import local_lists, mirrored  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _ctx():
    return tf.distribute.get_replica_context()


def _last(strategy, n, batch):
    ds = tf.data.Dataset.range(n).map(lambda x: tf.cast(x, tf.float32)).batch(batch)
    return list(strategy.experimental_distribute_dataset(ds))[-1]


def _shapes(strategy, value):
    return [tuple(part.shape) for part in strategy.experimental_local_results(value)]


@pytest.fixture(scope="module")
def four():
    strategy = mirrored(4)
    return strategy, _last(strategy, 10, 8)


def test_collectives_combine_the_real_rows_of_each_replica(four):
    # observed, TF 2.21, 4 CPUs: all_gather [8., 9.] (shape (2,)) on every replica; all_reduce SUM of the
    # replica's reduce_sum 17.; MEAN 4.25 (over replicas, not rows); tf.shape(x)[0] int32 [1, 1, 0, 0];
    # x * 2 per replica [16.], [18.], [], []
    strategy, last = four
    assert local_lists(strategy, last) == [[8.0], [9.0], [], []]

    def step(x):
        ctx = _ctx()
        return (ctx.all_gather(x, axis=0), ctx.all_reduce("SUM", tf.reduce_sum(x)),
                ctx.all_reduce(tf.distribute.ReduceOp.MEAN, tf.reduce_sum(x)), tf.shape(x)[0], x * 2)

    gathered, total, mean, rows, doubled = strategy.run(step, args=(last,))
    assert local_lists(strategy, gathered) == [[8.0, 9.0]] * 4
    assert _shapes(strategy, gathered) == [(2,)] * 4
    assert local_lists(strategy, total) == [17.0] * 4
    assert local_lists(strategy, mean) == [4.25] * 4
    assert local_lists(strategy, rows) == [1, 1, 0, 0]
    assert [p.dtype for p in strategy.experimental_local_results(rows)] == [tf.int32] * 4
    assert local_lists(strategy, doubled) == [[16.0], [18.0], [], []]
    assert _shapes(strategy, doubled) == [(1,), (1,), (0,), (0,)]
    # the same step again (no state left over from the first call); reduce of the per-example result
    again = strategy.run(lambda x: _ctx().all_reduce("SUM", tf.reduce_sum(x)), args=(last,))
    assert local_lists(strategy, again) == [17.0] * 4
    assert float(strategy.reduce("SUM", doubled, axis=0)) == 34.0


def test_merge_call_on_uneven_rows_and_a_variable_read_in_the_step(four):
    # observed, TF 2.21, 4 CPUs: merge_call(lambda s, v: s.reduce(SUM, v, axis=None), reduce_sum(x)) gives one
    # tensor 17. (one local result); merge_call handing back its PerReplica gives each replica its own rows;
    # a mirrored variable read in the step (2. * 17.) gives 34. on every replica, and the variable is left as it was
    strategy, last = four

    def merged(x):
        return _ctx().merge_call(lambda s, v: s.reduce("SUM", v, axis=None), args=(tf.reduce_sum(x),))

    out = strategy.run(merged, args=(last,))
    assert local_lists(strategy, out) == [17.0]
    back = strategy.run(lambda x: _ctx().merge_call(lambda s, v: v, args=(x,)), args=(last,))
    assert local_lists(strategy, back) == [[8.0], [9.0], [], []]
    with strategy.scope():
        v = tf.Variable(2.0)
    read = strategy.run(lambda x: _ctx().all_reduce("SUM", v * tf.reduce_sum(x)), args=(last,))
    assert local_lists(strategy, read) == [34.0] * 4
    assert float(v.numpy()) == 2.0


def test_row_counts_read_from_shapes_and_three_replicas_with_rows(four):
    # observed, TF 2.21, 4 CPUs: all_gather(tf.fill(tf.shape(x), replica_id)) [0, 1] on every replica;
    # range(14).batch(8)'s last batch [8, 9], [10, 11], [12, 13], []: all_gather gives 8..13, shape (6,);
    # all_reduce(SUM, reduce_mean(x)) is nan (the empty replica's mean)
    strategy, last = four
    ids = strategy.run(lambda x: _ctx().all_gather(tf.fill(tf.shape(x), _ctx().replica_id_in_sync_group), axis=0),
                       args=(last,))
    assert local_lists(strategy, ids) == [[0, 1]] * 4
    three = _last(strategy, 14, 8)
    gathered = strategy.run(lambda x: _ctx().all_gather(x, axis=0), args=(three,))
    assert local_lists(strategy, gathered) == [[8.0, 9.0, 10.0, 11.0, 12.0, 13.0]] * 4
    nan = strategy.run(lambda x: _ctx().all_reduce("SUM", tf.reduce_mean(x)), args=(last,))
    assert all(np.isnan(v) for v in local_lists(strategy, nan))


def test_values_of_different_shapes_cannot_be_all_reduced(four):
    # observed, TF 2.21, 4 CPUs: all_reduce(SUM, x) of shapes (1,), (1,), (0,), (0,) raises InvalidArgumentError
    # "Shape mismatch in the collective instance ... different input shapes at different members"
    strategy, last = four
    with pytest.raises(ValueError, match="different shapes.*Shape mismatch"):
        strategy.run(lambda x: _ctx().all_reduce("SUM", x), args=(last,))
    # the replicas are not left waiting: the next step runs
    out = strategy.run(lambda x: _ctx().all_reduce("SUM", tf.reduce_sum(x)), args=(last,))
    assert local_lists(strategy, out) == [17.0] * 4


def test_two_replicas_holding_two_and_one_rows():
    # observed, TF 2.21, 2 CPUs: range(3).batch(4) gives [0., 1.] and [2.]; all_gather(x * 10) [0., 10., 20.],
    # all_reduce SUM 3., tf.shape(x)[0] [2, 1]
    strategy = mirrored(2)
    batch = _last(strategy, 3, 4)
    assert local_lists(strategy, batch) == [[0.0, 1.0], [2.0]]
    gathered, total, rows = strategy.run(
        lambda x: (_ctx().all_gather(x * 10, axis=0), _ctx().all_reduce("SUM", tf.reduce_sum(x)), tf.shape(x)[0]),
        args=(batch,))
    assert local_lists(strategy, gathered) == [[0.0, 10.0, 20.0]] * 2
    assert local_lists(strategy, total) == [3.0] * 2
    assert local_lists(strategy, rows) == [2, 1]


def test_reduce_of_a_mirrored_variable_whose_copies_diverged():
    # observed, TF 2.21, 2 CPUs: v = Variable(1.) and w = Variable([1., 2.], aggregation=MEAN) in scope, then
    # experimental_local_results(v)[1].assign(5.), ...(w)[1].assign([3., 10.]): reduce(SUM, v or w, axis=None)
    # raises a bare AssertionError; MEAN axis=None gives the variable's value (1., [1., 2.]); along axis 0 each
    # replica's copy counts: SUM of w 16., MEAN 4.
    strategy = mirrored(2)
    with strategy.scope():
        v = tf.Variable(1.0)
        w = tf.Variable([1.0, 2.0], aggregation=tf.VariableAggregation.MEAN)
    strategy.experimental_local_results(v)[1].assign(5.0)
    strategy.experimental_local_results(w)[1].assign([3.0, 10.0])
    assert local_lists(strategy, v) == [1.0, 5.0]
    for variable in (v, w):
        with pytest.raises(AssertionError):
            strategy.reduce("SUM", variable, axis=None)
    assert float(strategy.reduce("MEAN", v, axis=None)) == 1.0
    assert np.asarray(strategy.reduce("MEAN", w, axis=None)).tolist() == [1.0, 2.0]
    assert float(strategy.reduce("SUM", w, axis=0)) == 16.0
    assert float(strategy.reduce(tf.distribute.ReduceOp.MEAN, w, axis=0)) == 4.0


def test_replicas_that_skip_a_collective_fail_as_in_tf(four):
    # observed, TF 2.21, 4 CPUs: `if x.shape[0] > 0: return all_reduce(SUM, reduce_sum(x))` (the empty replicas
    # return a constant) raises RuntimeError "Some replicas made a different number of
    # replica_context().merge_call() calls."; the next step runs (17. on every replica)
    strategy, last = four

    def branch(x):
        if x.shape[0] > 0:
            return _ctx().all_reduce("SUM", tf.reduce_sum(x))
        return tf.constant(0.0)

    with pytest.raises(RuntimeError, match="different number of replica_context"):
        strategy.run(branch, args=(last,))
    out = strategy.run(lambda x: _ctx().all_reduce("SUM", tf.reduce_sum(x)), args=(last,))
    assert local_lists(strategy, out) == [17.0] * 4
