"""`strategy.run` on a short batch: every result is what TensorFlow 2.21 computes on each replica's real
rows (`tests/tf_observed_padding.py`), or a clear error; never a value that counts padding rows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tf_observed_padding import TF_PADDING

import jdist

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
