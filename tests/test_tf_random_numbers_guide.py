"""TF's guide "Random number generation" (site/en/guide/random_numbers.ipynb; tests/tf_tutorials/
random_numbers_guide.py, only its import changed), run to its end and compared with what TF 2.21 printed for it
(tensorflow-cpu 2.21.0, Keras 3, this machine: tests/tf_tutorials/random_numbers_guide.tf_output.txt).

TF's numbers are its own Philox draws, which jdist does not reproduce; what is compared is every printed line's
text with the numbers left out, and the guide's claims about those numbers (a seed repeats its stream, a reset
goes back, a checkpoint restores the stream, the replicas' streams under a strategy)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).parent / "tf_tutorials" / "random_numbers_guide.py"
TF_OUTPUT = GUIDE.with_name("random_numbers_guide.tf_output.txt")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d*)?(e[-+]?\d+)?")

# Where jdist prints differently from TF, each line's TF text for jdist's (the numbers left out):
# - the guide's `print(g.normal([]))` inside the replica function of `strat.run(f)`: TF runs the function eagerly
#   per replica and prints each replica's number; jdist compiles the replica function and prints at tracing;
# - `num_traces` after `foo(tf.Variable(1))`, `foo(tf.Variable(2))`: TF traces once (prints 1); jdist runs a
#   tf.function's Python body on every call (2), although it counts one trace (experimental_get_tracing_count);
# - the loaded SavedModel's generator state is a JAX array, int32 without `jax_enable_x64` (TF's is int64); it
#   prints as TF's tensor otherwise.
_KNOWN = {"JitTracer(float32[])": "tf.Tensor(N, shape=(), dtype=float32)",
          "state: tf.Tensor([N N N], shape=(N,), dtype=int32)": "state: tf.Tensor([N N N], shape=(N,), dtype=int64)"}


def _shape_of(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", _NUMBER.sub("N", line)).replace("[ ", "[").replace(" ]", "]").strip()
        lines.append(line)
    return lines


def _numbers(line: str) -> list[float]:
    return [float(m.group()) for m in _NUMBER.finditer(line.split("shape=")[0])]


def test_random_numbers_guide_runs_to_its_end_as_tfs(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the guide makes its 3 CPUs itself
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, str(GUIDE)], capture_output=True, text=True, timeout=600, env=env,
                         cwd=tmp_path)  # it writes ./checkpoint and ./saved_model
    assert out.returncode == 0, out.stderr[-3000:]
    ours, theirs = _shape_of(out.stdout), _shape_of(TF_OUTPUT.read_text())
    assert len(ours) == len(theirs), out.stdout
    for i, (mine, tf_line) in enumerate(zip(ours, theirs)):
        assert mine == tf_line or _KNOWN.get(mine) == tf_line, (
            f"line {i + 1}: jdist {mine!r}, TF {tf_line!r}")
    lines = out.stdout.splitlines()
    # A seed repeats its stream: the first and third (2, 3) draws (Generator.from_seed(1), twice).
    assert lines[1:3] == lines[7:9]
    # g.normal, g.normal, reset_from_seed(1) -> the first again; from_seed(1) anew -> the first again (TF: same).
    first, second, again, anew = (_numbers(lines[i]) for i in range(12, 16))
    assert again == anew == first != second
    # Checkpoint sections: the restored stream repeats what followed the save (host; 2 replicas; 2 -> 3 replicas).
    saving = [i for i, line in enumerate(lines) if line == "RNG stream from saving point:"]
    restoring = [i for i, line in enumerate(lines) if line == "RNG stream from restoring point:"]
    assert len(saving) == 4 and len(restoring) == 3  # the fourth save is the SavedModel's (loaded below)
    host_after = lines[saving[0] + 1:saving[0] + 3]
    assert lines[restoring[0] + 1:restoring[0] + 3] == host_after
    two_after = lines[saving[1] + 1:restoring[1]]
    assert lines[restoring[1] + 1:restoring[1] + 1 + len(two_after)] == two_after
    # Restored on three replicas: replicas 0 and 1 go on with their streams, replica 2 gets its own.
    before = [_numbers(line) for line in lines[saving[2] + 1:restoring[2]] if line.lstrip().startswith(("0:", "1:"))]
    after = [_numbers(line) for line in lines[restoring[2] + 1:restoring[2] + 11]
             if line.lstrip().startswith(("0:", "1:"))]
    assert after == before
    # The loaded module goes on from the saved state, one draw at a time; the stateless draws repeat.
    loaded = lines[lines.index("RNG stream from loading point:") + 1:]
    assert [_numbers(loaded[i])[0] for i in (0, 2, 4)] == [1, 2, 3]
    assert loaded[-6:-3] == loaded[-3:]
