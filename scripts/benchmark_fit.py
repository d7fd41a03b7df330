"""Per-step overhead of Keras-style `fit`: jdist's Trainer vs Keras 3 on JAX vs TF Keras vs a hand-written scan.

    python scripts/benchmark_fit.py                      # 8 simulated CPU devices, steps_per_execution 1 and 8
    python scripts/benchmark_fit.py --tf --markdown runs/fit.md

A small MLP (32-64-10, global batch 64, Adam) under data parallelism, so a step's compute is tiny and what is
timed is each framework's cost per step and per `fit` call:
- jdist: `jdist.Trainer(model, optax.adam(1e-3), strategy=MirroredStrategy(), steps_per_execution=k).fit(...)`;
- keras: Keras 3 on JAX, `keras.distribution.DataParallel`, `compile(steps_per_execution=k)`, `fit`;
- tf_fit (`--tf`): TF Keras `fit` under `tf.distribute.MirroredStrategy` in its own process
  (`scripts/tf_bench_worker.py --variant fit`), same k;
- program: the Trainer's own compiled train program (`steps_per_execution=k`) called in a hand-written loop,
  each batch placed with one `jax.device_put` (the mask placed once), at most `MAX_IN_FLIGHT` executions ahead
  and the epoch logs read at the end: what `fit` costs above its program is `jdist / program`;
- scan: a hand-written `jax.jit` of `lax.scan` over k steps (k batches in one transfer, donated state, at most
  `MAX_IN_FLIGHT` executions ahead of the host, as the Trainer): the floor a fit loop with steps_per_execution=k
  can reach. It computes no metrics and reads no loss; `fit` also keeps a per-replica loss metric, masks
  padding, skips empty steps and fetches its epoch logs at the end of each call (one small device-to-host read).
Every window is one epoch (one `fit` call) of the same number of steps; variants run in interleaved windows and
the ratios are paired (see `scripts/benchmark.py`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchmark  # noqa: E402
from bench_common import (  # noqa: E402
    WorkerError,
    make_batches,
    paired_ratio,
    program as make_program,
    simulate_cpu_devices,
    summarize,
)

# Executions a loop may dispatch ahead of the host: jdist.Trainer's default `max_in_flight`, kept by the
# hand-written loop too (unbounded, 32 programs with an all-reduce queued on 2 cores near XLA:CPU's abort).
MAX_IN_FLIGHT = 4


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps", type=int, default=32,
                        help="steps per window, one fit call (a multiple of every k): the same for every variant")
    parser.add_argument("--tf", action="store_true")
    parser.add_argument("--tf-python", default=None)
    parser.add_argument("--no-keras", action="store_true")
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--json", default=None, help="also write rates and paired ratios here")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="first print cProfile's top entries of one jdist fit call of STEPS steps (k = the first "
                             "of --ks), then time as usual")
    args = parser.parse_args(argv)
    if args.tf:
        args.tf_python = args.tf_python or benchmark.default_tf_python()
        if not args.tf_python:
            parser.error("--tf needs TensorFlow: pass --tf-python /path/to/python or set $JDIST_TF_PYTHON")
    return args


def data(program, max_steps: int):
    import numpy as np

    batches = make_batches(program, 8)
    reps = -(-max_steps // len(batches))
    return (np.concatenate([b[0] for b in batches] * reps), np.concatenate([b[1] for b in batches] * reps))


def jdist_fit(program, x, y, k: int) -> benchmark.Variant:
    import jax
    import optax

    import jdist

    model = benchmark.flax_model(program)
    params = model.init(jax.random.key(0), x[:1])
    trainer = jdist.Trainer(model, optax.adam(1e-3), params=params, strategy=jdist.MirroredStrategy(),
                            steps_per_execution=k)
    return _fit_variant(trainer.fit, program.global_batch, x, y, k)


def program_loop(program, x, y, k: int) -> benchmark.Variant:
    """The Trainer's compiled train program in a plain loop: the same program `fit` runs, without `fit`'s
    batching, checks, callbacks and bookkeeping (reaches into the Trainer's private executor)."""
    import jax
    import numpy as np
    import optax
    from jax.sharding import NamedSharding, PartitionSpec as P

    import jdist
    from jdist.strategy.batch import Batch

    model = benchmark.flax_model(program)
    trainer = jdist.Trainer(model, optax.adam(1e-3), params=model.init(jax.random.key(0), x[:1]),
                            strategy=jdist.MirroredStrategy(), steps_per_execution=k)
    gb = program.global_batch
    trainer.fit(x[:k * gb], y[:k * gb], batch_size=gb, epochs=1, shuffle=False, verbose=0)  # state, compile
    execute = trainer._executor("train", k)
    mesh, axis = trainer.strategy.mesh, trainer.strategy.data_axis
    split = NamedSharding(mesh, P(axis) if k == 1 else P(None, axis))
    mask = jax.device_put(np.ones((gb,) if k == 1 else (k, gb), np.float32), split)
    active = jax.device_put(np.ones(k, bool), NamedSharding(mesh, P()))

    def execution(i: int, states):
        rows = slice(i * k * gb, (i + 1) * k * gb)
        xs, ys = (x[rows], y[rows]) if k == 1 else (x[rows].reshape((k, gb) + x.shape[1:]), y[rows].reshape(k, gb))
        placed = Batch(jax.device_put((xs, ys), split), mask)
        args = (placed,) if k == 1 else (placed, active)
        trainer._state, states = execute(trainer._state, states, *args)
        return states

    def run(steps: int) -> float:
        start = time.perf_counter()
        states, pending = trainer._fresh_states(), []
        for i in range(steps // k):
            states = execution(i, states)
            pending.append(states)
            if len(pending) > MAX_IN_FLIGHT:
                jax.block_until_ready(pending.pop(0))
        trainer._read_logs(states)  # as fit: one read of the epoch's metrics, which waits for every step
        return time.perf_counter() - start

    return benchmark.Variant(run, gb, step_multiple=k, max_steps=len(x) // gb)


def profile_fit(program, x, y, k: int, steps: int, top: int = 25) -> None:
    """cProfile's top entries (own time) of one jdist `fit` call of `steps` steps, after a warm-up call."""
    import cProfile
    import pstats

    variant = jdist_fit(program, x, y, k)
    variant.run(k)
    profiler = cProfile.Profile()
    profiler.enable()
    variant.run(steps)
    profiler.disable()
    print(f"cProfile of one jdist fit call of {steps} steps (k={k}), by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)
    if os.environ.get("JDIST_PROFILE_CUMULATIVE"):
        pstats.Stats(profiler).sort_stats("cumtime").print_stats("jdist", top)


def _fit_variant(fit, gb: int, x, y, k: int) -> benchmark.Variant:
    """A window is one `fit` call (Keras's signature) of `steps` global batches, in order, silent."""

    def run(steps: int) -> float:
        start = time.perf_counter()
        fit(x[: steps * gb], y[: steps * gb], batch_size=gb, epochs=1, shuffle=False, verbose=0)
        return time.perf_counter() - start

    return benchmark.Variant(run, gb, step_multiple=k, max_steps=len(x) // gb)


def keras_fit(program, x, y, k: int) -> benchmark.Variant:
    import keras

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=keras.distribution.list_devices()))
    model = benchmark.keras_model(program)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=k,
                  jit_compile=True)
    return _fit_variant(model.fit, program.global_batch, x, y, k)


def scan_loop(program, x, y, k: int) -> benchmark.Variant:
    """k steps per `jax.jit` call as one `lax.scan`; k batches are moved to the devices in one transfer."""
    import jax
    import numpy as np
    import optax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from jdist import models

    model = benchmark.flax_model(program)
    tx = optax.adam(1e-3)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P(None, "data"))
    params = jax.device_put(model.init(jax.random.key(0), x[:1]), replicated)
    state = (params, jax.device_put(tx.init(params), replicated))

    def one_step(state, batch):
        params, opt_state = state
        loss, grads = jax.value_and_grad(
            lambda p: models.classification_loss(model.apply(p, batch[0]), batch[1]).mean())(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    def k_steps(state, xs, ys):
        return jax.lax.scan(one_step, state, (xs, ys))

    k_steps = jax.jit(k_steps, in_shardings=(replicated, sharded, sharded), donate_argnums=0)
    gb = program.global_batch
    holder = {"state": state}

    def execution(i: int):
        first = i * k
        xs = x[first * gb:(first + k) * gb].reshape((k, gb) + x.shape[1:])
        ys = y[first * gb:(first + k) * gb].reshape(k, gb)
        holder["state"], losses = k_steps(holder["state"], jax.device_put(xs, sharded), jax.device_put(ys, sharded))
        return losses

    # At most MAX_IN_FLIGHT executions ahead (the Trainer's bound: XLA:CPU's collective hazard), and the
    # window ends when the last one has finished.
    executions = benchmark.timed_steps(execution, MAX_IN_FLIGHT)

    def run(steps: int) -> float:
        return executions(steps // k)

    return benchmark.Variant(run, gb, step_multiple=k, max_steps=len(x) // gb)


def main(argv=None) -> int:
    args = parse_args(argv)
    simulate_cpu_devices(args.devices)
    program = make_program("small_mlp")
    bad = [k for k in args.ks if args.steps % k]
    if bad:
        raise SystemExit(f"--steps {args.steps} is not a multiple of k={bad}")
    x, y = data(program, max(args.steps, args.profile))
    if args.profile:
        profile_fit(program, x, y, args.ks[0], args.profile)
    starting = {}
    if args.tf:
        for k in args.ks:
            starting[f"tf_fit/k={k}"] = benchmark.tf_variant(args.tf_python, program, variant="fit",
                                                            devices=args.devices, steps_per_execution=k,
                                                            fit_steps=args.steps)
    variants, errors = {}, {}
    for k in args.ks:
        variants[f"jdist/k={k}"] = jdist_fit(program, x, y, k)
        if not args.no_keras:
            variants[f"keras/k={k}"] = keras_fit(program, x, y, k)
        variants[f"program/k={k}"] = program_loop(program, x, y, k)
        variants[f"scan/k={k}"] = scan_loop(program, x, y, k)
    for key, ready in starting.items():
        try:
            variants[key] = ready()
        except WorkerError as error:
            errors[key] = str(error).splitlines()[0]
    load_before = os.getloadavg()
    # fit fetches its epoch logs at the end of each call, so no transfer guard here (benchmark.py has one).
    for variant in variants.values():
        variant.fixed_steps = args.steps
    timing = benchmark.interleaved_windows(variants, windows=args.windows, target_seconds=0.0,
                                           max_steps=args.steps, guard=False)
    for variant in variants.values():
        variant.close()
    errors.update(timing["errors"])
    rates = timing["rates"]
    lines = ["| steps_per_execution | jdist Trainer.fit ex/s (min-max) | Keras 3 (JAX) fit | TF Keras fit "
             "| its program, hand loop | hand-written scan | jdist / Keras 3 | jdist / TF fit | jdist / program "
             "| jdist / scan |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k in args.ks:
        def cell(name, k=k):
            key = f"{name}/k={k}"
            if key in rates:
                return benchmark.fmt(summarize(rates[key])["median"])
            return "failed" if key in errors else ""

        def ratio(name, k=k):
            key = f"{name}/k={k}"
            if key in rates and f"jdist/k={k}" in rates:
                return benchmark.fmt(paired_ratio(rates[f"jdist/k={k}"], rates[key])["median"], 2)
            return ""

        jd = summarize(rates[f"jdist/k={k}"]) if f"jdist/k={k}" in rates else None
        jd_text = f"{benchmark.fmt(jd['median'])} ({benchmark.fmt(jd['min'])}-{benchmark.fmt(jd['max'])})" if jd \
            else "failed"
        lines.append(f"| {k} | {jd_text} | {cell('keras')} | {cell('tf_fit')} | {cell('program')} | {cell('scan')} "
                     f"| {ratio('keras')} | {ratio('tf_fit')} | {ratio('program')} | {ratio('scan')} |")
    lines += ["", f"steps per window: {timing['steps']}",
              f"load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; after: "
              f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}"]
    lines += [f"{key} failed: {message}" for key, message in errors.items()]
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    if args.json:
        paired = {f"jdist/{key.split('/')[0]}/k={key.split('=')[1]}":
                  paired_ratio(rates[f"jdist/k={key.split('=')[1]}"], rates[key])
                  for key in rates if not key.startswith("jdist/") and f"jdist/k={key.split('=')[1]}" in rates}
        Path(args.json).write_text(json.dumps({
            "examples_per_s": {key: summarize(r) for key, r in rates.items()}, "paired": paired,
            "steps_per_window": args.steps, "windows": args.windows, "load_average_before": load_before,
            "load_average_after": os.getloadavg(), "errors": errors}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
