"""Replica-aware metrics: per-replica state, combined when read, exact over the real examples.

Reference: numpy over the real (unmasked) examples. Tolerance: float32 sums, rtol=1e-6.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist import metrics
from jdist.models import MLP


def _scores(n=40, classes=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, classes)).astype(np.float32), rng.integers(0, classes, size=n).astype(np.int32)


def test_eager_keras_style_use():
    scores, labels = _scores()
    acc = metrics.SparseCategoricalAccuracy()
    acc.update_state(labels[:25], scores[:25])
    acc.update_state(labels[25:], scores[25:], sample_weight=np.arange(15) % 2)
    hits = scores.argmax(-1) == labels
    weights = np.concatenate([np.ones(25), np.arange(15) % 2])
    np.testing.assert_allclose(acc.result(), (hits * weights).sum() / weights.sum(), rtol=1e-6)
    acc.reset_state()
    assert float(acc.result()) == 0.0

    mean = metrics.Mean()
    mean.update_state(np.array([1.0, 2.0, 3.0]))
    mean.update_state(np.array([10.0]), sample_weight=np.array([2.0]))
    assert float(mean.result()) == pytest.approx(26.0 / 5.0)
    exact = metrics.Accuracy()
    exact.update_state(np.array([1, 2, 3, 4]), np.array([1, 0, 3, 0]))
    assert float(exact.result()) == 0.5


def test_state_accumulates_per_replica_inside_run_and_is_summed_on_read():
    scores, labels = _scores(48)
    mask = np.ones(48, np.float32)
    mask[-7:] = 0.0  # padding in the second batch (it lands on the last two replicas)
    strategy = jdist.MirroredStrategy()
    acc = metrics.SparseCategoricalAccuracy()
    loss = metrics.Mean(name="loss")

    def replica_step(acc_state, loss_state, y, logits, m):
        per_example = optax.softmax_cross_entropy_with_integer_labels(logits, y)
        return acc.update(acc_state, y, logits, sample_weight=m), loss.update(loss_state, per_example, sample_weight=m)

    states = (acc.init(), loss.init())
    for half in (slice(0, 24), slice(24, 48)):
        batch = strategy.distribute_batch((labels[half], scores[half], mask[half]))
        states = strategy.run(replica_step, args=(*states, *batch))
    acc_state, loss_state = states
    # Each replica kept its own sums (SyncOnRead): no collective ran, so the state is per-replica.
    assert isinstance(acc_state["count"], jdist.PerReplica) and acc_state["count"].num_replicas == 8
    np.testing.assert_array_equal([float(c) for c in acc_state["count"].values], _per_replica_counts(mask))
    assert _per_replica_counts(mask).tolist() == [6, 6, 6, 6, 6, 5, 3, 3]
    real = mask > 0
    np.testing.assert_allclose(acc.result(acc_state), np.mean(scores[real].argmax(-1) == labels[real]), rtol=1e-6)
    expected_loss = np.asarray(optax.softmax_cross_entropy_with_integer_labels(scores[real], labels[real])).mean()
    np.testing.assert_allclose(loss.result(loss_state), expected_loss, rtol=1e-6)


def _per_replica_counts(mask):
    """Real examples each replica saw over the two batches of 24 (3 per replica per batch)."""
    counts = np.zeros(8)
    for half in (mask[:24], mask[24:]):
        counts += half.reshape(8, 3).sum(axis=1)
    return counts


class RootMeanSquaredError(metrics.Metric):
    """A user metric: sqrt of the mean squared error, from summed state."""

    def init(self):
        return {"sq": jnp.zeros(()), "n": jnp.zeros(())}

    def update(self, state, y_true, y_pred, sample_weight=None):
        w = jnp.ones(jnp.shape(y_true)[0]) if sample_weight is None else sample_weight
        err = jnp.sum(jnp.square(y_pred - y_true).reshape(len(w), -1), axis=1)
        return {"sq": state["sq"] + jnp.sum(w * err), "n": state["n"] + jnp.sum(w)}

    def compute(self, state):
        return jnp.sqrt(state["sq"] / state["n"])


class LastSeen(metrics.Metric):
    """Per-leaf aggregations: a MEAN leaf and an ONLY_FIRST_REPLICA leaf."""

    def init(self):
        return {"avg": jnp.zeros(()), "first": jnp.zeros(())}

    def aggregations(self, state):
        return {"avg": jdist.VariableAggregation.MEAN, "first": jdist.VariableAggregation.ONLY_FIRST_REPLICA}

    def update(self, state, values, sample_weight=None):
        return {"avg": jnp.mean(values), "first": values[0]}

    def compute(self, state):
        return state["avg"] * 1000 + state["first"]


def test_user_metrics_with_their_own_aggregation():
    strategy = jdist.MirroredStrategy()
    rng = np.random.default_rng(3)
    y, pred = rng.normal(size=(16, 2)).astype(np.float32), rng.normal(size=(16, 2)).astype(np.float32)
    rmse = RootMeanSquaredError()
    state = strategy.run(lambda s, a, b: rmse.update(s, a, b), args=(rmse.init(), *strategy.distribute_batch((y, pred))))
    np.testing.assert_allclose(rmse.result(state), np.sqrt(np.mean(np.sum((pred - y) ** 2, axis=1))), rtol=1e-6)

    values = np.arange(16, dtype=np.float32)  # replica r sees [2r, 2r+1]
    last = LastSeen()
    state = strategy.run(lambda s, v: last.update(s, v), args=(last.init(), strategy.distribute_batch(values)))
    assert float(last.result(state)) == pytest.approx(values.mean() * 1000 + 0.0)


def test_trainer_metric_from_a_function_is_exact():
    scores_x = np.random.default_rng(5).normal(size=(45, 6)).astype(np.float32)
    labels = (scores_x[:, 0] > 0).astype(np.int32) + (scores_x[:, 1] > 0).astype(np.int32)

    def top2(y_true, logits):
        top = jnp.argsort(logits, axis=-1)[:, -2:]
        return jnp.any(top == y_true[:, None], axis=-1).astype(jnp.float32)

    model = MLP(features=(8,), num_classes=3)
    params = model.init(jax.random.key(1), scores_x[:1])
    trainer = jdist.Trainer(model, optax.sgd(0.1), metrics=[top2, "accuracy"], params=params,
                            strategy=jdist.MirroredStrategy())
    logs = trainer.evaluate(scores_x, labels, batch_size=16, verbose=0, return_dict=True)
    logits = np.asarray(model.apply(params, scores_x))
    expected_top2 = np.mean([labels[i] in np.argsort(logits[i])[-2:] for i in range(45)])
    assert set(logs) == {"loss", "top2", "accuracy"}
    np.testing.assert_allclose(logs["top2"], expected_top2, rtol=1e-6)
    np.testing.assert_allclose(logs["accuracy"], np.mean(logits.argmax(-1) == labels), rtol=1e-6)


def test_metric_names_and_errors():
    assert metrics.get("accuracy").name == "accuracy"
    assert metrics.get("sparse_categorical_accuracy").name == "sparse_categorical_accuracy"
    with pytest.raises(ValueError, match="Unknown metric"):
        metrics.get("acuracy")
    # Keras 3's names for repeated metrics: a suffix for plain ones, a prefix for weighted ones.
    trainer = jdist.Trainer(MLP(), optax.sgd(0.1), metrics=["accuracy", metrics.Accuracy()],
                            weighted_metrics=["accuracy", "accuracy"])
    assert trainer.metrics_names == ["loss", "accuracy", "accuracy_1", "weighted_accuracy", "weighted_accuracy_1"]
    with pytest.raises(ValueError, match="named 'loss'"):
        jdist.Trainer(MLP(), optax.sgd(0.1), metrics=[metrics.Mean(name="loss")])
