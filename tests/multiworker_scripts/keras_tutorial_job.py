"""TF's multi-worker Keras tutorial (multi_worker_with_keras.ipynb) on jdist, shrunk: a Sequential CNN built
and compiled in `MultiWorkerMirroredStrategy.scope()`, `model.fit` with Keras's `BackupAndRestore`.

--kill-process P --kill-at-epoch E: in the job's first run (JDIST_RESTART_COUNT unset or 0), process P
kills itself with SIGKILL when epoch E begins; run it under `python -m jdist.launch --max-restarts 1`
and the restarted job resumes from the backup. Each worker appends the epochs it ran and its final
weights' sum to `<out>/epochs_<worker>.txt`.
"""
import argparse
import os
import signal

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

import jdist  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--backup-dir", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=4)
parser.add_argument("--kill-process", type=int, default=-1)
parser.add_argument("--kill-at-epoch", type=int, default=-1)
args = parser.parse_args()

PER_WORKER_BATCH = 8
strategy = jdist.MultiWorkerMirroredStrategy()
index = strategy.worker_index
first_run = os.environ.get("JDIST_RESTART_COUNT", "0") == "0"

import keras  # noqa: E402

keras.utils.set_random_seed(index)  # each worker its own seed: the chief's initial values win
rng = np.random.default_rng(index)  # each worker its own share of the data
x = rng.random((PER_WORKER_BATCH * args.steps_per_epoch, 10, 10, 1), np.float32)
y = rng.integers(0, 10, len(x))

with strategy.scope():
    model = keras.Sequential([
        keras.Input(shape=(10, 10, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=keras.optimizers.SGD(learning_rate=0.01), metrics=["accuracy"])


class Log(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if first_run and index == args.kill_process and epoch == args.kill_at_epoch:
            print(f"killing myself at epoch {epoch}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        with open(os.path.join(args.out, f"epochs_{index}.txt"), "a") as f:
            f.write(f"run {os.environ.get('JDIST_RESTART_COUNT', '0')} epoch {epoch}\n")


model.fit(x, y, batch_size=PER_WORKER_BATCH, epochs=args.epochs, shuffle=False, verbose=0,
          callbacks=[keras.callbacks.BackupAndRestore(backup_dir=args.backup_dir), Log()])
total = float(sum(np.asarray(w, np.float64).sum() for w in model.get_weights()))
with open(os.path.join(args.out, f"epochs_{index}.txt"), "a") as f:
    f.write(f"weights {total!r}\n")
print(f"done, weights sum {total!r}", flush=True)
