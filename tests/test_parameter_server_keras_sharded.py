"""A ParameterServerStrategy's `variable_partitioner` splits Keras layer weights (and metric variables) into
pieces on the servers, as TF's does with tf_keras; training through the workers matches one process."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
from ps_keras_cluster import BATCHES, keras_cluster  # noqa: E402
from jdist.interop.keras_sharded import ShardedVariable  # noqa: E402

@pytest.fixture(scope="module")
def cluster():
    with keras_cluster(variable_partitioner=jdist.partitioners.FixedShardsPartitioner(3)) as running:
        yield running


def _objects():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, name="d1"),
                              keras.layers.Dense(1, activation="sigmoid", name="d2")])
    return model, keras.optimizers.RMSprop(0.1), keras.metrics.Accuracy(), keras.metrics.AUC(num_thresholds=10)


def _task(variable) -> int:
    return int(variable.device.split("task:")[1].split("/")[0])


# TF 2.21 with TF_USE_LEGACY_KERAS=1 (tf_keras), ParameterServerStrategy(2 ps,
# variable_partitioner=FixedShardsPartitioner(3)): Dense(5, name="d1") on 4 inputs had
# layer.weights d1/kernel/part_0:0 (2, 5), part_1 (1, 5), part_2 (1, 5), d1/bias/part_0:0 (2,), (2,), (1,), on
# tasks 1, 0, 1, 0, 1, 0 (each piece the next server; a scalar made first took task 0); `layer.kernel` was a
# ShardedVariable of shape (4, 5); AUC(num_thresholds=10)'s four (10,) counts were each (4,), (3,), (3,).
# (TF's own Keras 3 instead keeps one Keras variable per weight wrapping the pieces: len(layer.weights) == 2.)
def test_layer_weights_are_tfs_pieces_on_alternating_servers(cluster):
    strategy, _ = cluster
    with strategy.scope():
        model, _, _, auc = _objects()
    dense = model.layers[0]
    assert [(w.name, tuple(w.shape)) for w in dense.weights] == [
        ("kernel/part_0", (2, 5)), ("kernel/part_1", (1, 5)), ("kernel/part_2", (1, 5)),
        ("bias/part_0", (2,)), ("bias/part_1", (2,)), ("bias/part_2", (1,))]
    assert dense.weights[0].path == f"{model.name}/d1/kernel/part_0"  # TF: sequential/d1/kernel/part_0
    tasks = [_task(w) for w in dense.weights]
    assert all(b == (a + 1) % 2 for a, b in zip(tasks, tasks[1:])), tasks
    assert isinstance(dense.kernel, ShardedVariable) and dense.kernel.shape == (4, 5)
    np.testing.assert_array_equal(np.asarray(dense.kernel),
                                  np.concatenate([np.asarray(w) for w in dense.weights[:3]]))
    assert [tuple(v.shape) for v in auc.variables] == [(4,), (3,), (3,)] * 4
    # d2's bias has one row: one piece, kept whole (TF: min(num_shards, rows)).
    assert [(w.name, tuple(w.shape)) for w in model.layers[1].weights][-1] == ("bias", (1,))
    # Drawn whole, then split: the pieces start from the unpartitioned model's values.
    reference = _objects()[0]
    for layer, ref in zip(model.layers, reference.layers):
        np.testing.assert_array_equal(np.asarray(layer.kernel), np.asarray(ref.kernel))


def _step_fn(model, optimizer, accuracy, auc, strategy):
    def step_fn(iterator):
        def replica_fn(x, y):
            with jdist.GradientTape() as tape:
                pred = model(x, training=True)
                loss = keras.ops.mean(keras.losses.binary_crossentropy(y, pred))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            accuracy.update_state(y, keras.ops.cast(pred > 0.5, "int64"))
            auc.update_state(y, pred)
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    return step_fn


def test_scheduled_steps_on_pieces_train_as_the_whole_model_in_one_process(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        objects = _objects()
    reference = _objects()  # unpartitioned, no strategy
    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES)))
    step = _step_fn(*objects, strategy)
    losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(3)]
    coordinator.join()
    ref_step, ref_batches = _step_fn(*reference, jdist.get_strategy()), iter(BATCHES)
    ref_losses = [float(np.asarray(ref_step(ref_batches))) for _ in range(3)]
    np.testing.assert_allclose([float(v.fetch()) for v in losses], ref_losses, rtol=1e-6)
    for layer, ref in zip(objects[0].layers, reference[0].layers):  # the servers' pieces, read back whole
        np.testing.assert_allclose(np.asarray(layer.kernel), np.asarray(ref.kernel), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(layer.bias), np.asarray(ref.bias), rtol=1e-5, atol=1e-6)
    assert float(objects[2].result()) == float(reference[2].result())
    np.testing.assert_allclose(float(objects[3].result()), float(reference[3].result()), rtol=1e-6)
    # One RMSprop slot per piece, shaped as its piece (TF: `rms` slots of each part).
    slots = [tuple(v.shape) for v in objects[1].variables if "velocity" in v.path]
    assert slots == [tuple(w.shape) for w in objects[0].trainable_variables]


def test_assigning_the_whole_writes_each_piece(cluster):
    strategy, _ = cluster
    with strategy.scope():
        layer = keras.layers.Embedding(7, 3)
        layer.build((None,))
    value = np.arange(21, dtype=np.float32).reshape(7, 3)
    layer.embeddings.assign(value)
    assert [tuple(w.shape) for w in layer.weights] == [(3, 3), (2, 3), (2, 3)]  # TF: 7 rows "div" over 3
    np.testing.assert_array_equal(np.asarray(layer.weights[1]), value[3:5])
    np.testing.assert_array_equal(np.asarray(layer(np.array([6, 0]))), value[[6, 0]])
    with pytest.raises(ValueError, match=r"shape \(3, 3\) to the ShardedVariable .* of shape \(7, 3\)"):
        layer.embeddings.assign(value[:3])


def test_min_size_partitioner_splits_only_what_is_large_enough(cluster):
    del cluster  # the module's Ray session
    strategy = jdist.ParameterServerStrategy(
        jdist.ParameterServerCluster(num_workers=1, num_ps=2),
        variable_partitioner=jdist.partitioners.MinSizePartitioner(min_shard_bytes=256, max_shards=2))
    try:
        with strategy.scope():
            small = keras.layers.Dense(3)  # kernel 4 x 3 float32 = 48 bytes: one shard
            small.build((None, 4))
            large = keras.layers.Embedding(8, 16)  # 512 bytes: 2 shards of >= 256
            large.build((None,))
        assert [tuple(w.shape) for w in small.weights] == [(4, 3), (3,)]
        assert [tuple(w.shape) for w in large.weights] == [(4, 16), (4, 16)]
        assert _task(large.weights[0]) != _task(large.weights[1])
    finally:
        strategy.shutdown()


def test_a_scheduled_tf_function_loads_and_pushes_its_keras_objects(cluster):
    """The tutorial decorates its step with `@tf.function`: the Keras objects are found through the wrapper."""
    import jdist.tf_compat as tf

    strategy, coordinator = cluster
    with strategy.scope():
        objects = _objects()
    reference = _objects()
    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES)))
    step = tf.function(_step_fn(*objects, strategy))
    for _ in range(2):
        coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    ref_step, ref_batches = _step_fn(*reference, jdist.get_strategy()), iter(BATCHES)
    for _ in range(2):
        ref_step(ref_batches)
    assert float(objects[2].result()) == float(reference[2].result()) > 0  # the workers' metric updates arrived
    np.testing.assert_allclose(np.asarray(objects[0].layers[0].kernel), np.asarray(reference[0].layers[0].kernel),
                               rtol=1e-5, atol=1e-6)


def test_a_split_layer_named_beside_its_model_shares_its_pieces_on_the_worker(cluster):
    """The worker's copy of the layer and of the model holding it (Keras pickles each on its own) read and train
    the same pieces, as TF's one ShardedVariable whoever refers to it."""
    strategy, coordinator = cluster

    def objects_():
        keras.utils.set_random_seed(0)
        dense = keras.layers.Dense(5, name="d1")
        return dense, keras.Sequential([keras.Input((4,)), dense, keras.layers.Dense(1, activation="sigmoid")])

    def step_fn_(dense, model, optimizer, strategy):
        def step_fn(iterator):
            def replica_fn(x, y):
                with jdist.GradientTape() as tape:
                    pred = model(x, training=True)
                    loss = keras.ops.mean(keras.losses.binary_crossentropy(y, pred))
                    loss = loss + 0.1 * keras.ops.sum(keras.ops.square(dense.kernel))  # the layer's own reference
                gradients = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(gradients, model.trainable_variables))
                return loss

            x, y = next(iterator)
            return strategy.run(replica_fn, args=(x, y))

        return step_fn

    with strategy.scope():
        dense, model = objects_()
        optimizer = keras.optimizers.SGD(0.1)
    ref_dense, ref_model = objects_()  # unpartitioned, no strategy
    assert len(dense.weights) == 6  # kernel and bias in three pieces each
    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES)))
    step = step_fn_(dense, model, optimizer, strategy)
    losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(3)]
    coordinator.join()
    ref_step, ref_batches = step_fn_(ref_dense, ref_model, keras.optimizers.SGD(0.1), jdist.get_strategy()), iter(BATCHES)
    ref_losses = [float(np.asarray(ref_step(ref_batches))) for _ in range(3)]
    np.testing.assert_allclose([float(v.fetch()) for v in losses], ref_losses, rtol=1e-6)
    for layer, ref in zip(model.layers, ref_model.layers):
        np.testing.assert_allclose(np.asarray(layer.kernel), np.asarray(ref.kernel), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(layer.bias), np.asarray(ref.bias), rtol=1e-6, atol=1e-6)
