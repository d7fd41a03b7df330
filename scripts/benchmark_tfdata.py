"""TF's input pipeline through jdist (`jdist.tf_compat.data`, on grain) against real `tf.data`, and under `fit`.

    python scripts/benchmark_tfdata.py                                  # jdist only
    python scripts/benchmark_tfdata.py --tf-python /path/to/tf/python   # also real tf.data, side by side

The pipeline is the one TF's tutorials write, the per-example transform in `tf.` ops:

    Dataset.from_tensor_slices((images_uint8, labels)).map(scale).shuffle(BUFFER).batch(BATCH).prefetch(AUTOTUNE)

Variants, timed in interleaved windows (A, B, C, then C, B, A, ...), ratios paired per round:
- `jdist_data`: examples/s reading the pipeline alone through `jdist.tf_compat.data`;
- `tf_data` (`--tf-python`): the same pipeline through real `tf.data` in a TensorFlow process;
- `fit_arrays`: `jdist.Trainer.fit` on the images already scaled, as arrays (shuffled per epoch): the
  ArrayDataset path;
- `fit_pipeline`: the same Trainer, model and batch size fed by the jdist pipeline (scaling per example
  on the host, windowed shuffle).
One fit window is one `fit` call of one epoch. The claim under test: `fit_pipeline / fit_arrays >= 0.9`.
The pipeline alone is compared to `fit_pipeline`: when it reads many times more examples per second than the
step consumes, the step does not wait on input beyond what the ratio to `fit_arrays` shows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_common import Worker, WorkerError, paired_ratio, protocol_stdout, serve, simulate_cpu_devices  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--examples", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--buffer", type=int, default=1024)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--read-batches", type=int, default=32, help="batches per pipeline-alone window")
    parser.add_argument("--tf-python", default=None)
    parser.add_argument("--worker", choices=["tf"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="also write the results here")
    return parser.parse_args(argv)


def make_data(examples: int, seed: int = 0):
    import numpy as np
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(examples, 28, 28, 1), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(examples,)).astype(np.int32)
    return images, labels


def pipeline(tf, images, labels, buffer: int, batch: int):
    """The same code for both libraries: `tf` is `tensorflow` or `jdist.tf_compat`."""
    def scale(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    return (tf.data.Dataset.from_tensor_slices((images, labels)).map(scale).shuffle(buffer, seed=0)
            .batch(batch).prefetch(tf.data.AUTOTUNE))


def reader(dataset, batch: int):
    """`run(n)`: reads n batches of an endless pass over `dataset`; the seconds it took."""
    iterator = iter(dataset.repeat())

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            next(iterator)
        return time.perf_counter() - start

    return run


def tf_worker(args) -> None:
    out = protocol_stdout()
    import tensorflow as tf
    images, labels = make_data(args.examples)
    run = reader(pipeline(tf, images, labels, args.buffer, args.batch), args.batch)
    run(4)  # warm-up: the first reads fill the shuffle buffer
    serve(run, {"tf": tf.__version__}, out=out)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker == "tf":
        tf_worker(args)
        return 0
    simulate_cpu_devices(args.devices)
    import jax
    import optax

    import jdist
    import jdist.tf_compat as tf
    from jdist.models import CNN

    images, labels = make_data(args.examples)
    tf_process = None
    if args.tf_python:
        tf_process = Worker([args.tf_python, os.path.abspath(__file__), "--worker", "tf", "--examples",
                             str(args.examples), "--batch", str(args.batch), "--buffer", str(args.buffer)], wait=False)
    strategy = jdist.MirroredStrategy()
    scaled = images.astype("float32") / 255.0

    def trainer():
        return jdist.Trainer(CNN(), optax.adam(1e-3), loss=jdist.losses.SparseCategoricalCrossentropy(from_logits=True),
                             strategy=strategy, seed=0)

    on_arrays, on_pipeline = trainer(), trainer()
    fed = pipeline(tf, images, labels, args.buffer, args.batch)
    steps_per_epoch = -(-args.examples // args.batch)

    def fit_window(which):
        def run(_: int) -> float:
            start = time.perf_counter()
            if which == "arrays":
                on_arrays.fit(scaled, labels, batch_size=args.batch, epochs=1, verbose=0)
            else:
                on_pipeline.fit(fed, epochs=1, verbose=0)
            return time.perf_counter() - start
        return run

    variants = {"jdist_data": (reader(pipeline(tf, images, labels, args.buffer, args.batch), args.batch),
                               args.read_batches * args.batch, args.read_batches),
                "fit_arrays": (fit_window("arrays"), args.examples, 1),
                "fit_pipeline": (fit_window("pipeline"), args.examples, 1)}
    if tf_process is not None:
        try:
            tf_process.wait_ready()
            variants["tf_data"] = (tf_process.run, args.read_batches * args.batch, args.read_batches)
        except WorkerError as error:
            print(f"tf_data: not measured ({str(error).splitlines()[0]})")
    for run, _, n in variants.values():  # warm-up: compile, fill buffers
        run(n)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for round_index in range(args.windows):
        for name in (names if round_index % 2 == 0 else names[::-1]):
            run, examples, n = variants[name]
            rates[name].append(examples / run(n))
    if tf_process is not None:
        tf_process.close()
    load = os.getloadavg()
    result = {"devices": len(jax.devices()), "examples": args.examples, "batch": args.batch, "buffer": args.buffer,
              "steps_per_epoch": steps_per_epoch, "load_average": load,
              "examples_per_s": {k: statistics.median(v) for k, v in rates.items()},
              "paired": {"fit_pipeline / fit_arrays": paired_ratio(rates["fit_pipeline"], rates["fit_arrays"]),
                         "jdist_data / fit_pipeline": paired_ratio(rates["jdist_data"], rates["fit_pipeline"])}}
    if "tf_data" in rates:
        result["paired"]["jdist_data / tf_data"] = paired_ratio(rates["jdist_data"], rates["tf_data"])
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {result['devices']} devices, "
          f"{args.examples} examples, batch {args.batch}, shuffle buffer {args.buffer}, {args.windows} windows")
    for name, rate in result["examples_per_s"].items():
        print(f"  {name:13s} {rate:10.0f} examples/s (median)")
    for name, ratio in result["paired"].items():
        print(f"  {name:26s} {ratio['median']:.3f} (min {ratio['min']:.3f}, max {ratio['max']:.3f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
