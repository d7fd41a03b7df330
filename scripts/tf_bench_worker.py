"""TensorFlow's side of the benchmarks: one variant in one long-lived process, run window by window.

    /path/to/tf-env/bin/python scripts/tf_bench_worker.py --model cnn --variant program --devices 8

Started by `scripts/benchmark.py --tf` and `scripts/benchmark_fit.py --tf` (one process per variant: two
MirroredStrategies in one process collide on collective keys), which then sends "run N" and reads back
the seconds N steps took (protocol in `scripts/bench_common.py`). Needs TensorFlow (`pip install
"jdist[bench-tf]"` or any environment with tensorflow, given as `--tf-python`).

Variants, over the same model, Adam and global batches as the JAX side:
- program: `tf.function` around `strategy.run(step_fn)`, the loss averaged with `tf.nn.compute_average_loss`,
  each global batch distributed from host memory by `strategy.experimental_distribute_dataset` (TF's own way
  of copying every batch to the replicas);
- fit: Keras `model.compile(..., steps_per_execution=k)` + `model.fit` in `strategy.scope()`, one epoch of
  N steps per window.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_common import make_batches, program as make_program, protocol_stdout, serve  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn", "small_mlp"])
    parser.add_argument("--width", type=int, default=1)
    parser.add_argument("--variant", default="program", choices=["program", "fit"])
    parser.add_argument("--devices", type=int, default=8, help="logical CPU devices under MirroredStrategy")
    parser.add_argument("--steps-per-execution", type=int, default=1)
    parser.add_argument("--batches", type=int, default=8, help="distinct global batches, cycled")
    parser.add_argument("--warmup-steps", type=int, default=2)
    return parser.parse_args(argv)


def keras_model(keras, program):
    """The same layers and weight shapes as `jdist.models.MLP` / `jdist.models.CNN` at this width."""
    if program.name == "small_mlp":
        layers = [keras.layers.Dense(64, activation="relu"), keras.layers.Dense(program.num_classes)]
    elif program.name == "mlp":
        layers = [keras.layers.Dense(units, activation="relu") for units in program.mlp_features]
        layers.append(keras.layers.Dense(program.num_classes))
    else:
        conv1, conv2, dense = program.cnn_features
        layers = [keras.layers.Conv2D(conv1, 3, activation="relu"), keras.layers.MaxPooling2D(2),
                  keras.layers.Conv2D(conv2, 3, activation="relu"), keras.layers.Flatten(),
                  keras.layers.Dense(dense, activation="relu"), keras.layers.Dense(program.num_classes)]
    return keras.Sequential([keras.Input(program.input_shape)] + layers)


def main(argv=None) -> int:
    args = parse_args(argv)
    channel = protocol_stdout()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"  # the parent runs Keras on JAX and passes its environment on
    os.environ.pop("XLA_FLAGS", None)  # the parent's simulated-device flags are not TensorFlow's
    import keras
    import numpy as np
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * args.devices)
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.devices)])
    program = make_program(args.model, args.width)
    batches = make_batches(program, args.batches)
    x_all = np.concatenate([b[0] for b in batches])
    y_all = np.concatenate([b[1] for b in batches])
    global_batch = program.global_batch
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras_model(keras, program)
        optimizer = keras.optimizers.Adam(1e-3)
        # Adam's slots are made here, not on the first traced step (where tf.function would wrap their
        # creation in a cond whose placeholders the distributed step cannot feed).
        optimizer.build(model.trainable_variables)

    if args.variant == "program":
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(global_batch, drop_remainder=True)
        iterator = iter(strategy.experimental_distribute_dataset(dataset.repeat()))

        def step_fn(x, y):
            with tf.GradientTape() as tape:
                per_example = loss_fn(y, model(x, training=True))
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        @tf.function
        def train_step(batch):
            per_replica = strategy.run(step_fn, args=batch)
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        def run_steps(steps: int) -> float:
            start = time.perf_counter()
            loss = None
            for _ in range(steps):
                loss = train_step(next(iterator))
            loss.numpy()  # block until the last step is done
            return time.perf_counter() - start

        concrete_functions = lambda: train_step.experimental_get_tracing_count()  # noqa: E731
        max_steps = None
    else:
        with strategy.scope():
            model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          steps_per_execution=args.steps_per_execution)
        reps = -(-4096 // len(x_all))
        x_fit, y_fit = np.concatenate([x_all] * reps), np.concatenate([y_all] * reps)

        def run_steps(steps: int) -> float:
            if steps * global_batch > len(x_fit):
                raise ValueError(f"at most {len(x_fit) // global_batch} steps per window")
            start = time.perf_counter()
            model.fit(x_fit[: steps * global_batch], y_fit[: steps * global_batch], batch_size=global_batch,
                      epochs=1, verbose=0, shuffle=False)
            return time.perf_counter() - start

        concrete_functions = lambda: None  # noqa: E731
        max_steps = len(x_fit) // global_batch

    warmup = max(args.warmup_steps, args.steps_per_execution)
    run_steps(warmup)
    run_steps(warmup)
    serve(run_steps, {"framework": f"tensorflow {tf.__version__}", "keras": keras.__version__,
                      "replicas": strategy.num_replicas_in_sync, "variant": args.variant,
                      "traces": concrete_functions(), "max_steps": max_steps}, out=channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
