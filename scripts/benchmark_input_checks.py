"""Per-batch cost of jdist's input validation (jdist.input.checks), in microseconds.

    python scripts/benchmark_input_checks.py

Times the Trainer's per-batch checks (structure cache lookup + the loss's label check)
and a make_train_step step's checks with timeit (the minimum over repeats: the cost
without other processes' interference), next to one training step of the same batch.
"""
import os
import time
import timeit

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np  # noqa: E402
import optax  # noqa: E402

import jdist  # noqa: E402
from jdist.input.checks import StepChecks  # noqa: E402
from jdist.models import CNN, MLP  # noqa: E402
from jdist.trainer import _batching as batching  # noqa: E402


def per_call_us(fn, number=200, repeat=15):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main():
    rng = np.random.default_rng(0)
    for name, model, shape, batch_size in [("CNN", CNN(), (28, 28, 1), 128), ("MLP", MLP(), (784,), 256)]:
        x = rng.random((batch_size * 4,) + shape, np.float32)
        y = (np.arange(batch_size * 4) % 10).astype(np.int32)
        trainer = jdist.Trainer(model, optax.adam(1e-3), strategy=jdist.MirroredStrategy())
        trainer.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)  # compile
        steps = []
        for _ in range(3):
            start = time.perf_counter()
            trainer.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)
            steps.append((time.perf_counter() - start) / 4 * 1e6)
        batch = batching.pad_batch(x[:batch_size], y[:batch_size], batch_size)
        trainer_us = per_call_us(lambda: trainer._checks.check(trainer, batch, "step"))
        checks = StepChecks()
        host = {"image": x[:batch_size], "label": y[:batch_size]}
        checks(host)
        step_us = per_call_us(lambda: checks(host))
        step = min(steps)
        print(f"{name} batch {batch_size}: Trainer checks {trainer_us:.1f} us, make_train_step checks "
              f"{step_us:.1f} us; one Trainer step {step / 1e3:.1f} ms -> checks are "
              f"{100 * trainer_us / step:.3f}% of a step")


if __name__ == "__main__":
    main()
