"""TensorFlow's DTensor documents, run with only their imports (and the tutorial's download) changed.

tests/tf_tutorials/dtensor_overview.py is the guide "DTensor concepts", compared line by line with what TF 2.21
printed for it (tensorflow-cpu 2.21.0, this machine: dtensor_overview.tf_output.txt). dtensor_ml_tutorial.py is
the tutorial "Distributed training with DTensors" on made-up reviews (synthetic_reviews.py; TF ran the same
arrays). test_tf_compat_dtensor.py checks the tutorial's training step against TF's numbers from fixed weights.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

TUTORIALS = Path(__file__).parent / "tf_tutorials"
_HANDLE_ID = re.compile(r'(ResourceHandle\(name="[^/"]*/)\d+')  # TF's resource counter (0 in the notebook, 5 here)


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the scripts split the CPU themselves
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(TUTORIALS))
    return subprocess.run([sys.executable, str(TUTORIALS / script)], capture_output=True, text=True, timeout=600,
                          env=env, cwd=cwd)


def _comparable(text: str) -> list[str]:
    """The printed lines without `help(...)` pages (docstrings differ) and the version line, with a variable
    handle's id masked (TF numbers its resources across the process)."""
    lines, skipping = [], False
    for line in text.splitlines():
        if line.startswith("Help on function"):
            skipping = True
        elif skipping and line.startswith("tf.Tensor("):
            skipping = False
        if not skipping and not line.startswith("TensorFlow version"):
            lines.append(_HANDLE_ID.sub(r"\1#", line))
    return lines


def test_dtensor_overview_guide_prints_what_tf_printed(tmp_path):
    out = _run("dtensor_overview.py", tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    ours = _comparable(out.stdout)
    tfs = _comparable((TUTORIALS / "dtensor_overview.tf_output.txt").read_text())
    assert len(ours) == len(tfs)
    differ = [i for i, (a, b) in enumerate(zip(ours, tfs)) if a != b]
    # Two differences left. A dtype prints as numpy's name where TF prints `<dtype: 'int32'>`. And
    # `call_with_layout(tf.function(tf.random.stateless_normal), Layout(['x', 'y'], mesh), ...)`: TF's DTensor
    # draws each device's piece with its own numbers, where jdist splits the numbers the op gives without a layout
    # (TF's own, as the replicated draw below it shows: its 64 x 32 values are printed equal).
    dtype_line = tfs.index("dtype: <dtype: 'int32'>")
    drawn = next(i for i, line in enumerate(tfs) if line.startswith('tf.Tensor({"CPU:0": [[0.0368092842'))
    assert ours[dtype_line] == "dtype: int32"
    assert differ == [dtype_line, *range(drawn, drawn + 7)], [tfs[i] for i in differ]  # its 7 printed lines
    assert ours[drawn].startswith('tf.Tensor({"CPU:0": [[1.66521633 1.36637604]')  # stateless_normal((6, 4), (1, 1))
    assert "got an error as expected for fully_sharded_dtensor" in ours and ours[-1] == "exception raised"


# TF 2.21, dtensor_ml_tutorial.py on the same reviews (two epochs under each of three meshes, the checkpoint of
# each restored by the next): the Progbar's last line per epoch, (loss, accuracy), and the first row of
# `print(model(sample_x))`. The model starts from tf.random.stateless_normal weights, TF's numbers here too.
TF_ML_EPOCHS = [(0.6808, 0.6875), (0.6895, 0.6094), (0.6754, 0.6094), (0.6604, 0.6406), (0.6446, 0.6719),
                (0.6281, 0.7031)]
TF_ML_FIRST_LOGITS = (-7.21120548, 9.99546528)
TF_ML_STARTS = ["New training", "Restoring a checkpoint", "Restoring a checkpoint", "Restoring a checkpoint"]


def test_dtensor_ml_tutorial_trains_and_restores_across_meshes_as_tf(tmp_path):
    out = _run("dtensor_ml_tutorial.py", tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout.replace("\r", "\n"))
    assert [line for line in text.splitlines() if line in ("New training", "Restoring a checkpoint")] == TF_ML_STARTS
    first = re.search(r"^tf\.Tensor\(\[\[(\S+) (\S+)\]", text, re.MULTILINE)
    assert first is not None and np.allclose([float(first[1]), float(first[2])], TF_ML_FIRST_LOGITS, rtol=1e-6)
    # the repacked batch printed as TF printed it: its tf-idf values per device, split over 8 devices
    assert 'x tf.Tensor({"CPU:0": [4.39401579 0 0 ... 0 0 0], "CPU:1": [0 8.78803158 0 ... 0 0 8.78803158]' in text
    assert '"CPU:4": [4.39401579 0 4.39401579 ... 0 4.39401579 13.1820469]' in text
    epochs = [(float(a), float(b)) for a, b in re.findall(r"^32/32 .* - loss: ([\d.]+) - accuracy: ([\d.]+)", text,
                                                           re.MULTILINE)]
    # TF's numbers to the Progbar's four digits, under every mesh, each going on from the last one's checkpoint
    np.testing.assert_allclose(epochs, TF_ML_EPOCHS, atol=2e-4)
