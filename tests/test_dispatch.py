"""Bounded dispatch: every jdist program over several CPU devices counts toward one process-wide
bound, so loops that never read a result (TF's custom-training tutorial) cannot deadlock XLA:CPU."""
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.strategy import dispatch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bound():
    """Runs a test with a chosen bound and nothing pending, then restores the default."""
    dispatch.wait(0)
    before = dispatch.max_in_flight()
    yield dispatch.set_max_in_flight
    dispatch.set_max_in_flight(before)
    dispatch.wait(0)


def _summed(x):
    return jdist.get_replica_context().all_reduce("sum", x * 2.0)


def test_every_dispatch_point_registers_once(bound):
    bound(1000)
    strategy = jdist.MirroredStrategy()
    batch = strategy.distribute_batch(np.arange(16, dtype=np.float32).reshape(16, 1))
    calls = []

    def count(label):
        calls.append((label, dispatch.pending()))

    count("start")
    per_replica = strategy.run(lambda x: x * 2.0, args=(batch,))
    count("run")
    strategy.reduce("sum", per_replica, axis=None)
    count("reduce")
    strategy.gather(per_replica, axis=0)
    count("gather")
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=None, params={"w": jnp.ones((1,))}, tx=optax.sgd(0.1))
    step = jdist.make_train_step(lambda p, b: jnp.mean((b * p["w"]) ** 2), strategy)
    state, _ = step(state, batch)
    count("make_train_step")
    mean = jdist.metrics.Mean()
    mean.update_state(batch)
    count("update_state")
    mean.result()
    count("result")
    assert [b - a for (_, a), (_, b) in zip(calls, calls[1:])] == [1] * 6, calls

    # A program on one device has no rendezvous to starve: it is not held back.
    one = jdist.OneDeviceStrategy(jax.devices()[0])
    one.run(lambda x: x + 1.0, args=(jnp.ones(3),))
    assert dispatch.pending() == calls[-1][1]


def test_the_oldest_program_is_finished_before_more_are_dispatched(bound):
    bound(2)
    strategy = jdist.MirroredStrategy()
    x = strategy.distribute_batch(np.ones((8, 4), np.float32))
    outputs = []
    for _ in range(8):
        x = strategy.run(_summed, args=(x,))
        outputs.append(x)
        assert dispatch.pending() <= 2
        if len(outputs) > 2:  # the bound waited for everything but the last two
            assert all(out.is_ready() for out in outputs[:-2])
    np.testing.assert_allclose(np.asarray(x), np.full((1, 4), 16.0 ** 8))


def test_bound_is_validated():
    with pytest.raises(ValueError, match="max_in_flight must be an int >= 1"):
        dispatch.set_max_in_flight(0)


def _tutorial_loop(strategy, per_replica, train, test, epochs=2):
    """TF's custom-training loop as scripts/port_tf_tutorial.py writes it (Keras model, GradientTape,
    apply_gradients, Keras metrics updated inside run, nothing read inside an epoch), on a small MLP."""
    import keras

    global_batch = per_replica * strategy.num_replicas_in_sync
    dataset = jdist.data.Dataset.from_tensor_slices
    train_dist = strategy.experimental_distribute_dataset(dataset(train).batch(global_batch))
    test_dist = strategy.experimental_distribute_dataset(dataset(test).batch(global_batch))
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(train[0].shape[1:]), keras.layers.Flatten(),
            keras.layers.Dense(32, activation="relu", kernel_regularizer=keras.regularizers.L2(1e-3)),
            keras.layers.Dense(10)])
        rng = np.random.default_rng(0)
        model.set_weights([rng.normal(0, 0.1, w.shape).astype(np.float32) for w in model.get_weights()])
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        optimizer = keras.optimizers.SGD(0.5)
        optimizer.build(model.trainable_variables)
        train_accuracy = keras.metrics.SparseCategoricalAccuracy()
        test_accuracy = keras.metrics.SparseCategoricalAccuracy()

    def train_step(inputs):
        images, labels = inputs
        with jdist.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = jdist.compute_average_loss(loss_object(labels, predictions))
            loss += jdist.scale_regularization_loss(sum(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    def test_step(inputs):
        images, labels = inputs
        test_accuracy.update_state(labels, model(images, training=False))

    @jdist.function
    def distributed_train_step(inputs):
        return strategy.reduce("sum", strategy.run(train_step, args=(inputs,)), axis=None)

    history = {"loss": [], "accuracy": [], "test_accuracy": []}
    for _ in range(epochs):
        total_loss, num_batches = 0.0, 0
        for x in train_dist:
            total_loss += distributed_train_step(x)
            num_batches += 1
        for x in test_dist:
            strategy.run(test_step, args=(x,))
        history["loss"].append(float(total_loss / num_batches))
        history["accuracy"].append(float(train_accuracy.result()))
        history["test_accuracy"].append(float(test_accuracy.result()))
        train_accuracy.reset_state()
        test_accuracy.reset_state()
    history["weights"] = model.get_weights()
    history["model"] = model
    return history


def test_tf_tutorial_loop_runs_and_equals_one_device():
    """The tutorial's loop on 8 replicas: same losses, accuracies and weights as one device, metrics
    over the real examples only (100 test examples, not the 128 padded rows). The 200 training examples make
    batches the replicas share evenly: `compute_average_loss` without `global_batch_size` weighs a short batch
    that they share unevenly as TF does, by its split (tests/test_input.py)."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    from jdist import datasets

    train = tuple(a[:200] for a in datasets.load_digits("train", image_size=8))
    test = tuple(a[:100] for a in datasets.load_digits("test", image_size=8))
    mirrored = _tutorial_loop(jdist.MirroredStrategy(), 8, train, test)
    single = _tutorial_loop(jdist.OneDeviceStrategy(jax.devices()[0]), 64, train, test)
    for key in ("loss", "accuracy", "test_accuracy"):
        np.testing.assert_allclose(mirrored[key], single[key], rtol=1e-5, atol=1e-6, err_msg=key)
    for a, b in zip(mirrored["weights"], single["weights"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert mirrored["loss"][1] < mirrored["loss"][0]

    # The last test pass, recomputed on the host from the final weights over the 100 real examples.
    logits = np.asarray(single["model"].predict(test[0], verbose=0))
    assert mirrored["test_accuracy"][-1] == pytest.approx(np.mean(np.argmax(logits, -1) == test[1]), abs=1e-6)


UNREAD_LOOP = """
import numpy as np
import jdist

strategy = jdist.MirroredStrategy()
x = strategy.distribute_batch(np.ones((8, 16), np.float32))
step = lambda x: x * 0.5 + jdist.get_replica_context().all_reduce("sum", x.sum()) * 1e-6
total = 0.0
for _ in range(300):   # nothing read inside the loop: 600 programs with collectives dispatched
    x = strategy.run(step, args=(x,))
    total += strategy.reduce("sum", x, axis=None)
print("total", float(total.sum()))
"""


def test_a_loop_that_never_reads_does_not_abort():
    """Unbounded, this loop queues hundreds of all-reduces and XLA:CPU aborts after 40 s (run in a
    child process, so an abort cannot take the test session with it)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8")
    result = subprocess.run([sys.executable, "-c", UNREAD_LOOP], capture_output=True, text=True, timeout=240,
                            env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "total" in result.stdout


def test_a_failed_program_raises_where_its_outputs_are_read_not_in_the_next_wait(clears_failed_effects):
    strategy = jdist.MirroredStrategy()

    def fail_on_host(x):
        raise ValueError("the host check failed")

    def step(x):
        jax.debug.callback(fail_on_host, x)
        return x + 1.0

    values = strategy.experimental_distribute_values_from_function(lambda ctx: np.ones(2, np.float32))
    failed = strategy.run(step, args=(values,))
    with pytest.raises(Exception, match="the host check failed"):
        jax.block_until_ready(strategy.experimental_local_results(failed))
    dispatch.wait()  # the failed program is finished: nothing more to raise here
    assert dispatch.pending() == 0
