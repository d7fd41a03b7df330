"""TensorFlow's own distribute tutorials, run with only `import tensorflow as tf` changed.

Each script under tests/tf_tutorials/ is a tutorial's code cells in order (see its header). It runs in a
fresh process, as a user runs it, and its output is compared with what TensorFlow 2.21 printed for the same
cells (recorded below; tensorflow-cpu 2.21.0 with its Keras 3, on the same machine).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
    lookups = re.findall(r"0: Array\(\[(\d), (\d)\], dtype=int32\),\n  1: Array\(\[(\d), (\d)\]", out.stdout)
    assert [[[int(a), int(b)], [int(c), int(d)]] for a, b, c, d in lookups] == TF_STRING_LOOKUP
    (result,) = [line for line in lines if line.startswith("{")]
    pairs = re.findall(r"np\.int\d+\((\d+)\): np\.int\d+\((\d+)\)", result)
    assert {int(k): int(v) for k, v in pairs} == {i: 2 * i for i in range(24)}


# TF 2.21, distributed_training.ipynb: `print(tf.Variable(1.))` in the default strategy's scope, and 210 losses
# printed by its custom-training cells, falling.
TF_GUIDE_VARIABLE = "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>"
TF_GUIDE_LOSSES = 210


def test_distributed_training_guide():
    out = _run("distributed_training_guide.py")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == TF_GUIDE_VARIABLE
    losses = [float(line) for line in lines if re.fullmatch(r"\d+\.\d+(e-?\d+)?", line)]
    assert len(losses) == TF_GUIDE_LOSSES
    assert losses[-1] < losses[0]
    # The guide's `MirroredStrategy(devices=["/gpu:0", "/gpu:1"])` on a machine without GPUs: TF runs the
    # replicas on the CPU; jdist warns and refuses only if that strategy is used (it is not).
    assert "Unknown device '/gpu:0'" in out.stderr
