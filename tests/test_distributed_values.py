"""jdist's distributed values against TensorFlow 2.21: dataset elements, per-example results of `run`,
results identical on every replica, and which arguments `run` splits."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tf_observed_values import TF_OBSERVED

import jdist

_STRATEGIES: dict = {}


def _strategy(replicas: int) -> jdist.MirroredStrategy:
    if replicas not in _STRATEGIES:
        _STRATEGIES[replicas] = jdist.MirroredStrategy(devices=jax.devices()[:replicas])
    return _STRATEGIES[replicas]


def _elements(strategy, examples, batch):
    x = np.arange(2 * examples, dtype=np.float32).reshape(examples, 2)
    return list(strategy.experimental_distribute_dataset([x[i:i + batch] for i in range(0, examples, batch)]))


def _check(strategy, value, expected):
    local = strategy.experimental_local_results(value)
    assert len(local) == len(expected["local"])
    for got, want in zip(local, expected["local"]):
        want = np.asarray(want, np.float32)
        assert np.shape(got)[0] == want.shape[0] if want.size else np.shape(got)[0] == 0
        np.testing.assert_array_equal(np.asarray(got).ravel(), want.ravel())
    np.testing.assert_array_equal(np.asarray(strategy.gather(value, axis=0)), expected["gather0"])
    for op in ("sum", "mean"):
        np.testing.assert_allclose(np.asarray(strategy.reduce(op, value, axis=0)), expected[f"{op}_0"], rtol=1e-6)
        if expected[f"{op}_None"] == "error":
            with pytest.raises(ValueError, match=r"axis=0"):
                strategy.reduce(op, value, axis=None)
        else:
            np.testing.assert_allclose(np.asarray(strategy.reduce(op, value, axis=None)), expected[f"{op}_None"],
                                       rtol=1e-6)


def _double(x):
    return x * 2.0


def _rowsum(x):
    return jnp.sum(x, axis=1)


@pytest.mark.parametrize("replicas,examples,batch", sorted(TF_OBSERVED))
def test_elements_and_per_example_results_match_tensorflow(replicas, examples, batch):
    strategy = _strategy(replicas)
    elements = _elements(strategy, examples, batch)
    assert len(elements) == len(TF_OBSERVED[replicas, examples, batch])
    for element, expected in zip(elements, TF_OBSERVED[replicas, examples, batch]):
        _check(strategy, element, expected["element"])
        _check(strategy, element.value, expected["element"])  # its leaves alone keep the mask
        _check(strategy, strategy.run(_double, args=(element,)), expected["x2"])
        _check(strategy, strategy.run(_rowsum, args=(element,)), expected["rowsum"])


# -------------------------------------------------------------- mirrored results
def test_all_reduced_result_is_one_value_per_replica_and_a_plain_array():
    strategy = _strategy(4)
    total = strategy.run(lambda: jdist.get_replica_context().all_reduce("sum", 1.0))
    # TF 2.21 (observed): a PerReplica of four local results 4.0; reduce SUM gives 16.0, MEAN 4.0.
    local = strategy.experimental_local_results(total)
    assert [float(v) for v in local] == [4.0, 4.0, 4.0, 4.0]
    assert float(strategy.reduce("sum", total, axis=None)) == 16.0
    assert float(strategy.reduce("mean", total, axis=None)) == 4.0
    np.testing.assert_array_equal(np.asarray(strategy.gather(total[None], axis=0)), [4.0] * 4)
    # Each local result is the copy already on its replica's device: no transfer.
    assert [v.devices() for v in local] == [{d} for d in strategy.worker_devices]
    pointers = {s.device: s.data.unsafe_buffer_pointer() for s in total.addressable_shards}
    assert [v.unsafe_buffer_pointer() for v in local] == [pointers[d] for d in strategy.worker_devices]
    # A plain replicated array: the next run and any jitted function take it as it is.
    assert isinstance(total, jax.Array) and total.sharding.is_fully_replicated
    again = strategy.run(lambda t: jdist.get_replica_context().all_reduce("sum", t), args=(total,))
    assert float(again) == 16.0
    assert float(jax.jit(lambda t: t * 3.0)(total)) == 12.0


def test_replica_computed_constant_has_one_local_result_per_replica():
    strategy = _strategy(4)
    # TF 2.21 (observed): run(lambda: tf.constant(2.0) * 3.0) is a PerReplica of four 6.0.
    const = strategy.run(lambda: jnp.float32(2.0) * 3.0)
    assert [float(v) for v in strategy.experimental_local_results(const)] == [6.0] * 4


def test_plain_value_is_one_local_result():
    strategy = _strategy(4)
    # TF 2.21 (observed): experimental_local_results of a plain tensor is a 1-tuple.
    assert len(strategy.experimental_local_results(jnp.float32(3.0))) == 1


# --------------------------------------------------------------- run's arguments
def test_array_stored_split_over_the_data_axis_is_broadcast():
    # A strategy that stores state split over the data axis (ZeRO-1 here): such arrays are broadcast. (On one
    # that never does, an unmarked split array can only come from a batch: run refuses it, test_padded_run.py.)
    strategy = jdist.MirroredStrategy(devices=jax.devices()[:4], shard_optimizer_state=True)
    weights = jax.device_put(np.arange(8.0, dtype=np.float32), strategy.data_sharding())  # like a ZeRO-1 leaf
    batch = strategy.distribute_batch(np.ones((8,), np.float32))
    seen = strategy.run(lambda w, x: (w.shape[0], jnp.sum(w), x.shape[0]), args=(weights, batch))
    assert seen[0] == 8 and float(seen[1]) == 28.0 and seen[2] == 2
    # What distribute_batch returns stays a plain array and is split: each replica its 2 rows.
    assert isinstance(batch, jax.Array)
    np.testing.assert_array_equal(strategy.gather(strategy.run(_double, args=(batch,)), 0), np.full(8, 2.0))


def test_fsdp_parameters_are_broadcast_to_run():
    strategy = jdist.FSDPStrategy(devices=jax.devices()[:4], min_size_bytes=0)
    with strategy.scope():
        params = strategy.place({"w": np.arange(16.0, dtype=np.float32).reshape(8, 2)})
    assert not params["w"].sharding.is_fully_replicated  # stored split over the replicas
    x = strategy.distribute_batch(np.ones((4, 8), np.float32))
    out = strategy.run(lambda p, x: x @ p["w"], args=(params, x))
    np.testing.assert_array_equal(strategy.gather(out, 0), np.ones((4, 8)) @ np.arange(16.0).reshape(8, 2))


def test_closed_over_constants_do_not_shift_which_results_are_per_replica():
    strategy = _strategy(4)
    const = np.ones(3, np.float32)  # traced as an extra leading input of the replica function
    doubled, twos = strategy.run(lambda x: (x * 2, const * 2), args=(strategy.distribute_batch(np.arange(4.0)),))
    assert isinstance(doubled, jdist.PerReplica) and not isinstance(twos, jdist.PerReplica)
    np.testing.assert_array_equal(strategy.gather(doubled, 0), [0.0, 2.0, 4.0, 6.0])


# ------------------------------------------------------------- the row rule
_TABLE = np.arange(30.0, dtype=np.float32).reshape(10, 3)
_W = np.arange(6.0, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("fn,per_example", [
    (lambda x: jax.nn.softmax(x @ _W, axis=-1), True),  # a dense layer and softmax
    (lambda x: jnp.take(_TABLE, x[:, 0].astype(jnp.int32) % 10, axis=0), True),  # an embedding lookup
    (lambda x: jnp.reshape(x[:, :, None] * x[:, None, :], (x.shape[0], -1)), True),  # fails on 0 rows
    (lambda x: jnp.max(x, axis=1) - jnp.min(x, axis=1), True),
    (lambda x: x - jnp.mean(x, axis=0), True),  # every row depends on the others: run per replica
    (lambda x: jnp.cumsum(x, axis=0), True),
    (lambda x: x[::-1], True),
    (lambda x: jnp.sum(x), False),
    (lambda x: jax.lax.fori_loop(0, 2, lambda i, v: v * 2.0, x), True),  # control flow
])
def test_short_batch_results_are_what_each_replica_computes_on_its_real_rows(fn, per_example):
    strategy = _strategy(4)
    short = _elements(strategy, 10, 8)[1]  # replicas hold 1, 1, 0, 0 real rows
    out = strategy.run(fn, args=(short,))
    assert (isinstance(out, jdist.PerReplica) and out.mask is not None) == per_example
    local = strategy.experimental_local_results(out)
    for got, rows in zip(local, strategy.experimental_local_results(short)):
        if rows.shape[0] or per_example:  # fn on 0 rows (reshape(0, -1) fails: its result is just empty)
            want = fn(jnp.asarray(rows)) if rows.shape[0] else np.zeros((0,) + np.shape(got)[1:])
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_short_batch_result_from_an_all_reduce_of_padded_rows_is_an_error():
    strategy = _strategy(4)
    short = _elements(strategy, 10, 8)[1]
    with pytest.raises(ValueError, match=r"padding rows.*example_mask.*drop_remainder=True"):
        strategy.run(lambda x: jdist.get_replica_context().all_reduce("sum", x), args=(short,))
    full = _elements(strategy, 10, 8)[0]  # a full batch: no padding, the one compiled program
    total = strategy.run(lambda x: jdist.get_replica_context().all_reduce("sum", x), args=(full,))
    np.testing.assert_array_equal(np.asarray(total), np.asarray(strategy.reduce("sum", full, axis=None)))


def test_conv_net_predictions_of_a_short_batch_equal_one_device():
    import flax.linen as nn

    class SmallConvNet(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(4, (3, 3))(x))
            return nn.Dense(3)(x.reshape((x.shape[0], -1)))

    strategy = _strategy(4)
    model = SmallConvNet()
    images = np.random.default_rng(0).normal(size=(11, 6, 6, 1)).astype(np.float32)
    with strategy.scope():
        params = strategy.place(model.init(jax.random.key(0), jnp.zeros((1, 6, 6, 1))))
    predictions = [strategy.gather(strategy.run(lambda p, x: model.apply(p, x), args=(params, element)), 0)
                   for element in strategy.experimental_distribute_dataset([images[:8], images[8:]])]
    np.testing.assert_allclose(np.concatenate(predictions), model.apply(params, images), rtol=1e-5, atol=1e-5)


def test_apply_gradients_inside_run_sums_the_replicas_gradients_as_tensorflow():
    import optax

    strategy = _strategy(2)
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=None, params={"w": jnp.zeros(())}, tx=optax.sgd(0.1))
    x, y = strategy.distribute_batch((np.ones(4, np.float32), np.array([1.0, 1.0, 2.0, 2.0], np.float32)))

    def replica_step(state, x, y):
        grads = jax.grad(lambda p: jnp.sum((p["w"] * x - y) ** 2) / 4.0)(state.params)
        return state.apply_gradients(grads=grads), grads

    state, grads = strategy.run(replica_step, args=(state, x, y))
    # TF 2.21 / Keras 3.15 (observed, Dense(1) kernel from 0, SGD(0.1), the same data and loss): per-replica
    # gradients -1.0 and -2.0; apply_gradients inside run sums them, both kernel copies become 0.3.
    assert [float(g["w"]) for g in strategy.experimental_local_results(grads)] == [-1.0, -2.0]
    assert not isinstance(state.params["w"], jdist.PerReplica)  # still one mirrored value
    np.testing.assert_allclose([float(w["w"]) for w in strategy.experimental_local_results(state.params)], [0.3] * 2)


def test_trainer_keeps_the_one_device_step_on_an_unevenly_split_last_batch():
    import flax.linen as nn
    import optax

    # Keras 3.15 / TF 2.21 fit (observed) on this data, Dense(1) kernel from 0, SGD(0.1), MSE, batch 4: one device
    # ends at kernel 0.26667; MirroredStrategy on 2 replicas at 0.3, because the short last batch (2 + 1 examples,
    # gradients -2, -2, -4) averages the replicas' mean gradients. jdist keeps the one-device result.
    x = np.ones((7, 1), np.float32)
    y = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 2.0], np.float32)
    model = nn.Dense(1, use_bias=False, kernel_init=nn.initializers.zeros)
    trainer = jdist.Trainer(model, optax.sgd(0.1), loss=lambda t, p: (p[:, 0] - t) ** 2, strategy=_strategy(2))
    trainer.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    kernel = jax.tree.leaves(trainer.state.params)[0]
    np.testing.assert_allclose(np.asarray(kernel).ravel(), [0.26666667], rtol=1e-6)
