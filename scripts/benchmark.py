"""Training throughput of jdist side by side with a hand-written JAX program, Keras 3 and TensorFlow.

    python scripts/benchmark.py                                   # MLP, CNN, Transformer; 8 simulated CPU devices
    python scripts/benchmark.py --tf --tf-python ~/tf-env/bin/python   # also TF 2.x MirroredStrategy, same run
    python scripts/benchmark.py --models cnn --tf --growth --peak --markdown runs/bench/table.md

For each model and each strategy, the same program (model, loss, Adam, global batch,
host-to-device transfer of every batch) runs as:
- jdist: `TrainState.create` + `make_train_step` + `strategy.distribute_batch`;
- baseline: `jax.jit` with `NamedSharding` in/out shardings and donated state, written by hand;
- keras: Keras 3 (JAX backend) `fit` with `keras.distribution.DataParallel` on the same devices
  (needs the `bench` extra: `pip install -e ".[bench]"`);
- tf / tf_fit (`--tf`): TensorFlow's `tf.function(strategy.run(step_fn))` with `compute_average_loss`, and
  Keras `fit`, under `tf.distribute.MirroredStrategy` over as many logical CPUs (MLP and CNN only). Each runs
  in its own long-lived process (`scripts/tf_bench_worker.py`, in the Python given by `--tf-python`, or
  `$JDIST_TF_PYTHON`; `pip install -e ".[bench-tf]"` puts TensorFlow in this environment instead).
Strategies: mirrored, one_device, and zero1 (Mirrored with the optimizer state stored split, at the library's
threshold or `--zero1-min-bytes`), which is paired with the Mirrored row's hand-written step.
All variants of one model run in interleaved windows (A, B, C, then C, B, A, ...), each window sized to take
about `--window-seconds`; the variants timed by the step all get the same steps per window (the median of
their sizes), so paired windows do the same work. Throughput is examples/s, the median of the windows (min and max reported); a ratio
`paired` is the median over rounds of one variant's window rate over the other's in the same round, which
cancels drift in the machine's load, the only ratio that means something on a shared machine.
Inside the timed windows device-to-host transfers are disallowed (`jax.transfer_guard_device_to_host`), so
any host round-trip inside a step fails loudly, and every XLA compilation is counted: after warm-up there
must be none, also for a short, padded last batch.
`--growth` times the CNN (jdist vs the TF program) at 1, 2, 4, 8 devices and at 2x and 4x the width on 8;
`--peak` measures one device's f32 GEMM rate, and every row reports its FLOP/s (XLA's cost analysis of the
one-device step x steps/s) as a fraction of it. Writes JSON + PNGs and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_common import (  # noqa: E402
    PROGRAMS,
    Program,
    Worker,
    WorkerError,
    default_tf_python,
    interleave_order,
    make_batches,
    paired_ratio,
    program as make_program,
    simulate_cpu_devices,
    summarize,
)

WORKER = Path(__file__).resolve().parent / "tf_bench_worker.py"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,cnn,transformer", help="comma list; empty for none")
    parser.add_argument("--strategies", default="mirrored,one_device,zero1",
                        help="comma list of mirrored, one_device, zero1 (Mirrored + sharded optimizer state)")
    parser.add_argument("--zero1-min-bytes", type=int, default=None,
                        help="jdist.layout.WEIGHT_UPDATE_MIN_BYTES while the zero1 variant is built and compiled: "
                             "the smallest leaf whose optimizer state it stores split (default: the library's, "
                             "1 MiB, the same leaves whose update Mirrored splits, so zero1 adds no collective; "
                             "32768 also splits the Transformer's 32-256 KiB leaves, at the cost of an all-gather "
                             "Mirrored does not have)")
    parser.add_argument("--control", action="store_true",
                        help="also time a second, identical Mirrored step (A/A): its paired ratio to the first is "
                             "the noise floor of the model's ratios in this run")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--window-seconds", type=float, default=1.0,
                        help="each variant's window is sized to take about this long (at least one step)")
    parser.add_argument("--max-steps-per-window", type=int, default=64)
    parser.add_argument("--max-in-flight", type=int, default=4)
    parser.add_argument("--fit-steps", type=int, default=8,
                        help="steps per window (one fit call) of the Keras 3 and TF fit variants")
    parser.add_argument("--no-keras", action="store_true")
    parser.add_argument("--tf", action="store_true", help="also run TensorFlow's programs (see --tf-python)")
    parser.add_argument("--tf-python", default=None,
                        help="Python with tensorflow installed (default: $JDIST_TF_PYTHON, else this one)")
    parser.add_argument("--growth", action="store_true",
                        help="the CNN at 1, 2, 4, 8 devices and 1x, 2x, 4x width: jdist vs the TF program")
    parser.add_argument("--growth-windows", type=int, default=3)
    parser.add_argument("--peak", action="store_true", help="measure the one-device f32 GEMM peak")
    parser.add_argument("--weight-update-min-bytes", type=int, default=None,
                        help="jdist.layout.WEIGHT_UPDATE_MIN_BYTES for this run: the smallest leaf whose update "
                             "(and, under zero1, stored optimizer state) is split over the replicas (default 1 MiB)")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to this file")
    parser.add_argument("--out", default="runs/benchmark")
    args = parser.parse_args(argv)
    if args.tf:
        args.tf_python = args.tf_python or default_tf_python()
        if not args.tf_python:
            parser.error("--tf needs TensorFlow: pass --tf-python /path/to/python (an environment with "
                         "tensorflow), set $JDIST_TF_PYTHON, or pip install -e '.[bench-tf]'")
    if args.growth and not args.tf:
        parser.error("--growth compares jdist with TensorFlow: add --tf")
    return args


def flax_model(program: Program):
    from jdist import models

    if program.name == "transformer":
        return models.TransformerLM(models.TransformerConfig(max_len=program.input_shape[0]))
    if program.name == "small_mlp":
        return models.MLP(features=(64,), num_classes=program.num_classes)
    if program.name == "mlp":
        return models.MLP(features=program.mlp_features)
    return models.CNN(features=program.cnn_features)


def keras_model(program: Program):
    import keras

    if program.name in ("mlp", "small_mlp"):
        widths = (64,) if program.name == "small_mlp" else program.mlp_features
        layers = [keras.layers.Dense(w, activation="relu") for w in widths] + [keras.layers.Dense(10)]
    else:
        conv1, conv2, dense = program.cnn_features
        layers = [keras.layers.Conv2D(conv1, 3, activation="relu"), keras.layers.MaxPooling2D(2),
                  keras.layers.Conv2D(conv2, 3, activation="relu"), keras.layers.Flatten(),
                  keras.layers.Dense(dense, activation="relu"), keras.layers.Dense(10)]
    return keras.Sequential([keras.Input(program.input_shape)] + layers)


class CompileCounter:
    """Counts XLA backend compilations (JAX reports each one as a monitoring event)."""

    def __init__(self):
        import jax

        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, name: str, *_args, **_kwargs) -> None:
        if name == "/jax/core/compile/backend_compile_duration":
            self.count += 1


class Variant:
    """One way of running a program: `run(steps)` runs that many steps, blocks, returns the seconds."""

    def __init__(self, run: Callable[[int], float], examples_per_step: int, *, step_multiple: int = 1,
                 max_steps: int | None = None, fixed_steps: int | None = None,
                 close: Callable[[], None] | None = None):
        self.run = run
        # `fit` variants pay a cost per call (data adapter, iterator): they all get the same steps per window,
        # so each pays it equally often, instead of a window sized by time.
        self.fixed_steps = fixed_steps
        self.examples_per_step = examples_per_step
        self.step_multiple = step_multiple  # e.g. steps_per_execution: windows hold whole executions
        self.max_steps = max_steps
        self.close = close or (lambda: None)
        self.steps = step_multiple


def window_steps(seconds_per_step: float, target_seconds: float, multiple: int, cap: int) -> int:
    """Steps that take about `target_seconds`, a multiple of `multiple`, at least one multiple, at most `cap`."""
    steps = int(round(target_seconds / max(seconds_per_step, 1e-9) / multiple)) * multiple
    return max(multiple, min(steps, max(multiple, cap // multiple * multiple)))


def interleaved_windows(variants: dict, *, windows: int, target_seconds: float, max_steps: int,
                        counter: "CompileCounter | None" = None, guard: bool = True,
                        same_steps: bool = True) -> dict:
    """Times each variant's windows in turn (A, B, C, then C, B, A, ...) so machine noise hits all alike.

    Returns examples/s per window per variant, the steps per window, and the XLA compilations in this
    process during the timed windows (there must be none). A variant that fails keeps its error instead.
    `guard`: device-to-host transfers inside the timed windows raise. `same_steps`: the variants sized by
    time share one window size (the median of theirs).
    """
    import contextlib

    import jax

    errors = {}
    for name, variant in variants.items():  # warm-up (compile, settle), then size the window
        try:
            variant.run(variant.step_multiple)
            if variant.fixed_steps:
                variant.steps = variant.fixed_steps
                continue
            probe = variant.step_multiple * (2 if variant.step_multiple == 1 else 1)
            seconds = variant.run(probe) / probe
            cap = min(max_steps, variant.max_steps or max_steps)
            variant.steps = window_steps(seconds, target_seconds, variant.step_multiple, cap)
        except WorkerError as error:
            errors[name] = str(error).splitlines()[0]
    live = [name for name in variants if name not in errors]
    # Variants timed by the step (not fit calls, not k-step executions) all run the same number of steps
    # per window, the median of their sizes: a paired ratio then compares the same work, and no variant
    # pays its pipeline's fill and drain over fewer steps because its sizing probe hit a busy moment.
    sized = [variants[name] for name in live if not variants[name].fixed_steps and variants[name].step_multiple == 1]
    if same_steps and len(sized) > 1:
        common = int(statistics.median_low(sorted(v.steps for v in sized)))
        for variant in sized:
            variant.steps = min(common, variant.max_steps or common)
    compiles_before = counter.count if counter else 0
    rates = {name: [] for name in live}
    with jax.transfer_guard_device_to_host("disallow") if guard else contextlib.nullcontext():
        for round_index in range(windows):
            for name in interleave_order(live, round_index):
                variant = variants[name]
                if name in errors:
                    continue
                try:
                    seconds = variant.run(variant.steps)
                except WorkerError as error:
                    errors[name] = str(error).splitlines()[0]
                    continue
                rates[name].append(variant.steps * variant.examples_per_step / seconds)
    return {"rates": {k: v for k, v in rates.items() if k not in errors},
            "steps": {name: variants[name].steps for name in live if name not in errors},
            "errors": errors,
            "compiles_after_warmup": (counter.count - compiles_before) if counter else 0}


def timed_steps(step: Callable[[int], object], max_in_flight: int) -> Callable[[int], float]:
    """`run(n)`: n steps with at most `max_in_flight` dispatched ahead; blocks, returns the seconds."""
    import jax

    def run(steps: int) -> float:
        start = time.perf_counter()
        pending = []
        for i in range(steps):
            pending.append(step(i))
            if len(pending) > max_in_flight:
                jax.block_until_ready(pending.pop(0))
        jax.block_until_ready(pending)
        return time.perf_counter() - start

    return run


def make_strategy(name: str, devices: int | None = None):
    """mirrored, one_device, or zero1 (Mirrored with the optimizer state stored sharded), on the first
    `devices` devices (all by default)."""
    import jax

    import jdist

    chosen = jax.devices()[:devices] if devices else None
    if name == "mirrored":
        return jdist.MirroredStrategy(devices=chosen)
    if name == "zero1":
        return jdist.MirroredStrategy(devices=chosen, shard_optimizer_state=True)
    if name == "one_device":
        return jdist.OneDeviceStrategy(jax.devices()[0])
    raise SystemExit(f"unknown strategy {name!r}: use mirrored, zero1 or one_device")


def loss_and_grad_program(program: Program):
    import jax
    import jax.numpy as jnp
    import optax

    from jdist import models

    model = flax_model(program)
    dtype = jnp.int32 if program.name == "transformer" else jnp.float32
    params = model.init(jax.random.key(0), jnp.zeros((1,) + program.input_shape, dtype))
    loss = models.lm_loss if program.name == "transformer" else models.classification_loss
    return model, params, optax.adam(1e-3), loss


def jdist_variant(strategy, program: Program, batches, args, min_bytes: int | None = None):
    """jdist's step; every batch carries its mask, as distributed datasets' batches do.

    `min_bytes`: `jdist.layout.WEIGHT_UPDATE_MIN_BYTES` while the state is created and the step compiled
    (both read it then; the compiled step keeps the layout it chose).
    Returns the variant, a check that a short padded batch reuses the compiled step, and the FLOPs of
    one step: XLA's cost analysis of the compiled program (each device's) times the replicas."""
    import jax
    import numpy as np

    import jdist

    model, params, tx, loss = loss_and_grad_program(program)
    step_fn = jdist.make_train_step(lambda p, b: loss(model.apply(p, b["x"]), b["y"]), strategy)
    full = np.ones(program.global_batch, np.float32)
    holder = {}

    def step(i, mask=full):
        x, y = batches[i % len(batches)]
        holder["state"], sums = step_fn(holder["state"], strategy.distribute_batch({"x": x, "y": y, "mask": mask}))
        return sums

    saved = jdist.layout.WEIGHT_UPDATE_MIN_BYTES
    try:
        if min_bytes is not None:
            jdist.layout.WEIGHT_UPDATE_MIN_BYTES = min_bytes
        with strategy.scope():
            holder["state"] = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
        if min_bytes is not None:
            jax.block_until_ready(step(0))  # compiles with this threshold
    finally:
        jdist.layout.WEIGHT_UPDATE_MIN_BYTES = saved

    def short_batch_compiles(counter: CompileCounter) -> int:
        """A short last batch, padded and masked, must reuse the compiled step."""
        before = counter.count
        mask = (np.arange(program.global_batch) < program.global_batch // 3).astype(np.float32)
        jax.block_until_ready(step(0, mask))
        return counter.count - before

    def flops() -> float:
        x, y = batches[0]
        lowered = step_fn.lower(holder["state"], {"x": x, "y": y, "mask": full})
        per_device = float(lowered.compile().cost_analysis().get("flops", float("nan")))
        return per_device * strategy.num_replicas_in_sync

    def stored_fraction() -> float:
        """The fraction of the optimizer state's bytes each device stores (1.0: all of it, replicated)."""
        leaves = jax.tree.leaves(holder["state"].opt_state)
        return sum(x.addressable_shards[0].data.nbytes for x in leaves) / max(1, sum(x.nbytes for x in leaves))

    variant = Variant(timed_steps(step, args.max_in_flight), program.global_batch)
    variant.stored_fraction = stored_fraction
    return variant, short_batch_compiles, flops


def baseline_variant(devices, program: Program, batches, args) -> Variant:
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

    return Variant(timed_steps(step, args.max_in_flight), program.global_batch)


def keras_variant(program: Program, batches, max_steps: int, fit_steps: int) -> Variant:
    """Keras 3 `fit` over the same batches, one epoch of the window's steps per window."""
    import keras
    import numpy as np

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=keras.distribution.list_devices()))
    model = keras_model(program)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    reps = -(-max_steps // len(batches))
    x = np.concatenate([b[0] for b in batches] * reps)
    y = np.concatenate([b[1] for b in batches] * reps)
    gb = program.global_batch

    def run(steps: int) -> float:
        start = time.perf_counter()
        model.fit(x[: steps * gb], y[: steps * gb], batch_size=gb, epochs=1, verbose=0, shuffle=False)
        return time.perf_counter() - start

    return Variant(run, gb, max_steps=max_steps, fixed_steps=fit_steps)


def tf_variant(tf_python: str, program: Program, *, variant: str = "program", devices: int = 8,
               steps_per_execution: int = 1, fit_steps: int | None = None) -> Callable[[], Variant]:
    """Starts `scripts/tf_bench_worker.py` now; the returned callable waits for it to be ready."""
    command = [tf_python, str(WORKER), "--model", program.name, "--width", str(program.width),
               "--variant", variant, "--devices", str(devices), "--steps-per-execution", str(steps_per_execution)]
    pending = Worker(command, wait=False)

    def ready() -> Variant:
        pending.wait_ready()
        return Variant(pending.run, program.global_batch, step_multiple=steps_per_execution,
                       max_steps=pending.info.get("max_steps"), close=pending.close,
                       fixed_steps=fit_steps if variant == "fit" else None)

    return ready


def peak_gemm_flops(size: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of a `size` x `size` f32 matmul on one device (best of `repeats`): this machine's ceiling."""
    import jax
    import jax.numpy as jnp

    device = jax.devices()[0]
    a = jax.device_put(jnp.ones((size, size), jnp.float32), device)
    matmul = jax.jit(lambda a, b: a @ b)
    jax.block_until_ready(matmul(a, a))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(matmul(a, a))
        best = min(best, time.perf_counter() - start)
    return 2.0 * size ** 3 / best


def paired_columns(rates: dict, row: str, model: str, strategy_name: str) -> dict:
    """The row's paired ratios: jdist over the hand-written program, Keras 3, the TF program and TF fit."""
    jd = rates.get(f"{row}/jdist")
    # ZeRO-1 is Mirrored with its optimizer state stored split: it races the Mirrored hand-written step.
    others = {"baseline": f"{row}/baseline" if f"{row}/baseline" in rates else f"{model}/mirrored/baseline"}
    if strategy_name == "mirrored":
        others.update(keras=f"{model}/mirrored/keras", tf=f"{model}/mirrored/tf", tf_fit=f"{model}/mirrored/tf_fit")
    return {name: paired_ratio(jd, rates[key]) for name, key in others.items() if jd and key in rates}


def run_model(name: str, args, counter: CompileCounter) -> dict:
    """Every variant of one program in one set of interleaved windows, with its checks."""

    program = make_program(name)
    batches = make_batches(program, 8)
    starting = {}
    if args.tf and name in ("mlp", "cnn") and "mirrored" in args.strategies.split(","):
        # TF's processes start (import, build, trace, warm up) while the JAX variants compile.
        starting[f"{name}/mirrored/tf"] = tf_variant(args.tf_python, program, devices=args.devices)
        starting[f"{name}/mirrored/tf_fit"] = tf_variant(args.tf_python, program, variant="fit",
                                                         devices=args.devices, fit_steps=args.fit_steps)
    variants, short_checks, flops = {}, {}, {}
    strategies = args.strategies.split(",")
    for strategy_name in strategies:
        strategy = make_strategy(strategy_name)
        variant, short_checks[strategy_name], flops[strategy_name] = jdist_variant(
            strategy, program, batches, args, args.zero1_min_bytes if strategy_name == "zero1" else None)
        variants[f"{name}/{strategy_name}/jdist"] = variant
        if strategy_name == "zero1" and "mirrored" in strategies:
            continue  # paired with the Mirrored row's hand-written step (the same program)
        variants[f"{name}/{strategy_name}/baseline"] = baseline_variant(
            list(strategy.worker_devices), program, batches, args)
    if args.control and "mirrored" in strategies:
        # A/A control: a second, identical Mirrored step built after the others; its ratio to the first is
        # what the same program measures against itself here (order, memory, load), the floor under any
        # paired ratio of this model.
        variants[f"{name}/mirrored/control"] = jdist_variant(make_strategy("mirrored"), program, batches, args)[0]
    if not args.no_keras and name != "transformer":  # no Keras twin of the Transformer here
        try:
            variants[f"{name}/mirrored/keras"] = keras_variant(program, batches, args.max_steps_per_window,
                                                                    args.fit_steps)
        except ImportError:
            print("keras is not installed: pip install -e '.[bench]' to compare with Keras 3", flush=True)
    errors = {}
    for key, ready in starting.items():
        try:
            variants[key] = ready()
        except WorkerError as error:
            errors[key] = str(error).splitlines()[0]
            print(f"[{name}] {key} did not start: {error}", flush=True)
    print(f"[{name}] timing {len(variants)} variants x {args.windows} windows "
          f"(global batch {program.global_batch}, {args.devices} devices)", flush=True)
    try:
        timing = interleaved_windows(variants, windows=args.windows, target_seconds=args.window_seconds,
                                     max_steps=args.max_steps_per_window, counter=counter)
    finally:
        for variant in variants.values():
            variant.close()
    if "keras" in str(list(variants)):
        import keras

        keras.distribution.set_distribution(None)
    errors.update(timing["errors"])
    rates = timing["rates"]
    rows = {}
    for strategy_name, short_check in short_checks.items():
        row = f"{name}/{strategy_name}"
        step_flops = flops[strategy_name]()
        jd = rates.get(f"{row}/jdist")
        rows[row] = {
            "variants": {key.rsplit("/", 1)[1]: summarize(r) for key, r in rates.items()
                         if key.startswith(row + "/") or (strategy_name == "mirrored" and
                                                          key.startswith(f"{name}/mirrored/"))
                         or (strategy_name == "zero1" and key == f"{name}/mirrored/baseline")},
            "paired": paired_columns(rates, row, name, strategy_name),
            "errors": {key.rsplit("/", 1)[1]: message for key, message in errors.items()
                       if key.startswith(row + "/")},
            "steps_per_window": {key.rsplit("/", 1)[1]: steps for key, steps in timing["steps"].items()
                                 if key.startswith(row + "/")},
            "flops_per_step": step_flops,
            "compiles_in_timed_windows": timing["compiles_after_warmup"],
            "compiles_for_short_batch": short_check(counter),
        }
        if strategy_name == "zero1":
            rows[row]["optimizer_state_stored_per_device"] = variants[f"{row}/jdist"].stored_fraction()
        if jd and strategy_name == "mirrored" and f"{row}/control" in rates:
            rows[row]["control"] = paired_ratio(rates[f"{row}/control"], jd)
        if jd and strategy_name == "zero1" and f"{name}/mirrored/jdist" in rates:
            rows[row]["paired"]["mirrored"] = paired_ratio(jd, rates[f"{name}/mirrored/jdist"])
    return {"rows": rows, "rates": rates}


def growth(args, counter: CompileCounter) -> list[dict]:
    """The CNN under jdist and the TF program at 1, 2, 4, 8 devices (width 1) and widths 2, 4 (8 devices)."""
    configs = [(n, 1) for n in (1, 2, 4, 8) if n <= args.devices] + [(args.devices, w) for w in (2, 4)]
    # All TF processes start at once and each idles on its stdin until its turn; nothing is timed until
    # every one is ready, so no window shares the machine with another process's start-up.
    starting = [tf_variant(args.tf_python, make_program("cnn", width), devices=devices) for devices, width in configs]
    workers = []
    for ready in starting:
        try:
            workers.append(ready())
        except WorkerError as error:
            workers.append(error)
    results = []
    for (devices, width), worker in zip(configs, workers):
        program = make_program("cnn", width)
        batches = make_batches(program, 8)
        strategy = make_strategy("mirrored", devices)
        jd, _, flops = jdist_variant(strategy, program, batches, args)
        variants = {"jdist": jd}
        entry = {"devices": devices, "width": width, "label": program.label}
        if isinstance(worker, WorkerError):
            entry["error"] = str(worker).splitlines()[0]
        else:
            variants["tf"] = worker
        timing = interleaved_windows(variants, windows=args.growth_windows, target_seconds=args.window_seconds,
                                     max_steps=args.max_steps_per_window, counter=counter)
        for variant in variants.values():
            variant.close()
        entry.update({key: summarize(r) for key, r in timing["rates"].items()})
        if "tf" in timing["rates"]:
            entry["paired"] = paired_ratio(timing["rates"]["jdist"], timing["rates"]["tf"])
        entry["errors"] = timing["errors"]
        entry["flops_per_step"] = flops()
        entry["compiles_in_timed_windows"] = timing["compiles_after_warmup"]
        print(f"[growth] cnn width {width} on {devices} device(s): jdist {entry['jdist']['median']:.0f} ex/s"
              + (f", TF {entry['tf']['median']:.0f}, paired {entry['paired']['median']:.2f}" if "tf" in entry else ""),
              flush=True)
        results.append(entry)
    return results


def fmt(value: float | None, digits: int = 0) -> str:
    if value is None or value != value:
        return ""
    return f"{value:,.{digits}f}"


def table_lines(rows: dict, peak: float | None) -> list[str]:
    """The markdown table: examples/s median (min-max) per variant, paired ratios, fraction of peak."""
    lines = ["| program / strategy | jdist ex/s (min-max) | hand-written | Keras 3 | TF program | TF fit "
             "| jdist / hand-written | jdist / Keras 3 | jdist / TF program | jdist / TF fit | jdist FLOP/s "
             "| of peak | recompiles |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row, info in rows.items():
        v, p, errors = info["variants"], info["paired"], info["errors"]

        def rate(name):
            if name in v:
                return fmt(v[name]["median"])
            return "failed" if name in errors else ""

        jd = v.get("jdist")
        jd_text = f"{fmt(jd['median'])} ({fmt(jd['min'])}-{fmt(jd['max'])})" if jd else "failed"
        achieved = (info["flops_per_step"] * jd["median"] / PROGRAMS[row.split("/")[0]].global_batch
                    if jd and info["flops_per_step"] == info["flops_per_step"] else None)
        recompiles = info["compiles_in_timed_windows"] + info["compiles_for_short_batch"]
        ratio = lambda name: fmt(p[name]["median"], 2) if name in p else ""  # noqa: E731
        lines.append(
            f"| {row} | {jd_text} | {rate('baseline')} | {rate('keras')} | {rate('tf')} | {rate('tf_fit')} "
            f"| {ratio('baseline')} | {ratio('keras')} | {ratio('tf')} | {ratio('tf_fit')} "
            f"| {fmt(achieved / 1e9, 1) + ' G' if achieved else ''} "
            f"| {fmt(100 * achieved / peak, 1) + '%' if achieved and peak else ''} | {recompiles} |")
    return lines


def growth_lines(entries: list[dict]) -> list[str]:
    lines = ["| CNN width | devices | jdist ex/s | TF program ex/s | jdist / TF (paired) | GFLOP per step |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e in entries:
        lines.append(f"| {e['width']}x | {e['devices']} | {fmt(e.get('jdist', {}).get('median'))} "
                     f"| {fmt(e.get('tf', {}).get('median')) or 'failed'} "
                     f"| {fmt(e.get('paired', {}).get('median'), 2)} | {fmt(e['flops_per_step'] / 1e9, 2)} |")
    return lines


def write_growth_chart(entries: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_devices, by_width) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("jdist", "jdist"), ("tf", "TF 2.21 Mirrored")):
        dev = [e for e in entries if e["width"] == 1 and key in e]
        by_devices.plot([e["devices"] for e in dev], [e[key]["median"] for e in dev], "o-", label=label)
        wid = [e for e in entries if e["devices"] == max(x["devices"] for x in entries) and key in e]
        # Cost per example relative to width 1: how each framework's step grows with the work.
        base = next((e[key]["median"] for e in wid if e["width"] == 1), None)
        if base:
            by_width.plot([e["width"] for e in wid], [base / e[key]["median"] for e in wid], "o-", label=label)
    widths = sorted({e["width"] for e in entries})
    work = {e["width"]: e["flops_per_step"] for e in entries if e["devices"] == max(x["devices"] for x in entries)}
    if 1 in work:
        by_width.plot(widths, [work[w] / work[1] for w in widths], "k--", label="FLOPs per step")
    by_devices.set_xscale("log", base=2)
    by_devices.set_xlabel("devices (all share the machine's cores)")
    by_devices.set_ylabel("examples / s (median)")
    by_devices.set_title("seed CNN, global batch 128")
    by_devices.legend()
    by_width.set_xscale("log", base=2)
    by_width.set_yscale("log", base=2)
    by_width.set_xlabel("model width (x seed)")
    by_width.set_ylabel("time per example / width 1")
    by_width.set_title("CNN on 8 devices: cost vs width")
    by_width.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    simulate_cpu_devices(args.devices)
    import jax

    import jdist

    if args.weight_update_min_bytes is not None:
        jdist.layout.WEIGHT_UPDATE_MIN_BYTES = args.weight_update_min_bytes
    counter = CompileCounter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.time()
    peak = peak_gemm_flops() if args.peak else None
    if peak:
        print(f"one-device f32 GEMM peak: {peak / 1e9:.1f} GFLOP/s", flush=True)
    rows = {}
    for name in filter(None, args.models.split(",")):
        rows.update(run_model(name, args, counter)["rows"])
    entries = growth(args, counter) if args.growth else []
    report = {"rows": rows, "growth": entries, "peak_flops": peak, "devices": args.devices,
              "load_average_before": load_before, "load_average_after": os.getloadavg(),
              "wall_seconds": time.time() - started, "backend": jax.default_backend(), "jax": jax.__version__,
              "argv": sys.argv[1:] if argv is None else list(argv)}
    lines = table_lines(rows, peak)
    if entries:
        lines += [""] + growth_lines(entries)
        write_growth_chart(entries, out / "growth.png")
    zero1 = [f"{row}: zero1 / mirrored jdist, paired: {info['paired']['mirrored']['median']:.3f}; each device "
             f"stores {100 * info['optimizer_state_stored_per_device']:.1f}% of the optimizer state "
             f"(--zero1-min-bytes {args.zero1_min_bytes or 'default'})"
             for row, info in rows.items() if "mirrored" in info["paired"]]
    lines += [""] + zero1 if zero1 else []
    control = [f"{row}: the same Mirrored step built twice (A/A control), paired: {info['control']['median']:.3f} "
               f"({info['control']['min']:.3f}-{info['control']['max']:.3f})" for row, info in rows.items()
               if "control" in info]
    lines += [""] + control if control else []
    lines += ["", f"load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
              f"{', '.join(f'{x:.2f}' for x in report['load_average_after'])}; wall {report['wall_seconds']:.0f} s"]
    for row, info in rows.items():
        for variant, message in info["errors"].items():
            lines.append(f"{row}/{variant} failed: {message}")
    print("\n" + "\n".join(lines))
    (out / "benchmark.json").write_text(json.dumps(report, indent=2))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    print(f"\nwrote {out / 'benchmark.json'}" + (f" and {out / 'growth.png'}" if entries else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
