"""What jdist achieves on an NVIDIA GPU machine: Transformer MFU in bf16, all-reduce against the ring model,
and CentralStorageStrategy with its parameters in host memory.

    python scripts/gpu_check.py                        # on a machine with NVIDIA GPUs (jax[cuda12] installed)
    python scripts/gpu_check.py --link-gbps 450        # per-direction link bandwidth for the ring model, GB/s
    python scripts/gpu_check.py --cpu-smoke            # every code path on 2 CPU devices, tiny, float32

1. MFU: `jdist.models.TransformerLM` with bf16 compute (float32 parameters, Adam) trained by
   `make_train_step` under MirroredStrategy (all GPUs) and OneDeviceStrategy, and the same step written by
   hand. MFU is the model-FLOPs count (`model_flops_per_step`) x steps/s over the devices' peak dense bf16
   FLOP/s, from a table of known `device_kind`s; an unknown kind reports model FLOP/s only.
2. All-reduce: `psum` over all devices of an S-byte float32 buffer per device, for several S, against the
   ring model 2(n-1)/n * S / B (B: `--link-gbps`, else the known per-direction NVLink figure). With one GPU
   the all-reduce moves nothing and the script says so.
3. CentralStorageStrategy: parameters and optimizer state stored in the `pinned_host` memory kind (its
   choice with several compute devices; with one it keeps them on that device, as TF does, and the script
   says which memory it used; with one GPU also `parameter_device="cpu:0"`, which is that GPU's pinned_host
   memory), step time and the loss before and after.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# Peak dense bf16 FLOP/s per device (vendor datasheets, without sparsity), by a substring of
# `jax.Device.device_kind`; the first match wins, so more specific names come first.
PEAK_BF16_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),  # SXM, e.g. "NVIDIA H100 80GB HBM3"
    ("H200", 989e12),
    ("GH200", 989e12),
    ("A100", 312e12),  # SXM and PCIe alike
    ("L40S", 362e12),
    ("L4", 121e12),
)

# NVLink bandwidth per direction per GPU, GB/s (what one GPU can send while it receives as much).
LINK_GBPS = (
    ("H100 PCIe", 64.0),  # PCIe 5.0 x16 without an NVLink bridge
    ("H100", 450.0),  # NVLink 4: 900 GB/s both directions
    ("H200", 450.0),
    ("A100", 300.0),  # NVLink 3: 600 GB/s both directions
)


def lookup(table, device_kind: str):
    """The value of the first entry whose name occurs in `device_kind`, else None."""
    return next((value for name, value in table if name.lower() in device_kind.lower()), None)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="run every code path on CPU with tiny sizes (checks the script, measures nothing)")
    parser.add_argument("--link-gbps", type=float, default=None,
                        help="link bandwidth per direction in GB/s (gigabytes) for the ring model "
                             "(default: the known NVLink figure of the device kind)")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="peak dense bf16 TFLOP/s per device (default: the known figure of the device kind)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per strategy")
    parser.add_argument("--per-device-batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--attention", default="auto", choices=("auto", "xla", "cudnn"),
                        help="TransformerConfig.attention: auto takes cuDNN's fused attention on GPUs in bf16")
    parser.add_argument("--allreduce-mib", default="1,16,64,256",
                        help="comma list of buffer sizes per device, MiB")
    args = parser.parse_args(argv)
    if args.cpu_smoke:  # tiny sizes: every path runs in seconds on a CPU
        args.steps, args.per_device_batch, args.seq_len = 3, 2, 16
        args.d_model, args.layers, args.heads = 32, 1, 2
        args.allreduce_mib = "0.0625,0.25"
        # Placeholders, so the MFU and ring-model arithmetic runs too (labelled as given by flag).
        args.peak_tflops = args.peak_tflops or 1.0
        args.link_gbps = args.link_gbps or 10.0
    return args


def gpu_devices(cpu_smoke: bool) -> list:
    """The NVIDIA GPUs JAX sees; with --cpu-smoke the CPU devices. Exits with a clear message without a GPU."""
    import jax

    if cpu_smoke:  # two devices are enough for every path (an all-reduce, host-memory parameters)
        return jax.devices("cpu")[:2]
    try:
        devices = jax.devices("gpu")
    except RuntimeError as error:
        raise SystemExit(
            f"gpu_check.py needs an NVIDIA GPU, and JAX sees none ({error}); the devices it sees are "
            f"{[d.device_kind for d in jax.devices()]}. Install JAX with CUDA (pip install -U 'jax[cuda12]') "
            "on a GPU machine, or pass --cpu-smoke to check the script on CPU.") from None
    if not all("nvidia" in d.device_kind.lower() or d.platform == "gpu" for d in devices):
        raise SystemExit(f"gpu_check.py expects NVIDIA GPUs; JAX's GPU devices are "
                         f"{[d.device_kind for d in devices]}.")
    return devices


def timed(fn, steps: int) -> float:
    """Seconds for `steps` calls of `fn(i)` dispatched back to back, blocking once at the end."""
    import jax

    start = time.perf_counter()
    out = None
    for i in range(steps):
        out = fn(i)
    jax.block_until_ready(out)
    return time.perf_counter() - start


def transformer_program(args, dtype):
    import jax
    import jax.numpy as jnp
    import optax

    from jdist import models

    config = models.TransformerConfig(vocab_size=256, d_model=args.d_model, num_heads=args.heads,
                                      num_layers=args.layers, d_ff=4 * args.d_model, max_len=args.seq_len,
                                      dtype=dtype, attention=args.attention)
    model = models.TransformerLM(config)
    # One compiled init (flax's eager init compiles every op of the model on its own).
    params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, args.seq_len), jnp.int32))

    def loss(p, batch):
        return models.lm_loss(model.apply(p, batch["x"]), batch["y"])

    return model, params, optax.adam(1e-4), loss


def token_batches(args, global_batch: int, count: int = 4):
    import numpy as np

    rng = np.random.default_rng(0)
    # A learnable stream (each token the previous plus one, mod 256) so the loss visibly goes down.
    starts = rng.integers(0, 256, (count, global_batch, 1))
    tokens = (starts + np.arange(args.seq_len + 1)) % 256
    return [{"x": t[:, :-1].astype(np.int32), "y": t[:, 1:].astype(np.int32)} for t in tokens]


def train(strategy, args, program, *, steps: int | None = None) -> dict:
    """Trains `program` (from `transformer_program`) under `strategy`; returns step time, loss first and
    last, FLOPs per step."""
    import jax

    import jdist

    model, params, tx, loss = program
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    step_fn = jdist.make_train_step(loss, strategy)
    global_batch = args.per_device_batch * strategy.num_replicas_in_sync
    batches = [strategy.distribute_batch(b) for b in token_batches(args, global_batch)]
    holder = {"state": state}

    def step(i):
        holder["state"], sums = step_fn(holder["state"], batches[i % len(batches)])
        return sums

    first = jax.device_get(step(0))  # compiles
    timed(step, 2)  # warm-up
    steps = steps or args.steps
    seconds = timed(step, steps) / steps
    last = jax.device_get(step(0))
    return {"seconds_per_step": seconds, "global_batch": global_batch,
            "loss_first": float(first["loss"] / first["count"]), "loss_last": float(last["loss"] / last["count"])}


def model_flops_per_step(program, args, global_batch: int) -> float:
    """Training FLOPs of one step by the model-FLOPs count MFU is defined with (PaLM, appendix B):
    6 N per token for the weight matmuls (N: parameters, less the embedding lookups) plus the causal
    attention's 6 L d T per token (half of PaLM's 12 L d T: the masked half is never computed).

    XLA's cost analysis is not used: on GPUs it leaves out cuBLAS and cuDNN custom calls."""
    import jax

    _, params, _, _ = program
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    n = sum(leaf.size for path, leaf in flat if not any(getattr(k, "key", None) in ("embed", "pos_embed")
                                                         for k in path))
    tokens = global_batch * args.seq_len
    return 6 * n * tokens + 6 * args.layers * args.d_model * args.seq_len * tokens


def train_hand_written(device, args, program) -> dict:
    """The same step written by hand (`jax.jit` of value_and_grad + optax on one device, the state donated):
    the reference jdist's OneDeviceStrategy row is read against."""
    import jax
    import optax

    model, params, tx, loss = program
    params = jax.tree.map(lambda x: x.copy(), jax.device_put(params, device))  # its own copy: it is donated
    opt_state = tx.init(params)

    def hand_step(params, opt_state, batch):
        value, grads = jax.value_and_grad(lambda p: loss(p, batch).mean())(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    hand_step = jax.jit(hand_step, donate_argnums=(0, 1))
    batches = [jax.device_put(b, device) for b in token_batches(args, args.per_device_batch)]
    holder = {"state": (params, opt_state)}

    def step(i):
        p, o, value = hand_step(*holder["state"], batches[i % len(batches)])
        holder["state"] = (p, o)
        return value

    first = float(step(0))
    timed(step, 2)
    seconds = timed(step, args.steps) / args.steps
    return {"seconds_per_step": seconds, "global_batch": args.per_device_batch, "loss_first": first,
            "loss_last": float(step(0))}


def mfu_section(devices, args, program) -> list[str]:
    import jdist
    from jdist.models import attention_implementation

    kind = devices[0].device_kind
    peak = args.peak_tflops * 1e12 if args.peak_tflops else lookup(PEAK_BF16_FLOPS, kind)
    config = program[0].config
    lines = [f"## 1. Transformer, {config.dtype.__name__} compute, {attention_implementation(config)} attention "
             f"({args.layers} layers, d_model {args.d_model}, seq {args.seq_len}, {args.per_device_batch} "
             "sequences per device)", ""]
    if peak is None:
        lines.append(f"No known peak bf16 FLOP/s for device kind {kind!r}: MFU is not computed, only the "
                     "model FLOP/s (pass --peak-tflops, or add the kind to PEAK_BF16_FLOPS).")
    else:
        lines.append(f"Peak dense bf16 per device ({kind}): {peak / 1e12:g} TFLOP/s"
                     + (" (--peak-tflops)." if args.peak_tflops else " (known figure for this device kind)."))
    lines += ["", "| strategy | devices | ms / step | tokens/s | model TFLOP/s | MFU | loss first -> last |",
              "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    mirrored = train(jdist.MirroredStrategy(devices=devices), args, program)
    one_device = train(jdist.OneDeviceStrategy(devices[0]), args, program)
    hand = train_hand_written(devices[0], args, program)
    rows = [("MirroredStrategy", len(devices), mirrored), ("OneDeviceStrategy", 1, one_device),
            ("hand-written jax.jit (one device)", 1, hand)]
    for name, n, r in rows:
        achieved = model_flops_per_step(program, args, r["global_batch"]) / r["seconds_per_step"]
        mfu = f"{100 * achieved / (peak * n):.1f}%" if peak else "unknown peak"
        tokens = r["global_batch"] * args.seq_len / r["seconds_per_step"]
        lines.append(f"| {name} | {n} | {1e3 * r['seconds_per_step']:.2f} | {tokens:,.0f} | "
                     f"{achieved / 1e12:.3f} | {mfu} | {r['loss_first']:.3f} -> {r['loss_last']:.3f} |")
    ratio = hand["seconds_per_step"] / one_device["seconds_per_step"]
    lines += ["", f"OneDeviceStrategy / hand-written, steps/s: {ratio:.3f} (both run the same model, batch and "
              "Adam). FLOPs: the model-FLOPs count, 6 N T + 6 L d T^2 per sequence (see model_flops_per_step)."]
    return lines


def allreduce_section(devices, args, program=None) -> list[str]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    n = len(devices)
    lines = ["", f"## 2. All-reduce (psum over {n} device(s)) against the ring model 2(n-1)/n * S / B", ""]
    if n == 1:
        lines.append("One device: the all-reduce moves no data (the ring model gives 0 s); the times below are "
                     "the cost of launching an empty collective, not of a link.")
    link = args.link_gbps or lookup(LINK_GBPS, devices[0].device_kind)
    if link is None:
        lines.append(f"No known link bandwidth for {devices[0].device_kind!r}: pass --link-gbps for the model.")
    else:
        lines.append(f"B = {link:g} GB/s per direction" + (" (--link-gbps)" if args.link_gbps else
                                                          " (known figure for this device kind)") + ".")
    lines += ["", "| S per device | ms (median of 10) | ring model ms | achieved bus GB/s | of model |",
              "| ---: | ---: | ---: | ---: | ---: |"]
    mesh = Mesh(np.array(devices), ("d",))
    spec = P("d")
    summed = jax.jit(jax.shard_map(lambda x: jax.lax.psum(x, "d"), mesh=mesh, in_specs=spec, out_specs=spec))
    for mib in (float(s) for s in args.allreduce_mib.split(",")):
        size = int(mib * (1 << 20))
        count = size // 4
        x = jax.device_put(jnp.ones((n * count,), jnp.float32), NamedSharding(mesh, spec))
        jax.block_until_ready(summed(x))
        times = []
        for _ in range(10):
            start = time.perf_counter()
            jax.block_until_ready(summed(x))
            times.append(time.perf_counter() - start)
        seconds = float(np.median(times))
        moved = 2 * (n - 1) / n * size  # bytes each device sends in a ring all-reduce
        model = moved / (link * 1e9) if link else None
        lines.append(f"| {size / (1 << 20):g} MiB | {1e3 * seconds:.3f} | "
                     f"{f'{1e3 * model:.3f}' if model is not None else ''} | {moved / seconds / 1e9:.1f} | "
                     f"{f'{100 * model / seconds:.0f}%' if model else ''} |")
    return lines


def central_storage_section(devices, args, program) -> list[str]:
    import jdist

    lines = ["", "## 3. CentralStorageStrategy", ""]
    variants = [("default", jdist.CentralStorageStrategy(compute_devices=devices))]
    if len(devices) == 1:  # TF's rule keeps the parameters on the one GPU; also store them on the host CPU
        variants.append(("parameter_device='cpu:0'",
                         jdist.CentralStorageStrategy(compute_devices=devices, parameter_device="cpu:0")))
    for name, strategy in variants:
        kind = strategy.parameter_memory_kind
        lines.append(f"{name}: {strategy!r}: parameters and optimizer state in memory kind {kind!r}.")
        if kind != "pinned_host" and name == "default":
            lines.append("Not pinned_host: with one compute device the strategy keeps the parameters on it (TF's "
                         "rule); host memory is used from two compute devices on.")
        r = train(strategy, args, program, steps=max(3, args.steps // 2))
        lines.append(f"{1e3 * r['seconds_per_step']:.2f} ms / step (global batch {r['global_batch']}); "
                     f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f} "
                     f"({'down' if r['loss_last'] < r['loss_first'] else 'NOT down'}).")
        lines.append("")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.cpu_smoke and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2")
    import jax

    devices = gpu_devices(args.cpu_smoke)
    head = [f"# gpu_check: {len(devices)} x {devices[0].device_kind} (jax {jax.__version__}, "
            f"backend {devices[0].platform})" + (" -- CPU SMOKE RUN, sizes tiny, figures meaningless" if
                                                 args.cpu_smoke else ""), ""]
    print("\n".join(head), flush=True)
    # bf16 on GPUs; the smoke run computes in float32 (XLA:CPU compiles bf16 steps 4x slower, and CPU
    # figures mean nothing anyway).
    program = transformer_program(args, jax.numpy.float32 if args.cpu_smoke else jax.numpy.bfloat16)
    for section in (mfu_section, allreduce_section, central_storage_section):
        print("\n".join(section(devices, args, program)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
