"""The core Strategy API against TensorFlow's documented results."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jdist


@pytest.fixture(scope="module")
def four():
    return jdist.MirroredStrategy(["cpu:0", "cpu:1", "cpu:2", "cpu:3"])


def _replica_id_plus_one():
    return jdist.get_replica_context().replica_id_in_sync_group + 1


def test_run_and_reduce_replica_ids(four):
    per_replica = four.run(_replica_id_plus_one)
    assert isinstance(per_replica, jdist.PerReplica)
    assert [int(v) for v in four.experimental_local_results(per_replica)] == [1, 2, 3, 4]
    assert int(four.reduce(jdist.ReduceOp.SUM, per_replica, axis=None)) == 10
    assert float(four.reduce("mean", per_replica, axis=None)) == 2.5
    assert int(four.reduce("Sum", per_replica, axis=None)) == 10


def test_results_live_on_their_replica_devices(four):
    values = four.experimental_local_results(four.run(_replica_id_plus_one))
    assert [list(v.devices())[0] for v in values] == list(four.worker_devices)


def test_all_reduce_sum_and_mean(four):
    def fn():
        ctx = jdist.get_replica_context()
        value = ctx.replica_id_in_sync_group.astype(jnp.float32)
        return ctx.all_reduce("sum", value), ctx.all_reduce(jdist.ReduceOp.MEAN, {"v": value * 2})

    total, mean = four.run(fn)
    # Identical on every replica, so it comes back as one replicated (mirrored) array.
    assert not isinstance(total, jdist.PerReplica)
    assert float(total) == 6.0 and float(mean["v"]) == 3.0


def test_all_reduce_of_a_replicated_value_counts_every_copy(four):
    out = four.run(lambda x: jdist.get_replica_context().all_reduce("sum", x), args=(jnp.float32(1.5),))
    assert float(out) == 6.0


def test_all_gather_matches_tf_doc(four):
    # TF doc: all_gather of [1, 2, 3] along axis 0 gives [1, 2, 3] repeated once per replica.
    value = jnp.array([1, 2, 3])
    out = four.run(lambda: jdist.get_replica_context().all_gather(value, axis=0))
    for v in four.experimental_local_results(out):
        np.testing.assert_array_equal(v, [1, 2, 3] * 4)


def test_all_gather_orders_by_replica(four):
    def fn():
        ctx = jdist.get_replica_context()
        return ctx.all_gather(ctx.replica_id_in_sync_group[None], axis=0)

    for v in four.experimental_local_results(four.run(fn)):
        np.testing.assert_array_equal(v, [0, 1, 2, 3])


def test_merge_call_reduces_in_cross_replica_context(four):
    seen = {}

    def merge_fn(strategy, value):
        seen["cross"] = jdist.in_cross_replica_context()
        seen["replica_ctx"] = jdist.get_replica_context()
        return strategy.reduce("sum", value, axis=None)

    def fn():
        ctx = jdist.get_replica_context()
        return ctx.merge_call(merge_fn, args=(ctx.replica_id_in_sync_group.astype(jnp.float32) + 1,))

    out = four.run(fn)
    assert float(out) == 10.0
    assert seen == {"cross": True, "replica_ctx": None}


def test_merge_call_hands_python_numbers_over_as_they_are(four):
    # TF 2.21 (4 logical CPUs): merge_call(merge_fn, args=(x,), kwargs={"scale": 2.0}) with replica values 0..3 and
    # merge_fn = reduce(SUM, x) * scale gives 12.0: `scale` arrives as 2.0, not as per-replica values.
    def merge_fn(strategy, value, scale=1.0):
        assert isinstance(scale, float)
        return strategy.reduce("sum", value, axis=None) * scale

    def fn():
        ctx = jdist.get_replica_context()
        return ctx.merge_call(merge_fn, args=(ctx.replica_id_in_sync_group.astype(jnp.float32),),
                              kwargs={"scale": 2.0})

    assert float(four.run(fn)) == 12.0


def test_merge_call_returns_per_replica_components(four):
    def fn():
        ctx = jdist.get_replica_context()
        return ctx.merge_call(lambda strategy, v: v, args=(ctx.replica_id_in_sync_group * 10,))

    assert [int(v) for v in four.experimental_local_results(four.run(fn))] == [0, 10, 20, 30]


def test_gather_matches_tf_doc():
    # TF doc: values [[1], [2]] on 2 replicas; gather axis 0 -> [[1],[2],[1],[2]], axis 1 -> [[1,1],[2,2]].
    two = jdist.MirroredStrategy(["cpu:0", "cpu:1"])
    values = two.experimental_distribute_values_from_function(lambda _: np.array([[1], [2]]))
    np.testing.assert_array_equal(two.gather(values, axis=0), [[1], [2], [1], [2]])
    np.testing.assert_array_equal(two.gather(values, axis=1), [[1, 1], [2, 2]])


def test_gather_concatenates_in_replica_order(four):
    values = four.experimental_distribute_values_from_function(
        lambda ctx: np.full((2, 3), ctx.replica_id_in_sync_group, np.float32)
    )
    out = four.gather(values, axis=0)
    np.testing.assert_array_equal(out[:, 0], [0, 0, 1, 1, 2, 2, 3, 3])
    assert four.gather(values, axis=1).shape == (2, 12)


def test_reduce_with_axis_uses_true_element_count():
    two = jdist.MirroredStrategy(["cpu:0", "cpu:1"])
    ragged = two.experimental_distribute_values_from_function(
        lambda ctx: np.array([0.0, 1, 2, 3]) if ctx.replica_id_in_sync_group == 0 else np.array([4.0, 5])
    )
    assert float(two.reduce("mean", ragged, axis=0)) == pytest.approx(2.5)
    assert float(two.reduce("sum", ragged, axis=0)) == pytest.approx(15.0)
    with pytest.raises(ValueError, match="different shapes"):
        two.reduce("sum", ragged, axis=None)
    with pytest.raises(ValueError, match="different shapes"):
        two.run(lambda x: x, args=(ragged,))


def test_reduce_axis_on_even_values(four):
    values = four.experimental_distribute_values_from_function(
        lambda ctx: np.arange(3.0) + 3 * ctx.replica_id_in_sync_group
    )
    assert float(four.reduce("mean", values, axis=0)) == pytest.approx(np.arange(12.0).mean())
    np.testing.assert_allclose(four.reduce("sum", values, axis=None), [18, 22, 26])
    np.testing.assert_allclose(four.reduce("mean", values, axis=-1), 5.5)
    with pytest.raises(ValueError, match="out of range"):
        four.reduce("sum", values, axis=1)
    with pytest.raises(TypeError):
        four.reduce("sum", values, axis=0.5)


def test_reduce_of_replicated_value_counts_every_copy(four):
    # A value every replica holds (a plain array, or a run() result identical on all
    # replicas) reduces like TF's Mirrored values: SUM adds the N copies, MEAN keeps it.
    assert float(four.reduce("mean", jnp.float32(3.0), axis=None)) == 3.0
    assert float(four.reduce("sum", jnp.float32(3.0), axis=None)) == 12.0
    mirrored = four.run(lambda: jnp.float32(2.0))
    assert float(four.reduce("sum", mirrored, axis=None)) == 8.0
    assert float(four.reduce("mean", jnp.arange(4.0), axis=0)) == 1.5
    assert float(four.reduce("sum", jnp.arange(4.0), axis=0)) == 24.0


def test_reduce_and_gather_inside_run_point_to_replica_collectives(four):
    with pytest.raises(RuntimeError, match="merge_call"):
        four.run(lambda: four.reduce("sum", jnp.ones(()), axis=None))
    with pytest.raises(RuntimeError, match="all_gather"):
        four.run(lambda: four.gather(jnp.ones(2), axis=0))


def test_bad_reduce_op_and_args(four):
    with pytest.raises(ValueError, match="reduce op"):
        four.reduce("max", four.run(_replica_id_plus_one))
    with pytest.raises(ValueError, match="list or tuple"):
        four.run(lambda x: x, args=jnp.ones(2))


def test_run_splits_distributed_batches_and_broadcasts_the_rest(four):
    batch = four.distribute_batch(np.arange(8.0))
    out = four.run(lambda b, w: b * w, args=(batch, 10.0))
    chunks = four.experimental_local_results(out)
    np.testing.assert_array_equal(np.stack(chunks), np.arange(80.0, step=10).reshape(4, 2))
    np.testing.assert_array_equal(four.gather(out, axis=0), np.arange(80.0, step=10))


def test_run_is_compiled_once_per_signature(four):
    traces = []

    def fn(x):
        traces.append(1)
        return x + 1

    for _ in range(3):
        four.run(fn, args=(jnp.ones(2),))
    # Two traces on first use (shape probe + compile), none after.
    assert len(traces) == 2


def test_distribute_values_from_function_passes_value_context(four):
    values = four.experimental_distribute_values_from_function(
        lambda ctx: np.float32(ctx.replica_id_in_sync_group * 100 + ctx.num_replicas_in_sync)
    )
    assert [float(v) for v in four.experimental_local_results(values)] == [4, 104, 204, 304]
    out = four.run(lambda v: v + 1, args=(values,))
    assert [float(v) for v in four.experimental_local_results(out)] == [5, 105, 205, 305]


def test_local_results_of_plain_value_is_a_one_tuple(four):
    x = jnp.ones(2)
    assert four.experimental_local_results(x) == (x,)


def test_one_device_strategy_unwraps():
    one = jdist.OneDeviceStrategy("cpu:1")
    out = one.run(lambda x: x * 2 + jdist.get_replica_context().replica_id_in_sync_group, args=(jnp.ones(2),))
    assert not isinstance(out, jdist.PerReplica)
    np.testing.assert_array_equal(out, [2.0, 2.0])
    assert one.num_replicas_in_sync == 1
    value = one.experimental_distribute_values_from_function(lambda ctx: np.float32(7))
    assert float(value) == 7.0 and list(value.devices())[0] == jax.devices("cpu")[1]
    # TF doc: sum of run(lambda x: x*2, args=(i,)) over i = 0..9 is 90.
    assert sum(float(one.run(lambda x: x * 2, args=(i,))) for i in range(10)) == 90.0


def test_single_replica_mirrored_unwraps_run_results():
    one = jdist.MirroredStrategy(["cpu:0"])
    out = one.run(lambda: jdist.get_replica_context().replica_id_in_sync_group + 5)
    assert not isinstance(out, jdist.PerReplica) and int(out) == 5


def test_default_strategy_and_contexts(four):
    default = jdist.get_strategy()
    assert isinstance(default, jdist.DefaultStrategy) and default is jdist.get_strategy()
    assert not jdist.has_strategy() and not jdist.in_cross_replica_context()
    ctx = jdist.get_replica_context()
    assert ctx is not None and int(ctx.replica_id_in_sync_group) == 0
    assert default.run(lambda x: x + 1, args=(1,)) == 2
    with four.scope():
        assert jdist.get_strategy() is four and jdist.has_strategy()
        assert jdist.in_cross_replica_context() and jdist.get_replica_context() is None
        with four.scope():  # re-entering the same strategy is allowed
            assert jdist.get_strategy() is four
    assert jdist.get_strategy() is default

    def inside():
        assert not jdist.in_cross_replica_context()
        assert jdist.get_replica_context().num_replicas_in_sync == 4
        return jnp.zeros(())

    four.run(inside)


def test_experimental_set_strategy(four):
    jdist.experimental_set_strategy(four)
    try:
        assert jdist.get_strategy() is four
        with pytest.raises(RuntimeError, match="Must not be called inside"):
            with four.scope():
                jdist.experimental_set_strategy(None)
    finally:
        jdist.experimental_set_strategy(None)
    assert isinstance(jdist.get_strategy(), jdist.DefaultStrategy)


def test_mixing_scopes_is_an_error(four):
    other = jdist.OneDeviceStrategy("cpu:0")
    with pytest.raises(RuntimeError, match="Mixing different jdist strategies"):
        with four.scope():
            with other.scope():
                pass
    with pytest.raises(RuntimeError, match="Mixing different jdist strategies"):
        with four.scope():
            other.run(lambda: 1.0)


@pytest.mark.parametrize(
    "devices, message",
    [
        (["cpu:0", "/device:CPU:0"], "No duplicates allowed"),
        (["cpu:99"], "Unknown device 'cpu:99'.*Available devices"),
        (["tpu:0"], "Unknown device 'tpu:0'"),
        (["not a device!"], "Cannot parse device"),
        ([], "at least one device"),
    ],
)
def test_bad_devices_get_clear_errors(devices, message):
    with pytest.raises(ValueError, match=message):
        jdist.MirroredStrategy(devices)


def test_device_names_and_objects():
    cpus = jax.devices("cpu")
    strategy = jdist.MirroredStrategy(["/job:localhost/replica:0/task:0/device:CPU:2", "CPU:3", cpus[5]])
    assert list(strategy.worker_devices) == [cpus[2], cpus[3], cpus[5]]
    assert jdist.MirroredStrategy().num_replicas_in_sync == len(jax.local_devices())
    assert strategy.mesh.axis_names == ("data",)


def test_batch_that_does_not_divide_names_the_fix(four):
    with pytest.raises(ValueError, match=r"10 does not divide among 4 replicas.*multiple of 4"):
        four.distribute_batch({"x": np.zeros((10, 3)), "y": np.zeros(10)})
    with pytest.raises(ValueError, match="disagree on the batch size"):
        four.distribute_batch({"x": np.zeros((8, 3)), "y": np.zeros(4)})


def test_values_created_in_scope_are_replicated(four):
    import flax.linen as nn
    import optax
    from flax import nnx

    with four.scope():
        params = nn.Dense(3).init(jax.random.key(0), jnp.ones((1, 2)))
        opt_state = optax.adam(1e-3).init(params)
        module = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    for leaf in jax.tree.leaves((params, opt_state, nnx.state(module))):
        assert leaf.sharding.is_fully_replicated
        assert leaf.sharding.device_set == set(four.worker_devices)


def test_train_state_create_places_per_strategy(four):
    import flax.linen as nn
    import optax
    from flax import nnx

    params = nn.Dense(3).init(jax.random.key(0), jnp.ones((1, 2)))  # created outside any scope
    with four.scope():
        state = jdist.TrainState.create(apply_fn=nn.Dense(3).apply, params=params, tx=optax.sgd(0.1))
        nnx_state = jdist.TrainState.from_nnx(nnx.Linear(2, 3, rngs=nnx.Rngs(0)), optax.adam(1e-3))
    for leaf in jax.tree.leaves((state, nnx_state)):
        assert leaf.sharding.device_set == set(four.worker_devices)
    out = nnx_state.apply_fn(nnx_state.params, jnp.ones((4, 2)))
    assert out.shape == (4, 3)


def test_mirrored_detection_is_conservative(four):
    batch = four.distribute_batch(np.arange(8.0))

    @jax.jit
    def inner_sum(x):
        return jdist.get_replica_context().all_reduce("sum", x)

    def fn(w, x):
        local_grad = jax.grad(lambda w: jnp.sum(w * x))(w)
        return {
            "local_grad": local_grad,  # differs per replica: no collective
            "summed_grad": inner_sum(local_grad),  # a collective inside a nested jit
            "from_id": w + jdist.get_replica_context().replica_id_in_sync_group,
            "from_constant": w * 3.0,
        }

    out = four.run(fn, args=(jnp.float32(2.0), batch))
    assert isinstance(out["local_grad"], jdist.PerReplica)
    assert isinstance(out["from_id"], jdist.PerReplica)
    assert not isinstance(out["summed_grad"], jdist.PerReplica)
    assert not isinstance(out["from_constant"], jdist.PerReplica)
    assert [float(v) for v in four.experimental_local_results(out["local_grad"])] == [1.0, 5.0, 9.0, 13.0]
    assert float(out["summed_grad"]) == 28.0 and float(out["from_constant"]) == 6.0


def test_a_donating_step_never_frees_the_callers_arrays():
    """TrainState.create places (copies) the parameters, so the step's donation leaves the caller's
    arrays alive, under the default strategy as under the others."""
    import optax

    for strategy in (jdist.get_strategy(), jdist.MirroredStrategy(), jdist.OneDeviceStrategy("cpu:0")):
        params = {"w": jnp.ones((4, 2))}
        with strategy.scope():
            state = jdist.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(0.1))
        step = jdist.make_train_step(lambda p, b: jnp.sum((b["x"] @ p["w"]) ** 2, axis=1), strategy)
        state, _ = step(state, {"x": np.ones((8, 4), np.float32)})
        assert not params["w"].is_deleted(), strategy
        np.testing.assert_array_equal(np.asarray(params["w"]), 1.0)
