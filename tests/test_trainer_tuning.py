"""Trainer options from the tuning toolkit: accumulation_steps, policy, ProfilerCallback.

Accumulated training is checked against the same Trainer without accumulation
(float32 weights after Adam steps: rtol=2e-5 / atol=2e-6, only the summation order differs).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist import datasets, mixed_precision
from jdist.callbacks import Callback, ProfilerCallback
from jdist.input import checks as input_checks
from jdist.models import MLP

N_EXAMPLES, BATCH = 100, 32  # the last batch has 4 real examples


def _data(n=N_EXAMPLES, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + 2 * (x[:, 2] > 0.5).astype(np.int32)
    return x, y


def _fit(accumulation_steps, steps_per_execution=1, epochs=2):
    x, y = _data()
    module = MLP(features=(16,), num_classes=4)
    params = module.init(jax.random.key(0), jnp.zeros((1, 6)))
    seen_batches = set()

    def apply_fn(p, xb):
        if not input_checks.evaluating_shapes():  # the input checks' shapes-only call is not the step
            seen_batches.add(xb.shape[0])  # at trace time: the batch one model call sees
        return module.apply(p, xb)

    trainer = jdist.Trainer(apply_fn, optax.adam(0.01), metrics=["accuracy"], params=params,
                            strategy=jdist.MirroredStrategy(), accumulation_steps=accumulation_steps,
                            steps_per_execution=steps_per_execution)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0)
    return jax.device_get(trainer.state.params), history.history, seen_batches


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_trainer_accumulation_equals_whole_batch_steps(steps_per_execution):
    reference, ref_history, seen1 = _fit(1)
    params, history, seen4 = _fit(4, steps_per_execution)
    assert seen1 == {32} and seen4 == {1}  # 4 micro-batches of 8, differentiated per replica (8 x 1)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6), params, reference)
    np.testing.assert_allclose(history["loss"], ref_history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history["accuracy"], ref_history["accuracy"], rtol=1e-5)


def _digits_fit(policy):
    (x, y), (tx, ty) = datasets.load_digits("train", image_size=8), datasets.load_digits("test", image_size=8)
    module = MLP(features=(64,))
    seen = set()

    def apply_fn(params, images):
        if not input_checks.evaluating_shapes():
            seen.add(str(images.dtype))
        return module.apply(params, images)

    params = module.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))
    trainer = jdist.Trainer(apply_fn, optax.adam(3e-3), metrics=["accuracy"], params=params, policy=policy,
                            strategy=jdist.MirroredStrategy())
    trainer.fit(x, y, batch_size=64, epochs=4, verbose=0)
    accuracy = trainer.evaluate(tx, ty, batch_size=120, verbose=0, return_dict=True)["accuracy"]
    return accuracy, seen, trainer


def test_trainer_bfloat16_policy_reaches_the_float32_accuracy():
    acc32, seen32, _ = _digits_fit("float32")
    acc16, seen16, trainer = _digits_fit("mixed_bfloat16")
    assert seen32 == {"float32"} and seen16 == {"bfloat16"}
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(trainer.state.params))
    assert acc32 >= 0.9 and acc16 >= 0.9, (acc32, acc16)


def test_trainer_float16_policy_wraps_the_optimizer_in_loss_scaling():
    x, y = _data()
    model = MLP(features=(16,), num_classes=4)
    trainer = jdist.Trainer(model, optax.adam(0.01), strategy=jdist.MirroredStrategy(), policy="mixed_float16")
    history = trainer.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    scale_state = mixed_precision.find_loss_scale(trainer.state.opt_state)
    assert scale_state is not None  # wrapped, as Keras's compile() does for mixed_float16
    assert float(scale_state.loss_scale) == 2.0**15 and int(scale_state.counter) == 4  # 4 finite steps
    assert np.isfinite(history.history["loss"][0])


class _Recorder(Callback):
    def __init__(self, profiler):
        super().__init__()
        self.profiler = profiler
        self.active = []

    def on_train_batch_end(self, batch, logs=None):
        self.active.append(self.profiler.active)


def test_profiler_callback_traces_the_chosen_steps_of_fit(tmp_path):
    x, y = _data()
    model = MLP(features=(16,), num_classes=4)
    profiler = ProfilerCallback(tmp_path, profile_batch=(2, 3))
    recorder = _Recorder(profiler)
    trainer = jdist.Trainer(model, optax.adam(0.01), strategy=jdist.MirroredStrategy())
    trainer.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[profiler, recorder])
    # after step s the trace is on while step s + 1 is in 2..3
    assert recorder.active == [True, True, False, False, False, False, False, False]
    assert any(f.endswith(".xplane.pb") for f in profiler.trace_files)
    with pytest.raises(ValueError, match="profile_batch"):
        ProfilerCallback(tmp_path, profile_batch=(3, 2))


def test_trainer_out_of_memory_is_explained():
    x, y = _data()
    trainer = jdist.Trainer(MLP(features=(16,), num_classes=4), optax.adam(0.01), strategy=jdist.MirroredStrategy())
    trainer.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    error = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1 bytes.")

    def fail(*args):
        raise error

    trainer._compiled[("train", 1)] = fail  # as XLA raises it while compiling or running the step
    with pytest.raises(jdist.DeviceOutOfMemoryError, match="dense_0/kernel") as info:
        trainer.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    assert info.value.__cause__ is error and "accumulation_steps" in str(info.value)
