"""Per-device memory and step time of DP, MP, DPxMP and FSDP on the Transformer LM,
and jdist's step time against a hand-written `jax.jit` + `NamedSharding` program.

    python scripts/benchmark_layouts.py                # 8 simulated CPU devices
    python scripts/benchmark_layouts.py --devices 0    # the machine's real devices
    python scripts/benchmark_layouts.py --pipeline     # pipeline stages: step time and bubble

For each layout three programs compute the same thing (mean token
cross-entropy, AdamW, donated state) with the same parameter shardings:
jdist's `make_train_step`; a hand-written `jax.jit` + `NamedSharding` step that
also applies jdist's weight-update sharding (the same program, so the ratio is
jdist's own overhead); and the plain hand-written step without it. The
baseline's shardings come from a separate few-line resolver here and are
checked equal to jdist's. The programs are timed in interleaved windows
(A B C, then C B A, ...) of `--steps` blocked steps; the table reports medians
over `--windows` windows.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import sys
import time


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=8, help="simulated CPU devices; 0 = real devices")
    parser.add_argument("--windows", type=int, default=15)
    parser.add_argument("--steps", type=int, default=4, help="steps per timed window (<= 8: see InFlightLimiter)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--model-parallelism", type=int, default=4, help="model axis size of DPxMP")
    parser.add_argument("--fsdp-min-size-bytes", type=int, default=16 << 10)
    parser.add_argument("--modes", default="DP,MP,DPxMP,FSDP")
    parser.add_argument("--pipeline", action="store_true",
                        help="instead: pipeline (data x stage) for --stages x --microbatches vs tensor parallelism")
    parser.add_argument("--stages", default="2,4")
    parser.add_argument("--microbatches", default="4,8,16")
    parser.add_argument("--schedule", default="gpipe", choices=["gpipe", "circular"])
    return parser.parse_args()


ARGS = _parse()
if ARGS.devices:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={ARGS.devices}").strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import traverse_util  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

if ARGS.devices:
    jax.config.update("jax_num_cpu_devices", ARGS.devices)

import jdist  # noqa: E402
from jdist.models import MEGATRON_RULES, TransformerConfig, TransformerLM, lm_loss  # noqa: E402


# ------------------------------------------------------------ the baseline
def hand_spec(path: str, shape: tuple, mode: str, data_size: int) -> P:
    """The layout written out by hand: Megatron rules, or the FSDP largest-dimension rule."""
    if mode in ("MP", "DPxMP"):
        for pattern, spec in MEGATRON_RULES:
            if re.fullmatch(pattern, path):
                return spec
        return P()
    if mode == "FSDP":
        nbytes = int(np.prod(shape)) * 4
        divisible = [d for d in range(len(shape)) if shape[d] % data_size == 0]
        if len(shape) < 2 or nbytes < ARGS.fsdp_min_size_bytes or not divisible:
            return P()
        dim = max(divisible, key=lambda d: (shape[d], d))
        return P(*("data" if d == dim else None for d in range(len(shape))))
    return P()


def hand_shardings(params, mesh: Mesh, mode: str):
    flat = traverse_util.flatten_dict(params, sep="/")
    data_size = mesh.shape["data"]
    specs = {k: NamedSharding(mesh, hand_spec(k, v.shape, mode, data_size)) for k, v in flat.items()}
    return traverse_util.unflatten_dict(specs, sep="/")


def widen_for_update(sharding: NamedSharding, shape: tuple, n: int) -> NamedSharding:
    """Weight-update sharding, as jdist's train step does it: the first unsplit dimension
    that the replica count divides is also split over `data` while the update runs."""
    spec = list(sharding.spec) + [None] * (len(shape) - len(sharding.spec))
    used = {a for e in spec if e for a in (e if isinstance(e, tuple) else (e,))}
    if n == 1 or not shape or "data" in used:
        return sharding
    for dim, (size, entry) in enumerate(zip(shape, spec)):
        if entry is None and size % n == 0:
            spec[dim] = "data"
            return NamedSharding(sharding.mesh, P(*spec))
    return sharding


def build_baseline(model, tx, params, mesh: Mesh, mode: str, update_sharding: bool):
    """A plain jitted step over (params, opt_state, step) with explicit NamedShardings;
    with `update_sharding`, the optimizer update is weight-update sharded as in jdist."""
    param_sh = hand_shardings(params, mesh, mode)
    flat_param_sh = traverse_util.flatten_dict(param_sh, sep="/")
    params_shapes = {k: v.shape for k, v in traverse_util.flatten_dict(params, sep="/").items()}
    replicated = NamedSharding(mesh, P())

    def opt_sharding(path, leaf):  # Adam moments mirror their parameter
        keys = [getattr(k, "key", None) for k in path]
        for start in range(len(keys)):
            name = "/".join(str(k) for k in keys[start:])
            if name in flat_param_sh and np.shape(leaf) == params_shapes[name]:
                return flat_param_sh[name]
        return replicated

    abstract_opt = jax.eval_shape(tx.init, params)
    opt_sh = jax.tree_util.tree_map_with_path(opt_sharding, abstract_opt)
    state_sh = (param_sh, opt_sh, replicated)
    batch_sh = NamedSharding(mesh, P("data"))
    n = mesh.shape["data"]
    widen = lambda shardings, tree: jax.tree.map(  # noqa: E731
        lambda s, x: widen_for_update(s, np.shape(x), n), shardings, tree)
    update_param_sh, update_opt_sh = widen(param_sh, params), widen(opt_sh, abstract_opt)
    constrain = lambda tree, sh: jax.tree.map(jax.lax.with_sharding_constraint, tree, sh)  # noqa: E731

    def step(state, batch):
        p, opt_state, count = state

        def mean_loss(p):
            per_example = lm_loss(model.apply(p, batch["inputs"]), batch["targets"])
            return jnp.sum(per_example) / per_example.shape[0], per_example

        grads, per_example = jax.grad(mean_loss, has_aux=True)(p)
        if update_sharding:
            grads, p = constrain(grads, update_param_sh), constrain(p, update_param_sh)
            opt_state = constrain(opt_state, update_opt_sh)
        updates, opt_state = tx.update(grads, opt_state, p)
        sums = {"loss": jnp.sum(per_example), "count": jnp.float32(per_example.shape[0])}
        return (optax.apply_updates(p, updates), opt_state, count + 1), sums

    compiled = jax.jit(step, in_shardings=(state_sh, batch_sh), out_shardings=(state_sh, replicated),
                       donate_argnums=(0,))
    state = jax.jit(lambda p: (p, tx.init(p), jnp.int32(0)), out_shardings=state_sh)(params)
    return compiled, state, batch_sh


# ------------------------------------------------------------------ modes
def make_strategy(mode: str) -> jdist.Strategy:
    megatron = jdist.Layout(MEGATRON_RULES, default=P())
    if mode == "DP":
        return jdist.MirroredStrategy()
    if mode == "MP":
        return jdist.ModelParallelStrategy(megatron, model=jax.device_count())
    if mode == "DPxMP":
        return jdist.ModelParallelStrategy(megatron, model=ARGS.model_parallelism)
    if mode == "FSDP":
        return jdist.FSDPStrategy(min_size_bytes=ARGS.fsdp_min_size_bytes)
    raise ValueError(mode)


def bytes_on_first_device(tree) -> int:
    device = jax.devices()[0]
    return sum(s.data.nbytes for leaf in jax.tree.leaves(tree) for s in leaf.addressable_shards
               if s.device == device)


def program_signature(compiled) -> tuple:
    """Collective counts and XLA's cost estimate: equal for equal programs."""
    text = compiled.as_text()
    collectives = tuple(sorted(collections.Counter(re.findall(
        r"\b(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)(?:-start)?\(", text)).items()))
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return collectives, cost.get("flops"), cost.get("bytes accessed")


def same_program(jdist_step, base_step, state, base_state, batch, base_batch) -> str:
    """Whether jdist's compiled step and the hand-written one match (jdist's jit is internal)."""
    jitted = next(iter(getattr(jdist_step, "_cache", {}).values()), None)
    if jitted is None:
        return "n/a"
    ours = program_signature(jitted.lower(state, batch).compile())
    theirs = program_signature(base_step.lower(base_state, base_batch).compile())
    # jdist also sums its (all-ones) example mask: a few bytes more, nothing else.
    close = lambda a, b: a == b or (a and b and abs(a - b) <= 1e-3 * max(a, b))  # noqa: E731
    same = ours[0] == theirs[0] and close(ours[1], theirs[1]) and close(ours[2], theirs[2])
    return "yes" if same else f"no: {ours} vs {theirs}"


def temp_bytes(fn, *args) -> int | None:
    try:
        analysis = fn.lower(*args).compile().memory_analysis()
        return int(analysis.temp_size_in_bytes)
    except Exception:  # not every backend reports it
        return None


class Variant:
    """One program under test: a step function, its state and its placed batches."""

    def __init__(self, step, state, batches):
        self.step, self.state, self.batches, self.times = step, state, batches, []

    def window(self) -> float:
        start = time.perf_counter()
        for batch in self.batches:
            self.state, sums = self.step(self.state, batch)
        jax.block_until_ready((self.state, sums))
        return (time.perf_counter() - start) / len(self.batches)


def bench(mode: str, model, params, batches_np):
    strategy = make_strategy(mode)
    mesh = strategy.mesh
    tx = optax.adamw(1e-3)
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=tx)

    def loss_fn(p, batch):
        return lm_loss(model.apply(p, batch["inputs"]), batch["targets"])

    variants = {"jdist": Variant(jdist.make_train_step(loss_fn, strategy), state,
                                 [strategy.distribute_batch(b) for b in batches_np])}
    for name, update_sharding in (("same", True), ("plain", False)):
        step, base_state, batch_sh = build_baseline(model, tx, params, mesh, mode, update_sharding)
        variants[name] = Variant(step, base_state, [jax.device_put(b, batch_sh) for b in batches_np])

    # The same layout on both sides, and the same bytes per device.
    base_state = variants["same"].state
    assert jax.tree.map(lambda a: a.sharding.spec, state.params) == \
        jax.tree.map(lambda a: a.sharding.spec, base_state[0]), f"{mode}: parameter shardings differ"
    state_bytes = bytes_on_first_device((state.params, state.opt_state))
    assert state_bytes == bytes_on_first_device(base_state[:2]), f"{mode}: bytes per device differ"
    temp = temp_bytes(variants["same"].step, base_state, variants["same"].batches[0])

    for v in variants.values():  # compile and warm up
        v.window()
    same_hlo = same_program(variants["jdist"].step, variants["same"].step, variants["jdist"].state,
                            variants["same"].state, variants["jdist"].batches[0], variants["same"].batches[0])
    order = list(variants.values())
    for w in range(ARGS.windows):
        for v in (order if w % 2 == 0 else order[::-1]):  # ABC CBA ...: drift hits all alike
            v.times.append(v.window())
    ours = variants["jdist"].times
    paired = lambda other: statistics.median(a / b for a, b in zip(ours, variants[other].times))  # noqa: E731
    mesh_str = " x ".join(f"{k}={v}" for k, v in mesh.shape.items())
    return {"mode": mode, "mesh": mesh_str, "state_bytes": state_bytes, "temp": temp, "same_hlo": same_hlo,
            "ours": statistics.median(ours), "same": statistics.median(variants["same"].times),
            "plain": statistics.median(variants["plain"].times),
            "ratio_same": paired("same"), "ratio_plain": paired("plain")}


def main() -> None:
    config = TransformerConfig(vocab_size=256, d_model=ARGS.d_model, num_heads=ARGS.num_heads,
                               num_layers=ARGS.num_layers, d_ff=ARGS.d_ff, max_len=ARGS.seq_len)
    model = TransformerLM(config)
    params = model.init(jax.random.key(0), jnp.zeros((1, ARGS.seq_len), jnp.int32))
    n_params = sum(x.size for x in jax.tree.leaves(params))
    rng = np.random.default_rng(0)
    batches_np = [{"inputs": rng.integers(0, 256, (ARGS.batch_size, ARGS.seq_len)).astype(np.int32),
                   "targets": rng.integers(0, 256, (ARGS.batch_size, ARGS.seq_len)).astype(np.int32)}
                  for _ in range(ARGS.steps)]
    print(f"jax {jax.__version__}, {jax.device_count()} x {jax.devices()[0].platform} devices; "
          f"TransformerLM d_model={ARGS.d_model} heads={ARGS.num_heads} layers={ARGS.num_layers} "
          f"d_ff={ARGS.d_ff} ({n_params:,} params), batch {ARGS.batch_size} x {ARGS.seq_len}, AdamW; "
          f"median of {ARGS.windows} alternating windows of {ARGS.steps} steps", flush=True)
    rows = []
    for mode in ARGS.modes.split(","):
        row = bench(mode, model, params, batches_np)
        rows.append(row)
        print(f"  done {mode}: jdist {row['ours'] * 1e3:.1f} ms, same program {row['same'] * 1e3:.1f} ms, "
              f"plain {row['plain'] * 1e3:.1f} ms", file=sys.stderr, flush=True)

    dp_bytes = next((r["state_bytes"] for r in rows if r["mode"] == "DP"), None)
    print()
    print("| mode | mesh | params+opt state / device | vs DP | XLA temp / device | jdist step | "
          "hand-written, same program | jdist / same | same compiled program | "
          "hand-written, no update sharding | jdist / that |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        vs = f"{dp_bytes / r['state_bytes']:.2f}x smaller" if dp_bytes else "-"
        temp = f"{r['temp'] / 2**20:.2f} MiB" if r["temp"] is not None else "n/a"
        print(f"| {r['mode']} | {r['mesh']} | {r['state_bytes'] / 2**20:.2f} MiB | {vs} | {temp} | "
              f"{r['ours'] * 1e3:.1f} ms | {r['same'] * 1e3:.1f} ms | {r['ratio_same']:.3f} | {r['same_hlo']} | "
              f"{r['plain'] * 1e3:.1f} ms | {r['ratio_plain']:.3f} |")
    print("\nStep times: medians over windows; ratios: medians of per-window ratios (paired windows). "
          "Same compiled program: equal collective counts, and FLOPs and bytes accessed in XLA's cost "
          "analysis within 0.1%.")


# --------------------------------------------------------------- pipeline
def _window(fn, args, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / steps


def _step_time(strategy, model, params, batches_np) -> float:
    tx = optax.adamw(1e-3)
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    step = jdist.make_train_step(lambda p, b: lm_loss(model.apply(p, b["inputs"]), b["targets"]), strategy)
    variant = Variant(step, state, [strategy.distribute_batch(b) for b in batches_np])
    variant.window()  # compile and warm up
    return statistics.median(variant.window() for _ in range(ARGS.windows))


def _blocks_times(strategy, config, stacked, x) -> tuple[float, float, float]:
    """Forward + backward of the pipelined blocks alone: with the schedule's `V*M + S - 1` ticks,
    and cut to `V*M` (no fill and drain, the same work per tick). Their gap is the bubble:
    (median time, median time without fill/drain, median over paired windows of 1 - the ratio)."""
    from jdist.models.transformer import DecoderBlock
    from jdist.pipeline import _pipelined

    pipe, mesh = strategy.pipeline, strategy.mesh
    stages = mesh.shape["stage"]
    block = lambda p, h: DecoderBlock(config).apply({"params": p}, h)  # noqa: E731
    stacked = strategy.place(stacked)
    x = jax.device_put(x, strategy.data_sharding())

    def make(ticks):
        def loss(p, h):
            return jnp.sum(_pipelined(block, p, h, pipe, mesh, "data", "stage", stages, ticks=ticks))
        return jax.jit(jax.grad(loss, argnums=(0, 1)))

    full, no_fill = make(None), make(pipe.chunks * pipe.num_microbatches)
    args = (stacked, x)
    jax.block_until_ready((full(*args), no_fill(*args)))  # compile and warm up
    pairs = []
    for w in range(ARGS.windows):  # alternating windows: drift and other load hit both alike
        first, second = (full, no_fill) if w % 2 == 0 else (no_fill, full)
        a, b = _window(first, args, ARGS.steps), _window(second, args, ARGS.steps)
        pairs.append((a, b) if w % 2 == 0 else (b, a))
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
            statistics.median(1 - p[1] / p[0] for p in pairs))


def pipeline_main() -> None:
    from jdist.models import StackedTransformerLM
    from jdist.models.transformer import stack_params

    config = TransformerConfig(vocab_size=256, d_model=ARGS.d_model, num_heads=ARGS.num_heads,
                               num_layers=ARGS.num_layers, d_ff=ARGS.d_ff, max_len=ARGS.seq_len)
    listed = TransformerLM(config)
    params = listed.init(jax.random.key(0), jnp.zeros((1, ARGS.seq_len), jnp.int32))
    stacked_model = StackedTransformerLM(config)
    stacked = stack_params(params, config.num_layers)
    rng = np.random.default_rng(0)
    batches_np = [{"inputs": rng.integers(0, 256, (ARGS.batch_size, ARGS.seq_len)).astype(np.int32),
                   "targets": rng.integers(0, 256, (ARGS.batch_size, ARGS.seq_len)).astype(np.int32)}
                  for _ in range(ARGS.steps)]
    x = jnp.asarray(rng.normal(size=(ARGS.batch_size, ARGS.seq_len, ARGS.d_model)), jnp.float32)
    n = jax.device_count()
    print(f"jax {jax.__version__}, {n} x {jax.devices()[0].platform} devices; TransformerLM "
          f"d_model={ARGS.d_model} heads={ARGS.num_heads} layers={ARGS.num_layers} d_ff={ARGS.d_ff}, "
          f"batch {ARGS.batch_size} x {ARGS.seq_len}, AdamW; {ARGS.schedule} schedule; medians of "
          f"{ARGS.windows} windows of {ARGS.steps} steps", flush=True)
    megatron = jdist.Layout(MEGATRON_RULES, default=P())
    print("\n| layout | mesh | M | train step | blocks fwd+bwd | same without fill/drain | measured bubble | "
          "theory (S-1)/(V*M+S-1) |")
    print("|---|---|---|---|---|---|---|---|")
    for s in (int(v) for v in ARGS.stages.split(",")):
        for m in (int(v) for v in ARGS.microbatches.split(",")):
            strategy = jdist.Strategy(mesh_shape={"data": n // s, "stage": s},
                                      pipeline=jdist.Pipeline(num_microbatches=m, schedule=ARGS.schedule))
            step = _step_time(strategy, stacked_model, stacked, batches_np)
            full, no_fill, bubble = _blocks_times(strategy, config, stacked["params"]["blocks"], x)
            print(f"| pipeline | data={n // s} x stage={s} | {m} | {step * 1e3:.1f} ms | {full * 1e3:.1f} ms | "
                  f"{no_fill * 1e3:.1f} ms | {bubble:.1%} | {strategy.pipeline.bubble(s):.1%} |",
                  flush=True)
        tp = jdist.ModelParallelStrategy(megatron, model=s)
        step = _step_time(tp, listed, params, batches_np)
        print(f"| tensor parallel | data={n // s} x model={s} | - | {step * 1e3:.1f} ms | - | - | - | - |", flush=True)
    print("\nMeasured bubble: median over alternating windows of 1 - (blocks' fwd+bwd with the loop cut to "
          "V*M ticks) / (with its V*M+S-1 ticks): the share of the pipelined blocks' time spent filling and "
          "draining the pipeline. Train step: the whole step (embedding, head, loss, AdamW) under make_train_step.")


if __name__ == "__main__":
    pipeline_main() if ARGS.pipeline else main()
