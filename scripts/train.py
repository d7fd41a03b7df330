"""Train a model under a jdist strategy: the project's main job.

    python scripts/train.py                          # CNN on digits, MirroredStrategy, 8 CPU devices
    python scripts/train.py --strategy one_device --epochs 3
    python scripts/train.py --model mlp --dataset synthetic
    python scripts/train.py --validate --log-dir runs/cnn   # val_* metrics; TensorBoard events, CSV, PNG
    python -m jdist.launch --num-workers 2 --devices-per-worker 4 -- python scripts/train.py  # one 2-worker job

Simulated CPU devices are configured from --devices before JAX starts.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", default="mirrored",
                        choices=["mirrored", "one_device", "default", "fsdp", "model", "mixed", "pipeline"],
                        help="model/mixed (tensor parallel, data x model) and pipeline (layers over stages) "
                             "need --model transformer")
    parser.add_argument("--model", default="cnn", choices=["cnn", "mlp", "transformer"],
                        help="transformer: a language model on text shipped with Python (its flags below)")
    parser.add_argument("--dataset", default="digits", help="digits | synthetic | a path to MNIST IDX files or mnist.npz")
    parser.add_argument("--devices", type=int, default=8, help="simulated CPU devices (ignored on GPU/TPU)")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps-per-execution", type=int, default=1, help="steps compiled into one XLA call")
    parser.add_argument("--max-in-flight", type=int, default=4, help="executions dispatched ahead of the host")
    parser.add_argument("--validate", action="store_true", help="evaluate the held-out split after every epoch")
    parser.add_argument("--log-dir", default=None, help="write TensorBoard events, metrics.csv and curves.png here")
    parser.add_argument("--no-plot", dest="plot", action="store_false", help="with --log-dir: skip the PNG plot")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    _transformer_job().add_arguments(parser)
    return parser.parse_args(argv)


def _transformer_job():
    """The Transformer job lives beside this script (imported lazily: it imports JAX)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import transformer_job

    return transformer_job


def configure_devices(count: int) -> None:
    """Simulated CPU devices must be requested before JAX initialises its backends."""
    flag = f"--xla_force_host_platform_device_count={count}"
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()


def load_dataset(name: str, seed: int):
    from jdist import datasets

    if name == "digits":
        return datasets.load_digits("train", seed=seed), datasets.load_digits("test", seed=seed)
    if name == "synthetic":
        train = datasets.make_classification(4096, image_shape=(28, 28, 1), seed=seed)
        test = datasets.make_classification(1024, image_shape=(28, 28, 1), seed=seed + 1)
        return train, test
    return datasets.load_mnist(name, "train"), datasets.load_mnist(name, "test")


def make_strategy(name: str):
    import jdist

    if name == "mirrored":
        if os.environ.get("TF_CONFIG"):  # one worker of a cluster, e.g. under python -m jdist.launch
            return jdist.MultiWorkerMirroredStrategy()
        return jdist.MirroredStrategy()
    if name == "fsdp":
        return jdist.FSDPStrategy()
    if name in ("model", "mixed", "pipeline"):
        raise SystemExit(f"--strategy {name} splits the Transformer's layers: use it with --model transformer.")
    if name == "one_device":
        return jdist.OneDeviceStrategy("cpu:0" if not _has_accelerator() else _first_accelerator())
    return jdist.get_strategy()


def _has_accelerator() -> bool:
    import jax

    return jax.default_backend() != "cpu"


def _first_accelerator():
    import jax

    return jax.local_devices()[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_devices(args.devices)
    if args.model == "transformer":
        _transformer_job().run(args)
        return 0

    import jax
    import optax

    import jdist
    from jdist import models
    from jdist.callbacks import Callback

    (train_x, train_y), (test_x, test_y) = load_dataset(args.dataset, args.seed)
    strategy = make_strategy(args.strategy)
    print(f"{strategy} | {strategy.num_replicas_in_sync} replicas on {jax.default_backend()} | "
          f"{len(train_x)} train / {len(test_x)} test examples | global batch {args.batch_size}")

    class EpochLine(Callback):
        """One plain line per epoch, after the progress bar."""

        def on_epoch_end(self, epoch, logs=None):
            print(f"epoch {epoch + 1}: loss {logs['loss']:.4f}  accuracy {logs['accuracy']:.4f}", flush=True)

    callbacks: list = [EpochLine()]
    if args.log_dir:
        callbacks.append(jdist.callbacks.MetricsLogger(args.log_dir, plot=args.plot))
    model = models.CNN() if args.model == "cnn" else models.MLP()
    trainer = jdist.Trainer(model, optax.adam(args.learning_rate),
                            loss=jdist.losses.SparseCategoricalCrossentropy(from_logits=True),
                            metrics=["accuracy"], strategy=strategy, seed=args.seed,
                            steps_per_execution=args.steps_per_execution, max_in_flight=args.max_in_flight)
    start = time.perf_counter()
    trainer.fit(train_x, train_y, batch_size=args.batch_size, epochs=args.epochs, callbacks=callbacks,
                validation_data=(test_x, test_y) if args.validate else None, verbose=1 if args.progress else 0)
    loss, accuracy = trainer.evaluate(test_x, test_y, batch_size=args.batch_size, verbose=0)
    print(f"held-out: loss {loss:.4f}  accuracy {accuracy:.4f} "
          f"({len(test_x)} examples)  in {time.perf_counter() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
