"""Keras models, optimizers and metrics made in a ParameterServerStrategy scope keep their values on the servers:
a scheduled function's updates land there and the coordinator reads them back, as TF's variables behave."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
from ps_keras_cluster import BATCHES, X, keras_cluster  # noqa: E402

@pytest.fixture(scope="module")
def cluster():
    with keras_cluster() as running:
        yield running


def _objects():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    return model, keras.optimizers.RMSprop(learning_rate=0.1), keras.metrics.Accuracy()


def _step_fn(model, optimizer, accuracy, strategy):
    """The tutorial's step: strategy.run of a GradientTape step that also updates a metric."""
    def step_fn(iterator):
        def replica_fn(x, y):
            with jdist.GradientTape() as tape:
                pred = model(x, training=True)
                loss = keras.ops.mean(keras.losses.binary_crossentropy(y, pred))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            accuracy.update_state(y, keras.ops.cast(pred > 0.5, "int64"))
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    return step_fn


def test_scheduled_steps_update_the_servers_values_as_one_process_would(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        model, optimizer, accuracy = _objects()
    reference = _objects()  # the same steps, run here without any strategy
    reference[0].set_weights(model.get_weights())
    ref_step = _step_fn(*reference, jdist.get_strategy())
    ref_batches = iter(BATCHES)

    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES)))
    step = _step_fn(model, optimizer, accuracy, strategy)
    losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(2)]
    coordinator.join()
    ref_losses = [float(np.asarray(ref_step(ref_batches))) for _ in range(2)]
    np.testing.assert_allclose([float(v.fetch()) for v in losses], ref_losses, rtol=1e-6)
    for got, want in zip(model.get_weights(), reference[0].get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)  # read back from the servers
    assert float(accuracy.result()) == float(reference[2].result())
    assert int(np.asarray(optimizer.iterations)) == 2

    accuracy.reset_state()  # an assignment here is written through to the servers
    reference[2].reset_state()
    coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    ref_step(ref_batches)
    assert float(accuracy.result()) == float(reference[2].result())  # only the third batch counted
    for got, want in zip(optimizer.variables, reference[1].variables):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)


def test_variables_get_tfs_round_robin_devices(cluster):
    strategy, _ = cluster
    with strategy.scope():
        layer = keras.layers.Dense(2)
        layer.build((None, 3))
    tasks = [int(v.device.split("task:")[1].split("/")[0]) for v in layer.weights]
    assert tasks[1] == (tasks[0] + 1) % 2  # kernel and bias on consecutive servers


def test_a_keras_object_made_outside_the_scope_is_refused(cluster):
    strategy, coordinator = cluster
    model, optimizer, accuracy = _objects()  # no scope: its updates would stay on the worker's copy
    with pytest.raises(ValueError, match=r"created outside the ParameterServerStrategy's scope.*strategy\.scope"):
        coordinator.schedule(_step_fn(model, optimizer, accuracy, strategy), args=(None,))


# TF 2.21 with TF_USE_LEGACY_KERAS=1 (tf_keras), one worker and one parameter server, this model and data:
# ParameterServerStrategy's model.fit(dataset, epochs=2, steps_per_epoch=5) printed epoch losses
# 0.14120617508888245 and 0.03019808605313301, exactly what the same fit gave without a strategy, and left
# kernel [[0.7438942790031433], [0.7348144054412842]], bias [-0.36319130659103394].
TF_FIT_LOSSES = [0.14120617508888245, 0.03019808605313301]
TF_FIT_WEIGHTS = [[[0.7438942790031433], [0.7348144054412842]], [-0.36319130659103394]]
FIT_X = np.arange(40, dtype=np.float32).reshape(20, 2) / 40
FIT_Y = FIT_X[:, :1] * 2 - FIT_X[:, 1:]


def _fit_model():
    model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones")])  # unbuilt, as in TF's tutorial
    model.compile(keras.optimizers.SGD(0.1), loss="mse", steps_per_execution=2)
    return model


class _EpochLogs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs))


def test_kerass_fit_schedules_its_steps_on_the_workers_as_one_process_would(cluster):
    from jdist import tf_compat as tf

    strategy, _ = cluster
    with strategy.scope():
        model = _fit_model()
    dataset = tf.data.Dataset.from_tensor_slices((FIT_X, FIT_Y)).batch(4).repeat()  # copied to each worker
    seen = _EpochLogs()
    history = model.fit(dataset, epochs=2, steps_per_epoch=5, callbacks=[seen], verbose=0)

    reference = _fit_model()  # the same steps in this process, without a strategy
    want = reference.fit(FIT_X, FIT_Y, batch_size=4, shuffle=False, epochs=2, verbose=0)
    np.testing.assert_allclose(history.history["loss"], want.history["loss"], rtol=1e-6)
    np.testing.assert_allclose(history.history["loss"], TF_FIT_LOSSES, rtol=1e-5)
    assert [log["loss"] for log in seen.logs] == history.history["loss"]
    for got, ref, tf_value in zip(model.get_weights(), reference.get_weights(), TF_FIT_WEIGHTS):
        np.testing.assert_allclose(got, ref, rtol=1e-6)  # read back from the servers
        np.testing.assert_allclose(got, tf_value, rtol=1e-5)
    assert int(np.asarray(model.optimizer.iterations)) == 10  # 5 executions of 2, 2 and 1 steps
    assert {v.device for v in model.weights} == {f"/job:ps/replica:0/task:{i}/device:CPU:0" for i in range(2)}

    # In-memory arrays: each worker batches its copy (TF turns them into a DatasetCreator); a second fit goes on
    # from the servers' values.
    history = model.fit(FIT_X, FIT_Y, batch_size=4, shuffle=False, epochs=1, steps_per_epoch=5, verbose=0)
    want = reference.fit(FIT_X, FIT_Y, batch_size=4, shuffle=False, epochs=1, verbose=0)
    np.testing.assert_allclose(history.history["loss"], want.history["loss"], rtol=1e-6)


# TF 2.21 with TF_USE_LEGACY_KERAS=1 (tf_keras), one worker and one parameter server, this data batched by 4 and
# repeated: Dense(1, kernel_initializer="ones") compiled with Adam(0.1), loss "mse" and steps_per_execution=3,
# fit(epochs=2, steps_per_epoch=6) printed epoch losses 0.037888627499341965 and 0.0332152433693409, left kernel
# [[0.7355888485908508], [0.7408608794212341]], bias [-0.18853861093521118], and `optimizer.iterations` 12, one per
# step (the same 12 with steps_per_execution=1).
TF_ADAM_FIT_LOSSES = [0.037888627499341965, 0.0332152433693409]
TF_ADAM_FIT_WEIGHTS = [[[0.7355888485908508], [0.7408608794212341]], [-0.18853861093521118]]


def test_kerass_fit_with_adam_applied_on_the_servers_gives_tfs_numbers(cluster):
    """Each step's gradients go to the servers, which apply Adam there (its `iterations` advanced per step);
    the next step of the same execution starts from the servers' values."""
    from jdist import tf_compat as tf

    strategy, _ = cluster
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones")])
        model.compile(keras.optimizers.Adam(0.1), loss="mse", steps_per_execution=3)
    dataset = tf.data.Dataset.from_tensor_slices((FIT_X, FIT_Y)).batch(4).repeat()
    history = model.fit(dataset, epochs=2, steps_per_epoch=6, verbose=0)
    np.testing.assert_allclose(history.history["loss"], TF_ADAM_FIT_LOSSES, rtol=1e-5)
    for got, tf_value in zip(model.get_weights(), TF_ADAM_FIT_WEIGHTS):
        np.testing.assert_allclose(got, tf_value, rtol=1e-5)
    assert int(np.asarray(model.optimizer.iterations)) == 12


def test_kerass_fit_with_a_loss_scale_optimizer_runs_it_on_the_worker(cluster):
    """No single server can judge a loss scale (every gradient finite?): fit applies it on the worker's copy and
    pushes the changes, which with one worker is what one process gives."""
    strategy, _ = cluster

    def make():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_initializer="ones")])
        model.compile(keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(0.1)), loss="mse")
        return model

    with strategy.scope():
        model = make()
    history = model.fit(FIT_X, FIT_Y, batch_size=4, shuffle=False, epochs=2, steps_per_epoch=5, verbose=0)
    reference = make()
    want = reference.fit(FIT_X, FIT_Y, batch_size=4, shuffle=False, epochs=2, verbose=0)
    np.testing.assert_allclose(history.history["loss"], want.history["loss"], rtol=1e-6)
    for got, ref in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_kerass_fit_under_the_strategy_refuses_what_tf_refuses(cluster):
    strategy, _ = cluster
    with strategy.scope():
        model = _fit_model()

    class PerBatch(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            pass

    # TF 2.21 (tf_keras): "When providing an infinite dataset, you must specify the number of steps to run";
    # verbose=1 and batch-level callbacks of one's own are ValueErrors naming ParameterServerStrategy.
    with pytest.raises(ValueError, match="needs `steps_per_epoch`"):
        model.fit(FIT_X, FIT_Y, batch_size=4)
    with pytest.raises(ValueError, match="`verbose=1` is not allowed with `ParameterServerStrategy`"):
        model.fit(FIT_X, FIT_Y, batch_size=4, steps_per_epoch=1, verbose=1)
    with pytest.raises(ValueError, match="Batch-level `Callback`s are not supported"):
        model.fit(FIT_X, FIT_Y, batch_size=4, steps_per_epoch=1, callbacks=[PerBatch()])
    # TF 2.21 (tf_keras): validation_data without validation_steps is a ValueError ("... `validation_steps`, ...
    # argument must be provided"); jdist refuses validation_split and class_weight, naming the alternatives.
    with pytest.raises(ValueError, match="needs `validation_steps`"):
        model.fit(FIT_X, FIT_Y, batch_size=4, steps_per_epoch=1, validation_data=(FIT_X, FIT_Y))
    with pytest.raises(NotImplementedError, match=r"\['validation_split'\].*validation_steps"):
        model.fit(FIT_X, FIT_Y, batch_size=4, steps_per_epoch=1, validation_split=0.5)
    with pytest.raises(NotImplementedError, match=r"\['class_weight'\].*sample_weight"):
        model.fit(FIT_X, FIT_Y, batch_size=4, steps_per_epoch=1, class_weight={0: 2.0})
    assert not model.built  # nothing ran


# TF 2.21 with tf_keras, one worker and one parameter server, the model above compiled with metrics=["mae"]:
# fit(dataset, epochs=2, steps_per_epoch=5, validation_data=<the first 10 rows, batch(4).repeat()>,
# validation_steps=2) printed loss [0.1412062, 0.0301981], mae [0.3500397, 0.1529924], val_loss [0.0454146,
# 0.0587259], val_mae [0.2021238, 0.2360469] (the first 2 validation batches, with the servers' values).
TF_FIT_VALIDATION = {"loss": [0.1412062, 0.0301981], "mae": [0.3500397, 0.1529924],
                     "val_loss": [0.0454146, 0.0587259], "val_mae": [0.2021238, 0.2360469]}


def test_kerass_fit_validates_on_the_servers_values_as_tf(cluster):
    from jdist import tf_compat as tf

    strategy, _ = cluster
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, kernel_initializer="ones")])
        model.compile(keras.optimizers.SGD(0.1), loss="mse", steps_per_execution=2, metrics=["mae"])
    dataset = tf.data.Dataset.from_tensor_slices((FIT_X, FIT_Y)).batch(4).repeat()
    validation = tf.data.Dataset.from_tensor_slices((FIT_X[:10], FIT_Y[:10])).batch(4).repeat()
    history = model.fit(dataset, epochs=2, steps_per_epoch=5, validation_data=validation, validation_steps=2,
                        verbose=0)
    assert sorted(history.history) == sorted(TF_FIT_VALIDATION)
    for name, want in TF_FIT_VALIDATION.items():
        np.testing.assert_allclose(history.history[name], want, rtol=1e-5, err_msg=name)


def test_inline_evaluation_scheduled_or_here_reads_the_servers_values(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        model, _, _ = _objects()
        eval_accuracy = keras.metrics.Accuracy()
    model.set_weights([w + 0.5 for w in model.get_weights()])  # written through to the servers

    def eval_step(iterator):
        def replica_fn(x, y):
            eval_accuracy.update_state(y, keras.ops.cast(model(x, training=False) > 0.5, "int64"))
        x, y = next(iterator)
        strategy.run(replica_fn, args=(x, y))

    iterator = iter(coordinator.create_per_worker_dataset(lambda: iter(BATCHES)))
    for _ in range(3):
        coordinator.schedule(eval_step, args=(iterator,))
    coordinator.join()
    here = keras.metrics.Accuracy()  # TF's other inline evaluation: a loop on the coordinator
    for x, y in BATCHES:
        here.update_state(y, keras.ops.cast(model(x, training=False) > 0.5, "int64"))
    assert float(eval_accuracy.result()) == float(here.result())
    assert float(eval_accuracy.count) == len(X)
