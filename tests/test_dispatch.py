"""Bounded dispatch: every jdist program over several CPU devices counts toward one process-wide
bound, so loops that never read a result (TF's custom-training tutorial) cannot deadlock XLA:CPU."""
import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist import dispatch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bound():
    """Runs a test with a chosen bound and nothing pending, then restores the default."""
    dispatch.wait(0)
    before = dispatch.max_in_flight()
    yield dispatch.set_max_in_flight
    dispatch.set_max_in_flight(before)
    dispatch.wait(0)


def _summed(x):
    return jdist.get_replica_context().all_reduce("sum", x * 2.0)


def test_every_dispatch_point_registers_once(bound):
    bound(1000)
    strategy = jdist.MirroredStrategy()
    batch = strategy.distribute_batch(np.arange(16, dtype=np.float32).reshape(16, 1))
    calls = []

    def count(label):
        calls.append((label, dispatch.pending()))

    count("start")
    per_replica = strategy.run(lambda x: x * 2.0, args=(batch,))
    count("run")
    strategy.reduce("sum", per_replica, axis=None)
    count("reduce")
    strategy.gather(per_replica, axis=0)
    count("gather")
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=None, params={"w": jnp.ones((1,))}, tx=optax.sgd(0.1))
    step = jdist.make_train_step(lambda p, b: jnp.mean((b * p["w"]) ** 2), strategy)
    state, _ = step(state, batch)
    count("make_train_step")
    mean = jdist.metrics.Mean()
    mean.update_state(batch)
    count("update_state")
    mean.result()
    count("result")
    assert [b - a for (_, a), (_, b) in zip(calls, calls[1:])] == [1] * 6, calls

    # A program on one device has no rendezvous to starve: it is not held back.
    one = jdist.OneDeviceStrategy(jax.devices()[0])
    one.run(lambda x: x + 1.0, args=(jnp.ones(3),))
    assert dispatch.pending() == calls[-1][1]


def test_the_oldest_program_is_finished_before_more_are_dispatched(bound):
    bound(2)
    strategy = jdist.MirroredStrategy()
    x = strategy.distribute_batch(np.ones((8, 4), np.float32))
    outputs = []
    for _ in range(8):
        x = strategy.run(_summed, args=(x,))
        outputs.append(x)
        assert dispatch.pending() <= 2
        if len(outputs) > 2:  # the bound waited for everything but the last two
            assert all(out.is_ready() for out in outputs[:-2])
    np.testing.assert_allclose(np.asarray(x), np.full((1, 4), 16.0 ** 8))


def test_bound_is_validated():
    with pytest.raises(ValueError, match="max_in_flight must be an int >= 1"):
        dispatch.set_max_in_flight(0)


def _tutorial_module():
    spec = importlib.util.spec_from_file_location("tf_tutorial_port", ROOT / "scripts" / "tf_tutorial_port.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tf_tutorial_loop_runs_and_equals_one_device():
    """The tutorial's loop (nothing read inside an epoch, metrics in a second compiled step) on
    8 replicas: same losses, accuracies and weights as one device, test metrics over the real
    examples only (100, not the 128 padded rows)."""
    tutorial = _tutorial_module()
    from jdist import datasets

    train = tuple(a[:200] for a in datasets.load_digits("train", image_size=12))
    test = tuple(a[:100] for a in datasets.load_digits("test", image_size=12))
    runs = {}
    for name, strategy, per_replica in [("mirrored", jdist.MirroredStrategy(), 8),
                                        ("one_device", jdist.OneDeviceStrategy(jax.devices()[0]), 64)]:
        runs[name] = tutorial.tutorial(strategy, train, test, epochs=2, batch_size_per_replica=per_replica,
                                       log=lambda _: None)
    mirrored, single = runs["mirrored"], runs["one_device"]
    for key in ("loss", "accuracy", "test_loss", "test_accuracy"):
        np.testing.assert_allclose(mirrored[key], single[key], rtol=2e-4, atol=2e-4, err_msg=key)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5),
                 mirrored["state"].params, single["state"].params)

    # The last test pass, recomputed on the host from the final weights over the 100 real examples.
    model = tutorial.create_model()
    logits = np.asarray(model.apply(jax.device_get(single["state"].params), jnp.asarray(test[0])))
    expected = 100.0 * np.mean(np.argmax(logits, -1) == test[1])
    assert mirrored["test_accuracy"][-1] == pytest.approx(expected, abs=1e-3)


UNREAD_LOOP = """
import numpy as np
import jdist

strategy = jdist.MirroredStrategy()
x = strategy.distribute_batch(np.ones((8, 16), np.float32))
step = lambda x: x * 0.5 + jdist.get_replica_context().all_reduce("sum", x.sum()) * 1e-6
total = 0.0
for _ in range(300):   # nothing read inside the loop: 600 programs with collectives dispatched
    x = strategy.run(step, args=(x,))
    total += strategy.reduce("sum", x, axis=None)
print("total", float(total.sum()))
"""


def test_a_loop_that_never_reads_does_not_abort():
    """Unbounded, this loop queues hundreds of all-reduces and XLA:CPU aborts after 40 s (run in a
    child process, so an abort cannot take the test session with it)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8")
    result = subprocess.run([sys.executable, "-c", UNREAD_LOOP], capture_output=True, text=True, timeout=240,
                            env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "total" in result.stdout
