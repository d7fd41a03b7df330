"""Gradient accumulation: k micro-batches in one compiled loop equal one step on the whole batch."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.diagnostics import hlo
from jdist.models import MLP, classification_loss

MODEL = MLP(features=(32,))
TOL = dict(rtol=1e-5, atol=1e-6)  # float32 sums in a different order


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6, 6, 1)).astype(np.float32)
    y = rng.integers(0, 10, n).astype(np.int32)
    mask = (np.arange(n) < n - 11).astype(np.float32)  # a padded batch: the last 11 are not real
    return {"image": x, "label": y, "mask": mask}


def _loss(params, batch):
    logits = MODEL.apply(params, batch["image"])
    return classification_loss(logits, batch["label"]), {"correct": jnp.argmax(logits, -1) == batch["label"]}


def _train(strategy, accumulation_steps, batches):
    with strategy.scope():
        params = MODEL.init(jax.random.key(0), jnp.zeros((1, 6, 6, 1)))
        state = jdist.TrainState.create(apply_fn=MODEL.apply, params=params, tx=optax.adam(1e-2))
    step = jdist.make_train_step(_loss, strategy, has_aux=True, accumulation_steps=accumulation_steps)
    all_sums = []
    for batch in batches:
        state, sums = step(state, strategy.distribute_batch(batch))
        all_sums.append(jax.device_get(sums))
    return jax.device_get(state.params), all_sums, step, state


@pytest.mark.parametrize("make_strategy", [lambda: jdist.OneDeviceStrategy("cpu:0"), jdist.MirroredStrategy,
                                           jdist.CentralStorageStrategy],
                         ids=["one_device", "mirrored8", "central_storage"])
def test_four_micro_batches_equal_one_step_on_the_whole_batch(make_strategy):
    batches = [_data(seed=0), _data(seed=1)]
    reference, ref_sums, _, _ = _train(jdist.OneDeviceStrategy("cpu:0"), 1, batches)
    params, sums, _, _ = _train(make_strategy(), 4, batches)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), params, reference)
    for got, want in zip(sums, ref_sums):
        assert got["count"] == want["count"] == 53  # the mean is over real examples of all micro-batches
        np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5)
        np.testing.assert_allclose(got["correct"], want["correct"])


def test_accumulated_gradients_cross_replicas_once_per_step():
    strategy = jdist.MirroredStrategy()
    batches = [_data()]
    _, _, step, state = _train(strategy, 4, batches)
    _, _, step1, state1 = _train(strategy, 1, batches)
    batch = strategy.distribute_batch(batches[0])
    text = step.lower(state, batch).compile().as_text()
    found = hlo.collectives(text, 8)
    assert " while(" in text  # really one compiled loop over the micro-batches
    assert found and all(c.count == 1 for c in found)  # no collective inside the loop
    grads_bytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves(state.params))
    reduced = sum(c.buffer_bytes for c in found if c.kind in ("all-reduce", "reduce-scatter"))
    once = sum(c.buffer_bytes * c.count for c in found)
    without = sum(c.buffer_bytes * c.count for c in hlo.collectives(step1.lower(state1, batch).compile().as_text(), 8))
    assert reduced >= grads_bytes  # every gradient is reduced across replicas ...
    assert once <= without + 64  # ... with the same bytes as without accumulation, not 4x


def test_accumulate_gradients_helper_matches_full_batch_gradient():
    strategy = jdist.MirroredStrategy()
    batch = {k: v for k, v in _data().items() if k != "mask"}
    with strategy.scope():
        params = MODEL.init(jax.random.key(0), jnp.zeros((1, 6, 6, 1)))

    def mean_loss(p, b):
        return jnp.mean(classification_loss(MODEL.apply(p, b["image"]), b["label"]))

    def with_aux(p, b):
        return jax.grad(mean_loss)(p, b), b["label"].shape[0]

    @jax.jit
    def accumulated(p, b):
        return jdist.accumulate_gradients(with_aux, p, b, steps=4, has_aux=True, strategy=strategy)

    grads, sizes = accumulated(params, strategy.distribute_batch(batch))
    full = jax.jit(jax.grad(mean_loss))(params, batch)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), grads, full)
    assert np.asarray(sizes).tolist() == [16, 16, 16, 16]


def test_accumulate_gradients_inside_strategy_run_splits_the_local_batch():
    strategy = jdist.MirroredStrategy()
    batch = {k: v for k, v in _data().items() if k != "mask"}
    with strategy.scope():
        params = MODEL.init(jax.random.key(0), jnp.zeros((1, 6, 6, 1)))

    def replica_fn(p, b):
        def loss(q, mb):
            return jdist.compute_average_loss(classification_loss(MODEL.apply(q, mb["image"]), mb["label"]),
                                              global_batch_size=64)
        grads = jdist.accumulate_gradients(jax.grad(loss), p, b, steps=2, reduce="sum")
        return jdist.get_replica_context().all_reduce("sum", grads)

    grads = strategy.run(replica_fn, args=(params, strategy.distribute_batch(batch)))
    full = jax.grad(lambda p: jnp.mean(classification_loss(MODEL.apply(p, batch["image"]), batch["label"])))(params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, **TOL), grads, full)


def test_bad_accumulation_settings_are_named():
    strategy = jdist.MirroredStrategy()
    with pytest.raises(ValueError, match="positive integer"):
        jdist.make_train_step(_loss, strategy, accumulation_steps=0)
    with strategy.scope():
        params = MODEL.init(jax.random.key(0), jnp.zeros((1, 6, 6, 1)))
        state = jdist.TrainState.create(apply_fn=MODEL.apply, params=params, tx=optax.sgd(0.1))
    step = jdist.make_train_step(_loss, strategy, has_aux=True, accumulation_steps=3)
    with pytest.raises(ValueError, match=r"multiple of replicas x accumulation_steps = 24"):
        step(state, strategy.distribute_batch(_data(n=64)))


class _ShardedParams(jdist.Strategy):
    """A strategy splitting each parameter's first divisible dimension over `axis` (a stand-in layout)."""

    def __init__(self, mesh_shape, axis):
        super().__init__(mesh_shape=mesh_shape)
        self._axis = axis

    def parameter_shardings(self, tree):
        from jax.sharding import NamedSharding, PartitionSpec as P

        size = self.mesh.shape[self._axis]

        def spec(x):
            shape = getattr(x, "shape", ())
            for i, d in enumerate(shape):
                if d % size == 0:
                    return NamedSharding(self.mesh, P(*([None] * i + [self._axis])))
            return NamedSharding(self.mesh, P())

        return jax.tree.map(spec, tree)


@pytest.mark.parametrize("mesh_shape,axis", [({"data": 8}, "data"), ({"data": 4, "model": 2}, "model")],
                         ids=["fsdp_like", "tensor_parallel_like"])
def test_accumulation_under_sharded_parameter_layouts(mesh_shape, axis):
    batches = [_data(seed=0)]
    reference, ref_sums, _, _ = _train(jdist.OneDeviceStrategy("cpu:0"), 1, batches)
    strategy = _ShardedParams(mesh_shape, axis)
    params, sums, step, state = _train(strategy, 4, batches)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), params, reference)
    assert sums[0]["count"] == ref_sums[0]["count"]
    kernel = state.params["params"]["dense_0"]["kernel"]
    assert axis in str(kernel.sharding.spec)  # the layout survived the step


def test_accumulation_takes_distributed_batches_with_padding():
    data = _data(n=117)  # two global batches of 64: the second has 53 real examples
    arrays = {"image": data["image"], "label": data["label"]}

    def train(strategy, k):
        with strategy.scope():
            params = MODEL.init(jax.random.key(0), jnp.zeros((1, 6, 6, 1)))
            state = jdist.TrainState.create(apply_fn=MODEL.apply, params=params, tx=optax.adam(1e-2))
        step = jdist.make_train_step(_loss, strategy, has_aux=True, accumulation_steps=k)
        counts = []
        for batch in strategy.experimental_distribute_dataset(jdist.ArrayDataset(arrays, 64)):
            state, sums = step(state, batch)
            counts.append(int(sums["count"]))
        return jax.device_get(state.params), counts

    reference, ref_counts = train(jdist.OneDeviceStrategy("cpu:0"), 1)
    params, counts = train(jdist.MirroredStrategy(), 4)
    assert counts == ref_counts == [64, 53]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), params, reference)
