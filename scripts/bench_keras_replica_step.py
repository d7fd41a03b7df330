"""Keras `fit` under MirroredStrategy: the per-replica step (a clipping optimizer) against the whole-batch step.

A clipping optimizer makes jdist's Keras step take each replica's gradients (`keras_replica_gradients`: the
model and loss run once per replica's rows under `jax.vmap`, each replica's gradients clipped, then summed);
without clipping the step is one whole-batch program. Both are timed on the same small MLP, interleaved round
by round (clip, then no clip) so that machine load hits both alike, on 2 and 4 simulated CPU devices; the
printed ratio is the per-replica step's time over the whole-batch step's (the fastest round of each). The models
log a metric (`mae`), which reads the step's outputs: a step that ran the model a second time for them (Keras's
own whole-batch pass) would show here.

    KERAS_BACKEND=jax .venv/bin/python scripts/bench_keras_replica_step.py [--rounds 4] [--batches 6] [--units 768]
"""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

keras = tf.keras
BATCH, FEATURES, UNITS = 1024, 64, 768


def build(strategy: Any, clipnorm: float | None, weights: list | None) -> Any:
    """The MLP, compiled with plain SGD or SGD with `clipnorm` (which takes the per-replica step)."""
    with strategy.scope():
        model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(UNITS, activation="relu"),
                                  keras.layers.Dense(UNITS, activation="relu"), keras.layers.Dense(1)])
        if weights is not None:
            model.set_weights(weights)
        optimizer = keras.optimizers.SGD(0.01, clipnorm=clipnorm) if clipnorm else keras.optimizers.SGD(0.01)
        model.compile(optimizer=optimizer, loss="mse", metrics=["mae"])  # a metric reads the outputs
    return model


def timed_fit(model: Any, x: np.ndarray, y: np.ndarray) -> float:
    """Seconds for one epoch of `fit` (its steps block before `fit` returns its history)."""
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    elapsed = time.perf_counter() - start
    assert np.isfinite(history.history["loss"][-1])
    return elapsed


def bench(replicas: int, rounds: int, batches: int) -> dict:
    rs = np.random.RandomState(0)
    x = rs.normal(size=(BATCH * batches, FEATURES)).astype("float32")
    y = rs.normal(size=(BATCH * batches, 1)).astype("float32")
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    per_replica = build(strategy, 1.0, None)
    whole = build(strategy, None, per_replica.get_weights())
    for model in (per_replica, whole):  # compile both
        timed_fit(model, x, y)
    clip_s, whole_s = [], []
    for _ in range(rounds):
        clip_s.append(timed_fit(per_replica, x, y))
        whole_s.append(timed_fit(whole, x, y))
    clip, plain = min(clip_s), min(whole_s)  # the least disturbed round of each (a shared machine)
    return {"replicas": replicas, "per_replica_steps_s": batches / clip, "whole_batch_steps_s": batches / plain,
            "ratio": clip / plain}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--units", type=int, default=UNITS, help="width of the two hidden layers")
    args = parser.parse_args()
    globals()["UNITS"] = args.units
    for replicas in (2, 4):
        r = bench(replicas, args.rounds, args.batches)
        print(f"{r['replicas']} replicas: per-replica (clipnorm) {r['per_replica_steps_s']:.1f} steps/s, "
              f"whole batch {r['whole_batch_steps_s']:.1f} steps/s, time ratio per-replica / whole "
              f"{r['ratio']:.2f}", flush=True)


if __name__ == "__main__":
    main()
