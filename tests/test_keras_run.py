"""TF's idioms for Keras objects inside `strategy.run` (jdist.interop.keras_run, GradientTape, function,
data.Dataset, train.Checkpoint): their errors and TF semantics. The tutorial loop itself is checked
against one device in test_dispatch.py and against TensorFlow in test_port_tf_tutorial.py."""
import functools
import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([np.arange(6, dtype=np.float32).reshape(3, 2) / 10, np.zeros(2, np.float32)])
    return model


def test_gradient_tape_outside_run_gives_jaxs_gradient_of_the_same_loss():
    """Eager, outside any strategy: the tape's block is replayed under jax.grad (jdist.interop.eager_tape)."""
    import jax

    model = _model()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with jdist.GradientTape() as tape:
        loss = keras.ops.mean(keras.ops.square(model(x)))
    grads = tape.gradient(loss, model.trainable_variables)

    def by_hand(weights):
        out, _ = model.stateless_call(weights, [], x)
        return keras.ops.mean(keras.ops.square(out))

    expected = jax.grad(by_hand)([v.value for v in model.trainable_variables])
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("make", [lambda: keras.optimizers.SGD(0.1), lambda: keras.optimizers.Adam(0.01)])
def test_unbuilt_optimizer_is_built_for_the_models_weights(make):
    """TF 2.21 runs the guide's custom loop with an unbuilt SGD on 8 replicas (it builds on the first
    apply_gradients); with Adam it fails there. jdist builds either before the replica function runs, and
    the step equals the one with the optimizer built by hand."""
    strategy = jdist.MirroredStrategy()
    x = strategy.distribute_batch(np.arange(24, dtype=np.float32).reshape(8, 3))
    weights = []
    for build_first in (False, True):
        with strategy.scope():
            keras.utils.set_random_seed(0)
            model = _model()
            optimizer = make()
            if build_first:
                optimizer.build(model.trainable_variables)

        def step(x):
            with jdist.GradientTape() as tape:
                loss = jdist.compute_average_loss(model(x)[:, 0])
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        strategy.run(step, args=(x,))
        strategy.run(step, args=(x,))
        assert int(optimizer.iterations.value) == 2
        weights.append(model.get_weights())
    for got, want in zip(*weights):
        np.testing.assert_array_equal(got, want)


def test_unbuilt_optimizer_is_built_for_the_lone_variables_it_steps():
    """As TF's first `apply_gradients` builds it: one SGD step on w, the gradient of the mean of x @ w over the
    global batch (x ones: 1 per element), as one device computes it."""
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        w = keras.Variable(np.ones((3,), np.float32))
        optimizer = keras.optimizers.SGD(0.1)

    def step(x):
        with jdist.GradientTape() as tape:
            loss = jdist.compute_average_loss(x @ w)
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])

    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    strategy.run(step, args=(strategy.distribute_batch(x),))
    np.testing.assert_allclose(np.asarray(w.value), 1.0 - 0.1 * x.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert optimizer.built and int(optimizer.iterations.value) == 1


@pytest.mark.parametrize("name", ["mirrored", "default"])
def test_apply_gradients_sums_replicas_and_unsummed_updates_are_an_error(name):
    """SGD(1) on loss = sum over the replica's rows of x @ w[:, 0], / 8 (compute_average_loss): the
    summed gradient is mean(x) for column 0, as one device over the global batch; skipping TF's
    aggregation leaves replicas with different weights, an error rather than silent divergence."""
    strategy = jdist.MirroredStrategy() if name == "mirrored" else jdist.get_strategy()
    with strategy.scope():
        model = _model()
        optimizer = keras.optimizers.SGD(1.0)
        optimizer.build(model.trainable_variables)
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    before = model.get_weights()[0]

    def step(x, skip=False):
        with jdist.GradientTape() as tape:
            loss = jdist.compute_average_loss(model(x)[:, 0])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables), skip_gradients_aggregation=skip)
        return loss

    strategy.run(step, args=(strategy.distribute_batch(x),))
    expected = before.copy()
    expected[:, 0] -= x.mean(axis=0)
    np.testing.assert_allclose(model.get_weights()[0], expected, rtol=1e-6)
    assert int(optimizer.iterations.value) == 1
    if name == "default":  # one replica: nothing to diverge
        return
    with pytest.raises(ValueError, match="different values on different replicas"):
        strategy.run(functools.partial(step, skip=True), args=(strategy.distribute_batch(x),))


def test_replica_dependent_updates_of_an_unaggregated_statistic_keep_a_copy_per_replica():
    """BatchNormalization's moving mean from each replica's own rows. TF 2.21 (Keras 3.15, 2 logical
    CPUs, rows [0, 2] and [10, 20]) kept [1, 1] and [15, 15] in the two copies and read [1, 1]: each
    replica keeps its own copy, the first replica's is read outside."""
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.BatchNormalization(momentum=0.0)])
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    strategy.run(lambda v: model(v, training=True), args=(strategy.distribute_batch(x),))
    np.testing.assert_allclose(np.asarray(model.layers[0].moving_mean.value), x[0])
    copies = strategy.run(lambda: model.layers[0].moving_mean.value + 0.0)
    np.testing.assert_allclose(np.stack([np.asarray(c) for c in strategy.experimental_local_results(copies)]), x)
    model.set_weights(model.get_weights())  # an assignment outside makes the copies equal again
    copies = strategy.run(lambda: model.layers[0].moving_mean.value + 0.0)
    np.testing.assert_allclose(np.stack([np.asarray(c) for c in strategy.experimental_local_results(copies)]),
                               np.broadcast_to(x[0], x.shape))


def test_metrics_add_every_replica_and_skip_padding():
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        mean = keras.metrics.Mean()
        weighted = keras.metrics.Mean()
    dataset = strategy.experimental_distribute_dataset(jdist.data.Dataset.from_tensor_slices(
        np.arange(11, dtype=np.float32)).batch(11))       # 11 rows over 8 replicas: padded to 16
    for x in dataset:
        strategy.run(lambda v: mean.update_state(v), args=(x,))
        strategy.run(lambda v: weighted.update_state(v, 2.0 * v), args=(x,))  # sample_weight given positionally
    assert float(mean.count.value) == 11
    assert float(mean.result()) == pytest.approx(5.0)
    assert float(weighted.count.value) == pytest.approx(110.0)            # 2 * (0 + ... + 10)
    assert float(weighted.result()) == pytest.approx(770.0 / 110.0)       # sum(2 v^2) / sum(2 v)


class _Loop:
    """TF code often keeps the model in an object: `self.model` inside a method given to run."""

    def __init__(self, model):
        self.model = model

    def forward(self, x):
        return self.model(x)


def test_a_method_finds_the_model_on_its_instance():
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        model = _model()
    loop = _Loop(model)
    x = strategy.distribute_batch(np.ones((8, 3), np.float32))
    first = np.asarray(strategy.gather(strategy.run(loop.forward, args=(x,)), axis=0))
    model.set_weights([w + 1 for w in model.get_weights()])  # read again, not baked into the compiled step
    second = np.asarray(strategy.gather(strategy.run(loop.forward, args=(x,)), axis=0))
    np.testing.assert_allclose(second - first, np.full((8, 2), 4.0), rtol=1e-6)


def test_function_wraps_the_function_and_calls_it():
    def f(x):
        return x + 1

    wrapped, configured = jdist.function(f), jdist.function(jit_compile=True)(f)
    assert wrapped.python_function is f and configured.python_function is f and wrapped.__name__ == "f"
    assert wrapped(1) == configured(1) == 2


def test_dataset_shuffle_buffers():
    x = np.arange(10)
    assert [b.numpy().tolist() for b in jdist.data.Dataset.from_tensor_slices(x).shuffle(1).batch(4)] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    shuffled = jdist.data.Dataset.from_tensor_slices(x).shuffle(10).batch(10)
    first, second = (next(iter(shuffled)).numpy().tolist() for _ in range(2))
    assert sorted(first) == list(range(10)) and first != list(range(10)) and first != second
    # A buffer smaller than the data is TF's windowed shuffle (tests/test_tfdata.py holds its rules).
    windowed = [int(v) for v in jdist.data.Dataset.from_tensor_slices(x).shuffle(5, seed=0)]
    assert sorted(windowed) == list(range(10))


def test_checkpoint_restores_into_a_new_model_without_strategy(tmp_path):
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        model = _model()
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        optimizer.iterations.assign(7)
        checkpoint = jdist.train.Checkpoint(optimizer=optimizer, model=model)
    prefix = checkpoint.save(str(tmp_path / "ckpt"))
    assert prefix.endswith("ckpt-1") and jdist.train.latest_checkpoint(str(tmp_path)) == prefix

    new_model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])   # other names: sequential_1/...
    new_optimizer = keras.optimizers.Adam()
    restored = jdist.train.Checkpoint(optimizer=new_optimizer, model=new_model)
    restored.restore(jdist.train.latest_checkpoint(str(tmp_path)))
    for a, b in zip(new_model.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    new_optimizer.build(new_model.trainable_variables)       # deferred, as TF's restore
    assert int(new_optimizer.iterations.value) == 7
    with pytest.raises(ValueError, match="different model"):
        jdist.train.Checkpoint(model=keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])).restore(prefix)
    assert jdist.train.latest_checkpoint(str(tmp_path / "none")) is None


@pytest.mark.parametrize("found", [True, False], ids=["beside_found_objects", "no_object_found"])
def test_a_model_reached_through_another_object_is_refused_not_compiled_in(found):
    """A model run cannot find (held by a plain object) would be read as a compiled-in constant: an error."""
    import types

    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        hidden, seen = _model(), _model()
    holder = types.SimpleNamespace(model=hidden)
    x = strategy.distribute_batch(np.ones((8, 3), np.float32))

    def forward(x):
        return holder.model(x) + (seen(x) if found else 0)

    with pytest.raises(ValueError, match="Refer to the object that owns it directly"):
        strategy.run(forward, args=(x,))
