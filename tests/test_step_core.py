"""`jdist.training.step_core`: the one masked-loss rule every step uses, and placement resolved once per tree."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

import jdist
from jdist.training import step_core


def test_masked_sum_leaves_padding_out_even_when_it_is_not_finite():
    values = jnp.array([1.0, 2.0, jnp.nan, jnp.inf])
    mask = jnp.array([1.0, 1.0, 0.0, 0.0])
    assert float(step_core.masked_sum(values, mask)) == 3.0
    grad = jax.grad(lambda v: step_core.masked_sum(v * 2.0, mask))(jnp.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(grad, [2.0, 2.0, 0.0, 0.0])


def test_make_train_step_and_the_trainer_both_use_the_one_rule(monkeypatch):
    """The masked-loss rule is one function: both kinds of step trace through it."""
    calls = []
    rule = step_core.masked_sum
    monkeypatch.setattr(step_core, "masked_sum", lambda v, m: calls.append(v.shape) or rule(v, m))
    strategy = jdist.MirroredStrategy()
    x = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    y = x @ np.ones((3, 1), np.float32)

    def apply(params, inputs):
        return inputs @ params["w"]

    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=apply, params={"w": jnp.zeros((3, 1))}, tx=optax.sgd(0.1))
    step = jdist.make_train_step(lambda p, b: jnp.sum((apply(p, b["x"]) - b["y"]) ** 2, axis=1), strategy,
                                 donate=False)
    step(state, strategy.distribute_batch({"x": x[:16], "y": y[:16]}))
    assert calls, "make_train_step did not use step_core.masked_sum"
    calls.clear()
    trainer = jdist.Trainer(apply, optax.sgd(0.1), loss="mse", params={"w": jnp.zeros((3, 1))}, strategy=strategy)
    trainer.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert calls, "Trainer.fit did not use step_core.masked_sum"


def test_a_strategy_resolves_a_tree_layout_once(monkeypatch):
    strategy = jdist.Strategy(mesh_shape={"data": 4, "model": 2}, layout=[("w", P(None, "model"))])
    resolved = []
    resolve = jdist.Layout.resolve
    monkeypatch.setattr(jdist.Layout, "resolve", lambda self, tree, mesh: resolved.append(1) or resolve(self, tree, mesh))
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=None, params={"w": jnp.ones((4, 8))}, tx=optax.adam(0.1))
    before = len(resolved)
    first = strategy.parameter_shardings(state)
    again = strategy.parameter_shardings(jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state))
    assert len(resolved) == before  # TrainState.create already resolved this state's structure
    assert first.params["w"].spec == again.params["w"].spec == P(None, "model")
    assert first.opt_state[0].mu["w"].spec == P(None, "model")
    strategy.parameter_shardings({"w": jnp.ones((2, 8))})  # another shape: resolved anew
    assert len(resolved) == before + 1
