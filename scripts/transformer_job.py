"""Train `jdist.models.TransformerLM` on the text that ships with Python, under any strategy.

    python scripts/transformer_job.py --strategy mixed --model-parallelism 4 --steps 200

Strategies (`--strategy`): `mirrored` (data parallel), `model` (tensor parallel
over every device), `mixed` (data x model, `--model-parallelism` devices per
replica), `fsdp` (parameters and optimizer state sharded over the replicas),
`one_device`, `default`, `pipeline` (the layers split over `--pipeline-stages`
stages, data parallel over the rest, `--microbatches` micro-batches per replica
batch; the model is then `StackedTransformerLM`, the same network with its blocks
stacked). The model and tensor-parallel modes use `MEGATRON_RULES`.

`scripts/train.py --model transformer` calls `add_arguments` and `run` from here.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Callable, Sequence

import jax
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

import jdist
from jdist.datasets import load_text_lm
from jdist.models import MEGATRON_RULES, StackedTransformerLM, TransformerConfig, TransformerLM, lm_loss

STRATEGIES = ("mirrored", "model", "mixed", "fsdp", "one_device", "default", "pipeline")


def make_strategy(name: str, model_parallelism: int = 4, fsdp_min_size_bytes: int = 1 << 20,
                  pipeline: jdist.Pipeline | None = None, stages: int = 2) -> jdist.Strategy:
    """The strategy called `name` over all local devices."""
    megatron = jdist.Layout(MEGATRON_RULES, default=P())  # norms and row-parallel biases replicated
    if name == "pipeline":
        return jdist.Strategy(mesh_shape={"data": -1, "stage": stages},
                              pipeline=pipeline or jdist.Pipeline(num_microbatches=4))
    if name == "mirrored":
        return jdist.MirroredStrategy()
    if name == "model":
        return jdist.ModelParallelStrategy(megatron, model=jax.device_count())
    if name == "mixed":
        return jdist.ModelParallelStrategy(megatron, model=model_parallelism)
    if name == "fsdp":
        return jdist.FSDPStrategy(min_size_bytes=fsdp_min_size_bytes)
    if name == "one_device":
        return jdist.OneDeviceStrategy(jax.devices()[0])
    if name == "default":
        return jdist.get_strategy()
    raise ValueError(f"Unknown strategy {name!r}; choose one of {STRATEGIES}.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The transformer's own flags. `run` also reads `strategy`, `batch_size`,
    `learning_rate`, `seed` and `max_in_flight`, which `scripts/train.py` defines."""
    group = parser.add_argument_group("transformer")
    group.add_argument("--steps", type=int, default=200)
    group.add_argument("--seq-len", type=int, default=128)
    group.add_argument("--d-model", type=int, default=128)
    group.add_argument("--num-heads", type=int, default=4)
    group.add_argument("--num-layers", type=int, default=2)
    group.add_argument("--d-ff", type=int, default=512)
    group.add_argument("--log-every", type=int, default=20)
    group.add_argument("--eval-batches", type=int, default=8)
    group.add_argument("--model-parallelism", type=int, default=4,
                       help="devices per replica for --strategy mixed")
    group.add_argument("--fsdp-min-size-bytes", type=int, default=64 << 10,
                       help="smaller arrays stay replicated under --strategy fsdp")
    group.add_argument("--pipeline-stages", type=int, default=2, help="stage axis size for --strategy pipeline")
    group.add_argument("--microbatches", type=int, default=4,
                       help="micro-batches per replica batch for --strategy pipeline")
    group.add_argument("--schedule", default="gpipe", choices=["gpipe", "circular"],
                       help="pipeline schedule for --strategy pipeline")


@dataclasses.dataclass
class TrainResult:
    losses: list[float]          # mean training loss of each logged window
    eval_loss: float             # mean token cross-entropy on the test split (nats)
    steps_per_second: float


def batches(inputs: np.ndarray, targets: np.ndarray, batch_size: int, seed: int):
    """Shuffled global batches, reshuffled every epoch; drops the last partial batch."""
    rng = np.random.default_rng(seed)
    if len(inputs) < batch_size:
        raise ValueError(f"The corpus has {len(inputs)} windows, fewer than one batch of {batch_size}.")
    while True:
        order = rng.permutation(len(inputs))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[start:start + batch_size]
            yield {"inputs": inputs[idx], "targets": targets[idx]}


def train_transformer(strategy: jdist.Strategy, args: argparse.Namespace,
                      print_fn: Callable[[str], None] = print) -> TrainResult:
    """Trains for `args.steps` steps under `strategy`, printing progress; returns the losses."""
    config = TransformerConfig(vocab_size=256, d_model=args.d_model, num_heads=args.num_heads,
                               num_layers=args.num_layers, d_ff=args.d_ff, max_len=args.seq_len)
    model = StackedTransformerLM(config) if strategy.pipeline is not None else TransformerLM(config)
    train_x, train_y = load_text_lm(seq_len=args.seq_len, split="train")
    test_x, test_y = load_text_lm(seq_len=args.seq_len, split="test")
    print_fn(f"corpus: {len(train_x)} train / {len(test_x)} test windows of {args.seq_len} bytes; {strategy}")

    params = model.init(jax.random.key(args.seed), np.zeros((1, args.seq_len), np.int32))
    tx = optax.adamw(args.learning_rate)
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    print_fn(strategy.summary(state))

    def loss_fn(p, batch):
        return lm_loss(model.apply(p, batch["inputs"]), batch["targets"])

    train_step = jdist.make_train_step(loss_fn, strategy)
    eval_step = jdist.make_eval_step(loss_fn, strategy)
    limiter = jdist.InFlightLimiter(getattr(args, "max_in_flight", 4))
    window, losses = [], []
    data = batches(train_x, train_y, args.batch_size, args.seed)
    start = None  # timed from the end of step 1, so compilation is not counted
    rate = 0.0
    for step in range(1, args.steps + 1):
        state, sums = train_step(state, strategy.distribute_batch(next(data)))
        limiter.push(sums)
        window.append(sums)
        if step == 1:
            jax.block_until_ready(sums)
            start = time.perf_counter()
        if step % args.log_every == 0 or step == args.steps:
            totals = jax.device_get(window)
            loss = sum(float(t["loss"]) for t in totals) / sum(float(t["count"]) for t in totals)
            losses.append(loss)
            rate = (step - 1) / (time.perf_counter() - start) if step > 1 else 0.0
            print_fn(f"step {step:5d}/{args.steps}  loss {loss:.4f}  ({rate:.1f} steps/s, "
                     f"{rate * args.batch_size * args.seq_len:,.0f} tokens/s)")
            window = []
    limiter.drain()
    steps_per_second = rate

    eval_sums = []
    eval_data = batches(test_x, test_y, args.batch_size, args.seed + 1)
    for _ in range(args.eval_batches):
        eval_sums.append(eval_step(state, strategy.distribute_batch(next(eval_data))))
    totals = jax.device_get(eval_sums)
    eval_loss = sum(float(t["loss"]) for t in totals) / sum(float(t["count"]) for t in totals)
    print_fn(f"test loss {eval_loss:.4f} nats/byte ({eval_loss / np.log(2):.3f} bits/byte)")
    return TrainResult(losses=losses, eval_loss=eval_loss, steps_per_second=steps_per_second)


def run(args: argparse.Namespace, print_fn: Callable[[str], None] = print) -> TrainResult:
    """Builds the strategy named by `args.strategy` and trains."""
    pipeline = jdist.Pipeline(num_microbatches=getattr(args, "microbatches", 4),
                              schedule=getattr(args, "schedule", "gpipe"))
    strategy = make_strategy(args.strategy, args.model_parallelism, args.fsdp_min_size_bytes,
                             pipeline, getattr(args, "pipeline_stages", 2))
    return train_transformer(strategy, args, print_fn)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", choices=STRATEGIES, default="mixed")
    parser.add_argument("--devices", type=int, default=8, help="simulated CPU devices (ignored on GPU/TPU)")
    parser.add_argument("--batch-size", type=int, default=32, help="global batch (sequences)")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-in-flight", type=int, default=4, help="steps dispatched ahead of the host")
    add_arguments(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    import os

    ARGS = parse_args()
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={ARGS.devices}").strip()
    run(ARGS)
