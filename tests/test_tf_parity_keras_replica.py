"""Keras's `fit` under MirroredStrategy where jdist takes each replica's gradients (a clipping optimizer): the model
runs once per step, a replica with no rows trains as TF's rule says, and a short last batch compiles once.

Values are observed in TF 2.21, Keras 3.15 (tensorflow-cpu, the CPU split into 4 logical devices), from the same
fixed weights on the same data, unshuffled, `SGD(0.1, clipnorm=1.0)`, `loss="mse"`, `metrics=["mae"]`.
"""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tf_parity_common import B, W, X, Y, mirrored  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

keras = tf.keras

_strategy = mirrored


def _model(strategy, clipnorm: float | None = 1.0, units: int | None = None):
    with strategy.scope():
        hidden = [keras.layers.Dense(units, activation="relu")] if units else []
        model = keras.Sequential([keras.Input((3,)), *hidden, keras.layers.Dense(2)])
        if not units:
            model.set_weights([W, B])
        optimizer = keras.optimizers.SGD(0.1, clipnorm=clipnorm) if clipnorm else keras.optimizers.SGD(0.1)
        model.compile(optimizer=optimizer, loss="mse", metrics=["mae"])
    return model


def _flat(model) -> np.ndarray:
    return np.concatenate([w.ravel() for w in model.get_weights()])


# Observed in TF 2.21, Keras 3.15 on 4 replicas, fit(X[:rows], Y[:rows], batch_size=4, epochs=2): the last batch
# of 7 rows (3) goes to the replicas as 1, 1, 1, 0; of 5 rows (1) as 1, 0, 0, 0. The empty replica's gradient is 0
# (its clipped norm 0, no NaN), the others' are each clipped, then summed.
_OBSERVED = {
    7: ([28.506290435791016, 23.12697982788086], [4.696997165679932, 4.315883159637451],
        [0.04729735851287842, -0.24403417110443115, 0.0300338976085186, 0.21388758718967438, -0.2201402187347412,
         0.24905601143836975, -0.21816317737102509, -0.17641177773475647]),
    5: ([29.841686248779297, 27.42665672302246], [4.5849609375, 4.475293159484863],
        [0.09104207158088684, -0.24088189005851746, 0.1413516253232956, 0.37339910864830017, -0.36769169569015503,
         0.37229612469673157, 0.06209757179021835, -0.215920090675354]),
}


@pytest.mark.parametrize("rows", [7, 5])
def test_last_batch_with_empty_replica_matches_tf(rows):
    model = _model(_strategy(4))
    history = model.fit(X[:rows], Y[:rows], batch_size=4, epochs=2, shuffle=False, verbose=0)
    loss, mae, weights = _OBSERVED[rows]
    np.testing.assert_allclose(history.history["loss"], loss, rtol=1e-5)
    np.testing.assert_allclose(history.history["mae"], mae, rtol=1e-5)
    np.testing.assert_allclose(_flat(model), weights, rtol=1e-5, atol=1e-6)


def _clipped_replicas_reference(rows: int, replicas: int, epochs: int) -> tuple[list, np.ndarray]:
    """One device's computation of TF's rule: replica r's loss is the mse of its ceil(rows / replicas) rows over
    replicas, its kernel and bias gradients each clipped to norm 1, the replicas' sum applied by SGD(0.1); the
    logged loss is the mse over all rows before the step."""
    w, b = W.astype(np.float64), B.astype(np.float64)
    size = -(-rows // replicas)
    losses = []
    for _ in range(epochs):
        x, y = X[:rows].astype(np.float64), Y[:rows].astype(np.float64)
        losses.append(float(np.mean((x @ w + b - y) ** 2)))
        gw, gb = np.zeros_like(w), np.zeros_like(b)
        for start in range(0, rows, size):
            xr, yr = x[start:start + size], y[start:start + size]
            d = 2 * (xr @ w + b - yr) / (yr.size * replicas)
            for total, grad in ((gw, xr.T @ d), (gb, d.sum(0))):
                total += grad * min(1.0, 1.0 / np.linalg.norm(grad))
        w, b = w - 0.1 * gw, b - 0.1 * gb
    return losses, np.concatenate([w.ravel(), b])


@pytest.mark.parametrize("rows", [3, 1])
def test_batch_smaller_than_replicas(rows):
    # TF 2.21 with Keras 3.15 fails where fit's first batch leaves a replica empty (3 or 1 rows at batch_size=8 on
    # 4 replicas, clipping or not: InvalidArgumentError "Inputs to operation AddN of type AddN must have the same
    # size and shape. Input 0: [1,3] != input 3: [0,3]"), and trains where a later batch does (above). jdist
    # trains the first as TF trains the later: each replica's one row clipped, the empty replica adding 0.
    model = _model(_strategy(4))
    history = model.fit(X[:rows], Y[:rows], batch_size=8, epochs=2, shuffle=False, verbose=0)
    losses, weights = _clipped_replicas_reference(rows, 4, 2)
    assert np.all(np.isfinite(history.history["loss"])) and np.all(np.isfinite(history.history["mae"]))
    np.testing.assert_allclose(history.history["loss"], losses, rtol=1e-5)
    np.testing.assert_allclose(_flat(model), weights, rtol=1e-5, atol=1e-6)


def _primitives(jaxpr, counts: dict) -> dict:
    for eqn in jaxpr.eqns:
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    _primitives(inner, counts)
    return counts


def _step_primitives(model, strategy) -> dict:
    x, y = X[:8], Y[:8]
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # builds the optimizer and metrics

    def values(variables):
        return [v.value for v in variables]
    state = (values(model.trainable_variables), values(model.non_trainable_variables),
             values(model.optimizer.variables), values(model.metrics_variables))
    with strategy.scope():
        jaxpr = jax.make_jaxpr(model.train_step)(state, (x, y))
    return _primitives(jaxpr.jaxpr, {})


def test_per_replica_step_runs_the_model_once():
    # The step of a clipping optimizer (each replica's gradients) multiplies by the kernels as often as the
    # whole-batch step: one forward and one backward pass. Before, it also ran Keras's own whole-batch pass for
    # the logged outputs (10 `dot_general`s against 5 for this two-layer model).
    strategy = _strategy(2)
    per_replica = _step_primitives(_model(strategy, 1.0, units=4), strategy)
    whole = _step_primitives(_model(strategy, None, units=4), strategy)
    assert whole["dot_general"] == 5
    assert per_replica["dot_general"] == whole["dot_general"]


def test_per_replica_step_metrics_match_single_device():
    # The metrics take the per-replica pass's outputs: 8 rows at batch_size=8 on 2 replicas, the mae of the
    # first epoch is that of the initial weights over all rows, as one device computes it.
    model = _model(_strategy(2))
    history = model.fit(X[:8], Y[:8], batch_size=8, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["mae"][0], np.mean(np.abs(X[:8] @ W + B - Y[:8])), rtol=1e-6)


def test_uneven_last_batch_compiles_once():
    # 17 rows at batch_size=8 on 4 replicas: the last batch of 1 row goes to the replicas as 1, 0, 0, 0 (its own
    # program). After the first epoch compiled both shapes, later epochs compile nothing.
    model = _model(_strategy(4))
    model.fit(X[:17], Y[:17], batch_size=8, epochs=1, shuffle=False, verbose=0)
    compiled: list = []

    def listener(event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(event)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        history = model.fit(X[:17], Y[:17], batch_size=8, epochs=3, shuffle=False, verbose=0)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert np.all(np.isfinite(history.history["loss"]))
    assert compiled == []


def _apply_outside_scope(make):
    strategy = _strategy(2)
    with strategy.scope():
        variable = tf.Variable(np.ones(3, np.float32))
        optimizer = make()
    optimizer.apply_gradients([(tf.constant([1.0, 2.0, 3.0]), variable)])
    return variable.numpy()


def test_optimizer_made_in_scope_makes_its_slots_in_scope():
    # Observed in TF 2.21, Keras 3.15 on 2 replicas (the mixed precision guide's custom loop, run outside
    # strategy.run): an optimizer made in the scope whose first apply_gradients (or build) runs outside it fails
    # where it makes slot variables, and applies where it has none.
    with pytest.raises(RuntimeError, match=r'Need to be inside "with strategy.scope\(\)" for'):
        _apply_outside_scope(lambda: keras.optimizers.RMSprop(0.1))
    np.testing.assert_allclose(_apply_outside_scope(lambda: keras.optimizers.SGD(0.1)), [0.9, 0.8, 0.7], rtol=1e-6)
    np.testing.assert_allclose(
        _apply_outside_scope(lambda: keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))),
        [0.9999969601631165, 0.9999939203262329, 0.9999908208847046], rtol=1e-7)


def test_optimizer_failed_outside_scope_builds_in_scope_later():
    strategy = _strategy(2)
    with strategy.scope():
        variable = tf.Variable(np.ones(3, np.float32))
        optimizer = keras.optimizers.RMSprop(0.1)
    with pytest.raises(RuntimeError, match="Need to be inside"):
        optimizer.build([variable])
    with strategy.scope():
        optimizer.apply_gradients([(tf.constant([1.0, 2.0, 3.0]), variable)])
    assert np.all(variable.numpy() < 1.0)


def test_fit_outside_scope_builds_the_optimizer_under_the_model_strategy():
    # TF's fit runs under the model's strategy: an Adam made in the scope builds its slots in fit outside it.
    strategy = _strategy(2)
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse")
    history = model.fit(X[:8], Y[:8], batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]) and model.optimizer.built


def test_per_output_losses_sum_the_replicas_updates():
    # Keras's per-output loss trackers are updated in each replica's pass (rows-weighted, as TF's summed metric
    # variables): on 8 rows over 2 replicas they log each output's loss over all rows, as one device computes it.
    rs = np.random.RandomState(0)
    x = rs.normal(size=(8, 3)).astype("float32")
    y1, y2 = rs.normal(size=(8, 1)).astype("float32"), rs.normal(size=(8, 2)).astype("float32")
    with _strategy(2).scope():
        inputs = keras.Input((3,))
        model = keras.Model(inputs, {"a": keras.layers.Dense(1, name="a")(inputs),
                                     "b": keras.layers.Dense(2, name="b")(inputs)})
        model.set_weights([np.full(w.shape, 0.1, "float32") for w in model.get_weights()])
        model.compile(optimizer=keras.optimizers.SGD(0.1, clipnorm=1.0), loss={"a": "mse", "b": "mae"})
    history = model.fit(x, {"a": y1, "b": y2}, batch_size=8, epochs=1, verbose=0, shuffle=False)
    a, b = x @ np.full((3, 1), 0.1) + 0.1, x @ np.full((3, 2), 0.1) + 0.1
    np.testing.assert_allclose(history.history["a_loss"][0], np.mean((a - y1) ** 2), rtol=1e-5)
    np.testing.assert_allclose(history.history["b_loss"][0], np.mean(np.abs(b - y2)), rtol=1e-5)
