"""`fit` with `steps_per_execution` that does not divide `steps_per_epoch`: each epoch trains exactly
`steps_per_epoch` steps, its last execution shortened (jdist.interop.keras_epochs).

Observed in TF 2.21 with tf_keras (TF's TPU guide, MirroredStrategy on 8 logical CPUs, a repeated dataset of
7 batches, `steps_per_execution=50`, `steps_per_epoch=7`): every epoch trained 7 steps (the progress bar
"7/7"), its losses as with one step an execution. Keras 3 alone trains whole executions (50 steps an epoch,
"50/7"); TF's Keras 3 fails in that execution ("You must feed a value for placeholder tensor").
"""
import os
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat  # noqa: E402

STEPS_PER_EPOCH, EPOCHS = 7, 2


def _train(strategy, steps_per_execution: int):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x @ np.arange(1.0, 5.0, dtype="float32"))[:, None]
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=steps_per_execution)
    # 8 batches of 8 an epoch of the data, repeated: fit stops each epoch by steps_per_epoch alone
    dataset = jdist.tf_compat.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8)
    with warnings.catch_warnings(record=True) as caught:
        history = model.fit(dataset, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH, verbose=0)
    # TF's fit takes a tf.data dataset's order silently; Keras warns that a grain dataset ignores `shuffle=True`
    assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
    return int(model.optimizer.iterations.numpy()), history.history["loss"], model.get_weights()


@pytest.mark.parametrize("steps_per_execution", [3, 50])
@pytest.mark.parametrize("preset", ["mirrored", "one_device"])
def test_an_epoch_ends_at_steps_per_epoch_and_trains_as_one_step_an_execution(preset, steps_per_execution):
    # Installed by a jdist strategy's Keras distribution (mirrored), or by a port's `tf.keras` (without a strategy)
    jdist.tf_compat.keras  # noqa: B018
    make = {"mirrored": jdist.MirroredStrategy, "one_device": lambda: jdist.OneDeviceStrategy("cpu:0")}[preset]
    iterations, losses, weights = _train(make(), steps_per_execution)
    ref_iterations, ref_losses, ref_weights = _train(make(), 1)
    assert iterations == ref_iterations == STEPS_PER_EPOCH * EPOCHS
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for got, want in zip(weights, ref_weights):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_keras_that_changed_its_epoch_iterator_keeps_its_own():
    from keras.src.trainers.epoch_iterator import EpochIterator

    from jdist.interop import keras_epochs

    keras_epochs.install()
    # The installed Keras is the one the replacement was written from (else it would have kept its own).
    assert getattr(EpochIterator._enumerate_iterator, "_jdist", False)

    class Changed:  # a later Keras: another enumeration
        def _enumerate_iterator(self):
            yield from ()

        def __next__(self):
            return None

    assert keras_epochs.written_for(Changed) is False


def test_fit_counts_the_batches_of_a_tf_data_dataset_of_known_cardinality(recwarn):
    # TF 2.21 (Keras 3 and tf_keras alike): fit on from_tensor_slices(...).batch(32) of 256 rows shows "8/8" from
    # the first epoch and warns nothing about running out of data; an infinite dataset needs steps_per_epoch.
    from keras.src.trainers.epoch_iterator import EpochIterator

    x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
    data = jdist.tf_compat.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(32)
    with jdist.MirroredStrategy().scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
    assert EpochIterator(x=data).num_batches == 8
    assert EpochIterator(x=data.repeat(), steps_per_epoch=3).num_batches == 3
    model.fit(data, epochs=2, verbose=0)
    model.evaluate(data, verbose=0)
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]
