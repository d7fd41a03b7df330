"""Device memory report and the out-of-memory message."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.diagnostics import memory
from jdist.models import MLP, classification_loss


def test_memory_report_counts_live_arrays_per_device():
    import gc

    strategy = jdist.MirroredStrategy()
    gc.collect()  # arrays of earlier tests held in reference cycles are freed now, not between the two reports
    before = strategy.memory_report()
    sharded = strategy.distribute_batch(np.ones((8, 32768), np.float32))  # 128 KiB per device
    with strategy.scope():
        replicated = strategy.place(jnp.ones((1000,), jnp.float32))  # 4000 B on every device
    jax.block_until_ready((sharded, replicated))
    after = strategy.memory_report()
    assert [d.device for d in after.devices] == [f"cpu:{i}" for i in range(8)]
    for old, new in zip(before.devices, after.devices):
        assert new.live_array_bytes - old.live_array_bytes == 32768 * 4 + 4000
        assert new.source == "live arrays" and new.peak_bytes_in_use is None  # CPU gives no statistics
    text = str(after)
    assert "cpu:7" in text and "no memory statistics" in text
    del sharded, replicated


def _oom_step(strategy, error):
    model = MLP(features=(256,))
    with strategy.scope():
        params = model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    step = jdist.make_train_step(lambda p, b: classification_loss(model.apply(p, b["x"]), b["y"]), strategy)

    def fail(*args, **kwargs):
        raise error

    step.jitted = lambda state, donate=None, strategy=None: fail  # as XLA raises it during compile or execution
    batch = strategy.distribute_batch({"x": np.zeros((16, 8, 8, 1), np.float32), "y": np.zeros(16, np.int32)})
    return step, state, batch


def test_out_of_memory_names_the_largest_buffers_and_the_remedies():
    xla_error = jax.errors.JaxRuntimeError(
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.")
    step, state, batch = _oom_step(jdist.MirroredStrategy(), xla_error)
    with pytest.raises(jdist.DeviceOutOfMemoryError) as info:
        step(state, batch)
    message = str(info.value)
    assert info.value.__cause__ is xla_error
    assert isinstance(info.value, jax.errors.JaxRuntimeError)  # existing `except` clauses still catch it
    assert "RESOURCE_EXHAUSTED" in message and "MirroredStrategy" in message
    first = message.index("Largest parameters")
    assert "params/dense_0/kernel" in message[first:].splitlines()[1]  # 64x256 floats: the biggest
    assert "(64, 256) float32  64.0 KiB  replicated" in message
    for remedy in ("FSDP", "model parallel", "accumulation_steps", "smaller global batch", "recommend_strategy"):
        assert remedy in message


def test_other_runtime_errors_pass_through_unchanged():
    other = jax.errors.JaxRuntimeError("INTERNAL: something else")
    step, state, batch = _oom_step(jdist.MirroredStrategy(), other)
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        step(state, batch)
    assert info.value is other
    assert not memory.is_out_of_memory(other) and memory.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: x"))
