"""Distributed datasets on simulated CPU devices, against TensorFlow 2.21's observed splits.

TF's rule: each global batch of b examples goes to N replicas in consecutive chunks of
ceil(b / N); the last replicas get fewer or none. jdist pads every chunk to
ceil(G / N) rows and masks the padding. Expected values come from TF runs (the
reference's observed cases) and TF's own input_lib tests.
"""
import importlib.util
import json
import threading
import time

import grain
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.input.dataset import EmptyDatasetError, choose_shard_policy


def _mirrored(n):
    return jdist.MirroredStrategy([f"cpu:{i}" for i in range(n)])


@pytest.fixture(scope="module")
def four():
    return _mirrored(4)


def _range_batches(n, batch, drop_remainder=False):
    stop = n - n % batch if drop_remainder else n
    return [np.arange(i, min(i + batch, stop)) for i in range(0, stop, batch)]


class _Reiterable:
    """A plain Python iterable whose __iter__ starts over (a generator per epoch)."""

    def __init__(self, batches):
        self._batches = batches

    def __iter__(self):
        return (b for b in self._batches)


def _sources(n, batch, drop_remainder=False):
    records = list(range(n))
    return {
        "list": _range_batches(n, batch, drop_remainder),
        "iterable": _Reiterable(_range_batches(n, batch, drop_remainder)),
        "grain_map": grain.MapDataset.range(n).batch(batch, drop_remainder=drop_remainder),
        "grain_iter": grain.MapDataset.range(n).batch(batch, drop_remainder=drop_remainder).to_iter_dataset(),
        "grain_loader": grain.DataLoader(
            data_source=records,
            sampler=grain.samplers.IndexSampler(n, shuffle=False, num_epochs=1),
            operations=[grain.transforms.Batch(batch, drop_remainder=drop_remainder)],
            worker_count=0,
        ),
        "array_dataset": jdist.ArrayDataset(np.arange(n), batch, drop_remainder=drop_remainder),
    }


def _local(strategy, batch):
    return [np.asarray(v).tolist() for v in strategy.experimental_local_results(batch)]


def _epoch(strategy, dist_ds):
    return [_local(strategy, b) for b in dist_ds]


# (replicas, examples, global batch, drop_remainder) -> per-step per-replica examples, from TF 2.21.
TF_SPLITS = [
    (4, 10, 8, False, [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8], [9], [], []]]),
    (4, 10, 6, False, [[[0, 1], [2, 3], [4, 5], []], [[6], [7], [8], [9]]]),
    (3, 8, 4, False, [[[0, 1], [2, 3], []], [[4, 5], [6, 7], []]]),
    (3, 8, 4, True, [[[0, 1], [2, 3], []], [[4, 5], [6, 7], []]]),
    (4, 10, 8, True, [[[0, 1], [2, 3], [4, 5], [6, 7]]]),
    (8, 16, 8, False, [[[i] for i in range(8)], [[i] for i in range(8, 16)]]),
    (2, 10, 2, False, [[[i], [i + 1]] for i in range(0, 10, 2)]),  # TF input_lib_test, 2 replicas
    (1, 10, 2, False, [[[i, i + 1]] for i in range(0, 10, 2)]),  # and 1 replica
]


@pytest.mark.parametrize("source", ["list", "iterable", "grain_map", "grain_iter", "grain_loader", "array_dataset"])
@pytest.mark.parametrize("replicas,n,batch,drop,expected", TF_SPLITS)
def test_tf_split_rule(source, replicas, n, batch, drop, expected):
    strategy = _mirrored(replicas)
    dist_ds = strategy.experimental_distribute_dataset(_sources(n, batch, drop)[source])
    assert _epoch(strategy, dist_ds) == expected


def test_shards_are_padded_to_one_shape_and_masked(four):
    dist_ds = four.experimental_distribute_dataset(_range_batches(10, 6))
    batches = list(dist_ds)
    assert dist_ds.per_replica_batch_size == 2  # ceil(6 / 4)
    for batch, counts in zip(batches, [[2, 2, 2, 0], [1, 1, 1, 1]]):
        assert batch.value.shape == (8,) and batch.mask.shape == (8,)
        assert batch.value.sharding == four.data_sharding()
        mask = np.asarray(batch.mask).reshape(4, 2)
        # Real examples first in every shard, then padding.
        np.testing.assert_array_equal(mask, np.arange(2)[None, :] < np.array(counts)[:, None])
        # Padding repeats a real example of the batch, so any model stays finite on it.
        values = np.asarray(batch.value)
        real = set(values[np.asarray(batch.mask)].tolist())
        assert set(values.tolist()) <= real


def test_tuple_and_dict_elements_keep_their_structure(four):
    x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    tuples = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 10, 8)]
    last = list(four.experimental_distribute_dataset(tuples))[-1]
    assert isinstance(last.value, tuple)
    per_replica = four.experimental_local_results(last)
    assert [r[1].tolist() for r in per_replica] == [[8], [9], [], []]
    assert per_replica[0][0].shape == (1, 2) and per_replica[3][0].shape == (0, 2)
    dicts = [{"x": x[i:i + 8], "y": y[i:i + 8]} for i in range(0, 10, 8)]
    last = list(four.experimental_distribute_dataset(dicts))[-1]
    assert [r["y"].tolist() for r in four.experimental_local_results(last)] == [[8], [9], [], []]


def test_unpacked_batch_components_keep_the_mask(four):
    """TF's `for x, y in dist_dataset`: each component is still per replica, its padding masked."""
    pairs = [(np.arange(i, min(i + 8, 10), dtype=np.float32), np.arange(i, min(i + 8, 10))) for i in range(0, 10, 8)]
    x, y = list(four.experimental_distribute_dataset(pairs))[-1]
    assert [r.tolist() for r in four.experimental_local_results(y)] == [[8], [9], [], []]
    doubled = four.run(lambda a, b: a * 2.0 + b, args=(x, y))
    assert [r.tolist() for r in four.experimental_local_results(doubled)] == [[24.0], [27.0], [], []]
    (single,) = four.experimental_distribute_dataset([np.zeros(4)])
    with pytest.raises(TypeError, match="not a tuple"):
        a, b = single


def test_multi_axis_mesh_splits_over_the_data_axis_only():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4})
    batches = list(strategy.experimental_distribute_dataset(_range_batches(10, 4)))
    assert [_local(strategy, b) for b in batches] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8], [9]]]
    assert batches[0].value.sharding == strategy.data_sharding()


def test_default_strategy_distributes_too():
    strategy = jdist.get_strategy()
    dist_ds = strategy.experimental_distribute_dataset(_range_batches(5, 2))
    assert _epoch(strategy, dist_ds) == [[[0, 1]], [[2, 3]], [[4]]]
    out = [strategy.run(lambda x: x * 2, args=(b,)) for b in dist_ds]
    np.testing.assert_array_equal(out[-1], [8, 8])  # the padding row repeats 4


# ------------------------------------------------------------------ from a function
def test_distribute_datasets_from_function(four):
    seen = []

    def dataset_fn(ctx):
        seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync))
        return _range_batches(10, ctx.get_per_replica_batch_size(8))

    dist_ds = four.distribute_datasets_from_function(dataset_fn)
    assert seen == [(1, 0, 4)]  # called once: one input pipeline per worker
    # The replicas take consecutive per-replica batches; replicas left without data get empty slots.
    assert _epoch(four, dist_ds) == [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8, 9], [], [], []]]
    batch = list(dist_ds)[-1]
    assert batch.value.shape == (8,)
    np.testing.assert_array_equal(np.asarray(batch.mask), [True, True] + [False] * 6)


def test_from_function_tf_uneven_case():
    # TF input_lib_test testUnevenDatasetBatches (input_fn, 2 replicas): range(9).batch(2).
    strategy = _mirrored(2)
    dist_ds = strategy.distribute_datasets_from_function(lambda ctx: grain.MapDataset.range(9).batch(2))
    assert _epoch(strategy, dist_ds) == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8], []]]


def test_from_function_per_replica_pipelines(four):
    options = jdist.InputOptions(experimental_replication_mode=jdist.InputReplicationMode.PER_REPLICA)

    def dataset_fn(ctx):
        assert (ctx.num_input_pipelines, ctx.num_replicas_in_sync) == (4, 4)
        start = 100 * ctx.input_pipeline_id
        return [np.arange(start, start + 1 + ctx.input_pipeline_id)]  # one batch, its own size per replica

    assert _epoch(four, four.distribute_datasets_from_function(dataset_fn, options)) == [
        [[0], [100, 101], [200, 201, 202], [300, 301, 302, 303]]]


def test_input_context_matches_tf():
    ctx = jdist.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4)
    assert ctx.get_per_replica_batch_size(8) == 2
    assert str(ctx) == "tf.distribute.InputContext(input pipeline id 1, total: 2)"
    with pytest.raises(ValueError) as err:
        ctx.get_per_replica_batch_size(7)
    assert str(err.value) == "The `global_batch_size` 7 is not divisible by `num_replicas_in_sync` 4 "
    default = jdist.InputContext()
    assert (default.num_input_pipelines, default.input_pipeline_id, default.num_replicas_in_sync) == (1, 0, 1)


# ------------------------------------------------------------------ training
N_EXAMPLES, GLOBAL_BATCH, LR, EPOCHS = 37, 6, 0.5, 2
RTOL, ATOL = 1e-5, 1e-6  # float32; only the summation order differs


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_EXAMPLES, 5)).astype(np.float32)
    y = (x @ rng.normal(size=(5, 3))).argmax(-1).astype(np.int32)
    params = {"w": np.zeros((5, 3), np.float32), "b": np.zeros(3, np.float32)}
    return x, y, params


def _per_example_loss(params, x, y):
    logits = x @ params["w"] + params["b"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y)


def _reference(x, y, params):
    """One device, plain JAX: SGD on the mean loss of each batch, the short last batch included."""
    step = jax.jit(lambda p, xb, yb: jax.tree.map(
        lambda w, g: w - LR * g, p, jax.grad(lambda q: jnp.mean(_per_example_loss(q, xb, yb)))(p)))
    for _ in range(EPOCHS):
        for i in range(0, N_EXAMPLES, GLOBAL_BATCH):
            params = step(params, x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH])
    return params


def _tf_reference(x, y, params, replicas=4):
    """TF's `compute_average_loss` without `global_batch_size`: each replica's sum over its rows of TF's split
    (6 rows over 4 replicas: 2, 2, 2, 0), divided by its row count times the replicas."""
    def loss(q, xb, yb):
        total, start = 0.0, 0
        for rows in [min(-(-len(xb) // replicas), max(0, len(xb) - r * -(-len(xb) // replicas)))
                     for r in range(replicas)]:
            if rows:
                total += jnp.sum(_per_example_loss(q, xb[start:start + rows], yb[start:start + rows])) / (
                    rows * replicas)
            start += rows
        return total

    step = jax.jit(lambda p, xb, yb: jax.tree.map(lambda w, g: w - LR * g, p, jax.grad(loss)(p, xb, yb)))
    for _ in range(EPOCHS):
        for i in range(0, N_EXAMPLES, GLOBAL_BATCH):
            params = step(params, x[i:i + GLOBAL_BATCH], y[i:i + GLOBAL_BATCH])
    return params


def _assert_close(params, reference):
    for name in ("w", "b"):
        got = np.asarray(params[name])
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, np.asarray(reference[name]), rtol=RTOL, atol=ATOL)


def test_train_step_over_uneven_dataset_matches_one_device(four):
    x, y, params = _data()
    reference = _reference(x, y, params)
    # 37 examples, global batch 6, 4 replicas: chunks [2, 2, 2, 0] and finally [1, 0, 0, 0].
    dist_ds = four.experimental_distribute_dataset(jdist.ArrayDataset({"x": x, "y": y}, GLOBAL_BATCH))
    with four.scope():
        state = jdist.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(LR))
    step = jdist.make_train_step(lambda p, b: _per_example_loss(p, b["x"], b["y"]), four)
    counts = []
    for _ in range(EPOCHS):
        for batch in dist_ds:
            state, sums = step(state, batch)
            counts.append(int(sums["count"]))
    assert counts == [6] * 6 + [1] + [6] * 6 + [1]
    _assert_close(state.params, reference)
    (compiled,) = step._cache.values()
    assert compiled._cache_size() == 1  # the short batch has the same shapes: no recompilation


@pytest.mark.parametrize("explicit_mask", [True, False])
def test_custom_loop_with_compute_average_loss_matches_one_device(four, explicit_mask):
    x, y, params = _data()
    reference = _reference(x, y, params) if explicit_mask else _tf_reference(x, y, params)

    def replica_step(params, inputs, *mask):
        xb, yb = inputs  # run hands the replica its plain (padded) element

        def loss_fn(p):
            per_example = _per_example_loss(p, xb, yb)
            # Without mask=, the replica's mask comes from the distributed batch (ported TF code).
            return jdist.compute_average_loss(per_example, mask=mask[0] if mask else None)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        grads = jdist.get_replica_context().all_reduce("sum", grads)
        return jax.tree.map(lambda w, g: w - LR * g, params, grads), loss

    dist_ds = four.experimental_distribute_dataset(jdist.ArrayDataset((x, y), GLOBAL_BATCH))
    with four.scope():
        params = four.place(params)
    for _ in range(EPOCHS):
        for batch in dist_ds:
            args = (params, batch, batch.mask) if explicit_mask else (params, batch)
            params, per_replica_loss = four.run(replica_step, args=args)
            losses = np.array([float(v) for v in four.experimental_local_results(per_replica_loss)])
            assert np.all(np.isfinite(losses))  # replicas without examples give 0, not NaN
            assert losses[3] == 0.0
    _assert_close(params, reference)


def test_replica_context_exposes_the_mask(four):
    (batch,) = four.experimental_distribute_dataset([np.arange(5)])
    # In the padded program (a function that communicates between replicas), the padding shows.
    def with_collective(x):
        ctx = jdist.get_replica_context()
        return ctx.example_mask, ctx.all_reduce("sum", jnp.sum(x * ctx.example_mask))
    masks, total = four.run(with_collective, args=(batch,))
    assert [np.asarray(m).tolist() for m in four.experimental_local_results(masks)] == [
        [True, True], [True, True], [True, False], [False, False]]
    assert int(total) == 10
    # A function without collectives runs on each replica's real rows alone, as in TF: nothing to mask.
    masks = four.run(lambda x: jdist.get_replica_context().example_mask, args=(batch,))
    assert [np.asarray(m).tolist() for m in four.experimental_local_results(masks)] == [
        [True, True], [True, True], [True], []]


def test_compute_average_loss_refuses_misaligned_losses(four):
    (batch,) = four.experimental_distribute_dataset([np.arange(8.0)])
    with pytest.raises(ValueError, match="cannot be masked"):
        four.run(lambda x: jdist.compute_average_loss(jnp.concatenate([x, x])), args=(batch,))


# ------------------------------------------------------------------ epochs, shuffling, state
def test_array_dataset_shuffles_per_epoch_reproducibly(four):
    def epochs(seed):
        dist_ds = four.experimental_distribute_dataset(jdist.ArrayDataset(np.arange(20), 8, shuffle=True, seed=seed))
        return [sum((sum(_local(four, b), []) for b in dist_ds), []) for _ in range(3)]

    first = epochs(seed=7)
    assert first == epochs(seed=7)
    assert first != epochs(seed=8)
    assert all(sorted(e) == list(range(20)) for e in first)  # each epoch: every example once
    assert first[0] != first[1] != first[2]


def test_array_dataset_for_loop_is_one_epoch(four):
    """As a tf.data dataset: each for loop is one pass (it used to index on forever), each new
    pass is the next epoch, reshuffled, and the distributed dataset's epochs are the same."""
    ds = jdist.ArrayDataset(np.arange(10), 4)
    assert len(ds) == 3
    assert [b.tolist() for b in ds] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [b.tolist() for b in ds] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # a second pass, again finite
    assert list(jdist.ArrayDataset(np.arange(8), 4, drop_remainder=True)) != []
    assert [b.tolist() for b in jdist.ArrayDataset(np.arange(10), 4, drop_remainder=True)] == [[0, 1, 2, 3],
                                                                                                [4, 5, 6, 7]]

    shuffled = jdist.ArrayDataset(np.arange(20), 8, shuffle=True, seed=7)
    passes = [np.concatenate(list(shuffled)).tolist() for _ in range(3)]
    assert all(sorted(p) == list(range(20)) for p in passes) and passes[0] != passes[1] != passes[2]
    dist_ds = four.experimental_distribute_dataset(jdist.ArrayDataset(np.arange(20), 8, shuffle=True, seed=7))
    assert [sum((sum(_local(four, b), []) for b in dist_ds), []) for _ in range(3)] == passes


def test_grain_shuffle_gets_a_new_order_each_epoch(four):
    dist_ds = four.experimental_distribute_dataset(grain.MapDataset.range(20).shuffle(seed=1).batch(8))
    orders = [sum((sum(_local(four, b), []) for b in dist_ds), []) for _ in range(2)]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1]) == list(range(20))


def _shuffled_sources():
    return {
        "list": _range_batches(23, 4),
        "iterable": _Reiterable(_range_batches(23, 4)),
        "grain_map": grain.MapDataset.range(23).shuffle(seed=3).batch(4),
        "grain_iter": grain.MapDataset.range(23).shuffle(seed=3).batch(4).to_iter_dataset(),
        "grain_loader": grain.DataLoader(
            data_source=list(range(23)),
            sampler=grain.samplers.IndexSampler(23, shuffle=True, seed=3, num_epochs=1),
            operations=[grain.transforms.Batch(4)], worker_count=0),
        "array_dataset": jdist.ArrayDataset(np.arange(23), 4, shuffle=True, seed=3),
    }


@pytest.mark.parametrize("source", ["list", "iterable", "grain_map", "grain_iter", "grain_loader", "array_dataset"])
def test_iterator_state_round_trip(four, source):
    options = jdist.InputOptions(experimental_per_replica_buffer_size=3)  # prefetched batches are not "seen"
    dist_ds = four.experimental_distribute_dataset(_shuffled_sources()[source], options)
    epoch0 = _epoch(four, dist_ds)
    it = iter(dist_ds)  # epoch 1
    seen = [_local(four, next(it)) for _ in range(2)]
    time.sleep(0.05)  # let the prefetcher run ahead
    state = json.loads(json.dumps(it.get_state()))  # JSON-serializable
    rest = [_local(four, b) for b in it]
    epoch2 = _epoch(four, dist_ds)
    assert len(seen) + len(rest) == len(epoch0) == 6 and rest

    resumed_ds = four.experimental_distribute_dataset(_shuffled_sources()[source], options)
    resumed = iter(resumed_ds)
    resumed.set_state(state)
    assert [_local(four, b) for b in resumed] == rest
    assert _epoch(four, resumed_ds) == epoch2  # the next iter() continues with epoch 2


def test_state_restores_the_declared_batch_size_before_the_short_batch(four):
    dist_ds = four.experimental_distribute_dataset(_range_batches(10, 8))
    it = iter(dist_ds)
    next(it)
    state = it.get_state()
    resumed = iter(four.experimental_distribute_dataset(_range_batches(10, 8)))
    resumed.set_state(state)
    (last,) = list(resumed)  # the short batch, still padded to 2 rows per replica
    assert last.value.shape == (8,) and _local(four, last) == [[8], [9], [], []]


def test_one_shot_iterators_cannot_be_reread(four):
    dist_ds = four.experimental_distribute_dataset(iter(_range_batches(8, 4)))
    assert len(list(dist_ds)) == 2
    with pytest.raises(ValueError, match="one-shot iterator"):
        next(iter(dist_ds))


# ------------------------------------------------------------------ prefetching
class _CountingSource:
    def __init__(self, n, fail_at=None):
        self.fetched, self._n, self._fail_at = 0, n, fail_at

    def __iter__(self):
        for i in range(self._n):
            if i == self._fail_at:
                raise RuntimeError("broken record")
            self.fetched += 1
            yield np.full(4, i)


@pytest.mark.parametrize("depth", [0, 2])
def test_prefetcher_reads_ahead_by_its_depth(four, depth):
    source = _CountingSource(10)
    options = jdist.InputOptions(experimental_per_replica_buffer_size=depth)
    it = iter(four.experimental_distribute_dataset(source, options))
    next(it)
    # Ahead of the consumer: `depth` batches on the devices and one being handed over, then one
    # prepared batch queued on the host and one being handed over; nothing without prefetching.
    expected = 1 + (depth + 1) + 2 if depth else 1
    deadline = time.time() + 5
    while source.fetched < expected and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert source.fetched == expected
    it.close()


def test_prefetch_errors_reach_the_consumer_and_threads_stop(four):
    before = threading.active_count()
    it = iter(four.experimental_distribute_dataset(_CountingSource(10, fail_at=3)))
    assert len([next(it) for _ in range(3)]) == 3
    with pytest.raises(RuntimeError, match="broken record"):
        next(it)
    it2 = iter(four.experimental_distribute_dataset(_CountingSource(10)))
    next(it2)
    it2.close()
    with pytest.raises(StopIteration):  # a closed iterator ends, it does not hang
        next(it2)
    time.sleep(0.3)
    assert threading.active_count() <= before


def test_host_batches_are_placed_when_used(four):
    options = jdist.InputOptions(experimental_fetch_to_device=False)
    host = list(four.experimental_distribute_dataset(_range_batches(10, 8), options))
    device = list(four.experimental_distribute_dataset(_range_batches(10, 8)))
    assert host[1].on_host and isinstance(host[1].value, np.ndarray)
    doubled = four.run(lambda x: x * 2, args=(host[1],))
    # Only the real rows come back, as TF's gather of a short batch's results (8 and 9 doubled).
    np.testing.assert_array_equal(np.asarray(four.gather(doubled, 0)), np.asarray(four.gather(device[1], 0)) * 2)
    np.testing.assert_array_equal(np.asarray(four.gather(doubled, 0)), [16, 18])


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is optional, not installed")
def test_tf_data_dataset(four):
    import tensorflow as tf

    dist_ds = four.experimental_distribute_dataset(tf.data.Dataset.range(10).batch(8))
    assert _epoch(four, dist_ds) == [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8], [9], [], []]]


# ------------------------------------------------------------------ bad input
def test_leaves_disagreeing_on_the_batch_dimension(four):
    with pytest.raises(ValueError, match="disagree on the batch"):
        list(four.experimental_distribute_dataset([{"x": np.zeros((4, 2)), "y": np.zeros(3)}]))


def test_batch_larger_than_declared(four):
    with pytest.raises(ValueError, match="larger than the declared global batch size 4"):
        list(four.experimental_distribute_dataset([np.arange(4), np.arange(8)]))
    options = jdist.InputOptions(global_batch_size=4)
    with pytest.raises(ValueError, match="larger than the declared"):
        list(four.experimental_distribute_dataset([np.arange(8)], options))


def test_declared_batch_size_pads_every_batch(four):
    options = jdist.InputOptions(global_batch_size=16)
    (batch,) = four.experimental_distribute_dataset([np.arange(8)], options)
    assert batch.value.shape == (16,) and _local(four, batch) == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.parametrize("empty", [[], grain.MapDataset.range(10).filter(lambda x: x > 100).to_iter_dataset().batch(2)])
def test_empty_dataset(four, empty):
    with pytest.raises(EmptyDatasetError, match="produced no batches"):
        next(iter(four.experimental_distribute_dataset(empty)))
    with pytest.raises(ValueError, match="produced no batches"):
        list(four.distribute_datasets_from_function(lambda ctx: []))


def test_unbatched_or_changing_elements(four):
    with pytest.raises(ValueError, match="leading batch dimension"):
        list(four.experimental_distribute_dataset([np.float32(1.0)]))
    with pytest.raises(ValueError, match="same structure, per-example shapes and dtypes"):
        list(four.experimental_distribute_dataset([np.zeros((4, 2)), np.zeros((4, 3))]))
    with pytest.raises(TypeError, match="jdist.ArrayDataset"):
        four.experimental_distribute_dataset(np.zeros((8, 2)))
    with pytest.raises(TypeError, match="already distributed"):
        four.experimental_distribute_dataset(four.experimental_distribute_dataset([np.arange(4)]))


def test_bad_options(four):
    with pytest.raises(ValueError, match="non-negative"):
        jdist.InputOptions(experimental_per_replica_buffer_size=-1)
    with pytest.raises(NotImplementedError, match="PER_REPLICA"):
        four.experimental_distribute_dataset(
            [np.arange(4)], jdist.InputOptions(experimental_replication_mode="PER_REPLICA"))


def test_shard_policy_choice():
    files = jdist.FileSource([f"part-{i}" for i in range(4)], lambda paths: paths)
    one_file = jdist.FileSource(["only"], lambda paths: paths)
    policy = jdist.AutoShardPolicy
    assert choose_shard_policy(policy.AUTO, files, 2)[0] is policy.FILE
    chosen, reason = choose_shard_policy(policy.AUTO, one_file, 2)
    assert chosen is policy.DATA and "1 file(s) for 2 workers" in reason
    assert choose_shard_policy(policy.AUTO, [np.arange(4)], 2)[0] is policy.DATA
    assert choose_shard_policy(policy.DATA, files, 2)[0] is policy.DATA
    assert choose_shard_policy(policy.OFF, files, 2)[0] is policy.OFF
    with pytest.raises(ValueError, match="1 file\\(s\\) for 2 workers"):
        choose_shard_policy(policy.FILE, one_file, 2)
    with pytest.raises(ValueError, match="needs a jdist.FileSource"):
        choose_shard_policy(policy.FILE, [np.arange(4)], 2)
    assert choose_shard_policy(policy.FILE, one_file, 1)[0] is policy.FILE  # one worker: a no-op
    assert files.files_for(1, 2) == ["part-1", "part-3"]
