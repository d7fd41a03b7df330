"""`strategy.run` on a short batch: every result is what TensorFlow 2.21 computes on each replica's real
rows (`tests/tf_observed_padding.py`), or a clear error; never a value that counts padding rows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tf_observed_padding import TF_PADDING

import jdist
from jdist.strategy import python_control_flow

_STRATEGIES: dict = {}


def _strategy(replicas: int) -> jdist.MirroredStrategy:
    if replicas not in _STRATEGIES:
        _STRATEGIES[replicas] = jdist.MirroredStrategy(devices=jax.devices()[:replicas])
    return _STRATEGIES[replicas]


def _ctx():
    return jdist.get_replica_context()


# The replica functions of the TF probe, written in JAX (same names as the recorded results).
FUNCTIONS = {
    "sum": lambda x: jnp.sum(x),
    "mean": lambda x: jnp.mean(x),
    "colsum": lambda x: jnp.sum(x, axis=0),
    "rowsum": lambda x: jnp.sum(x, axis=1),
    "centered": lambda x: x - jnp.mean(x, axis=0),
    "scaled": lambda x: x / (1.0 + jnp.sum(x)),
    "count": lambda x: jnp.asarray(x.shape[0], jnp.float64),
    "sumsq_plus_id": lambda x: jnp.sum(x * x) + _ctx().replica_id_in_sync_group.astype(jnp.float64),
    "psum": lambda x: _ctx().all_reduce("sum", jnp.sum(x)),
    "psum_rows": lambda x: x * _ctx().all_reduce("sum", jnp.sum(x)),
}
# Functions with collectives may refuse a short batch (their replicas cannot run apart); all others must match.
MAY_REFUSE = {"psum", "psum_rows"}


def _close(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if want.size == 0:
        assert got.size == 0, got
        return
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, equal_nan=True)


def _check(strategy, value, expected):
    local = strategy.experimental_local_results(value)
    assert len(local) == len(expected["local"])
    for i, (got, want) in enumerate(zip(local, expected["local"])):
        try:
            _close(got, want)
        except AssertionError as e:
            raise AssertionError(f"local result {i}: {e}") from None
    for name, call in (("sum_None", lambda: strategy.reduce("sum", value, axis=None)),
                       ("sum_0", lambda: strategy.reduce("sum", value, axis=0)),
                       ("mean_None", lambda: strategy.reduce("mean", value, axis=None)),
                       ("mean_0", lambda: strategy.reduce("mean", value, axis=0)),
                       ("gather0", lambda: strategy.gather(value, axis=0))):
        if expected[name] == "error":  # TF raised: jdist must raise too, never return a number
            with pytest.raises((ValueError, TypeError)):
                call()
        else:
            try:
                _close(call(), expected[name])
            except AssertionError as e:
                raise AssertionError(f"{name}: {e}") from None


@pytest.fixture
def float64():
    """float64 everywhere, the dataset's prefetch threads included (a context manager is per thread)."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("config", sorted(TF_PADDING), ids=lambda c: "x".join(map(str, c)))
def test_run_on_short_batches_matches_tensorflow_or_raises(config, float64):
    replicas, examples, batch = config
    strategy = _strategy(replicas)
    if True:  # noqa: SIM108
        x = np.arange(2 * examples, dtype=np.float64).reshape(examples, 2) * 0.375 + 0.125
        elements = list(strategy.experimental_distribute_dataset(
            [x[i:i + batch] for i in range(0, examples, batch)]))
        observed = TF_PADDING[config]
        assert len(elements) == len(observed)
        for start, element, expected in zip(range(0, examples, batch), elements, observed):
            short = examples - start < batch
            for name, fn in FUNCTIONS.items():
                try:
                    value = strategy.run(fn, args=(element,))
                except ValueError as e:
                    # Only a short batch, and only a function whose replicas must communicate, may refuse.
                    if not (short and name in MAY_REFUSE):
                        raise
                    assert "drop_remainder=True" in str(e) and "example_mask" in str(e)
                    continue
                try:
                    _check(strategy, value, expected[name])
                except AssertionError as e:
                    raise AssertionError(f"{name}, element at row {start}: {e}") from None


# --------------------------------------------------------------- round trips and one replica
def _short(strategy):
    x = np.arange(20.0, dtype=np.float32).reshape(10, 2)
    return list(strategy.experimental_distribute_dataset([x[:8], x[8:]]))[1]  # 2 rows over 4: 1, 1, 0, 0


def test_a_per_example_result_keeps_its_mask_through_another_run():
    strategy = _strategy(4)
    short = _short(strategy)
    doubled = strategy.run(lambda x: x * 2.0, args=(short,))
    assert doubled.mask is not None
    again = strategy.run(lambda d: d + 1.0, args=(doubled,))  # fed back: still one row per real example
    assert again.mask is not None
    assert [np.asarray(v).tolist() for v in strategy.experimental_local_results(again)] == [
        [[33.0, 35.0]], [[37.0, 39.0]], [], []]
    sums = strategy.run(lambda d: jnp.sum(d), args=(doubled,))  # computed on each replica's real rows only
    assert [float(v) for v in strategy.experimental_local_results(sums)] == [66.0, 74.0, 0.0, 0.0]
    assert float(strategy.reduce("sum", sums, axis=None)) == 140.0


def test_one_replica_cuts_a_short_batch_as_eight_do():
    one = _strategy(1)
    x = np.arange(14.0, dtype=np.float32).reshape(7, 2)
    short = list(one.experimental_distribute_dataset([x[:4], x[4:]]))[1]  # 3 real rows, padded to 4
    rows = one.run(lambda x: x * 2.0, args=(short,))
    np.testing.assert_array_equal(np.asarray(rows), x[4:] * 2.0)  # a plain array of the real rows, as TF's
    assert float(one.run(lambda x: jnp.sum(x), args=(short,))) == float(np.sum(x[4:]))
    # A single replica's all_reduce is the identity: the function runs on the real rows, TF's value.
    assert float(one.run(lambda x: _ctx().all_reduce("sum", jnp.sum(x)), args=(short,))) == float(np.sum(x[4:]))
    masked = one.run(lambda x: _ctx().all_reduce("sum", jnp.sum(x * _ctx().example_mask[:, None])),
                     args=(short,))
    assert float(masked) == float(np.sum(x[4:]))  # the mask applied by the function: exact


def test_an_array_computed_from_a_batch_outside_run_is_refused_not_broadcast():
    strategy = _strategy(4)
    batch = strategy.distribute_batch(np.arange(8.0, dtype=np.float32))
    derived = batch * 2.0  # outside run: no longer marked as per-replica
    with pytest.raises(ValueError, match=r"args\[0\] is split over the replicas.*replicated_sharding"):
        strategy.run(lambda x: jnp.sum(x), args=(derived,))
    import jax as _jax
    total = strategy.run(lambda x: jnp.sum(x), args=(_jax.device_put(derived, strategy.replicated_sharding()),))
    assert float(total) == 56.0  # replicated on purpose: every replica gets the whole array


def test_a_training_step_with_the_mask_runs_on_a_short_batch():
    """The custom-loop pattern (compute_average_loss + all_reduce of gradients) reads the mask: exact."""
    strategy = _strategy(4)
    short = _short(strategy)
    w = jnp.ones((2,), jnp.float32)

    def step(w, x):
        def loss(w):
            return jdist.compute_average_loss(x @ w, global_batch_size=8)
        value, grad = jax.value_and_grad(loss)(w)
        return w - 0.1 * _ctx().all_reduce("sum", grad), value

    new_w, loss = strategy.run(step, args=(w, short))
    real = np.arange(16.0, 20.0, dtype=np.float32).reshape(2, 2)
    np.testing.assert_allclose(np.asarray(new_w), np.ones(2) - 0.1 * real.sum(0) / 8, rtol=1e-6)
    np.testing.assert_allclose(float(strategy.reduce("sum", loss, axis=None)), float((real @ np.ones(2)).sum() / 8))


def test_full_batches_run_the_one_compiled_program():
    """The per-replica path costs only on a short batch: a full one never reaches it."""
    strategy = _strategy(4)
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    full = list(strategy.experimental_distribute_dataset([x]))[0]
    fn = lambda x: jnp.sum(x)  # noqa: E731
    strategy.run(fn, args=(full,))
    ran = python_control_flow.converted(fn)  # the function as `run` compiles it (AutoGraph converts lambdas too)
    per_replica = lambda: [k for k in strategy._run_cache if k[0] == "each replica" and k[1] is ran]  # noqa: E731
    assert per_replica() == []
    strategy.run(fn, args=(_short(strategy),))
    assert len(per_replica()) == 1


def test_a_row_count_read_from_a_shape_is_each_replicas_own_where_the_replicas_communicate():
    """TF 2.21 (4 logical CPUs, one batch of 10 examples: rows 3, 3, 3, 1): `all_reduce(SUM, tf.shape(x)[0])` and
    the same of `tf.size(x)` are 10 on every replica. The padded shards hold 3 rows each, and a count read from a
    shape is a constant of the program, not data computed from the padding: it gave 12. Now each replica runs on
    its real rows, as TF's do."""
    strategy = _strategy(4)
    short = list(strategy.experimental_distribute_dataset([np.arange(10.0, dtype=np.float32)]))[0]
    reads = {
        "shape": lambda x: _ctx().all_reduce("sum", jnp.asarray(x.shape[0])),
        "size": lambda x: _ctx().all_reduce("sum", jnp.float32(jnp.size(x))),
        "rows scaled by the count": lambda x: (x / x.shape[0], _ctx().all_reduce("sum", jnp.float32(1.0))),
        # rows made from constants: TF 2.21 counted reduce_sum(ones_like(x[:, 0])) on replicas holding 2, 2, 2
        # and 0 real rows as 2, 2, 2 and 0 (observed); the padded shards give 2 on each
        "ones like the batch": lambda x: _ctx().all_reduce("sum", jnp.sum(jnp.ones_like(x))),
        "a range as long as the batch": lambda x: (jnp.arange(x.shape[0]) * 1.0, _ctx().all_reduce("sum", 1.0)),
    }
    # Each replica runs on its own rows, meeting the others at the collective (jdist/strategy/uneven_rows.py)
    for name in ("shape", "size", "ones like the batch"):
        out = strategy.run(reads[name], args=(short,))
        assert [float(v) for v in strategy.experimental_local_results(out)] == [10.0] * 4, name
    scaled, _ = strategy.run(reads["rows scaled by the count"], args=(short,))
    for got, want in zip(strategy.experimental_local_results(scaled), ([0, 1, 2], [3, 4, 5], [6, 7, 8], [9])):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32) / len(want), rtol=1e-6)
    ranged, _ = strategy.run(reads["a range as long as the batch"], args=(short,))
    assert [np.asarray(v).tolist() for v in strategy.experimental_local_results(ranged)] == [
        [0.0, 1.0, 2.0]] * 3 + [[0.0]]
    # The count of real rows from the mask is exact (TF's 10); without collectives each replica reads its own.
    counted = strategy.run(lambda x: _ctx().all_reduce("sum", jnp.sum(_ctx().example_mask.astype(jnp.float32))),
                           args=(short,))
    assert [float(v) for v in strategy.experimental_local_results(counted)] == [10.0] * 4
    own = strategy.run(lambda x: jnp.asarray(x.shape[0]), args=(short,))
    assert [int(v) for v in strategy.experimental_local_results(own)] == [3, 3, 3, 1]
    ones = strategy.run(lambda x: jnp.sum(jnp.ones_like(x)), args=(short,))
    assert [float(v) for v in strategy.experimental_local_results(ones)] == [3.0, 3.0, 3.0, 1.0]
    # A full batch of the same function runs: its shapes are the replicas' own.
    full = list(strategy.experimental_distribute_dataset([np.arange(8.0, dtype=np.float32)]))[0]
    assert float(strategy.experimental_local_results(strategy.run(reads["shape"], args=(full,)))[0]) == 8.0
