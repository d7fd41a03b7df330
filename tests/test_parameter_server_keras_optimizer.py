"""A scheduled function's `optimizer.apply_gradients` updates the parameter servers' current values and slots,
as TF's servers do: two workers that pulled the same values still apply their updates one after the other."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import time  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
from ps_keras_cluster import BATCHES, keras_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with keras_cluster(num_workers=2) as running:
        yield running


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1, activation="sigmoid")])


def _gradients(model, x, y) -> list:
    """The loss's gradients at the model's current values, outside strategy.run."""
    def loss(values):
        pred, _ = model.stateless_call(values, [v.value for v in model.non_trainable_variables], x, training=True)
        return keras.ops.mean(keras.losses.binary_crossentropy(y, pred))

    return jax.grad(loss)([v.value for v in model.trainable_variables])


def _barrier_step(model, optimizer, strategy, meeting: str, eager: bool):
    """A step that waits, after its worker loaded the servers' values, until both workers have: both compute
    their gradients from the same values, the first to arrive on batch 0, the other on batch 1. Returns the
    batch's index and the gradients (summed over the replicas)."""
    def replica_fn(x, y):
        with jdist.GradientTape() as tape:
            loss = keras.ops.mean(keras.losses.binary_crossentropy(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return grads

    def step_fn():
        for index in (0, 1):  # claimed atomically: two workers listing the folder at once both saw it empty
            try:
                os.close(os.open(os.path.join(meeting, str(index)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                continue
        deadline = time.monotonic() + 60
        while len(os.listdir(meeting)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        x, y = BATCHES[index]
        if eager:  # apply_gradients called outside strategy.run, on values
            grads = _gradients(model, x, y)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return index, grads
        return index, strategy.run(replica_fn, args=(x, y))

    return step_fn


OPTIMIZERS = {
    "sgd_momentum": lambda: keras.optimizers.SGD(learning_rate=0.5, momentum=0.9),
    "adam": lambda: keras.optimizers.Adam(learning_rate=0.1),  # bias correction reads the shared `iterations`
    "rmsprop_global_clipnorm": lambda: keras.optimizers.RMSprop(learning_rate=0.1, global_clipnorm=0.05),
}


@pytest.mark.parametrize("name,eager", [("sgd_momentum", False), ("adam", False),
                                        ("rmsprop_global_clipnorm", True)])
def test_two_workers_updates_are_applied_in_turn_on_the_servers(cluster, tmp_path, name, eager):
    strategy, coordinator = cluster
    with strategy.scope():
        model = _model()
        optimizer = OPTIMIZERS[name]()
        optimizer.build(model.trainable_variables)
    start = [np.asarray(w) for w in model.get_weights()]
    step = _barrier_step(model, optimizer, strategy, str(tmp_path), eager)
    results = [coordinator.schedule(step) for _ in range(2)]
    coordinator.join()
    computed = dict(r.fetch() for r in results)
    assert sorted(computed) == [0, 1]
    assert int(np.asarray(optimizer.iterations)) == 2  # TF 2.21: one per apply_gradients (21 after 21 steps)

    here = _model()  # both workers' gradients were computed from `start`
    here.set_weights(start)
    for index, grads in computed.items():
        for got, want in zip(grads, _gradients(here, *BATCHES[index])):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)

    # The two gradient sets applied in turn in this process. Each `apply_gradients` takes its step number from the
    # server holding `iterations` (fetch-and-add) and then updates each server in one call; the servers take the
    # two updates in their own orders, as TF's do. So every variable, with its slots, must equal one of the four
    # outcomes (which worker took step 1) x (which update its server applied first); each is checked on its own.
    outcomes = []
    for first_step in (0, 1):
        for order in ((0, 1), (1, 0)):
            reference, ref_optimizer = _model(), OPTIMIZERS[name]()
            reference.set_weights(start)
            for index in order:
                ref_optimizer.iterations.assign(0 if index == first_step else 1)
                ref_optimizer.apply_gradients(zip([np.asarray(g) for g in computed[index]],
                                                  reference.trainable_variables))
            outcomes.append((reference, ref_optimizer))

    def close(a, b):
        return np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

    got_weights = model.get_weights()
    for i, got in enumerate(got_weights):  # read back from the servers
        assert any(close(got, reference.get_weights()[i]) for reference, _ in outcomes), f"weight {i}"
    for i, got in enumerate(optimizer.variables):  # the slots (`iterations` is checked above)
        if got.name not in ("iteration", "learning_rate"):
            assert any(close(got, ref_optimizer.variables[i]) for _, ref_optimizer in outcomes), f"slot {got.name}"
    reference = min((r for r, _ in outcomes), key=lambda r: max(float(np.max(np.abs(a - b)))
                                                                for a, b in zip(got_weights, r.get_weights())))

    # What each worker applying its update to its own copy and adding the changes up would have given instead.
    summed = list(start)
    for index in (0, 1):
        alone, alone_optimizer = _model(), OPTIMIZERS[name]()
        alone.set_weights(start)
        alone_optimizer.apply_gradients(zip([np.asarray(g) for g in computed[index]], alone.trainable_variables))
        summed = [t + a - s for t, a, s in zip(summed, alone.get_weights(), start)]
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(summed, reference.get_weights())) > 1e-3


def test_slots_live_on_their_variables_server(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        model = _model()
        optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
        optimizer.build(model.trainable_variables)
    ones = [np.ones(v.shape, "float32") for v in model.trainable_variables]
    coordinator.schedule(lambda: optimizer.apply_gradients(zip(ones, model.trainable_variables)))
    coordinator.join()
    reference = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    reference.apply_gradients(zip(ones, [keras.Variable(np.zeros(v.shape, "float32"))
                                         for v in model.trainable_variables]))
    slots = optimizer.variables[2:]  # after `iterations` and `learning_rate`: one momentum per variable
    assert len(slots) == len(model.trainable_variables) == 4
    for variable, momentum, want in zip(model.trainable_variables, slots, reference.variables[2:]):
        assert momentum.device == variable.device  # TF 2.21: each slot on its variable's server
        np.testing.assert_allclose(np.asarray(momentum), np.asarray(want))
    assert len({v.device for v in model.trainable_variables}) == 2


def test_an_optimizer_the_servers_cannot_apply_is_refused(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        model = _model()
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
        optimizer.build(model.trainable_variables)
    step = _barrier_step(model, optimizer, strategy, "/nonexistent", eager=True)
    with pytest.raises(ValueError, match="LossScaleOptimizer.*no single parameter server"):
        coordinator.schedule(step)


def test_tf_kerass_rmsprop_without_momentum_overwrites_a_concurrent_update(cluster, tmp_path):
    """tf_keras's RMSprop without momentum reads the variable and its slot, computes and assigns: TF 2.21 (3 workers,
    2 servers, gradient ones, lr 0.1) moved a variable by 30 scheduled updates as far as 20 in a row (2.857 and
    2.845 in two runs; 3.895 for 30), and with momentum 0.9 (one fused op on the server) as far as 30. Here two
    workers load the same values: the servers keep the update of the worker that wrote last, computed from those
    values, with its slot; the other's is lost, as in TF."""
    from jdist.tf_compat.keras_extras import legacy_optimizers

    make = lambda: legacy_optimizers().RMSprop(learning_rate=0.1)  # noqa: E731
    strategy, coordinator = cluster
    with strategy.scope():
        model = _model()
        optimizer = make()
        optimizer.build(model.trainable_variables)
    start = [np.asarray(w) for w in model.get_weights()]
    step = _barrier_step(model, optimizer, strategy, str(tmp_path), eager=False)
    results = [coordinator.schedule(step) for _ in range(2)]
    coordinator.join()
    computed = dict(r.fetch() for r in results)
    assert sorted(computed) == [0, 1]
    assert int(np.asarray(optimizer.iterations)) == 2  # TF: `iterations` counts both (assign_add on its server)

    def applied(order):
        reference, ref_optimizer = _model(), make()
        reference.set_weights(start)
        for index in order:
            ref_optimizer.apply_gradients(zip([np.asarray(g) for g in computed[index]],
                                              reference.trainable_variables))
        return reference.get_weights(), [np.asarray(v) for v in ref_optimizer.variables[2:]]

    alone = [applied((0,)), applied((1,))]
    in_turn = applied((0, 1))
    got = model.get_weights(), [np.asarray(v) for v in optimizer.variables[2:]]
    distance = lambda a, b: max(float(np.max(np.abs(x - y))) for x, y in zip(a[0] + a[1], b[0] + b[1]))  # noqa: E731
    # Each server keeps the update of the worker that wrote to it last; the two servers may take the two
    # workers' writes in different orders (one full run saw a mix), so each variable and slot must equal one
    # worker's update alone. A lost or stale update matches neither.
    for i, got_values in enumerate(got[0] + got[1]):  # weights and rms slots
        options = [(o[0] + o[1])[i] for o in alone]
        assert any(np.allclose(got_values, want, rtol=1e-5, atol=1e-6) for want in options), (i, got_values, options)
    assert distance(got, in_turn) > 1e-3 and distance(alone[0], alone[1]) > 1e-3


class _MeetingBatches:
    """A dataset for `fit` whose copy on each worker first waits until both workers have asked for a batch (so both
    loaded the same servers' values for their step), then yields the batch of its arrival index: 0 or 1."""

    def __init__(self, meeting: str):
        self.meeting, self.coordinator = meeting, os.getpid()

    def __iter__(self):
        return self._batches()

    def _batches(self):
        if os.getpid() == self.coordinator:  # fit reads one batch here to build the model
            yield FIT_BATCHES[0]
            return
        for index in (0, 1):
            try:
                os.close(os.open(os.path.join(self.meeting, str(index)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                continue
        deadline = time.monotonic() + 60
        while len(os.listdir(self.meeting)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        while True:
            yield FIT_BATCHES[index]


FIT_BATCHES = [(BATCHES[i][0], BATCHES[i][1].astype(np.float32)) for i in (0, 1)]


def _fit_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), loss="mse")
    return model


def test_kerass_fit_has_the_servers_apply_the_optimizer_in_turn(cluster, tmp_path):
    """As a scheduled function's apply_gradients: two workers' fit steps from the same values are applied one after
    the other on the servers (TF 2.21: the optimizer runs on the servers; `iterations` counts every step), not
    each applied to its own copy and the changes added up."""
    strategy, _ = cluster
    with strategy.scope():
        model = _fit_model()
    start = [np.asarray(w) for w in model.get_weights()]
    history = model.fit(_MeetingBatches(str(tmp_path)), epochs=1, steps_per_epoch=2, verbose=0)
    assert sorted(os.listdir(tmp_path)) == ["0", "1"]  # each worker ran one step
    assert int(np.asarray(model.optimizer.iterations)) == 2

    def gradients(index):
        here = _fit_model()
        here.set_weights(start)
        x, y = FIT_BATCHES[index]

        def loss(values):
            pred, _ = here.stateless_call(values, [], x, training=True)
            return keras.ops.mean(keras.ops.square(pred - y))

        return [np.asarray(g) for g in jax.grad(loss)([v.value for v in here.trainable_variables])]

    def applied(order):
        reference = _fit_model()
        reference.set_weights(start)
        for index in order:
            reference.optimizer.apply_gradients(zip(gradients(index), reference.trainable_variables))
        return reference.get_weights()

    distance = lambda a, b: max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))  # noqa: E731
    got = model.get_weights()
    want = min((applied((0, 1)), applied((1, 0))), key=lambda w: distance(got, w))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    summed = [s + a - s + b - s for s, a, b in zip(start, applied((0,)), applied((1,)))]  # the push path's result
    assert distance(summed, want) > 1e-3
    assert np.isfinite(history.history["loss"][0])
