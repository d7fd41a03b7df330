"""Results of `strategy.run` read as TF scripts read them, `tf.function`'s tracing, and `tf.Variable`, through
jdist.tf_compat (TF observations: TF 2.21, tensorflow-cpu 2.21.0, 8 logical CPUs)."""
import logging
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _replica_ids(strategy):
    ctx = tf.distribute.get_replica_context()
    return tf.ones((2,)) * tf.cast(ctx.replica_id_in_sync_group, tf.float32)


def test_run_results_print_and_read_inside_the_scope(capsys):
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        result = strategy.run(lambda: _replica_ids(strategy))
        print(result)
        local = strategy.experimental_local_results(result)
        values = result.values
        shown = repr(result)
    # TF 2.21 prints "PerReplica:{\n  0: tf.Tensor([0. 0.], shape=(2,), dtype=float32),\n  1: ..." (str of each).
    expected = ("PerReplica:{\n" + ",\n".join(f"  {i}: tf.Tensor([{i}. {i}.], shape=(2,), dtype=float32)"
                                               for i in range(8)) + "\n}\n")
    assert capsys.readouterr().out == expected
    assert shown.startswith("PerReplica:{\n  0: <tf.Tensor: shape=(2,), dtype=float32, numpy=array([0., 0.], "
                            "dtype=float32)>,\n  1: <tf.Tensor: shape=(2,)")
    assert len(local) == len(values) == 8
    for i in range(8):
        np.testing.assert_array_equal(np.asarray(local[i]), [i, i])
        np.testing.assert_array_equal(np.asarray(values[i]), [i, i])
    with strategy.scope():
        total = strategy.reduce("SUM", result, axis=None)
        assert np.asarray(total).tolist() == [28.0, 28.0]


def test_printed_distributed_batch_shows_each_replicas_examples():
    strategy = tf.distribute.MirroredStrategy()
    dataset = tf.data.Dataset.from_tensor_slices((np.arange(16.0).reshape(16, 1), np.arange(16))).batch(16)
    with strategy.scope():
        batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
        shown = repr(batch)
    # TF 2.21 shows the element with one PerReplica per leaf: (PerReplica:{0: <tf.Tensor ... [[0.], [1.]]>, ...}, ...),
    # each part as a tf.Tensor (TF's is float64: JAX holds the float32 it places, without jax_enable_x64).
    assert shown.startswith("(PerReplica:{\n  0: <tf.Tensor: shape=(2, 1), dtype=float32, numpy=\narray([[0.],\n"
                            "       [1.]], dtype=float32)>,")
    assert "7: <tf.Tensor: shape=(2,), dtype=int32, numpy=array([14, 15], dtype=int32)>" in shown


def _model_and_optimizer(strategy, weights):
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
        model.set_weights(weights)
        optimizer = tf.keras.optimizers.SGD(0.05)
        optimizer.build(model.trainable_variables)
    return model, optimizer


def test_tf_function_defining_step_fn_inside_compiles_once_and_matches_the_hoisted_loop(caplog):
    strategy = tf.distribute.MirroredStrategy()
    weights = [np.array([[0.5]], np.float32), np.array([0.1], np.float32)]
    batches = [np.linspace(-1, 1, 16, dtype=np.float32).reshape(16, 1) * (i + 1) for i in range(5)]

    model, optimizer = _model_and_optimizer(strategy, weights)

    @tf.function
    def train_step(x):
        def step_fn(x):  # as TF's multi-worker custom-loop tutorial writes it: a new function every call
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(tf.square(model(x) - 1.0)[:, 0], global_batch_size=16)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.reduce("SUM", strategy.run(step_fn, args=(x,)), axis=None)

    inside = []
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        for i, x in enumerate(batches):
            inside.append(float(train_step(x)))
            if i == 0:
                after_first = len(caplog.records)
    compiled = [r for r in caplog.records[after_first:] if "Compiling" in r.getMessage()]
    assert after_first > 0 and not compiled, "later calls compiled again"
    assert train_step.experimental_get_tracing_count() == 1  # TF 2.21: 1 over these 5 calls

    hoisted_model, hoisted_optimizer = _model_and_optimizer(strategy, weights)

    def step_fn(x):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(tf.square(hoisted_model(x) - 1.0)[:, 0], global_batch_size=16)
        grads = tape.gradient(loss, hoisted_model.trainable_variables)
        hoisted_optimizer.apply_gradients(zip(grads, hoisted_model.trainable_variables))
        return loss

    hoisted = [float(strategy.reduce("SUM", strategy.run(step_fn, args=(x,)), axis=None)) for x in batches]
    assert inside == hoisted
    for a, b in zip(model.get_weights(), hoisted_model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_tf_function_tracing_count_follows_tfs_signatures():
    @tf.function
    def f(x, k):
        return x * k

    for x, k in [(tf.constant(1.0), 2), (tf.constant(2.0), 2), (tf.constant(2.0), 3), (tf.constant([2.0]), 3),
                 (tf.constant(2), 3)]:
        f(x, k)
    assert f.experimental_get_tracing_count() == 4  # observed in TF 2.21 for these five calls


def test_tf_function_recompiles_when_the_inner_function_captures_a_new_array():
    strategy = tf.distribute.MirroredStrategy()

    @tf.function
    def scaled(x, scale):
        factor = np.float32(scale) * np.ones((), np.float32)  # a new array each call, captured below
        return strategy.run(lambda v: v * factor, args=(x,))

    with strategy.scope():
        first = strategy.experimental_local_results(scaled(np.float32(1.0), 2.0))
        second = strategy.experimental_local_results(scaled(np.float32(1.0), 2.0))
    assert float(first[0]) == float(second[0]) == 2.0


def test_variable_is_mirrored_in_scope_and_updated_by_run():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        v = tf.Variable(1.0)
        assert v.value().sharding.is_fully_replicated and len(v.value().sharding.device_set) == 8
        # TF 2.21 (observed, 2 logical CPUs, in the scope and outside alike): MirroredVariable:{ a line per replica }
        assert repr(v).startswith("MirroredVariable:{\n  0: <tf.Variable 'Variable:0' shape=() dtype=float32, "
                                  "numpy=1.0>,\n  1: <tf.Variable 'Variable/replica_1:0' shape=() dtype=float32, "
                                  "numpy=1.0>,\n")

        def step():
            v.assign_add(2.0)
            return v.read_value() * 10

        out = strategy.run(step)
        # TF 2.21 returns a read of a mirrored variable as a PerReplica of the 8 equal values (observed)
        assert [float(part) for part in out.values] == [30.0] * 8 and float(v.numpy()) == 3.0
        v.assign_sub(1.0)
        assert float(v + 1) == 3.0 and float(v.read_value()) == 2.0
    assert isinstance(v, tf.Variable) and v.dtype == tf.float32 and v.trainable and v.shape == ()
    w = tf.Variable([1, 2], name="w")
    assert repr(w) == "<tf.Variable 'w:0' shape=(2,) dtype=int32, numpy=array([1, 2], dtype=int32)>"
    with pytest.raises(ValueError, match="initial_value"):
        tf.Variable()


def test_variable_is_differentiated_and_updated_like_a_keras_weight():
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        w = tf.Variable(2.0)
        optimizer = tf.keras.optimizers.SGD(0.1)
        optimizer.build([w])
    x = np.linspace(0.5, 2.0, 16, dtype=np.float32)

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(w * x, global_batch_size=16)
        optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
        return loss

    loss = strategy.reduce("SUM", strategy.run(step, args=(strategy.distribute_batch(x),)), axis=None)
    # One device: loss = mean(w * x), d loss / d w = mean(x), one SGD step.
    np.testing.assert_allclose(float(loss), 2.0 * x.mean(), rtol=1e-6)
    np.testing.assert_allclose(float(w.numpy()), 2.0 - 0.1 * x.mean(), rtol=1e-6)


def test_replica_functions_are_reused_only_over_the_same_captures():
    from jdist.strategy.traced_functions import equivalent

    class Model:
        def step(self, x):
            return x

    shared, other = Model(), Model()

    def make(model, scale):
        def helper(x):
            return x * scale

        def step_fn(x):
            return helper(model.step(x))
        return step_fn

    assert equivalent(make(shared, 2.0), make(shared, 2.0))  # new objects, same code over the same captures
    assert not equivalent(make(shared, 2.0), make(other, 2.0))  # another model
    assert not equivalent(make(shared, 2.0), make(shared, 3.0))  # another Python value
    assert not equivalent(make(shared, np.ones(2)), make(shared, np.ones(2)))  # arrays: only the same one
    assert equivalent(shared.step, shared.step) and not equivalent(shared.step, other.step)


def test_multi_worker_tutorial_loop_compiles_in_its_first_epoch_only(tmp_path, caplog):
    """TF's multi_worker_with_ctl tutorial's shape: `train_step(iterator)` with `step_fn` inside, a new iterator
    per epoch, int64 `tf.Variable` counters saved by `tf.train.Checkpoint` through a `CheckpointManager`."""
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
        optimizer = tf.keras.optimizers.RMSprop(0.01)
        optimizer.build(model.trainable_variables)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    epoch = tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name="epoch")  # as the tutorial
    step_in_epoch = tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name="step_in_epoch")
    rows = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((rows, np.arange(32) % 2)).batch(16))

    @tf.function
    def train_step(iterator):
        def step_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=(next(iterator),)), axis=None)

    checkpoint = tf.train.Checkpoint(model=model, epoch=epoch, step_in_epoch=step_in_epoch)
    manager = tf.train.CheckpointManager(checkpoint, directory=str(tmp_path), max_to_keep=1)
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        while epoch.numpy() < 3:
            iterator = iter(dataset)
            losses = []
            while step_in_epoch.numpy() < 2:
                losses.append(float(train_step(iterator)))
                step_in_epoch.assign_add(1)
            assert all(np.isfinite(losses))
            manager.save()
            epoch.assign_add(1)
            step_in_epoch.assign(0)
            if int(epoch.numpy()) == 1:
                after_first_epoch = len(caplog.records)
    late = [r.getMessage()[:300] for r in caplog.records[after_first_epoch:] if "Compiling" in r.getMessage()]
    assert not late, late
    assert train_step.experimental_get_tracing_count() == 1  # TF: one trace (iterators trace by their spec)
    assert manager.checkpoints == [str(tmp_path / "ckpt-3")]
    restored = tf.Variable(0, dtype=tf.int64, name="epoch")  # TF restores only into the saved dtype
    restored_step = tf.Variable(0, dtype=tf.int64, name="step_in_epoch")
    tf.train.Checkpoint(model=model, epoch=restored, step_in_epoch=restored_step).restore(
        tf.train.latest_checkpoint(str(tmp_path)))
    assert (int(restored.numpy()), int(restored_step.numpy())) == (2, 2)  # saved before the counters moved on


def test_tf_function_traces_variables_by_their_spec():
    # TF 2.21 (guide/random_numbers.ipynb): foo(tf.Variable(1)) then foo(tf.Variable(2)) is one trace; two
    # generators passed in are two; a variable of another dtype is another trace.
    @tf.function
    def foo(v):
        return v.read_value()

    foo(tf.Variable(1))
    foo(tf.Variable(2))
    assert foo.experimental_get_tracing_count() == 1
    foo(tf.Variable(2.0))
    assert foo.experimental_get_tracing_count() == 2

    @tf.function
    def bar(g):
        return g.normal([])

    bar(tf.random.Generator.from_seed(1))
    bar(tf.random.Generator.from_seed(2))
    assert bar.experimental_get_tracing_count() == 2
