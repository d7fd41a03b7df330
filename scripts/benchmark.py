"""Training throughput of jdist side by side with a hand-written JAX baseline and Keras 3.

    python scripts/benchmark.py                       # MLP + CNN, 8 simulated CPU devices
    python scripts/benchmark.py --models cnn --windows 7 --out runs/bench

For each model and each strategy, the same program (model, loss, Adam, global batch,
host-to-device transfer of every batch) runs as:
- jdist: `TrainState.create` + `make_train_step` + `strategy.distribute_batch`;
- baseline: `jax.jit` with `NamedSharding` in/out shardings and donated state, written by hand;
- keras: Keras 3 (JAX backend) with `keras.distribution.DataParallel` on the same devices
  (needs the `bench` extra: `pip install -e ".[bench]"`).
Throughput is examples/s, the median of several timed windows after compilation (min and
max reported). Inside the timed windows device-to-host transfers are disallowed
(`jax.transfer_guard_device_to_host`), so any host round-trip inside a step fails loudly,
and every XLA compilation is counted: after warm-up there must be none, also for a short,
padded last batch. Writes JSON + PNG and prints a table of ratios: `jd/base` is the ratio of
the medians, `paired` the median over rounds of each jdist window's rate over its neighbouring
baseline window's (rounds alternate the order), which cancels drift in the machine's load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# Figures recorded for TensorFlow 2.21 MirroredStrategy over 8 logical CPUs on a 2-core
# machine of the same kind (examples/s); TensorFlow is not a dependency, so it is not re-run here.
TF_REFERENCE = {"mlp": 4600.0, "cnn": 3700.0}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,cnn,transformer")
    parser.add_argument("--strategies", default="mirrored,one_device",
                        help="comma list of mirrored, one_device, zero1 (Mirrored + sharded optimizer state)")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps-per-window", type=int, default=24)
    parser.add_argument("--max-in-flight", type=int, default=4)
    parser.add_argument("--no-keras", action="store_true")
    parser.add_argument("--weight-update-min-bytes", type=int, default=None,
                        help="jdist.layout.WEIGHT_UPDATE_MIN_BYTES for this run: the smallest leaf whose update "
                             "(and, under zero1, stored optimizer state) is split over the replicas (default 1 MiB)")
    parser.add_argument("--out", default="runs/benchmark")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Program:
    name: str
    global_batch: int
    input_shape: tuple
    num_classes: int = 10


PROGRAMS = {
    "mlp": Program("mlp", 256, (784,)),
    "cnn": Program("cnn", 128, (28, 28, 1)),
    # A small decoder-only LM: examples are sequences of 64 byte tokens.
    "transformer": Program("transformer", 32, (64,), num_classes=256),
}


def flax_model(program: Program):
    from jdist import models

    if program.name == "transformer":
        return models.TransformerLM(models.TransformerConfig(max_len=program.input_shape[0]))
    return models.MLP(features=(1024, 1024)) if program.name == "mlp" else models.CNN()


def keras_model(program: Program):
    import keras

    if program.name == "mlp":
        layers = [keras.Input(program.input_shape), keras.layers.Dense(1024, activation="relu"),
                  keras.layers.Dense(1024, activation="relu"), keras.layers.Dense(10)]
    else:
        layers = [keras.Input(program.input_shape), keras.layers.Conv2D(32, 3, activation="relu"),
                  keras.layers.MaxPooling2D(2), keras.layers.Conv2D(64, 3, activation="relu"),
                  keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
    return keras.Sequential(layers)


def make_batches(program: Program, count: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    if program.name == "transformer":
        tokens = rng.integers(0, program.num_classes, (count, program.global_batch, program.input_shape[0] + 1))
        return [(t[:, :-1].astype(np.int32), t[:, 1:].astype(np.int32)) for t in tokens]
    return [
        (rng.standard_normal((program.global_batch,) + program.input_shape, dtype=np.float32),
         rng.integers(0, program.num_classes, program.global_batch).astype(np.int32))
        for _ in range(count)
    ]


class CompileCounter:
    """Counts XLA backend compilations (JAX reports each one as a monitoring event)."""

    def __init__(self):
        import jax

        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, name: str, *_args, **_kwargs) -> None:
        if name == "/jax/core/compile/backend_compile_duration":
            self.count += 1


def interleaved_windows(variants: dict, args, counter: CompileCounter) -> dict:
    """Times each variant's windows in turn (A, B, C, C, B, A, ...) so machine noise hits all alike.

    A variant is `(run_window, examples_per_window)`; `run_window()` runs one window and blocks.
    """
    import jax

    for run_window, _ in variants.values():  # warm-up: compile and settle
        run_window()
    compiles_before = counter.count
    rates = {name: [] for name in variants}
    order = list(variants.items())
    with jax.transfer_guard_device_to_host("disallow"):
        for round_index in range(args.windows):
            # Alternate the order (A, B, ... then ..., B, A): no variant always runs first.
            for name, (run_window, examples) in (order if round_index % 2 == 0 else order[::-1]):
                start = time.perf_counter()
                run_window()
                rates[name].append(examples / (time.perf_counter() - start))
    return {"rates": rates, "compiles_after_warmup": counter.count - compiles_before}


def step_window(step: Callable[[int], object], args) -> Callable[[], None]:
    """One window of `steps_per_window` steps with at most `max_in_flight` dispatched ahead."""
    import jax

    def run_window():
        pending = []
        for i in range(args.steps_per_window):
            pending.append(step(i))
            if len(pending) > args.max_in_flight:
                jax.block_until_ready(pending.pop(0))
        jax.block_until_ready(pending)

    return run_window


def make_strategy(name: str):
    """mirrored, one_device, or zero1 (Mirrored with the optimizer state stored sharded)."""
    import jax

    import jdist

    if name == "mirrored":
        return jdist.MirroredStrategy()
    if name == "zero1":
        return jdist.MirroredStrategy(shard_optimizer_state=True)
    if name == "one_device":
        return jdist.OneDeviceStrategy(jax.devices()[0])
    raise SystemExit(f"unknown strategy {name!r}: use mirrored, zero1 or one_device")


def summarize(rates: list[float]) -> dict:
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates)}


def loss_and_grad_program(program: Program):
    import jax.numpy as jnp
    import optax

    from jdist import models

    model = flax_model(program)
    if program.name == "transformer":
        params = model.init(__import__("jax").random.key(0), jnp.zeros((1,) + program.input_shape, jnp.int32))
        return model, params, optax.adam(1e-3), models.lm_loss
    params = model.init(__import__("jax").random.key(0), jnp.zeros((1,) + program.input_shape))
    return model, params, optax.adam(1e-3), models.classification_loss


def jdist_variant(strategy, program: Program, batches, args):
    """jdist's step; every batch carries its mask, as distributed datasets' batches do."""
    import numpy as np

    import jdist

    model, params, tx, loss = loss_and_grad_program(program)
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    step_fn = jdist.make_train_step(lambda p, b: loss(model.apply(p, b["x"]), b["y"]), strategy)
    holder = {"state": state}
    full = np.ones(program.global_batch, np.float32)

    def step(i, mask=full):
        x, y = batches[i % len(batches)]
        holder["state"], sums = step_fn(holder["state"], strategy.distribute_batch({"x": x, "y": y, "mask": mask}))
        return sums

    def short_batch_compiles(counter: CompileCounter) -> int:
        """A short last batch, padded and masked, must reuse the compiled step."""
        before = counter.count
        mask = (np.arange(program.global_batch) < program.global_batch // 3).astype(np.float32)
        jax_sums = step(0, mask)
        __import__("jax").block_until_ready(jax_sums)
        return counter.count - before

    return step, short_batch_compiles


def baseline_variant(devices, program: Program, batches, args):
    import jax
    import numpy as np
    import optax
    from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

    model, params, tx, loss = loss_and_grad_program(program)
    mesh = Mesh(np.array(devices), ("data",), axis_types=(AxisType.Auto,))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    params = jax.device_put(params, replicated)
    opt_state = jax.device_put(tx.init(params), replicated)

    def train_step(params, opt_state, x, y):
        def mean_loss(p):
            return loss(model.apply(p, x), y).mean()

        value, grads = jax.value_and_grad(mean_loss)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    compiled = jax.jit(train_step, in_shardings=(replicated, replicated, sharded, sharded),
                       out_shardings=(replicated, replicated, replicated), donate_argnums=(0, 1))
    holder = {"params": params, "opt": opt_state}

    def step(i):
        x, y = batches[i % len(batches)]
        holder["params"], holder["opt"], value = compiled(
            holder["params"], holder["opt"], jax.device_put(x, sharded), jax.device_put(y, sharded))
        return value

    return step


def keras_variant(program: Program, batches):
    """Keras 3 `fit` over the same batches, one epoch per window."""
    import keras
    import numpy as np

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=keras.distribution.list_devices()))
    model = keras_model(program)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[1] for b in batches])

    def run_window():
        model.fit(x, y, batch_size=program.global_batch, epochs=1, verbose=0, shuffle=False)

    return run_window, len(x)


def write_chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, medians, errors = [], [], []
    for key, value in results.items():
        if key.endswith("paired_ratio"):
            continue
        labels.append(key)
        medians.append(value["median"])
        errors.append([value["median"] - value["min"], value["max"] - value["median"]])
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 0.9), 4))
    ax.bar(range(len(labels)), medians, yerr=list(zip(*errors)), capsize=3)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_ylabel("examples / s (median, min-max)")
    ax.set_title("jdist vs hand-written JAX vs Keras 3")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={args.devices}")
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax

    import jdist

    if args.weight_update_min_bytes is not None:
        jdist.layout.WEIGHT_UPDATE_MIN_BYTES = args.weight_update_min_bytes
    counter = CompileCounter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, extra = {}, {}
    for name in args.models.split(","):
        program = PROGRAMS[name]
        batches = make_batches(program, 8)
        examples = args.steps_per_window * program.global_batch
        variants, short_checks = {}, {}
        for strategy_name in args.strategies.split(","):
            strategy = make_strategy(strategy_name)
            step, short_check = jdist_variant(strategy, program, batches, args)
            variants[f"{name}/{strategy_name}/jdist"] = (step_window(step, args), examples)
            base = baseline_variant(list(strategy.worker_devices), program, batches, args)
            variants[f"{name}/{strategy_name}/baseline"] = (step_window(base, args), examples)
            short_checks[strategy_name] = short_check
        if not args.no_keras and name != "transformer":  # no Keras twin of the Transformer here
            try:
                variants[f"{name}/mirrored/keras"] = keras_variant(program, batches)
            except ImportError:
                print("keras is not installed: pip install -e '.[bench]' to compare with Keras 3", flush=True)
        print(f"[{name}] timing {len(variants)} variants x {args.windows} windows "
              f"(global batch {program.global_batch}, {args.devices} devices)", flush=True)
        timing = interleaved_windows(variants, args, counter)
        for key, rates in timing["rates"].items():
            results[key] = summarize(rates)
        for strategy_name in short_checks:
            # Each round's jdist window over its neighbouring baseline window: drift between rounds cancels.
            key = f"{name}/{strategy_name}"
            paired = [a / b for a, b in zip(timing["rates"][f"{key}/jdist"], timing["rates"][f"{key}/baseline"])]
            results[f"{key}/paired_ratio"] = summarize(paired)
        if {"mirrored", "zero1"} <= set(short_checks):  # ZeRO-1 over plain Mirrored, window by window
            rates = timing["rates"]
            paired = [a / b for a, b in zip(rates[f"{name}/zero1/jdist"], rates[f"{name}/mirrored/jdist"])]
            results[f"{name}/zero1_over_mirrored/paired_ratio"] = summarize(paired)
        for strategy_name, short_check in short_checks.items():
            extra[f"{name}/{strategy_name}"] = {
                "compiles_in_timed_windows": timing["compiles_after_warmup"],
                "compiles_for_short_batch": short_check(counter),
            }
        if not args.no_keras and f"{name}/mirrored/keras" in variants:
            import keras

            keras.distribution.set_distribution(None)

    print()
    header = (f"{'program':<22}{'jdist ex/s':>12}{'baseline':>12}{'keras':>10}{'jd/base':>9}{'paired':>8}"
              f"{'jd/keras':>10}{'jd/TF':>8}{'recompiles':>11}")
    print(header)
    print("-" * len(header))
    for key, info in extra.items():
        name, strategy_name = key.split("/")
        jd = results[f"{key}/jdist"]["median"]
        base = results[f"{key}/baseline"]["median"]
        keras_result = results.get(f"{name}/mirrored/keras") if strategy_name == "mirrored" else None
        kr = keras_result["median"] if keras_result else float("nan")
        tf = TF_REFERENCE.get(name) if strategy_name == "mirrored" else None
        recompiles = info["compiles_in_timed_windows"] + info["compiles_for_short_batch"]
        paired = results[f"{key}/paired_ratio"]["median"]
        print(f"{key:<22}{jd:>12.0f}{base:>12.0f}{kr:>10.0f}{jd / base:>9.3f}{paired:>8.3f}{jd / kr:>10.3f}"
              f"{(jd / tf) if tf else float('nan'):>8.2f}{recompiles:>11d}")
    for key, value in results.items():
        if "zero1_over_mirrored" in key:
            print(f"{key.split('/')[0]}: zero1 / mirrored jdist throughput, paired windows: {value['median']:.3f} "
                  f"(min {value['min']:.3f}, max {value['max']:.3f})")
    report = {"results": results, "checks": extra, "tf_reference": TF_REFERENCE,
              "devices": args.devices, "backend": jax.default_backend(), "jax": jax.__version__}
    (out / "benchmark.json").write_text(json.dumps(report, indent=2))
    write_chart(results, out / "benchmark.png")
    print(f"\nwrote {out / 'benchmark.json'} and {out / 'benchmark.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
