"""TensorFlow's own distribute tutorials, run with only `import tensorflow as tf` changed.

Each script under tests/tf_tutorials/ is a tutorial's code cells in order (see its header). It runs in a
fresh process, as a user runs it, and its output is compared with what TensorFlow 2.21 printed for the same
cells (recorded below; tensorflow-cpu 2.21.0 with its Keras 3, on the same machine).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TUTORIALS = Path(__file__).parent / "tf_tutorials"

# TF 2.21, input.ipynb: the three tf.print lines of the get_next_as_optional loop (stderr) ...
TF_OPTIONAL_LOOP = ["([0 1], [2 3])", "([4 5], [6 7])", "([8], [])"]
# ... the StringLookup batches of distribute_datasets_from_function on 2 logical CPUs ...
TF_STRING_LOOKUP = [[[1, 3], [0, 1]], [[3, 0], [1, 3]], [[0, 1], [3, 0]]]
# ... the number of "Loss is" lines, and the enumerate/predict cell's dict {i: 2 * i for i in range(24)}.
TF_LOSS_LINES = 57


def _run(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the tutorial splits the CPU itself
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, str(TUTORIALS / script)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=TUTORIALS)


def test_distributed_input_tutorial():
    out = _run("distributed_input.py")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("2.21.0")  # print(tf.__version__)
    assert lines[1:4] == ["Available devices:", "0) LogicalDevice(name='/device:CPU:0', device_type='CPU')",
                          "1) LogicalDevice(name='/device:CPU:1', device_type='CPU')"]
    assert [line for line in out.stderr.splitlines() if line.startswith("([")] == TF_OPTIONAL_LOOP
    assert sum(line.startswith("Loss is") for line in lines) == TF_LOSS_LINES
    # Printed as TF prints a distributed element that is one tensor (its str; TF's dtype is StringLookup's int64).
    lookups = re.findall(r"0: tf\.Tensor\(\[(\d) (\d)\], shape=\(2,\), dtype=int\d+\),\n  1: tf\.Tensor\(\[(\d) (\d)\]",
                         out.stdout)
    assert [[[int(a), int(b)], [int(c), int(d)]] for a, b, c, d in lookups] == TF_STRING_LOOKUP
    (result,) = [line for line in lines if line.startswith("{")]
    pairs = re.findall(r"np\.int\d+\((\d+)\): np\.int\d+\((\d+)\)", result)
    assert {int(k): int(v) for k, v in pairs} == {i: 2 * i for i in range(24)}


# TF 2.21, distributed_training.ipynb: `print(tf.Variable(1.))` in the default strategy's scope, and 210 losses
# printed by its custom-training cells as TF prints a tensor (`tf.Tensor(<loss>, shape=(), dtype=float32)`), falling.
TF_GUIDE_VARIABLE = "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>"
TF_GUIDE_LOSSES = 210


def test_distributed_training_guide():
    out = _run("distributed_training_guide.py")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == TF_GUIDE_VARIABLE
    losses = [float(m[1]) for line in lines
              if (m := re.fullmatch(r"tf\.Tensor\((\d+\.\d+(e-?\d+)?), shape=\(\), dtype=float32\)", line))]
    assert len(losses) == TF_GUIDE_LOSSES
    assert losses[-1] < losses[0]
    # The guide's `MirroredStrategy(devices=["/gpu:0", "/gpu:1"])` on a machine without GPUs: TF runs the
    # replicas on the CPU; jdist warns and refuses only if that strategy is used (it is not).
    assert "Unknown device '/gpu:0'" in out.stderr


# TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1; with its Keras 3 the tutorial as written stops at
# `test_loss.reset_states()`), custom_training.ipynb on the same digits and 2 logical CPUs, one unseeded run:
# the training loss of cell 28's epochs 1 and 10, its last test accuracy (%), and the last lines of cells 36 / 38.
TF_CUSTOM_TRAINING = {"first_loss": 2.1440, "last_loss": 0.0958, "last_test_accuracy": 95.28,
                      "cell36_last_accuracy": 99.375, "cell38_last_loss": 0.0104}


def test_custom_training_tutorial(tmp_path):
    """custom_training.ipynb as written: MirroredStrategy, an unbuilt Sequential first called inside
    `strategy.run`, Adam built there, `tf.function` steps, checkpoints, `reset_states`."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    out = subprocess.run([sys.executable, str(TUTORIALS / "custom_training.py")], capture_output=True, text=True,
                         timeout=900, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Number of devices: 2" in out.stdout
    number = r"([\d.e-]+)"
    epochs = [tuple(map(float, m)) for m in re.findall(
        rf"Epoch \d+, Loss: {number}, Accuracy: {number}, Test Loss: {number}, Test Accuracy: {number}", out.stdout)]
    assert len(epochs) == 10
    losses = [e[0] for e in epochs]
    assert 0.9 * TF_CUSTOM_TRAINING["first_loss"] < losses[0] < 1.1 * TF_CUSTOM_TRAINING["first_loss"]
    assert losses[-1] < 2.5 * TF_CUSTOM_TRAINING["last_loss"] and losses[-1] < losses[0] / 8
    assert epochs[-1][3] > TF_CUSTOM_TRAINING["last_test_accuracy"] - 5
    # The last checkpoint is cell 28's fifth (after epoch 9); the model restored from it without the strategy
    # scores what epoch 9's test loop scored (both are the same weights on the same test digits; so in TF too).
    (restored,) = re.findall(r"Accuracy after restoring the saved model without strategy: (\S+)", out.stdout)
    assert float(restored) == pytest.approx(epochs[8][3], abs=1e-4)
    later = [tuple(map(float, m)) for m in re.findall(rf"Epoch (\d+), Loss: {number}, Accuracy: {number}\n",
                                                      out.stdout + "\n")]
    assert [int(e[0]) for e in later] == [10] * 10 + list(range(1, 11))  # cell 36 prints its stale `epoch`
    assert later[9][2] > TF_CUSTOM_TRAINING["cell36_last_accuracy"] - 3
    assert later[-1][1] < 4 * TF_CUSTOM_TRAINING["cell38_last_loss"] + 0.02
    assert "nan" not in out.stdout.lower()
    assert sorted(p.name for p in (tmp_path / "training_checkpoints").iterdir() if p.name.startswith("ckpt-")) \
        == [f"ckpt-{i}.npz" for i in range(1, 6)]


# TF 2.21 with its Keras 3, keras.ipynb on the same digits arrays and 8 logical CPUs, nine runs (unseeded): eval
# loss 1.076-1.318, eval accuracy 0.803-0.875 (0.875, 0.858, 0.803, 0.842, 0.864, 0.819, 0.808, 0.842, 0.842), the
# same numbers again for the model saved and loaded without and within the strategy. jdist's sixteen runs
# (unseeded) gave loss 1.067-1.380, accuracy 0.728-0.869 (0.864, 0.775, 0.728, 0.869, 0.853, 0.756, 0.828, 0.819,
# 0.828; a CI run 0.728; then 0.819, 0.836, 0.842, 0.825, 0.819, 0.861): the model starts from random weights and
# the data is reshuffled, and nine steps at 1e-3 decide most of it. With the same starting weights and no shuffle
# the two compute the same training (test_keras_tutorial_model_trains_as_tf), so this run is asserted to train
# (loss in TF's range with room, accuracy far above chance's 0.1), not to land on TF's numbers.
# The learning rates PrintLR printed (TF's own lines):
TF_KERAS_LEARNING_RATES = ["0.0010000000474974513"] * 3 + ["9.999999747378752e-05"] * 4 + [
    "9.999999747378752e-06"] * 5
TF_KERAS_EVAL = {"loss": (1.076, 1.318), "accuracy": (0.803, 0.875)}


def test_keras_tutorial(tmp_path):
    import shutil

    from jdist.callbacks.event_file import read_scalars

    work = tmp_path / "keras"
    shutil.copytree(TUTORIALS, work)
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, "keras_tutorial.py"], capture_output=True, text=True, timeout=900,
                         env=env, cwd=work)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Number of devices: 8" in out.stdout
    rates = re.findall(r"Learning rate for epoch (\d+) is (\S+)", out.stdout)
    assert rates == [(str(i + 1), rate) for i, rate in enumerate(TF_KERAS_LEARNING_RATES)]
    evals = [(float(a), float(b)) for a, b in re.findall(r"Eval loss: (\S+), Eval [Aa]ccuracy: (\S+)", out.stdout)]
    assert len(evals) == 3  # trained model, loaded without the strategy, loaded within it
    for loss, accuracy in evals:
        assert loss == pytest.approx(evals[0][0], rel=1e-5) and accuracy == evals[0][1]
    low, high = TF_KERAS_EVAL["loss"]
    assert 0.7 * low < evals[0][0] < 1.3 * high  # TF's range, with room for an unseeded run
    assert evals[0][1] > TF_KERAS_EVAL["accuracy"][0] - 0.15  # jdist's lowest of sixteen: 0.728
    assert sorted(p.name for p in (work / "training_checkpoints").iterdir()) == [
        f"ckpt_{epoch:04d}.weights.h5" for epoch in range(1, 13)]
    (events,) = (work / "logs" / "train").iterdir()
    scalars = read_scalars(events)
    assert [step for step, tag, _ in scalars if tag == "epoch_loss"] == list(range(12))
    # TF wrote these three scalar tags (and the model config as a "keras" text summary, which jdist does not)
    assert {tag for _, tag, _ in scalars} == {"epoch_accuracy", "epoch_loss", "epoch_learning_rate"}



# The Keras tutorial's model and input with fixed starting weights (below) and no shuffle, 4 epochs under
# MirroredStrategy on 8 logical CPUs: TF 2.21 with its Keras 3 printed these epoch losses and accuracies.
TF_KERAS_SEEDED = {"loss": [2.259377, 2.112046, 1.923372, 1.694924], "accuracy": [0.1865, 0.494085, 0.719555, 0.807933]}
_SEEDED = """
import json
import numpy as np
import jdist.tf_compat as tf
from jdist.datasets import load_digits
rng = np.random.default_rng(0)
shapes = [(3, 3, 1, 32), (32,), (5408, 64), (64,), (64, 10), (10,)]
weights = [(rng.uniform(-1, 1, s) * (0.1 if len(s) > 1 else 0.0)).astype("float32") for s in shapes]
x, y = load_digits("train")
train = tf.data.Dataset.from_tensor_slices(((x * 255).round().astype("uint8"), y.astype("int64")))
def scale(image, label):
    image = tf.cast(image, tf.float32)
    image /= 255
    return image, label
train = train.map(scale).cache().batch(512)
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten(), tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10)])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.Adam(learning_rate=0.001), metrics=["accuracy"])
model.set_weights(weights)
history = model.fit(train, epochs=4, verbose=0).history
print("history", json.dumps([history["loss"], history["accuracy"]]))
"""


def test_keras_tutorial_model_trains_as_tf():
    """With TF's starting weights and data order, the tutorial's training is TF's: the unseeded tutorial's spread
    (above) is its random start, not a difference in what is computed. 1437 examples in batches of 512: two
    split over the 8 replicas, the short one of 413 replicated."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, "-c", _SEEDED], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    losses, accuracies = json.loads(out.stdout.split("history ", 1)[1])
    np.testing.assert_allclose(losses, TF_KERAS_SEEDED["loss"], atol=1e-3)  # observed: within 3.5e-4
    np.testing.assert_allclose(accuracies, TF_KERAS_SEEDED["accuracy"], atol=3 / 1437)  # observed: 2 examples

# TF 2.21 with tf_keras (the tutorial as written fails with TF's default Keras 3), 2 workers on this machine, the
# same digits, fifteen unseeded runs: the third epoch ended with accuracy 0.62 .. 0.83 and loss 1.82 .. 2.14.
# jdist's eighteen: accuracy 0.43 .. 0.81, loss 1.84 .. 2.19. The model starts unseeded and the data is shuffled
# unseeded, so a run says that the tutorial trains, not which numbers TF would give: the seeded test below does.
TF_MULTI_WORKER_LAST_EPOCH = {"loss": (1.8207, 2.1423), "accuracy": (0.6191, 0.8256)}


def _free_ports(count: int) -> list[int]:
    import socket
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _two_workers(work: Path, script: str) -> list[str]:
    """`python <script> &` on each of two workers with its TF_CONFIG, as the tutorial runs main.py; their logs."""
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    codes = _finish(_start_workers(work, cluster, [script], "run"), timeout=600)
    logs = [re.sub(r"\x1b\[[0-9;]*m", "", text) for text in _logs(work, "run")]
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    return logs


@pytest.mark.multiprocess
def test_multi_worker_keras_tutorial(tmp_path):
    """`python main.py &` on each of two workers, each with its TF_CONFIG, as the tutorial runs them."""
    import shutil

    work = tmp_path / "job"
    shutil.copytree(TUTORIALS / "multi_worker", work)
    finals = []
    for text in _two_workers(work, "main.py"):
        sections = text.split("Epoch ")[1:]  # each epoch's last progress line holds its final metrics
        epochs = [re.findall(r"70/70 \S+ \d+s \S+ - accuracy: ([\d.]+) - loss: ([\d.]+)", part)[-1]
                  for part in sections]
        assert len(epochs) == 3, text[-2000:]
        finals.append([tuple(float(v) for v in epoch) for epoch in epochs])
    assert finals[0] == finals[1]  # one model, global metrics: both workers print the same numbers
    losses = [loss for _, loss in finals[0]]
    assert losses == sorted(losses, reverse=True)  # it learns every epoch ...
    accuracy, loss = finals[0][-1]
    # ... and ends where both TF's and jdist's unseeded runs ended, with room: under chance (ln 10 = 2.3026)
    assert accuracy > TF_MULTI_WORKER_LAST_EPOCH["accuracy"][0] - 0.3
    assert loss < TF_MULTI_WORKER_LAST_EPOCH["loss"][1] + 0.12


# The tutorial's model and fit (mnist_setup.py's), on 2 workers with TF_CONFIG, from fixed starting weights (Glorot's
# uniform range, numpy's generator) and the digits unshuffled: TF 2.21 with tf_keras printed these three epochs'
# losses and accuracies, the same on both workers and on one device (one device differs in the 7th digit).
TF_MULTI_WORKER_SEEDED = {"loss": [2.2552586, 2.1424375, 2.0132525], "accuracy": [0.21506697, 0.53705359, 0.68035716]}
_MULTI_WORKER_SEEDED = """
import json
import numpy as np
import jdist.tf_compat as tf
import mnist_setup
from jdist.datasets import load_digits

strategy = tf.distribute.MultiWorkerMirroredStrategy()
x, y = load_digits("train")
x = (x[..., 0] * 255).round().astype(np.uint8) / np.float32(255)
dataset = tf.data.Dataset.from_tensor_slices((x, y.astype(np.int64))).repeat().batch(128)
with strategy.scope():
    model = mnist_setup.build_and_compile_cnn_model()
rng = np.random.default_rng(1)
weights = []
for shape in [w.shape for w in model.get_weights()]:
    if len(shape) == 1:
        weights.append(np.zeros(shape, "float32"))
        continue
    field = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    limit = np.sqrt(6 / (shape[-2] * field + shape[-1] * field))
    weights.append(rng.uniform(-limit, limit, shape).astype("float32"))
model.set_weights(weights)
history = model.fit(dataset, epochs=3, steps_per_epoch=70, verbose=0).history
print("history", json.dumps([history["loss"], history["accuracy"]]))
"""


@pytest.mark.multiprocess
def test_multi_worker_keras_tutorial_model_trains_as_tf(tmp_path):
    """With TF's starting weights and data order, the tutorial's training on two workers is TF's: the unseeded
    tutorial's spread (above) is its random start and shuffle, not a difference in what is computed."""
    import shutil

    work = tmp_path / "job"
    shutil.copytree(TUTORIALS / "multi_worker", work)
    (work / "seeded.py").write_text(_MULTI_WORKER_SEEDED)
    histories = [json.loads(text.split("history ", 1)[1].splitlines()[0]) for text in _two_workers(work, "seeded.py")]
    assert histories[0] == histories[1]
    losses, accuracies = histories[0]
    np.testing.assert_allclose(losses, TF_MULTI_WORKER_SEEDED["loss"], rtol=1e-5)  # observed: within 2.4e-7
    np.testing.assert_allclose(accuracies, TF_MULTI_WORKER_SEEDED["accuracy"], rtol=1e-6)  # observed: equal


# TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1; with its default Keras 3 the tutorial stops at
# `tf.keras.optimizers.legacy.SGD()`), parameter_server_training.ipynb on this machine, two runs (unseeded random
# data): fit's epoch losses 0.4639 .. 0.2116 and 0.9104 .. 0.3765; the embedding's two shards printed on
# "/job:ps/replica:0/task:1/device:CPU:0" and "/job:ps/replica:0/task:0/device:CPU:0"; the custom loop's
# accuracies 0.4375, 0.51875, 0.75, 1.0 and 0.49375, 0.54375, 0.625, 1.0; final loss 0.028068 and 0.006898;
# both evaluation accuracies 1.0 in both runs. Four more runs of the same script (TF 2.21, tf_keras; the fourth
# printed `optimizer.iterations` after the loop: 21, one per scheduled step, on ps task 0, each RMSprop slot on its
# variable's server): accuracies 0.59375, 0.80625, 1.0, 1.0 / 0.6, 0.49375, 0.955882, 1.0 / 0.70625, 0.39375,
# 0.70625, 1.0 / 0.50625, 1.0, 1.0, 1.0; final losses 0.237172, 0.151863, 0.018051, 0.318281; evaluations 1.0.
# Ten more runs of the custom loop's cells alone (the script without cell 28's fit, with per-step prints; same TF):
# the last ten entries below. One of them had not converged by its last epoch (0.794118, final loss 1.730304).
TF_PS_FIT_LOSSES = [(0.4639, 0.3696, 0.3018, 0.2503, 0.2116), (0.9104, 0.7157, 0.5721, 0.4601, 0.3765)]
TF_PS_ACCURACIES = [(0.4375, 0.51875, 0.75, 1.0), (0.49375, 0.54375, 0.625, 1.0), (0.59375, 0.80625, 1.0, 1.0),
                    (0.6, 0.49375, 0.955882, 1.0), (0.70625, 0.39375, 0.70625, 1.0), (0.50625, 1.0, 1.0, 1.0),
                    (0.5125, 0.55, 0.975, 1.0), (0.5875, 0.45625, 0.9875, 1.0), (0.73125, 0.5125, 0.80625, 1.0),
                    (0.44375, 0.4125, 0.9, 1.0), (0.7375, 0.3125, 0.5375, 0.794118), (0.5125, 0.4625, 0.85, 1.0),
                    (0.575, 1.0, 1.0, 1.0), (0.59375, 0.3875, 1.0, 1.0), (0.45625, 0.58125, 1.0, 1.0),
                    (0.69375, 0.975, 1.0, 1.0)]
TF_PS_FINAL_LOSS = (0.006898, 0.028068, 0.237172, 0.151863, 0.018051, 0.318281, 0.134573, 0.233036, 0.235702,
                    0.20579, 1.730304, 0.227734, 0.086801, 0.077757, 0.116908, 0.148451)
TF_PS_EVAL_ACCURACY = 1.0


@pytest.mark.multiprocess
def test_parameter_server_tutorial_runs_to_its_end():
    """The cluster cells run; `model.fit` (cell 28) trains through the 3 workers: five epoch losses, falling,
    in TF's range (the data is unseeded, so the numbers vary from run to run, in TF as here); the string
    preprocessing models and the embedding model are built (cells 32-38); cell 40's asserts hold (the
    `variable_partitioner` splits the (8, 16384) embedding into two (4, 16384) pieces), the pieces' two servers
    are printed, and the custom loop, its final loss and both evaluations (inline and scheduled) run to the end.
    Both evaluation accuracies are TF's 1.0 when the loop converged (at least 14 of 16 asserted then); a run
    whose loop did not converge (TF: 1 of 16) is checked to reach its end with finite numbers.

    The custom loop is in TF's range. Its loss passes through the hundreds (RMSprop at 0.1 on a 16384-wide
    dense layer) and, once every prediction is right, ends on the kernel's L2 term, 1e-4 * sum(kernel**2), so
    the final loss measures how far the kernel grew. Two differences from TF made it grow further here, both
    found by logging each step's `iterations`, loss, gradient norms and sum(kernel**2) in both:
    - `tf.keras.optimizers.legacy.RMSprop` was Keras 3's RMSprop, which divides by sqrt(rms + 1e-7) where
      tf_keras divides by sqrt(rms) + 1e-7; this model's gradients are near 1e-3, so the first step moved the
      embedding a third as far as TF's (sum of squares 989 against 11045 after one step, one worker). Now
      tf_keras's rule (`jdist/tf_compat/legacy_optimizers.py`; tests/test_tf_compat_keras.py).
    - tf_keras's RMSprop without momentum reads, computes and assigns, so concurrent workers' updates overwrite
      each other in TF (three steps from the initial values left sum(kernel**2) at one step's 1638), where jdist
      applied each in turn (6659 after those three). Now the servers compute it from the step's reads, as TF
      (docs/parameter_server.md; tests/test_parameter_server_keras_optimizer.py).
    sum(kernel**2) after epoch 0: TF 879-3225 (10 runs); jdist before 5623 (1 run), with the first change only
    6296-10149 (4), with both 1436-3184 (10). Last epoch's accuracy and final loss: TF (16 runs) 1.0 in 15 and
    0.0069-0.318 there, and one run not converged (0.79, 1.73); jdist before (6 runs) 0.76-1.0 and 0.27-1.02,
    with the first change (4) 1.0 and 0.089-1.12, with both (10 runs) 1.0 in 8 and 0.031-0.162, 0.68 and 0.71
    in the other two (finals 0.031, 0.145). Asserted: the final loss below 0.5 when that epoch reached 1.0 (the
    L2 plateau; TF: at most 0.318)."""
    out = _run("parameter_server_training.py")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"^20/20 - .* loss: (\d+\.\d+)$", out.stdout, re.MULTILINE)]
    assert len(losses) == 5, out.stdout[-2000:] + out.stderr[-3000:]
    assert all(a > b for a, b in zip(losses, losses[1:])), losses
    assert 0.2 < losses[0] < 1.5 and 0.1 < losses[-1] < 0.75 * losses[0], losses  # TF: 0.46 -> 0.21, 0.91 -> 0.38
    devices = re.findall(r"^/job:ps/replica:0/task:(\d)/device:CPU:0$", out.stdout, re.MULTILINE)
    assert sorted(devices) == ["0", "1"], out.stdout[-2000:]  # TF: the two pieces on the two servers
    accuracies = [float(v) for v in re.findall(r"^Finished epoch \d, accuracy is (\d+\.\d+)\.$", out.stdout,
                                                re.MULTILINE)]
    assert len(accuracies) == 4 and all(0.0 < a <= 1.0 for a in accuracies), out.stdout[-2000:]
    (final,) = re.findall(r"^Final loss is (\d+\.\d+)$", out.stdout, re.MULTILINE)
    evaluations = [float(v) for v in re.findall(r"^Evaluation accuracy: (\d+\.\d+)$", out.stdout, re.MULTILINE)]
    assert len(evaluations) == 2 and all(0.0 <= a <= 1.0 for a in evaluations), evaluations
    assert "nan" not in out.stdout.lower()
    if accuracies[-1] == 1.0:  # the loop converged: TF's plateau and TF's evaluations
        # TF (TF_PS_FINAL_LOSS): 0.0069-0.318 after a last epoch at 1.0; here 0.031-0.162
        assert 0.0 < float(final) < 0.5, (final, accuracies)
        assert all(a >= TF_PS_EVAL_ACCURACY - 2 / 16 for a in evaluations), evaluations
    # Otherwise the loop did not converge in its four epochs. TF 2.21 left 1 run of 16 so (last epoch 0.794, final
    # loss 1.73); jdist leaves more: 2 of 10 earlier (0.68, 0.71) and, on 2026-11-27, 2 of 5 (0.794 with final
    # loss 269.4 in a CI run; 0.589 with 16.1). Such a run is asserted to reach its end with finite numbers only.


# TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1): multi_worker_with_ctl.ipynb's main.py on 2 workers on this machine,
# the same digits, two unseeded runs; each printed (accuracy, train_loss) for epochs 0, 1, 2, the same on both workers.
# With TF's default Keras 3 the tutorial as written stops after its first epoch line: `train_accuracy.reset_states()`
# is an AttributeError there (observed; epoch 0 had printed accuracy 0.842857, train_loss 0.549042).
TF_CTL_EPOCHS = [[(0.801004, 0.793538), (0.947433, 0.164858), (0.972210, 0.095247)],
                 [(0.835045, 0.554419), (0.954464, 0.152402), (0.979129, 0.085291)]]
_EPOCH_LINE = r"Epoch: (\d+), accuracy: ([\d.]+), train_loss: ([\d.]+)\."
# main.py as written keeps its checkpoints in multiprocessing's per-process temporary directory (deleted at exit);
# to restart a worker onto them, as the tutorial's fault-tolerance section describes, this runs main.py unchanged with
# that directory fixed.
_FIXED_TEMP_DIR = ("import sys, runpy, multiprocessing.util as u; d = sys.argv[1]; u.get_temp_dir = lambda: d; "
                   "sys.argv = ['main.py']; runpy.run_path('main.py', run_name='__main__')")


def _start_workers(work: Path, cluster: dict, args: list[str], tag: str) -> list[subprocess.Popen]:
    """`python <args> &` once per worker, each with its TF_CONFIG; output in job_<index>_<tag>.log."""

    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one device per worker, as TF's CPUs
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    workers = []
    for index in range(len(cluster["worker"])):
        config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        with open(work / f"job_{index}_{tag}.log", "w") as log:
            workers.append(subprocess.Popen([sys.executable, *args], cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                            env={**env, "TF_CONFIG": config}))
    return workers


def _finish(workers: list[subprocess.Popen], timeout: float) -> list[int | None]:
    """Each worker's exit code, waiting at most `timeout` seconds in all; what is still running is killed (None)."""
    import time

    deadline = time.monotonic() + timeout
    codes: list[int | None] = []
    for process in workers:
        try:
            codes.append(process.wait(timeout=max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            codes.append(None)
    for process in workers:
        if process.poll() is None:
            process.kill()
            process.wait()
    return codes


# TF 2.21 with tf_keras (its Keras 3 stops at `optimizers.legacy`), guide/migrate/multi_worker_cpu_gpu_training,
# unseeded: the fifth epoch's loss was 0.0008-0.59 over 10 runs, and the evaluation's 0.0011-45.5 over 14 (the
# random start decides it).
TF_CPU_GPU_GUIDE_EVALUATION = (0.0011, 45.5)


@pytest.mark.multiprocess
def test_multi_worker_cpu_gpu_migration_guide():
    """The guide's TF2 cells as written (its two imports changed): `TFConfigClusterResolver`, in-process
    `tf.distribute.Server`s for 3 workers and 2 parameter servers, `ParameterServerStrategy`, `fit` of 5 epochs
    of 10 steps with tf_keras's legacy Adagrad, then `evaluate`; the losses in TF's range (about a minute:
    Ray's five processes start and compile)."""
    done = _run("multi_worker_cpu_gpu_training.py")
    assert done.returncode == 0, done.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"10/10 - \S+ - \S+/step - loss: ([0-9.e+-]+)", done.stdout)]
    assert len(losses) == 5 and np.all(np.isfinite(losses)), done.stdout[-2000:]
    # The start is unseeded (in TF too): a run from a far start fell from 8.72 to 0.91 here, past TF's ten runs'
    # 0.59, so the loss is asserted to fall well below its first epoch's, not into those ten runs' range.
    assert losses[-1] < losses[0] / 5, losses
    evaluation = json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))
    assert 0 <= evaluation["loss"] <= TF_CPU_GPU_GUIDE_EVALUATION[1], evaluation


def _logs(work: Path, tag: str) -> list[str]:
    return [(work / f"job_{i}_{tag}.log").read_text() for i in range(2)]


@pytest.mark.multiprocess
def test_multi_worker_ctl_tutorial(tmp_path):
    """The tutorial's main.py, `python main.py &` on each of two workers with its TF_CONFIG, as written."""
    import shutil

    work = tmp_path / "job"
    shutil.copytree(TUTORIALS / "multi_worker_ctl", work)
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    codes = _finish(_start_workers(work, cluster, ["main.py"], "run"), timeout=600)
    logs = _logs(work, "run")
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    epochs = [re.findall(_EPOCH_LINE, text) for text in logs]
    assert epochs[0] == epochs[1], logs  # one model, global metrics: both workers print the same lines
    assert [epoch for epoch, _, _ in epochs[0]] == ["0", "1", "2"]
    accuracies, losses = [float(a) for _, a, _ in epochs[0]], [float(x) for _, _, x in epochs[0]]
    assert accuracies == sorted(accuracies) and losses == sorted(losses, reverse=True)
    tf_first, tf_last = [run[0] for run in TF_CTL_EPOCHS], [run[-1] for run in TF_CTL_EPOCHS]
    assert min(a for a, _ in tf_first) - 0.1 < accuracies[0] and losses[0] < max(x for _, x in tf_first) + 0.25
    assert accuracies[-1] > min(a for a, _ in tf_last) - 0.03 and losses[-1] < max(x for _, x in tf_last) + 0.05


@pytest.mark.multiprocess
def test_multi_worker_ctl_tutorial_restarts_from_its_checkpoint(tmp_path):
    """The tutorial's fault tolerance: worker 1 is killed after the first epoch's checkpoint, the survivor stops,
    both are restarted with the same TF_CONFIG and restore the chief's checkpoint.

    TF 2.21 (tf_keras, the same two workers and fixed directory) did exactly this: the survivor stopped ("Collective
    ops is aborted by: ... Connection reset by peer"), and both restarted workers restored epoch 0 with
    step_in_epoch 70 (the tutorial saves before advancing its counters), skipped the inner loop and stopped with
    ZeroDivisionError at `train_loss = total_loss / num_batches`, printing no epoch line."""
    import shutil
    import signal
    import time

    work, temp = tmp_path / "job", tmp_path / "temp"
    shutil.copytree(TUTORIALS / "multi_worker_ctl", work)
    temp.mkdir()
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    args = ["-c", _FIXED_TEMP_DIR, str(temp)]
    workers = _start_workers(work, cluster, args, "first")
    try:
        deadline = time.monotonic() + 300
        while not ((temp / "ckpt" / "ckpt-1.npz").exists() and (temp / "ckpt" / "checkpoint").exists()):
            assert time.monotonic() < deadline and all(p.poll() is None for p in workers), _logs(work, "first")
            time.sleep(0.5)
        workers[1].send_signal(signal.SIGKILL)
    finally:
        codes = _finish(workers, timeout=120)
    logs = _logs(work, "first")
    assert codes[0] not in (0, None), logs[0][-3000:]  # the survivor stopped by itself, in bounded time
    assert re.findall(_EPOCH_LINE, logs[0])[0][0] == "0"
    with np.load(temp / "ckpt" / "ckpt-1.npz") as saved:  # what the chief saved after epoch 0
        assert [int(saved[f"{name}/.ATTRIBUTES/VARIABLE_VALUE"]) for name in ("epoch", "step_in_epoch", "save_counter")
                    ] == [0, 70, 1]

    codes = _finish(_start_workers(work, cluster, args, "restarted"), timeout=300)
    for text in _logs(work, "restarted"):
        assert "train_loss = total_loss / num_batches" in text and "ZeroDivisionError" in text, text[-3000:]
        assert not re.findall(_EPOCH_LINE, text)
    assert codes[0] not in (0, None) and codes[1] not in (0, None)
    assert sorted(os.listdir(temp / "ckpt")) == ["checkpoint", "ckpt-1.npz"]


# TF 2.21, save_and_load.ipynb on the same digits and 8 logical CPUs, one unseeded run with each Keras. With its
# Keras 3 the tutorial stops at cell 34, `model.save('/tmp/tf_save')` ("Invalid filepath extension for saving");
# with tf_keras (TF_USE_LEGACY_KERAS=1) it runs to the end, which the test compares with. Both printed the
# signature's output dict for the 360 test digits, then a PerReplica of 8 parts of 45 rows whose first row is the
# single call's first row; the key is 'output_0' with Keras 3 (jdist's tf.keras is Keras 3) and the last
# layer's name ('dense_3') with tf_keras. Epoch losses of the fits (trained; loaded without a strategy; loaded
# in OneDeviceStrategy), Keras 3: 2.2125 1.9022 | 1.5522 1.2162 | 1.5502 1.2102; tf_keras: 2.2017 1.8528 |
# 1.4827 1.1435 | 1.4884 1.1452. tf_keras printed the unbuilt subclassed model's ValueError, then `True` and
# `False` for `save_spec() is None` before and after its fit.
TF_SAVE_AND_LOAD_LOSSES = {"keras3": (2.2125, 1.9022, 1.5522, 1.2162, 1.5502, 1.2102),
                           "tf_keras": (2.2017, 1.8528, 1.4827, 1.1435, 1.4884, 1.1452)}
TF_KERAS_UNBUILT_SAVE = ("cannot be saved either because the input shape is not available or because the forward "
                         "pass of the model is not defined.To define a forward pass, please override `Model.call()`.")


def _first_row(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text.split("]")[0])]


def test_save_and_load_tutorial(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, str(TUTORIALS / "save_and_load.py")], capture_output=True, text=True,
                         timeout=900, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout).replace("\r", "\n")
    sections = text.split("Epoch ")[1:]
    assert [s.split("\n")[0] for s in sections] == ["1/2", "2/2"] * 4  # four fits, as TF's
    losses = [float(re.findall(r"(\d+)/\1 \S+ \S+ \S+ - loss: ([\d.]+)", s)[-1][1]) for s in sections]
    trained, restored, restored_ds = losses[:2], losses[2:4], losses[4:6]
    low = min(v[0] for v in TF_SAVE_AND_LOAD_LOSSES.values())
    assert abs(trained[0] - low) < 0.15  # an unseeded first epoch, in TF's range
    for fit in (trained, restored, restored_ds):
        assert fit[1] < fit[0]
    # Both loaded models go on from the saved one (TF: 1.55 / 1.48 after 1.90 / 1.85), from the same weights.
    assert restored[0] < trained[1] and restored_ds[0] < trained[1]
    assert abs(restored[0] - restored_ds[0]) < 0.1
    single, distributed = text.split("{'output_0': PerReplica:{")
    # The signature's dict, with Keras 3's key, and each tensor as TF prints one in a dict (observed):
    # `<tf.Tensor: shape=(45, 10), dtype=float32, numpy=\narray([[...`; the distributed result's parts likewise.
    whole = "{'output_0': <tf.Tensor: shape=(360, 10), dtype=float32, numpy=\narray([["  # the batch of 360
    assert whole in single
    part = "<tf.Tensor: shape=(45, 10), dtype=float32, numpy=\narray([["
    parts = re.findall(r"\n  (\d): " + re.escape(part), distributed)
    assert parts == [str(i) for i in range(8)]
    first = _first_row(single.split(whole)[1])
    in_replica_0 = _first_row(distributed.split("0: " + part)[1])
    assert first[:3] == pytest.approx(in_replica_0[:3], rel=1e-5)
    lines = text.splitlines()
    (error,) = [line for line in lines if line.startswith("ValueError: ")]
    assert TF_KERAS_UNBUILT_SAVE in error
    assert [line for line in lines if line in ("True", "False")] == ["True", "False"]
    # The directory the tutorial saved last holds its subclassed model after fit: one Dense layer, x @ W + b.
    import zipfile

    from jdist.saved_model import load  # tf.saved_model.load; serving needs no Keras

    loaded = load("/tmp/tf_save")
    f = loaded.signatures["serving_default"]
    x = np.arange(15, dtype="float32").reshape(3, 5)
    weights = loaded.trainable_variables
    np.testing.assert_allclose(np.asarray(f(inputs=x)["output_0"]), x @ weights[0] + weights[1], rtol=1e-5)
    assert "config.json" in zipfile.ZipFile("/tmp/keras_save.keras").namelist()  # cell 14's Keras archive


# TF 2.21 with tf_keras (TF_USE_LEGACY_KERAS=1), guide/checkpoint.ipynb run here as written. With its Keras 3 the
# guide stops at `net.save_weights('easy_checkpoint')` ("The filename must end in `.weights.h5`"), and with that
# line removed its `net/l1/kernel` key does not exist (Keras 3 names it `net/l1/_kernel`). tf_keras printed the
# losses below, then these lines and keys (its optimizer's slots are `optimizer/_variables/1..4`; jdist's Keras 3
# Adam also holds its learning rate among its variables, so its slots are `_variables/2..5`).
TF_CHECKPOINT_GUIDE_LOSSES = [29.05, 22.46, 15.92, 9.52, 4.23, 1.36, 1.24, 0.62, 0.49, 0.22]
TF_GUIDE_KEYS = ["_CHECKPOINTABLE_OBJECT_GRAPH", "iterator/.ATTRIBUTES/ITERATOR_STATE",
                 "net/l1/bias/.ATTRIBUTES/VARIABLE_VALUE", "net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE",
                 "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE",
                 "optimizer/_learning_rate/.ATTRIBUTES/VARIABLE_VALUE",
                 "save_counter/.ATTRIBUTES/VARIABLE_VALUE", "step/.ATTRIBUTES/VARIABLE_VALUE"]


def test_checkpoint_guide(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, str(TUTORIALS / "checkpoint_guide.py")], capture_output=True, text=True,
                         timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    saves = [line for line in lines if line.startswith(("Saved", "Restored", "Initializing"))]
    assert saves == (["Initializing from scratch."]
                     + [f"Saved checkpoint for step {10 * i}: ./tf_ckpts/ckpt-{i}" for i in range(1, 6)]
                     + ["Restored from ./tf_ckpts/ckpt-5"]  # the step, optimizer, net and iterator resume
                     + [f"Saved checkpoint for step {10 * i}: ./tf_ckpts/ckpt-{i}" for i in range(6, 11)])
    losses = [float(line.split()[1]) for line in lines if line.startswith("loss ")]
    # The guide's model starts unseeded: TF's one recorded run began at 29.05; fresh jdist runs began at 24.46, 30.18,
    # 30.42, 30.79, 31.04 and 32.00. Held: ten losses, starting far above where they end, ending below 1 as TF's.
    assert len(losses) == 10 and losses[0] > 10 * losses[-1] and losses[-1] < 1.0, (losses, TF_CHECKPOINT_GUIDE_LOSSES)
    assert "['./tf_ckpts/ckpt-8', './tf_ckpts/ckpt-9', './tf_ckpts/ckpt-10']" in lines  # TF's line
    assert "['checkpoint', 'ckpt-10.npz', 'ckpt-8.npz', 'ckpt-9.npz']" in lines  # TF: .index and .data files
    at = lines.index("[0. 0. 0. 0. 0.]")
    assert lines[at + 1] != lines[at]  # the bias restored through the fake Checkpoint objects
    assert lines[at + 2] == "[[0. 0. 0. 0. 0.]]" and lines[at + 3].startswith("[[")
    keys = eval(lines[at + 4])  # noqa: S307 - the printed sorted key list
    assert [k for k in keys if not k.startswith("optimizer/_variables/")] == TF_GUIDE_KEYS
    assert [k for k in keys if k.startswith("optimizer/_variables/")] == [
        f"optimizer/_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE" for i in range(2, 6)]
    assert lines[at + 5: at + 7] == ["Shape: [1, 5]", "Dtype: float32"]
    # the kernel restored late (delayed restoration) is the value the reader gives for its key, as in TF
    tensor = " ".join(lines[at + 7:-1])
    assert " ".join(lines[at + 3].split()) == " ".join(tensor.split())
    assert lines[-1] == "ListWrapper([])"  # and the list-cell asserts held
    assert (tmp_path / "easy_checkpoint.npz").exists() and (tmp_path / "tf_list_example-1.npz").exists()


# TF 2.21, guide/migrate/mirrored_strategy.ipynb's TF2 cells on this machine, unseeded: the evaluation's loss over
# ten runs with its Keras 3 (one CPU, as the guide is written) was 0.00052, 10.10, 3.05, 0.353, 0.0058, 0.0112,
# 0.267, 0.139, 103.5, 1.55, and with tf_keras on 8 logical CPUs 4.08, 0.136, 80.2, 31.0, 24.8: three Adagrad
# steps barely move the random start, whose predictions on the eval features the Glorot limit bounds (squared
# error under 400). TF's Keras 3 on 8 logical CPUs stops in the first step: a batch of 1 leaves 7 replicas empty
# ("Inputs to operation AddN of type AddN must have the same size and shape. Input 0: [1,2] != input 1: [0,2]").
TF_MIGRATE_MIRRORED_EVAL_LOSSES = [0.00052, 10.10, 3.05, 0.353, 0.0058, 0.0112, 0.267, 0.139, 103.5, 1.55]


def test_mirrored_strategy_migration_guide():
    """The guide makes the model and optimizer in the scope and compiles after it (a built model compiled there
    failed its first step before), and feeds batches of 1 to 8 replicas."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, str(TUTORIALS / "mirrored_strategy_migration.py")], capture_output=True,
                         text=True, timeout=600, env=env, cwd=TUTORIALS)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "3/3" in out.stdout  # fit's three steps
    (loss,) = [float(v) for v in re.findall(r"^\{'loss': (\S+)\}$", out.stdout, re.MULTILINE)]
    assert 0 <= loss < 400  # TF's runs' range is the random start's (above); the seeded test compares numbers


# The same cells from a fixed start (kernel [[0.5], [-0.25]], bias [0.1], set in the scope): TF 2.21 on one CPU
# printed the same with its Keras 3 and with tf_keras (fit's loss, the evaluation's loss, the weights after fit):
# 0.007992628961801529, 0.2803955078125, [[0.5135148763656616, -0.23113445937633514], [0.11181898415088654]].
# On 8 logical CPUs TF's Keras 3 fails ("Inputs to operation AddN ... must have the same size"); tf_keras printed
# the values below: each batch of 1 goes to one of 8 replicas, the 7 empty ones averaged in, as jdist computes it.
TF_MIGRATE_MIRRORED_SEEDED = {"fit_loss": 0.002909293631091714, "eval_loss": 0.10132855176925659,
                              "weights": [[0.4968470335006714, -0.2526301443576813], [0.1009717732667923]]}
_SEEDED_MIGRATION = """
import json
import numpy as np
import jdist.tf_compat as tf
features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]
eval_features = [[4., 4.5], [5., 5.5], [6., 6.5]]
eval_labels = [[0.8], [0.9], [1.]]
dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
eval_dataset = tf.data.Dataset.from_tensor_slices((eval_features, eval_labels)).batch(1)
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
    model.build((None, 2))
    model.set_weights([np.array([[0.5], [-0.25]], "float32"), np.array([0.1], "float32")])
model.compile(optimizer=optimizer, loss='mse')
history = model.fit(dataset, verbose=0).history
result = model.evaluate(eval_dataset, return_dict=True, verbose=0)
print("result", strategy.num_replicas_in_sync, json.dumps(
    [history["loss"][0], result["loss"], [w.ravel().tolist() for w in model.get_weights()]]))
"""


def test_mirrored_strategy_migration_guide_computes_tfs_numbers():
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, "-c", _SEEDED_MIGRATION], capture_output=True, text=True, timeout=600,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    replicas, rest = out.stdout.split("result ", 1)[1].split(" ", 1)
    fit_loss, eval_loss, weights = json.loads(rest)
    assert replicas == "8"
    assert fit_loss == pytest.approx(TF_MIGRATE_MIRRORED_SEEDED["fit_loss"], rel=1e-5)  # observed: 8e-7
    assert eval_loss == pytest.approx(TF_MIGRATE_MIRRORED_SEEDED["eval_loss"], rel=1e-5)  # observed: 4e-7
    for got, want in zip(weights, TF_MIGRATE_MIRRORED_SEEDED["weights"]):
        np.testing.assert_allclose(got, want, atol=1e-6)


# TF 2.21 on this machine (no TPU), guide/migrate/tpu_estimator.ipynb's TF2 cells, with Keras 3 and with tf_keras:
# the first cell stops at `TPUClusterResolver(tpu='')` with this ValueError.
TF_TPU_NO_NAME = "ValueError: Please provide a TPU Name to connect to."


def test_tpu_estimator_migration_guide_stops_where_tf_does_and_names_the_way_to_cpu():
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, str(TUTORIALS / "tpu_estimator_migration.py")], capture_output=True,
                         text=True, timeout=600, env=env, cwd=TUTORIALS)
    assert out.returncode == 1 and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(TF_TPU_NO_NAME) and 'tf.distribute.TPUStrategy(devices=jax.devices("cpu"))' in last


# The guide's cells after the resolver, from a fixed start (kernel [[0.5], [-0.25]], bias [0.1], set in the scope),
# with the TPUStrategy on the 8 CPU devices (the way the error above names). TF cannot run a TPUStrategy without
# TPUs; its MirroredStrategy on 8 logical CPUs with tf_keras printed these numbers (its Keras 3 stops in the
# first execution of 10 steps: "You must feed a value for placeholder tensor ..."): fit's five epoch losses, the
# evaluation's loss, the weights, and optimizer.iterations.
TF_TPU_ESTIMATOR_SEEDED = {"losses": [0.0005756415193900466, 0.0, 0.0, 0.0, 0.0], "eval_loss": 0.1454567164182663,
                           "weights": [[0.5186122059822083, -0.224816232919693], [0.1186121478676796]],
                           "iterations": 50}
_SEEDED_TPU = """
import json
import jax
import numpy as np
import jdist.tf_compat as tf
features = [[1., 1.5]]
labels = [[0.3]]
eval_features = [[4., 4.5]]
eval_labels = [[0.8]]
dataset = tf.data.Dataset.from_tensor_slices(
    (features, labels)).shuffle(10).repeat().batch(8, drop_remainder=True).prefetch(2)
eval_dataset = tf.data.Dataset.from_tensor_slices((eval_features, eval_labels)).batch(1, drop_remainder=True)
strategy = tf.distribute.TPUStrategy(devices=jax.devices("cpu"))
with strategy.scope():
    model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
    model.build((None, 2))
    model.set_weights([np.array([[0.5], [-0.25]], "float32"), np.array([0.1], "float32")])
    model.compile(optimizer, "mse", steps_per_execution=10)
history = model.fit(dataset, epochs=5, steps_per_epoch=10, verbose=0).history
result = model.evaluate(eval_dataset, return_dict=True, verbose=0)
print("result", strategy.num_replicas_in_sync, json.dumps(
    [history["loss"], result["loss"], [w.ravel().tolist() for w in model.get_weights()],
     int(optimizer.iterations.numpy())]))
"""


def test_tpu_estimator_migration_guide_on_cpu_devices_computes_tfs_numbers():
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, "-c", _SEEDED_TPU], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    replicas, rest = out.stdout.split("result ", 1)[1].split(" ", 1)
    losses, eval_loss, weights, iterations = json.loads(rest)
    assert replicas == "8" and iterations == TF_TPU_ESTIMATOR_SEEDED["iterations"]
    np.testing.assert_allclose(losses, TF_TPU_ESTIMATOR_SEEDED["losses"], atol=1e-7)  # observed: equal
    assert eval_loss == pytest.approx(TF_TPU_ESTIMATOR_SEEDED["eval_loss"], rel=1e-5)
    for got, want in zip(weights, TF_TPU_ESTIMATOR_SEEDED["weights"]):
        np.testing.assert_allclose(got, want, atol=1e-6)


# TF 2.21 with tf_keras (its Keras 3 has no tf.keras.utils.SidecarEvaluator), guide/migrate/evaluator.ipynb on the
# same digits, twelve unseeded runs: fit's one epoch ended at loss 0.6968, 0.7213, 0.7580, 0.7820, 0.7812, 0.7181,
# 0.7687, 0.7929, 0.7786, 0.7213, 0.7644, 0.6977 and accuracy 0.8114, 0.7940, 0.7766, 0.7829, 0.7599, 0.7919,
# 0.7808, 0.7495, 0.7752, 0.7864, 0.7808, 0.8100; the SidecarEvaluator's one evaluation ("6/6 - 0s - loss: ... -
# accuracy: ...") at loss 0.2657, 0.2851, 0.2695, 0.2914, 0.3036, 0.2829, 0.3220, 0.3314, 0.3221, 0.2986, 0.3143,
# 0.3222 and accuracy 0.9250, 0.9222, 0.9389, 0.9250, 0.9278, 0.9250, 0.9167, 0.9056, 0.9194, 0.9194, 0.9222,
# 0.9028; the checkpoint directory held ['checkpoint', 'ckpt-1.data-00000-of-00001', 'ckpt-1.index'].
TF_EVALUATOR = {"fit_loss": (0.6968, 0.7929), "fit_accuracy": (0.7495, 0.8114), "eval_loss": (0.2657, 0.3314),
                "eval_accuracy": (0.9028, 0.9389)}


def test_evaluator_migration_guide():
    """ModelCheckpoint(save_weights_only=True) to an extension-less `ckpt-{epoch}`, then tf_keras's
    SidecarEvaluator with max_evaluations=1: it evaluates ckpt-1 and stops."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the guide runs on the default device
    out = subprocess.run([sys.executable, str(TUTORIALS / "evaluator_migration.py")], capture_output=True,
                         text=True, timeout=600, env=env, cwd=TUTORIALS)
    assert out.returncode == 0, out.stderr[-3000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)
    fit_accuracy, fit_loss = map(float, re.findall(r"45/45 .* - accuracy: ([\d.]+) - loss: ([\d.]+)", text)[-1])
    (evaluation,) = re.findall(r"^\d+/\d+ - \S+ - \S+ - accuracy: ([\d.]+) - loss: ([\d.]+)$", text, re.MULTILINE)
    eval_accuracy, eval_loss = map(float, evaluation)
    # TF's range, with room for an unseeded run (jdist's: fit 0.711-0.786; evaluation loss 0.256-0.303 in three
    # runs, 0.384 in a fourth, accuracy 0.917-0.942 in the three). Later, 8 more runs each side by side on
    # 2026-11-27: TF (tf_keras) evaluation loss 0.281-0.307, jdist 0.293-0.346, and one full run's 0.416: jdist's
    # mean is about 0.03 higher, a gap in training (its evaluator equals its own `evaluate`), not yet explained.
    # Full test runs gave 0.416 and 0.406 (accuracy 0.842); with JAX's persistent compilation cache on, as the
    # suite runs it, 4 runs gave 0.308-0.386 (accuracy 0.878-0.917). The gap is Keras 3's, not jdist's: the
    # guide's training and evaluation (the model, Adam, one epoch, steps_per_execution=10, run_eagerly=True; then
    # evaluate on the 360 test digits, batch 64) without jdist gave evaluation loss 0.292-0.333 (mean 0.310, 6 runs)
    # with Keras 3 on TF 2.21's backend and 0.278-0.407 (mean 0.310, 14 runs) with Keras 3 on JAX, and with jdist's
    # tf.keras 0.279-0.348 (mean 0.315, 8 runs), all side by side on 2026-11-27; tf_keras's mean was 0.295.
    # A bound for an unseeded run, not a match.
    assert TF_EVALUATOR["fit_loss"][0] - 0.1 < fit_loss < TF_EVALUATOR["fit_loss"][1] + 0.1
    assert fit_accuracy > TF_EVALUATOR["fit_accuracy"][0] - 0.06
    assert eval_loss < TF_EVALUATOR["eval_loss"][1] + 0.12 and eval_accuracy > TF_EVALUATOR["eval_accuracy"][0] - 0.08
    assert text.rstrip().splitlines()[-1] == "['checkpoint', 'ckpt-1.npz']"  # TF: checkpoint, ckpt-1.data/.index


# TF 2.21 with its Keras 3 (KERAS_BACKEND=tensorflow), Keras's guide "Multi-GPU distributed training with
# TensorFlow" on the same digits, MirroredStrategy on 8 logical CPUs, one unseeded run: 8 devices; the first fit's
# epochs at loss 1.0103 then 0.2420 (accuracy 0.7291, 0.9340; val_loss 0.3356, 0.1731); evaluate [0.2043, 0.9306];
# "Creating a new model", loss 0.8736 (val 0.3033); "Restoring from ./ckpt/ckpt-1.keras", loss 0.2196, val_loss
# 0.1662, val accuracy 0.9467.
def test_keras_io_distributed_training_guide(tmp_path):
    """Plain `import keras` (Keras 3 on JAX) under jdist's MirroredStrategy: fit and evaluate tf.data datasets,
    then ModelCheckpoint to `.keras` files and `keras.models.load_model` of the latest inside a new scope, which
    goes on from the saved model."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = subprocess.run([sys.executable, str(TUTORIALS / "keras_io_distributed_training.py")], capture_output=True,
                         text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)
    assert "Number of devices: 8" in text
    assert "Creating a new model" in text and "Restoring from ./ckpt/ckpt-1.keras" in text
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["ckpt-1.keras"]  # the second run saves its epoch 1 again
    evaluation = re.findall(r"- loss: ([\d.]+) - sparse_categorical_accuracy: ([\d.]+)\s*$", text, re.MULTILINE)
    eval_loss, eval_accuracy = map(float, evaluation[-1])  # evaluate's line (its progress bar's last state)
    assert eval_loss < 0.35 and eval_accuracy > 0.88, text[-2000:]  # TF: 0.2043, 0.9306
    fits = re.findall(r"^36/36 - .* loss: ([\d.]+) .* val_loss: ([\d.]+)", text, re.MULTILINE)
    (fresh_loss, _), (resumed_loss, resumed_val) = fits[-2], fits[-1]
    # the restored model goes on from its first epoch: its loss is an epoch-2 loss (TF: 0.8736, then 0.2196)
    assert float(resumed_loss) < 0.5 * float(fresh_loss) and float(resumed_val) < 0.3, fits
