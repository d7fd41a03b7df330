"""Keras objects that share variables in a scheduled function: one variable on one server, whoever references it.

A worker receives a scheduled function as a pickle, and Keras pickles each model, layer,
optimizer and metric on its own (its config and weights), so a layer the function names
and the model that contains it arrive as two copies. In TF the function's references all
reach the one variable on its server; here the worker's copies are made to share their
variables again, and each step is checked against the same steps in one process.
"""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
from ps_keras_cluster import BATCHES, keras_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with keras_cluster(num_workers=1) as running:
        yield running


def _bce(y, pred):
    return keras.ops.mean(keras.losses.binary_crossentropy(y, pred))


def _layer_in_model():
    """The tutorial-style loop that names a layer and the model holding it: the loss regularizes the layer's kernel
    (so the gradient of the model's variables must see the layer's use), and a metric reads the layer's output."""
    keras.utils.set_random_seed(0)
    dense = keras.layers.Dense(3, activation="relu")
    model = keras.Sequential([keras.Input((4,)), dense, keras.layers.Dense(1, activation="sigmoid")])
    return dense, model, keras.optimizers.Adam(learning_rate=0.05), keras.metrics.Mean()


def _layer_in_model_step(objects, strategy):
    dense, model, optimizer, hidden_mean = objects

    def step_fn(iterator):
        def replica_fn(x, y):
            with jdist.GradientTape() as tape:
                loss = _bce(y, model(x, training=True)) + 0.1 * keras.ops.sum(keras.ops.square(dense.kernel))
            hidden_mean.update_state(dense(x))  # before the update: a worker reads its pre-update values after it
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    return step_fn


def _assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


def test_a_layer_and_the_model_holding_it_share_its_variables_on_the_worker(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        objects = _layer_in_model()
    reference = _layer_in_model()  # the same steps, run here without any strategy
    reference[1].set_weights(objects[1].get_weights())
    ref_step, ref_batches = _layer_in_model_step(reference, jdist.get_strategy()), iter(BATCHES)

    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES)))
    step = _layer_in_model_step(objects, strategy)
    losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(3)]
    coordinator.join()
    ref_losses = [float(np.asarray(ref_step(ref_batches))) for _ in range(3)]
    np.testing.assert_allclose([float(v.fetch()) for v in losses], ref_losses, rtol=1e-6)
    _assert_same(objects[1].get_weights(), reference[1].get_weights())
    _assert_same(objects[0].get_weights(), reference[0].get_weights())  # the layer is the model's
    _assert_same(objects[2].variables, reference[2].variables)  # Adam's moments and iterations
    assert float(objects[3].result()) == pytest.approx(float(reference[3].result()), rel=1e-6)
    assert int(np.asarray(objects[2].iterations)) == 3


def _two_models():
    """A layer shared by two models, one optimizer applied to each model in turn, one metric for both."""
    keras.utils.set_random_seed(1)
    shared = keras.layers.Dense(3, activation="tanh")
    model_a = keras.Sequential([keras.Input((4,)), shared, keras.layers.Dense(1, activation="sigmoid")])
    model_b = keras.Sequential([keras.Input((4,)), shared, keras.layers.Dense(1, activation="sigmoid")])
    optimizer = keras.optimizers.Adam(learning_rate=0.05)
    optimizer.build(model_a.trainable_variables + model_b.trainable_weights[2:])
    return model_a, model_b, optimizer, keras.metrics.BinaryAccuracy()


def _two_models_step(objects, strategy):
    model_a, model_b, optimizer, accuracy = objects

    def step_fn(iterator):
        def replica_fn(x, y):
            # Both forward passes before either update: a worker reads its pre-update values after an update.
            updates, losses = [], []
            for model in (model_a, model_b):
                with jdist.GradientTape() as tape:
                    pred = model(x, training=True)
                    loss = _bce(y, pred)
                updates.append((tape.gradient(loss, model.trainable_variables), model.trainable_variables))
                accuracy.update_state(y, pred)
                losses.append(loss)
            for gradients, variables in updates:  # the shared kernel gets both, in turn
                optimizer.apply_gradients(zip(gradients, variables))
            return losses[0] + losses[1]

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    return step_fn


def _eval_fn(objects, strategy):
    """A second scheduled function that updates the same metric."""
    model_a, _, _, accuracy = objects

    def eval_fn(iterator):
        def replica_fn(x, y):
            accuracy.update_state(y, model_a(x, training=False))

        x, y = next(iterator)
        strategy.run(replica_fn, args=(x, y))

    return eval_fn


def test_a_layer_shared_by_two_models_an_optimizer_for_both_and_a_metric_of_two_functions(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        objects = _two_models()
    reference = _two_models()
    for ref_model, model in zip(reference[:2], objects[:2]):
        ref_model.set_weights(model.get_weights())
    ref_step, ref_eval = _two_models_step(reference, jdist.get_strategy()), _eval_fn(reference, jdist.get_strategy())
    ref_batches = iter(BATCHES * 2)

    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES * 2)))
    step, evaluate = _two_models_step(objects, strategy), _eval_fn(objects, strategy)
    losses = []
    for _ in range(2):
        losses.append(coordinator.schedule(step, args=(iterator,)))
        coordinator.join()  # in order, as the reference runs them
        coordinator.schedule(evaluate, args=(iterator,))
        coordinator.join()
    ref_losses = []
    for _ in range(2):
        ref_losses.append(float(np.asarray(ref_step(ref_batches))))
        ref_eval(ref_batches)
    np.testing.assert_allclose([float(v.fetch()) for v in losses], ref_losses, rtol=1e-6)
    _assert_same(objects[0].get_weights(), reference[0].get_weights())
    _assert_same(objects[1].get_weights(), reference[1].get_weights())
    assert objects[0].layers[0].kernel is objects[1].layers[0].kernel  # still one variable here
    _assert_same(objects[2].variables, reference[2].variables)
    assert int(np.asarray(objects[2].iterations)) == 4  # two apply_gradients per step
    assert float(objects[3].result()) == pytest.approx(float(reference[3].result()), rel=1e-6)
    _assert_same(objects[3].variables, reference[3].variables)  # counts of both functions' updates
