"""Asynchronous ParameterServerStrategy + ClusterCoordinator on a local Ray cluster.

Workers and parameter servers are real processes (Ray actors). Functions run
on workers are imported there from this module, so they live at module level.
"""
import os
import signal
import time
import warnings

import jax
import numpy as np
import optax
import pytest
import ray

import jdist
from jdist.datasets import load_digits
from jdist.models import MLP, classification_loss

model = MLP(features=(64,))
train_step = jdist.make_train_step(lambda params, batch: classification_loss(model.apply(params, batch["x"]),
                                                                              batch["y"]))


class DigitsBatches:
    """An endless stream of random training batches; each worker builds its own."""

    def __init__(self, batch_size=32):
        self.batch_size = batch_size

    def __iter__(self):
        x, y = load_digits("train", image_size=8)
        rng = np.random.default_rng(jdist.get_current_worker_index())
        while True:
            index = rng.integers(0, len(x), self.batch_size)
            yield {"x": x[index], "y": y[index]}


class WorkerTag:
    """A per-worker dataset whose items say which worker built it."""

    def __iter__(self):
        index = jdist.get_current_worker_index()
        while True:
            yield index


def indexed_step(state, iterator, index):
    state, sums = train_step(state, iterator)
    return index, jdist.get_current_worker_index(), os.getpid(), sums


def dying_step(state, iterator, index, marker):
    """Step `index` 5 kills its worker process the first time it runs (mid-step)."""
    if index == 5 and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(f"{jdist.get_current_worker_index()} {os.getpid()}")
        os.kill(os.getpid(), signal.SIGKILL)
    return indexed_step(state, iterator, index)


def own_iterator_matches_worker(iterator):
    return next(iterator) == jdist.get_current_worker_index()


def failing(message):
    raise ValueError(message)


def add_one(x):
    return np.asarray(x) + 1


def replicated_double(strategy, x):
    """Uses the strategy inside a scheduled function: there it is the worker's own strategy."""
    doubled = strategy.run(lambda v: v * 2, args=(x,))
    return type(strategy).__name__, strategy.num_replicas_in_sync, strategy.reduce("sum", doubled, axis=None)


class ExamplesSeen(jdist.metrics.Metric):
    """Counts the real examples a training epoch saw (padding has sample weight 0)."""

    def init(self):
        return jax.numpy.zeros(())

    def update(self, state, y_true, y_pred, sample_weight=None):
        return state + jax.numpy.sum(sample_weight)

    def compute(self, state):
        return state


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster for the whole session (the strategy would start one itself; this sizes it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)  # Ray's fork+exec
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cluster(ray_cluster):
    """2 workers, 2 parameter servers; parameters of >= 8 KiB split in two."""
    strategy = jdist.ParameterServerStrategy(
        jdist.ParameterServerCluster(num_workers=2, num_ps=2),
        variable_partitioner=jdist.partitioners.MinSizePartitioner(min_shard_bytes=8 << 10, max_shards=2),
    )
    coordinator = jdist.ClusterCoordinator(strategy)
    yield strategy, coordinator
    strategy.shutdown()


def _params():
    return model.init(jax.random.key(0), np.zeros((1, 8, 8, 1), np.float32))


def _accuracy(params):
    x, y = load_digits("test", image_size=8)
    return float(np.mean(np.argmax(np.asarray(model.apply(params, x)), -1) == y))


# ------------------------------------------------------------------- tests
def test_cluster_spec_errors_match_tf():
    with pytest.raises(ValueError, match="There must be at least one ps."):
        jdist.ParameterServerStrategy(jdist.ParameterServerCluster(num_workers=2, num_ps=0))
    with pytest.raises(ValueError, match="There must be at least one worker."):
        jdist.ParameterServerStrategy(jdist.ParameterServerCluster(num_workers=0, num_ps=1))
    with pytest.raises(ValueError, match="Cluster spec must be non-empty"):
        jdist.ParameterServerStrategy({})
    with pytest.raises(ValueError, match="Unrecognized task_type: 'trainer'"):
        jdist.ParameterServerStrategy({"ps": ["a:1"], "worker": ["b:1"], "trainer": ["c:1"]})


def test_tf_style_cluster_resolvers_are_counted(monkeypatch):
    from jdist.parameter_server.cluster import cluster_plan

    spec = {"chief": ["c:1"], "ps": ["p0:1", "p1:1", "p2:1"], "worker": ["w0:1", "w1:1"]}
    plan = cluster_plan(jdist.cluster.SimpleClusterResolver(spec))
    assert (plan.num_workers, plan.num_ps) == (2, 3)
    monkeypatch.setenv("TF_CONFIG", '{"cluster": %s, "task": {"type": "chief", "index": 0}}'
                       % str(spec).replace("'", '"'))
    plan = cluster_plan(jdist.cluster.TFConfigClusterResolver())
    assert (plan.num_workers, plan.num_ps) == (2, 3)
    with pytest.raises(ValueError, match="There must be at least one ps."):
        cluster_plan(jdist.cluster.SimpleClusterResolver({"worker": ["w0:1"]}))


def test_coordinator_needs_a_parameter_server_strategy():
    with pytest.raises(ValueError, match="Only `jdist.ParameterServerStrategy` is supported to work with "
                                         "`jdist.ClusterCoordinator`"):
        jdist.ClusterCoordinator(jdist.MirroredStrategy())


def test_schedule_needs_a_function(cluster):
    strategy, coordinator = cluster
    assert jdist.ClusterCoordinator(strategy) is coordinator  # one coordinator per strategy
    with pytest.raises(TypeError, match="only accepts a function"):
        coordinator.schedule(42)
    with pytest.raises(ValueError, match="RemoteValue` used as an input"):
        coordinator.schedule(add_one, args=(coordinator.schedule(add_one, args=(1,)),))
    coordinator.join()


def test_placement_round_robin_and_partitioned(ray_cluster):
    strategy = jdist.ParameterServerStrategy(jdist.ParameterServerCluster(num_workers=1, num_ps=3),
                                             variable_partitioner=jdist.partitioners.FixedShardsPartitioner(5))
    try:
        rng = np.random.default_rng(0)
        tree = {"a": rng.normal(size=(13, 4)).astype(np.float32), "b": np.float32(3.0),
                "c": rng.normal(size=(1, 3)).astype(np.float32), "d": np.arange(4, dtype=np.int32)}
        with strategy.scope():
            values = strategy.place(tree)
        assert values.placement == {
            "a": [(0, 0, 3), (1, 3, 6), (2, 6, 9), (0, 9, 11), (1, 11, 13)],  # 13 rows -> [3, 3, 3, 2, 2]
            "b": [(2, 0, 0)],  # rank 0: never partitioned, next server round robin
            "c": [(0, 0, 1)],  # one row: one shard
            "d": [(1, 0, 1), (2, 1, 2), (0, 2, 3), (1, 3, 4)],
        }
        more = strategy.place({"e": np.zeros((2, 2), np.float32)})  # the count goes on, as in TF
        assert more.placement == {"e": [(2, 0, 1), (0, 1, 2)]}
        # What each server really stores: server 0 holds rows 0-3 and 9-11 of "a".
        version, leaves = ray.get(strategy.parameter_servers[0].pull.remote(values._store_id))
        np.testing.assert_array_equal(leaves[0], np.concatenate([tree["a"][0:3], tree["a"][9:11]]))
        gathered = strategy.gather_parameters(values)
        for key in tree:
            np.testing.assert_array_equal(gathered[key], tree[key])
            assert gathered[key].dtype == np.asarray(tree[key]).dtype
        values.assign(jax.tree.map(lambda v: v * 2, tree))
        np.testing.assert_array_equal(strategy.gather_parameters(values)["a"], tree["a"] * 2)
        with pytest.raises(ValueError, match="shape"):
            values.assign(dict(tree, a=np.zeros((12, 4), np.float32)))
    finally:
        strategy.shutdown()


def test_synchronous_steps_match_one_device(cluster):
    """Pull / push steps run from the coordinator equal single-device training (no staleness)."""
    strategy, _ = cluster
    x, y = load_digits("train", image_size=8)
    batches = [{"x": x[i * 32:(i + 1) * 32], "y": y[i * 32:(i + 1) * 32]} for i in range(3)]
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=_params(), tx=optax.adam(1e-2))
    # In flatten order: dense_0/bias -> server 0; dense_0/kernel (16 KiB) is split in two -> 1, 0; ...
    assert state.placement["params/dense_0/bias"] == [(0, 0, 64)]
    assert state.placement["params/dense_0/kernel"] == [(1, 0, 32), (0, 32, 64)]
    assert len(state.placement["params/head/kernel"]) == 1  # 2.5 KiB: whole, round robin
    single = jdist.OneDeviceStrategy("cpu:0")
    with single.scope():
        reference = jdist.TrainState.create(apply_fn=model.apply, params=_params(), tx=optax.adam(1e-2))
        for batch in batches:
            reference, _ = train_step(reference, single.distribute_batch(batch))
    with strategy.scope():
        for batch in batches[:2]:
            state, _ = train_step(state, batch)
    # Outside the scope the step still runs under the strategy that placed the state.
    state, _ = train_step(state, batches[2])
    gathered = strategy.gather_train_state(state)
    assert int(gathered.step) == 3 == state.step
    for a, b in zip(jax.tree.leaves((gathered.params, gathered.opt_state)),
                    jax.tree.leaves((reference.params, reference.opt_state))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)


@pytest.mark.multiprocess  # asynchronous: its accuracy floor depends on the workers' interleaving
def test_async_training_converges(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=_params(), tx=optax.adam(3e-3))
    assert _accuracy(strategy.gather_parameters(state)) < 0.3
    iterator = iter(coordinator.create_per_worker_dataset(DigitsBatches))
    results = [coordinator.schedule(indexed_step, args=(state, iterator, i)) for i in range(300)]
    coordinator.join()
    assert coordinator.done()
    fetched = coordinator.fetch(results)
    assert [r[0] for r in fetched] == list(range(300))
    assert {r[1] for r in fetched} == {0, 1}  # both workers trained
    assert _accuracy(strategy.gather_parameters(state)) >= 0.9
    stats = strategy.parameter_server_stats(state)
    assert [s["updates"] for s in stats] == [300, 300]
    assert all(len(s["staleness"]) == 300 and min(s["staleness"]) >= 0 for s in stats)


def test_per_worker_values_resolve_to_the_running_worker(cluster):
    _, coordinator = cluster
    iterator = iter(coordinator.create_per_worker_dataset(WorkerTag))
    results = [coordinator.schedule(own_iterator_matches_worker, args=(iterator,)) for _ in range(20)]
    assert all(coordinator.fetch(results))
    with pytest.raises(TypeError, match="pass it to ClusterCoordinator.schedule"):
        next(iterator)


def test_an_error_in_a_scheduled_function_surfaces_once(cluster):
    _, coordinator = cluster
    failed = coordinator.schedule(failing, args=("bad input",))
    with pytest.raises(ValueError, match="bad input"):
        failed.fetch()
    with pytest.raises(ValueError, match="bad input"):
        coordinator.schedule(add_one, args=(1,))  # raised by the next schedule ...
    coordinator.join()  # ... and only once
    assert coordinator.done()
    assert coordinator.schedule(add_one, args=(1,)).fetch() == 2
    failed = coordinator.schedule(failing, args=("again",))
    with pytest.raises(ValueError, match="again"):
        failed.fetch()
    with pytest.raises(ValueError, match="again"):
        coordinator.done()  # done() raises it too, once
    assert coordinator.done()


def test_an_error_raises_once_when_two_callers_wait_for_it():
    """join() and done() from two threads while the failed function's neighbour still runs: one
    caller raises the error, the other returns (it was raised already), neither raises `None`."""
    import threading

    from jdist.parameter_server.coordinator import _ClosureQueue

    class Closure:
        def cancel(self):
            pass

    queue = _ClosureQueue()
    queue.put(Closure())
    assert queue.get() is not None  # one function in flight
    queue.mark_failed(ValueError("bad input"), inflight=False)  # another one failed
    outcomes = []

    def wait():
        try:
            queue.wait()
            outcomes.append(None)
        except BaseException as e:  # noqa: BLE001 (recorded and checked below)
            outcomes.append(e)

    threads = [threading.Thread(target=wait) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(queue._cond._waiters) < 2 and time.monotonic() < deadline:  # both wait for the one in flight
        time.sleep(0.01)
    assert len(queue._cond._waiters) == 2
    queue.mark_finished()
    for t in threads:
        t.join(timeout=10)
    assert sorted(type(o).__name__ for o in outcomes) == ["NoneType", "ValueError"], outcomes


def test_the_strategy_inside_a_scheduled_function_is_the_workers(cluster):
    strategy, coordinator = cluster
    name, replicas, total = coordinator.schedule(replicated_double, args=(strategy, np.float32(3.0))).fetch()
    assert (name, replicas, float(total)) == ("WorkerStrategy", 1, 6.0)


def test_checkpoint_round_trip_with_a_synchronous_strategy(cluster):
    strategy, coordinator = cluster
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=_params(), tx=optax.adam(3e-3))
    iterator = iter(coordinator.create_per_worker_dataset(DigitsBatches))
    for i in range(20):
        coordinator.schedule(indexed_step, args=(state, iterator, i))
    coordinator.join()
    saved = strategy.gather_train_state(state)
    assert int(saved.step) == 20

    # Restore into MirroredStrategy and keep training there.
    mirrored = jdist.MirroredStrategy(["cpu:0", "cpu:1"])
    with mirrored.scope():
        restored = mirrored.place(saved)
        x, y = load_digits("train", image_size=8)
        restored, _ = train_step(restored, mirrored.distribute_batch({"x": x[:32], "y": y[:32]}))
    assert int(restored.step) == 21

    # ...and push that state back to the servers.
    strategy.restore(state, restored)
    back = strategy.gather_train_state(state)
    assert int(back.step) == 21 == state.step
    for a, b in zip(jax.tree.leaves((back.params, back.opt_state)),
                    jax.tree.leaves((restored.params, restored.opt_state))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _trainer(strategy, **kwargs):
    return jdist.Trainer(model, optax.adam(1e-2), metrics=["accuracy"], params=_params()["params"],
                         strategy=strategy, **kwargs)


@pytest.fixture(scope="module")
def one_worker(ray_cluster):
    """1 worker with 2 devices, 2 parameter servers; parameters of >= 8 KiB split in two."""
    strategy = jdist.ParameterServerStrategy(
        jdist.ParameterServerCluster(num_workers=1, num_ps=2, devices_per_worker=2),
        variable_partitioner=jdist.partitioners.MinSizePartitioner(min_shard_bytes=8 << 10, max_shards=2))
    yield strategy
    strategy.shutdown()


def test_trainer_fit_with_one_worker_equals_single_device(one_worker):
    """One worker runs the scheduled steps in order: the same weights and metrics as one device
    (parameters split over two servers, steps_per_execution=3, a 75-example short last batch)."""
    x, y = load_digits("train", image_size=8)
    x, y = x[:331], y[:331]
    reference = _trainer(jdist.OneDeviceStrategy("cpu:0"))
    expected = reference.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0).history
    strategy = one_worker
    trainer = _trainer(strategy, steps_per_execution=3)
    history = trainer.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0).history
    for a, b in zip(jax.tree.leaves(strategy.gather_parameters(trainer.state)),
                    jax.tree.leaves(reference.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=1e-5)
    np.testing.assert_allclose(history["accuracy"], expected["accuracy"], rtol=1e-6)
    assert trainer.step == 12 == trainer.state.step
    # evaluate / predict run on the coordinator with the pulled parameters.
    np.testing.assert_allclose(trainer.evaluate(x, y, batch_size=64, verbose=0),
                               reference.evaluate(x, y, batch_size=64, verbose=0), rtol=1e-5)
    np.testing.assert_allclose(trainer.predict(x[:10], verbose=0), reference.predict(x[:10], verbose=0),
                               rtol=1e-5, atol=1e-6)


class StopAfterEpoch(jdist.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt


def test_trainer_backup_and_restore_and_early_stopping(one_worker, tmp_path):
    """An interrupted fit resumes from its backup (gathered from and pushed back to the servers) and
    ends with the uninterrupted weights; EarlyStopping's best weights come back from the servers."""
    x, y = load_digits("train", image_size=8)
    x, y = x[:200], y[:200]
    reference = _trainer(jdist.OneDeviceStrategy("cpu:0"))
    reference.fit(x, y, batch_size=64, epochs=4, shuffle=False, verbose=0)
    backup = jdist.callbacks.BackupAndRestore(tmp_path / "backup")
    with pytest.raises(KeyboardInterrupt):
        _trainer(one_worker).fit(x, y, batch_size=64, epochs=4, shuffle=False, verbose=0,
                                 callbacks=[backup, StopAfterEpoch()])
    resumed = _trainer(one_worker)
    history = resumed.fit(x, y, batch_size=64, epochs=4, shuffle=False, verbose=0,
                          callbacks=[jdist.callbacks.BackupAndRestore(tmp_path / "backup")])
    assert history.epoch == [2, 3] and resumed.step == 16
    for a, b in zip(jax.tree.leaves(one_worker.gather_parameters(resumed.state)),
                    jax.tree.leaves(reference.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)
    # Weights saved from the servers load on one device, and back onto the servers.
    resumed.save_weights(tmp_path / "weights")
    single = _trainer(jdist.OneDeviceStrategy("cpu:0"))
    single.load_weights(tmp_path / "weights")
    for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(reference.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)
    fresh = _trainer(one_worker)
    fresh.fit(x[:64], y[:64], batch_size=64, epochs=1, verbose=0)  # moves the weights away first
    fresh.load_weights(tmp_path / "weights")
    for a, b in zip(jax.tree.leaves(one_worker.gather_parameters(fresh.state)),
                    jax.tree.leaves(single.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # A whole-state save (gathered from the servers) loads back onto them, optimizer state and step too.
    resumed.save(tmp_path / "state")
    fresh.load(tmp_path / "state")
    assert fresh.step == resumed.step == 16
    for a, b in zip(jax.tree.leaves(one_worker.gather_train_state(fresh.state)),
                    jax.tree.leaves(one_worker.gather_train_state(resumed.state)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    stopper = jdist.callbacks.EarlyStopping(monitor="loss", patience=0, restore_best_weights=True)
    trainer = jdist.Trainer(model, optax.sgd(5.0), params=_params()["params"], strategy=one_worker)
    trainer.fit(x, y, batch_size=64, epochs=6, shuffle=False, verbose=0, callbacks=[stopper])
    assert stopper.stopped_epoch > 0  # a learning rate this large makes the loss go up
    best = jax.tree.leaves(stopper.best_state.params)
    for a, b in zip(jax.tree.leaves(one_worker.gather_parameters(trainer.state)), best, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_trainer_fit_on_asynchronous_workers(cluster):
    """Two workers train asynchronously; every example of every epoch is counted exactly once."""
    strategy, _ = cluster
    x, y = load_digits("train", image_size=8)
    trainer = jdist.Trainer(model, optax.adam(3e-3), metrics=["accuracy", ExamplesSeen()],
                            params=_params()["params"], strategy=strategy)
    history = trainer.fit(x, y, batch_size=32, epochs=3, verbose=0).history
    assert history["examples_seen"] == [len(x)] * 3
    assert history["loss"][2] < history["loss"][0]
    steps = 3 * -(-len(x) // 32)
    assert trainer.step == steps
    stats = strategy.parameter_server_stats(trainer.state)
    assert [s["updates"] for s in stats] == [steps, steps]
    assert max(max(s["staleness"]) for s in stats) >= 1  # the workers really overlapped
    x_test, y_test = load_digits("test", image_size=8)
    assert trainer.evaluate(x_test, y_test, return_dict=True, verbose=0)["accuracy"] >= 0.9


def test_killing_a_worker_loses_no_step(cluster, tmp_path):
    strategy, coordinator = cluster
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=_params(), tx=optax.adam(3e-3))
    iterator = iter(coordinator.create_per_worker_dataset(DigitsBatches))
    marker = tmp_path / "killed"
    restarts = coordinator.worker_restarts
    results = [coordinator.schedule(dying_step, args=(state, iterator, i, str(marker))) for i in range(40)]
    coordinator.join()
    fetched = coordinator.fetch(results)
    killed_index, killed_pid = map(int, marker.read_text().split())  # step 5 killed this worker mid-step
    assert [r[0] for r in fetched] == list(range(40))  # yet every step ran (step 5 again, elsewhere)
    assert fetched[5][2] != killed_pid  # step 5's result came from its rerun on another process
    assert strategy.parameter_server_stats(state)[0]["updates"] >= 40

    # The dead worker is replaced (in the background), gets the per-worker dataset again and trains.
    deadline = time.monotonic() + 120
    while coordinator.worker_restarts == restarts and time.monotonic() < deadline:
        time.sleep(0.2)
    assert coordinator.worker_restarts == restarts + 1
    more = coordinator.fetch([coordinator.schedule(indexed_step, args=(state, iterator, i)) for i in range(20)])
    replacement = {r[2] for r in more if r[1] == killed_index}
    assert replacement and killed_pid not in replacement


@pytest.mark.timeout(180)
def test_a_dead_parameter_server_is_a_clear_error_not_a_hang(ray_cluster):
    strategy = jdist.ParameterServerStrategy(jdist.ParameterServerCluster(num_workers=1, num_ps=2))
    try:
        coordinator = jdist.ClusterCoordinator(strategy)
        with strategy.scope():
            state = jdist.TrainState.create(apply_fn=model.apply, params=_params(), tx=optax.sgd(0.1))
        iterator = iter(coordinator.create_per_worker_dataset(DigitsBatches))
        coordinator.schedule(indexed_step, args=(state, iterator, 0))
        coordinator.join()
        os.kill(ray.get(strategy.parameter_servers[1].pid.remote()), signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(jdist.PSUnavailableError, match="Parameter server 1 is unavailable.*last checkpoint"):
            for i in range(1, 20):
                coordinator.schedule(indexed_step, args=(state, iterator, i))
            coordinator.join()
        assert time.monotonic() - start < 60
        with pytest.raises(jdist.PSUnavailableError):  # the cluster stays unusable, loudly
            coordinator.join()
        with pytest.raises(jdist.PSUnavailableError, match="restore"):
            strategy.gather_parameters(state)
    finally:
        strategy.shutdown()
