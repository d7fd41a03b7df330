"""Steps compiled by jdist run outside the scope that created them, under the strategy
that placed the state (TF lets a compiled step run after its strategy's scope closed)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.models import MLP, classification_loss

RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 784)).astype(np.float32)
Y = (np.arange(64) % 10).astype(np.int32)


def _loss(model):
    return lambda p, b: classification_loss(model.apply(p, b["image"]), b["label"])


@pytest.mark.timeout(300)
def test_readme_global_view_step_outside_the_scope():
    strategy = jdist.MirroredStrategy()
    model = MLP(features=(32,))
    with strategy.scope():  # the README's first code block
        params = model.init(jax.random.key(0), jnp.zeros((1, 784)))
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1))
    step = jdist.make_train_step(_loss(model), donate=False)
    outside, sums = step(state, strategy.distribute_batch({"image": X, "label": Y}))
    with strategy.scope():
        inside, sums_inside = step(state, strategy.distribute_batch({"image": X, "label": Y}))
    for a, b in zip(jax.tree.leaves(outside.params), jax.tree.leaves(inside.params)):
        assert a.sharding == b.sharding
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(sums["loss"]) == float(sums_inside["loss"])
    # The same step on one device (no strategy) gives the same update.
    single = jdist.TrainState.create(apply_fn=model.apply, params=jax.device_get(params), tx=optax.sgd(0.1))
    one, _ = step(single, {"image": X, "label": Y})
    for a, b in zip(jax.tree.leaves(outside.params), jax.tree.leaves(one.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    # Host batches (not distributed) outside the scope go to the state's strategy too.
    again, _ = step(state, {"image": X, "label": Y})
    np.testing.assert_array_equal(np.asarray(jax.tree.leaves(again.params)[0]),
                                  np.asarray(jax.tree.leaves(outside.params)[0]))
