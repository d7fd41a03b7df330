"""The Trainer makes its optimizer state where it will live: `tx.init` runs compiled into the strategy's
shardings (split over the replicas under ZeRO-1 and FSDP), never on whole host arrays first."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist


@pytest.mark.parametrize("make", [
    lambda: jdist.MirroredStrategy(),
    lambda: jdist.MirroredStrategy(shard_optimizer_state=True),
    lambda: jdist.FSDPStrategy(min_size_bytes=0),
], ids=["mirrored", "zero1", "fsdp"])
def test_optimizer_state_is_made_in_its_layout(make):
    strategy = make()
    seen = []
    adam = optax.adam(1e-2)

    def init(params):  # records whether it ran on concrete arrays (eagerly) or traced (compiled)
        seen.append(any(not isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(params)))
        return adam.init(params)

    x = np.random.default_rng(0).normal(size=(32, 8)).astype(np.float32)
    y = (np.arange(32) % 4).astype(np.int32)
    trainer = jdist.Trainer(lambda p, x: x @ p["w"], optax.GradientTransformation(init, adam.update),
                            params={"w": jnp.zeros((8, 4))}, strategy=strategy)
    trainer.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert seen and not any(seen)  # never eager
    want = strategy.parameter_shardings(trainer.state).opt_state
    for got, expected in zip(jax.tree.leaves(trainer.state.opt_state), jax.tree.leaves(want)):
        assert got.sharding.is_equivalent_to(expected, got.ndim)
