"""Distributed values a TF script touches through `jdist.tf_compat`, against TF 2.21.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) with MirroredStrategy over 2
logical CPUs (and 4 where a test says so; one strategy per TF process), or on TF's default strategy
(`tf.distribute.get_strategy()` outside any scope).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tests.tf_parity_common import local_lists, mirrored  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


@pytest.fixture(scope="module")
def strategy():
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def _ids(strategy, scale=1, shift=0):
    return strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group * scale + shift)


def test_reduce_mean_of_integers_is_float64_and_sum_keeps_int32(strategy):
    # observed, TF 2.21, 2 CPUs: MEAN of int32 ids float64 0.5; of 3*id+1 float64 2.5; SUM int32 1;
    # MEAN along axis 0 of [id, id] float64 0.5, axis=None float64 [0.5, 0.5]; float16 MEAN stays float16
    ids = _ids(strategy)
    mean = strategy.reduce(tf.distribute.ReduceOp.MEAN, ids, axis=None)
    assert mean.dtype == tf.float64 and mean.numpy() == 0.5
    mean = strategy.reduce("MEAN", _ids(strategy, 3, 1), axis=None)
    assert mean.dtype == tf.float64 and mean.numpy() == 2.5
    total = strategy.reduce("SUM", ids, axis=None)
    assert total.dtype == tf.int32 and int(total) == 1
    vec = strategy.run(lambda: tf.fill([2], tf.distribute.get_replica_context().replica_id_in_sync_group))
    along = strategy.reduce("MEAN", vec, axis=0)
    assert along.dtype == tf.float64 and along.numpy() == 0.5
    across = strategy.reduce("MEAN", vec, axis=None)
    assert across.dtype == tf.float64 and across.numpy().tolist() == [0.5, 0.5]
    half = strategy.run(lambda: tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float16))
    assert strategy.reduce("MEAN", half, axis=None).dtype == tf.float16
    # observed, TF 2.21, 2 CPUs: a plain int32 [1, 2] comes back as it is with axis=None, float64 1.5 with axis=0;
    # a distributed int32 batch [0..3] and run's per-example copy of it: float64 1.5 along axis 0
    plain = strategy.reduce("MEAN", tf.constant([1, 2]), axis=None)
    assert plain.dtype == tf.int32 and np.asarray(plain).tolist() == [1, 2]
    assert strategy.reduce("MEAN", tf.constant([1, 2]), axis=0).dtype == tf.float64
    ds = tf.data.Dataset.range(4).map(lambda x: tf.cast(x, tf.int32)).batch(4)
    batch = next(iter(strategy.experimental_distribute_dataset(ds)))
    for value in (batch, strategy.run(lambda x: x, args=(batch,))):
        mean = strategy.reduce("MEAN", value, axis=0)
        assert mean.dtype == tf.float64 and mean.numpy() == 1.5


def test_len_of_a_distributed_dataset_is_a_type_error_and_cardinality_counts(strategy):
    # observed, TF 2.21: "object of type 'DistributedDataset' has no len()"; cardinality np.int64(3)
    dist_ds = strategy.experimental_distribute_dataset(tf.data.Dataset.range(10).batch(4))
    with pytest.raises(TypeError, match="has no len()"):
        len(dist_ds)
    assert dist_ds.cardinality == np.int64(3)
    from_fn = strategy.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(10).batch(2))
    with pytest.raises(TypeError, match="has no len()"):
        len(from_fn)
    assert len(list(dist_ds)) == 3  # still iterates its 3 batches


def test_local_results_of_a_mirrored_variable_are_per_device_variables(strategy):
    # observed, TF 2.21, 2 CPUs: ResourceVariables on CPU:0 and CPU:1 named 'Variable:0', 'Variable/replica_1:0',
    # the same objects as v.values; read_value/numpy/operators read the copy
    with strategy.scope():
        v = tf.Variable([1.0, 2.0])
    local = strategy.experimental_local_results(v)
    assert [type(x).__name__ for x in local] == ["ResourceVariable", "ResourceVariable"]
    assert [x.device for x in local] == [CPU.format(0), CPU.format(1)]
    assert [x.name for x in local] == [v.name, v.name.removesuffix(":0") + "/replica_1:0"]
    assert all(a is b for a, b in zip(local, v.values))
    assert [x.numpy().tolist() for x in local] == [[1.0, 2.0]] * 2
    assert local[1].read_value().numpy().tolist() == [1.0, 2.0]
    assert (local[0] + 1).numpy().tolist() == [2.0, 3.0]
    assert local[0].dtype == tf.float32 and local[0].shape == (2,) and local[0].trainable


def test_assigning_one_copy_changes_that_replica_alone(strategy):
    # observed, TF 2.21, 2 CPUs: after local[1].assign([5, 6]) the copies read [1, 2] and [5, 6], v reads [1, 2],
    # a run reads each replica's own copy, v.assign makes them one value; local[0].assign sets what v reads
    with strategy.scope():
        v = tf.Variable([1.0, 2.0])
    local = strategy.experimental_local_results(v)
    assert local[1].assign([5.0, 6.0]).numpy().tolist() == [5.0, 6.0]
    assert [x.numpy().tolist() for x in local] == [[1.0, 2.0], [5.0, 6.0]]
    assert v.numpy().tolist() == [1.0, 2.0]
    read = strategy.run(lambda: v.read_value() * 1.0)
    assert [x.numpy().tolist() for x in strategy.experimental_local_results(read)] == [[1.0, 2.0], [5.0, 6.0]]
    assert "'Variable/replica_1:0' shape=(2,) dtype=float32, numpy=array([5., 6.]" in repr(v)
    v.assign([7.0, 8.0])
    assert [x.numpy().tolist() for x in local] == [[7.0, 8.0]] * 2
    local[0].assign_add([1.0, 1.0])
    assert v.numpy().tolist() == [8.0, 9.0] and local[1].numpy().tolist() == [7.0, 8.0]
    with pytest.raises(ValueError, match=r"Shape mismatch.The variable shape \(2,\), and the assigned value shape"):
        local[0].assign([1.0])


def test_default_strategy_hands_tf_data_datasets_back():
    # observed, TF 2.21: the default strategy's experimental_distribute_dataset(ds) is ds; from_function returns
    # dataset_fn's dataset (InputContext 1 pipeline, id 0, 1 replica, per-replica batch of 8 is 8)
    default = tf.distribute.get_strategy()
    ds = tf.data.Dataset.range(6).batch(4)
    assert default.experimental_distribute_dataset(ds) is ds
    seen = []

    def dataset_fn(ctx):
        seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync,
                     ctx.get_per_replica_batch_size(8)))
        return ds

    assert default.distribute_datasets_from_function(dataset_fn) is ds
    assert seen == [(1, 0, 1, 8)]
    assert [x.numpy().tolist() for x in ds] == [[0, 1, 2, 3], [4, 5]]


def test_num_replicas_in_sync_from_run_is_one_value(strategy):
    # observed, TF 2.21, 2 CPUs: eager run gives the Python int 2; under tf.function an int32 tensor 2 (not a
    # PerReplica); a constant tensor is a PerReplica of two 3s
    assert strategy.run(lambda: tf.distribute.get_replica_context().num_replicas_in_sync) == 2
    traced = tf.function(lambda: strategy.run(lambda: tf.distribute.get_replica_context().num_replicas_in_sync))()
    assert not isinstance(traced, tf.distribute.DistributedValues) and int(traced) == 2
    const = strategy.run(lambda: tf.constant(3))
    assert [int(x) for x in const.values] == [3, 3]


def test_migrate_mirrored_strategy_guide_keras_cells():
    # TF's guide site/en/guide/migrate/mirrored_strategy.ipynb, TF2 cells (Dense initialized to ones so the run is
    # deterministic), MirroredStrategy() over 2 logical CPUs. observed, TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1):
    # fit loss 14.833241, evaluate loss 65.53267, kernel [0.85806549, 0.85943303]. (With Keras 3.15 TF 2.21 fails
    # this cell: AddN "Input 0: [1,2] != input 1: [0,2]" for the replica left without an example of batch(1).)
    # The TF1 estimator cell: tf.compat.v1 has no estimator in TF 2.21 (AttributeError, observed); jdist names why.
    with pytest.raises(AttributeError, match="port the code to TF2 style"):
        tf.compat.v1.distribute.MirroredStrategy()  # noqa: B018
    features = [[1., 1.5], [2., 2.5], [3., 3.5]]
    labels = [[0.3], [0.5], [0.7]]
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
    eval_dataset = tf.data.Dataset.from_tensor_slices(([[4., 4.5], [5., 5.5], [6., 6.5]], [[0.8], [0.9], [1.]]))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1, kernel_initializer="ones")])
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
    model.compile(optimizer=optimizer, loss="mse")
    history = model.fit(dataset, verbose=0)
    np.testing.assert_allclose(history.history["loss"], [14.833241], rtol=1e-5)
    np.testing.assert_allclose(model.evaluate(eval_dataset.batch(1), return_dict=True, verbose=0)["loss"],
                               65.53267, rtol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0].ravel(), [0.85806549, 0.85943303], rtol=1e-5)


def test_collectives_on_a_short_batch_with_equal_real_rows_use_the_real_rows(strategy):
    # observed, TF 2.21, 2 CPUs: range(10) as (x: 10x2, y) in batches of 4: the last batch gives each replica one
    # real row; in run, all_gather(x) is [[16, 17], [18, 19]] on both replicas, all_reduce(SUM, reduce_sum(x)) 70,
    # all_reduce(SUM, tf.shape(x)[0]) 2, y * 2 [16] and [18]; strategy.gather(y * 2) [16, 18]
    ds = tf.data.Dataset.from_tensor_slices((tf.reshape(tf.range(20.0), (10, 2)), tf.range(10))).batch(4)
    *_, last = iter(strategy.experimental_distribute_dataset(ds))

    def step(x, y):
        ctx = tf.distribute.get_replica_context()
        return (ctx.all_gather(x, axis=0), ctx.all_reduce("SUM", tf.reduce_sum(x)),
                ctx.all_reduce("SUM", tf.shape(x)[0]), y * 2)

    def local(value):
        return [np.asarray(t).tolist() for t in strategy.experimental_local_results(value)]

    for run in (lambda: strategy.run(step, args=last), tf.function(lambda: strategy.run(step, args=last))):
        gathered, total, rows, doubled = run()
        assert local(gathered) == [[[16.0, 17.0], [18.0, 19.0]]] * 2
        assert local(total) == [70.0, 70.0] and local(rows) == [2, 2]
        assert local(doubled) == [[16], [18]]
        assert np.asarray(strategy.gather(doubled, axis=0)).tolist() == [16, 18]


def test_default_strategy_reduce_mean_of_integers_is_float64():
    # observed, TF 2.21, tf.distribute.get_strategy() outside any scope: reduce(MEAN, tf.constant([1, 2]), axis=0)
    # float64 1.5; axis=None hands the int32 tensor back; MEAN along axis 1 of [[1, 2], [3, 4]] float64
    # [1.5, 3.5]; SUM along axis 0 int32 3; MEAN of float32 [1., 2.] float32 1.5
    default = tf.distribute.get_strategy()
    assert tf.distribute.get_strategy() is default and not tf.distribute.has_strategy()
    mean = default.reduce(tf.distribute.ReduceOp.MEAN, tf.constant([1, 2]), axis=0)
    assert mean.dtype == tf.float64 and mean.numpy() == 1.5
    plain = default.reduce("MEAN", tf.constant([1, 2]), axis=None)
    assert plain.dtype == tf.int32 and np.asarray(plain).tolist() == [1, 2]
    rows = default.reduce("MEAN", tf.constant([[1, 2], [3, 4]]), axis=1)
    assert rows.dtype == tf.float64 and rows.numpy().tolist() == [1.5, 3.5]
    total = default.reduce("SUM", tf.constant([1, 2]), axis=0)
    assert total.dtype == tf.int32 and int(total) == 3
    assert default.reduce("MEAN", tf.constant([1.0, 2.0]), axis=0).dtype == tf.float32
    with default.scope():  # its own scope: still the default strategy
        assert tf.distribute.get_strategy() is default and not tf.distribute.has_strategy()


def test_indexing_a_variable_gives_a_tensor_that_remembers_its_variable():
    # observed, TF 2.21, eager, x = tf.Variable([1., 2., 3.]): x[None], x[0], x[1:], x[...], x[:, tf.newaxis],
    # x[tf.constant(1)], x[-1] are each an EagerTensor on /job:localhost/replica:0/task:0/device:CPU:0, shapes
    # (1, 3), (), (2,), (3,), (3, 1), (), (); hasattr(x[0], "assign") True, of x[0] + 1 and x[None][0] False; x[1:]
    # read before x.assign([7., 8., 9.]) stays [2., 3.]; x[1].assign(5.) gives [7., 5., 9.]; a float64 variable's
    # x[None] and x[0] are float64, an int32 one's int32
    x = tf.Variable([1.0, 2.0, 3.0])
    forms = {"None": (lambda: x[None], [[1.0, 2.0, 3.0]]), "int": (lambda: x[0], 1.0),
             "slice": (lambda: x[1:], [2.0, 3.0]), "ellipsis": (lambda: x[...], [1.0, 2.0, 3.0]),
             "newaxis": (lambda: x[:, tf.newaxis], [[1.0], [2.0], [3.0]]),
             "tensor": (lambda: x[tf.constant(1)], 2.0), "negative": (lambda: x[-1], 3.0)}
    for name, (read, expected) in forms.items():
        item = read()
        assert item.device == CPU.format(0), name
        assert item.dtype == tf.float32 and np.asarray(item.numpy()).tolist() == expected, name
        assert item.shape == np.shape(expected), name
    assert hasattr(x[0], "assign") and not hasattr(x[0] + 1, "assign") and not hasattr(x[None][0], "assign")
    before = x[1:]
    x.assign([7.0, 8.0, 9.0])
    assert before.numpy().tolist() == [2.0, 3.0]
    x[1].assign(5.0)
    assert x.numpy().tolist() == [7.0, 5.0, 9.0]
    assert "shape=(1, 3), dtype=float32" in repr(x[None])
    wide = tf.Variable([1.0, 2.0], dtype=tf.float64)
    assert wide[None].dtype == tf.float64 and wide[0].dtype == tf.float64
    assert tf.Variable([1, 2])[None].dtype == tf.int32


def test_keras_objects_and_variables_on_replicas_holding_different_real_rows(strategy):
    # observed, TF 2.21 (Keras 3.15), 2 CPUs: range(3).batch(4) gives [0., 1.] and [2.]; v = Variable(2.) made in
    # the scope, all_reduce(SUM, v * reduce_sum(x)) 6. on both replicas (v stays 2.); a step updating a Sum and a
    # Mean metric with x and returning (all_reduce(SUM, reduce_sum(model(x))) for a Dense(1) of ones, tf.shape(x)[0])
    # gives 3., 3. and [2, 1], the metrics 3. and 1.; w = Variable(0., aggregation=SUM), w.assign_add(reduce_sum(x))
    # read back 3. on both replicas, w 3.; a tape step (SGD(0.1), loss compute_average_loss(model(x) * x,
    # global_batch_size=4)) losses [0.25, 1.], kernel 0.875; again [0.21875, 0.875], kernel 0.75
    ds = tf.data.Dataset.range(3).map(lambda x: tf.cast(x, tf.float32)).batch(4)
    last = list(strategy.experimental_distribute_dataset(ds))[-1]
    ctx = tf.distribute.get_replica_context

    def local(value):
        return [np.asarray(t).tolist() for t in strategy.experimental_local_results(value)]

    assert local(last) == [[0.0, 1.0], [2.0]]
    with strategy.scope():
        v = tf.Variable(2.0)
        w = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)
        total, mean = keras.metrics.Sum(), keras.metrics.Mean()
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
        optimizer = keras.optimizers.SGD(0.1)
    assert local(strategy.run(lambda x: ctx().all_reduce("SUM", v * tf.reduce_sum(x)), args=(last,))) == [6.0] * 2
    assert float(v.numpy()) == 2.0

    def metric_step(x):
        total.update_state(x)
        mean.update_state(x)
        return ctx().all_reduce("SUM", tf.reduce_sum(model(tf.reshape(x, (-1, 1))))), tf.shape(x)[0]

    summed, rows = strategy.run(metric_step, args=(last,))
    assert local(summed) == [3.0] * 2 and local(rows) == [2, 1]
    assert float(total.result()) == 3.0 and float(mean.result()) == 1.0
    assert "update_state" not in vars(total) and "update_state" not in vars(mean)  # no patch left behind

    def assign_step(x):
        w.assign_add(tf.reduce_sum(x))
        return w.read_value()

    assert local(strategy.run(assign_step, args=(last,))) == [3.0] * 2 and float(w.numpy()) == 3.0

    def train_step(x):
        column = tf.reshape(x, (-1, 1))
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.reshape(model(column) * column, (-1,)), global_batch_size=4)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for losses, kernel in (([0.25, 1.0], 0.875), ([0.21875, 0.875], 0.75)):
        np.testing.assert_allclose(local(strategy.run(train_step, args=(last,))), losses, rtol=1e-6)
        np.testing.assert_allclose(model.trainable_variables[0].numpy().ravel(), [kernel], rtol=1e-6)


def test_keras_objects_on_replicas_without_rows():
    # observed, TF 2.21 (Keras 3.15), 4 CPUs: range(10).batch(8)'s last batch gives [8.], [9.], [], []; a step
    # updating a Sum and a Mean metric with x, returning all_reduce(SUM, reduce_sum(model(x))) (a Dense(1) of ones)
    # and tf.shape(x)[0]: 17. on every replica and [1, 1, 0, 0]; the metrics hold 17. and 8.5
    four = mirrored(4)
    ds = tf.data.Dataset.range(10).map(lambda x: tf.cast(x, tf.float32)).batch(8)
    last = list(four.experimental_distribute_dataset(ds))[-1]
    with four.scope():
        total, mean = keras.metrics.Sum(), keras.metrics.Mean()
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])

    def step(x):
        total.update_state(x)
        mean.update_state(x)
        summed = tf.distribute.get_replica_context().all_reduce("SUM", tf.reduce_sum(model(tf.reshape(x, (-1, 1)))))
        return summed, tf.shape(x)[0]

    summed, rows = four.run(step, args=(last,))
    assert local_lists(four, summed) == [17.0] * 4 and local_lists(four, rows) == [1, 1, 0, 0]
    assert float(total.result()) == 17.0 and float(mean.result()) == 8.5
