"""CentralStorageStrategy: one host copy of the parameters, compute replicated, same numbers as the others."""
import jax
import numpy as np
import optax
import pytest
from jax.sharding import SingleDeviceSharding

import jdist
from jdist.models import MLP, classification_loss

model = MLP(features=(32,))
TOLERANCE = 1e-6  # float32; the three strategies run the same XLA ops on CPU


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 1), dtype=np.float32), (np.arange(n) % 10).astype(np.int32)


def _loss(params, batch):
    return classification_loss(model.apply(params, batch["x"]), batch["y"])


def _train(strategy, steps=3):
    x, y = _data(64 * steps)
    params = model.init(jax.random.key(0), x[:1])
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
        step = jdist.make_train_step(_loss)
        losses = []
        for i in range(steps):
            window = slice(64 * i, 64 * (i + 1))
            batch = strategy.distribute_batch({"x": x[window], "y": y[window]})
            state, sums = step(state, batch)
            losses.append(float(sums["loss"]) / float(sums["count"]))
    return state, losses


def _assert_trees_close(a, b):
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=0, atol=TOLERANCE)


def test_defaults_follow_tf():
    strategy = jdist.CentralStorageStrategy()
    assert strategy.num_replicas_in_sync == 8
    assert strategy.compute_devices == tuple(jax.devices())
    assert strategy.parameter_device == jax.devices()[0]
    assert strategy.parameter_memory_kind == "pinned_host"  # host memory: XLA:CPU has the memory kind
    one = jdist.CentralStorageStrategy(compute_devices=["cpu:3"])
    assert one.num_replicas_in_sync == 1
    assert one.parameter_device == jax.devices()[3]
    assert one.parameter_memory_kind == "device"  # one compute device keeps the parameters itself


def test_parameters_and_optimizer_state_are_stored_once_on_the_host():
    strategy = jdist.CentralStorageStrategy()
    host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
    params = model.init(jax.random.key(0), _data()[0][:1])
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
    for leaf in jax.tree.leaves((state.params, state.opt_state, state.step)):
        assert leaf.sharding == host
        assert len(leaf.addressable_shards) == 1
    state, _ = _train(strategy, steps=1)
    for leaf in jax.tree.leaves((state.params, state.opt_state, state.step)):
        assert leaf.sharding == host  # the update wrote the new values back to the store


def test_training_matches_mirrored_and_one_device():
    central, central_losses = _train(jdist.CentralStorageStrategy())
    mirrored, mirrored_losses = _train(jdist.MirroredStrategy())
    single, single_losses = _train(jdist.OneDeviceStrategy("cpu:0"))
    for other in (mirrored, single):
        _assert_trees_close(central.params, other.params)
        _assert_trees_close(central.opt_state, other.opt_state)
    assert int(central.step) == int(mirrored.step) == 3
    np.testing.assert_allclose(central_losses, single_losses, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(central_losses, mirrored_losses, rtol=0, atol=TOLERANCE)
    assert central_losses[-1] < central_losses[0]


def test_one_compute_device_behaves_like_one_device_strategy():
    central, losses = _train(jdist.CentralStorageStrategy(compute_devices=["cpu:1"]))
    single, single_losses = _train(jdist.OneDeviceStrategy("cpu:1"))
    leaf = jax.tree.leaves(central.params)[0]
    assert leaf.sharding.device_set == {jax.devices()[1]}
    assert leaf.sharding.memory_kind == "device"
    _assert_trees_close(central.params, single.params)
    np.testing.assert_allclose(losses, single_losses, rtol=0, atol=TOLERANCE)


def test_explicit_parameter_device():
    strategy = jdist.CentralStorageStrategy(compute_devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"],
                                            parameter_device="cpu:5")
    assert strategy.num_replicas_in_sync == 4
    state, _ = _train(strategy, steps=2)
    reference, _ = _train(jdist.MirroredStrategy(["cpu:0", "cpu:1", "cpu:2", "cpu:3"]), steps=2)
    for leaf in jax.tree.leaves(state.params):
        assert leaf.sharding.device_set == {jax.devices()[5]}
    _assert_trees_close(state.params, reference.params)


def test_eval_step_and_run_read_the_stored_parameters():
    strategy = jdist.CentralStorageStrategy()
    state, _ = _train(strategy, steps=1)
    x, y = _data()
    evaluate = jdist.make_eval_step(_loss)
    with strategy.scope():
        sums = evaluate(state, strategy.distribute_batch({"x": x, "y": y}))
    expected = np.sum(np.asarray(_loss(jax.device_get(state.params), {"x": x, "y": y})))
    np.testing.assert_allclose(float(sums["loss"]), expected, rtol=1e-5)

    # Per-replica code gets the parameters broadcast to every compute device.
    def replica_loss(params, images, labels):
        per_example = classification_loss(model.apply(params, images), labels)
        return jdist.compute_average_loss(per_example, global_batch_size=64)

    images, labels = strategy.distribute_batch((x, y))
    per_replica = strategy.run(replica_loss, args=(state.params, images, labels))
    total = strategy.reduce("sum", per_replica, axis=None)
    np.testing.assert_allclose(float(total), expected / 64, rtol=1e-5)


def test_global_batch_must_divide_over_compute_devices():
    strategy = jdist.CentralStorageStrategy()
    with pytest.raises(ValueError, match="does not divide among 8 replicas"):
        strategy.distribute_batch({"x": np.zeros((12, 2))})


class _FakeDevice:
    """Just what `explicit_parameter_store` reads of a device: its platform and memory kinds."""

    def __init__(self, platform, kinds):
        self.platform, self._kinds = platform, kinds

    def addressable_memories(self):
        return [type("Memory", (), {"kind": kind})() for kind in self._kinds]


@pytest.mark.parametrize("compute_platform, kinds, several, expected", [
    # A host CPU named beside GPUs: the first GPU's pinned_host memory, one GPU or several.
    ("gpu", ("device", "pinned_host"), False, ("first compute", "pinned_host")),
    ("gpu", ("device", "pinned_host"), True, ("first compute", "pinned_host")),
    # GPUs without host memory spaces: the CPU device itself.
    ("gpu", ("device",), False, ("cpu", None)),
    # CPU compute devices: the named CPU device, in pinned_host only with several compute devices.
    ("cpu", ("device", "pinned_host"), False, ("cpu", None)),
    ("cpu", ("device", "pinned_host"), True, ("cpu", "pinned_host")),
])
def test_explicit_host_parameter_device_beside_accelerators(compute_platform, kinds, several, expected):
    from jdist.strategy.central_storage import explicit_parameter_store

    cpu = _FakeDevice("cpu", ("device", "pinned_host"))
    compute = [_FakeDevice(compute_platform, kinds) for _ in range(2 if several else 1)]
    names = {id(cpu): "cpu", id(compute[0]): "first compute"}
    device, kind = explicit_parameter_store(cpu, compute)
    assert (names[id(device)], kind) == expected
