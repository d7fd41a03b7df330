"""Steps per second of `jdist.Trainer.fit` for steps_per_execution k = 1, 8, 32, side by side.

    python scripts/benchmark_steps_per_execution.py            # 8 simulated CPU devices
    python scripts/benchmark_steps_per_execution.py --ks 1 4 16 --steps 512
    python scripts/benchmark_steps_per_execution.py --model cnn --ks 1 8 --steps 64

`--model mlp` (default): a small MLP under MirroredStrategy, so each step is short and the
per-step cost of dispatch (one XLA call, one host-to-device transfer, Python bookkeeping)
shows. `--model cnn`: the seed's CNN on 28x28 inputs (the README's model), whose steps are
long, so dispatch is a small share and what k changes is how XLA runs the steps. Each
k is compiled first, then the k's are timed in interleaved rounds; the median round
counts. Timed epochs hold a multiple of every k, so no execution has empty steps.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--devices", type=int, default=8, help="simulated CPU devices (ignored on GPU/TPU)")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--steps", type=int, default=256, help="steps per timed epoch (a multiple of every k)")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={args.devices}").strip()
    import jax
    import numpy as np
    import optax

    import jdist
    from jdist.models import CNN, MLP

    bad = [k for k in args.ks if args.steps % k]
    if bad:
        raise SystemExit(f"--steps {args.steps} is not a multiple of k={bad}")
    rng = np.random.default_rng(0)
    n = args.steps * args.batch_size
    x = rng.normal(size=(n, 28, 28, 1) if args.model == "cnn" else (n, 32)).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int32)
    strategy = jdist.MirroredStrategy()
    model = CNN() if args.model == "cnn" else MLP(features=(64,), num_classes=10)
    params = model.init(jax.random.key(0), x[:1])
    name = "seed CNN, 28x28x1" if args.model == "cnn" else "MLP 32-64-10"
    print(f"{strategy.num_replicas_in_sync} replicas on {jax.default_backend()} | {name} | "
          f"global batch {args.batch_size} | {args.steps} steps per timed epoch | JAX {jax.__version__}")

    trainers = {}
    for k in args.ks:
        optimizer = optax.adam(1e-3) if args.model == "cnn" else optax.sgd(0.01)
        trainer = jdist.Trainer(model, optimizer, metrics=["accuracy"], params=params, strategy=strategy,
                                steps_per_execution=k)
        trainer.fit(x, y, batch_size=args.batch_size, epochs=1, steps_per_epoch=max(args.ks), shuffle=False,
                    verbose=0)  # compile
        trainers[k] = trainer
    times: dict[int, list[float]] = {k: [] for k in args.ks}
    for _ in range(args.rounds):
        for k in args.ks:
            start = time.perf_counter()
            trainers[k].fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
            times[k].append(time.perf_counter() - start)
    base = args.steps / statistics.median(times[args.ks[0]])
    print(f"{'k':>4} {'steps/s':>10} {'vs k=' + str(args.ks[0]):>9}")
    for k in args.ks:
        rate = args.steps / statistics.median(times[k])
        print(f"{k:>4} {rate:>10.0f} {rate / base:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
