"""Keras `fit` under ParameterServerStrategy on TF's own migration guide, jdist and TensorFlow interleaved.

    python scripts/ps_fit_guide_bench.py                          # 3 rounds: jdist, TF, jdist, TF, ...
    python scripts/ps_fit_guide_bench.py --before /tmp/old        # also an older jdist tree, in each round
    (mkdir /tmp/old && git archive <commit> jdist | tar -x -C /tmp/old)

The guide (`guide/migrate/multi_worker_cpu_gpu_training.ipynb`: 3 workers, 2 parameter servers, a Dense(1),
tf_keras's legacy Adagrad, `fit` of 5 epochs x 10 steps, `evaluate` of 10) is
tests/tf_tutorials/multi_worker_cpu_gpu_training.py; TF runs the same file with its two marked import lines put
back, under TF_USE_LEGACY_KERAS=1 (TF 2.21's Keras 3 refuses `optimizers.legacy`). Each run is a fresh process.
Printed per run: wall time, each epoch's ms/step (epochs 2-5 timed here from the epoch lines' arrival, the first
as Keras prints it), the evaluation's loss; then the medians
over runs of the first epoch (compilation, process start-up) and of epochs 2-5, and the jdist/TF ratios.
TensorFlow is not a jdist dependency: point --tf-python at a venv that has it.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "tests" / "tf_tutorials" / "multi_worker_cpu_gpu_training.py"
_IMPORT = re.compile(r"^.*# was: (import tensorflow.*)$", re.MULTILINE)
_STEP = re.compile(r"^10/10 - .*?(\d+(?:\.\d+)?)(us|ms|s)/step", re.MULTILINE)
_EVAL = re.compile(r"^\{'loss': (\S+)\}$", re.MULTILINE)
_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def tf_version(text: str) -> str:
    """The guide as TF runs it: each `... # was: import tensorflow...` line replaced by what it was."""
    replaced, count = _IMPORT.subn(lambda m: m.group(1), text)
    if count != 2:
        raise SystemExit(f"expected the guide's two marked import lines, found {count}")
    return replaced


def run(python: str, script: Path, env: dict, timeout: float) -> dict:
    """One run; an epoch's ms/step is the time between its line and the previous epoch's, over 10 steps (Keras
    rounds its own figure to whole seconds above 1 s); the first epoch's is the one Keras printed."""
    start = time.perf_counter()
    lines: list[tuple[float, str]] = []
    process = subprocess.Popen([python, "-u", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, cwd=script.parent)
    assert process.stdout is not None
    for line in process.stdout:
        lines.append((time.perf_counter(), re.sub(r"\x1b\[[0-9;]*m", "", line)))
        if time.perf_counter() - start > timeout:
            process.kill()
            break
    code = process.wait()
    wall = time.perf_counter() - start
    text = "".join(line for _, line in lines)
    epochs = [(t, m) for t, line in lines if (m := _STEP.match(line)) is not None][:5]  # tf_keras: evaluate's 6th
    evaluation = _EVAL.findall(text)
    if code != 0 or len(epochs) != 5 or not evaluation:
        raise SystemExit(f"{python} {script} failed (exit {code}):\n{text[-4000:]}")
    first = epochs[0][1]
    steps = [float(first.group(1)) * _UNIT_MS[first.group(2)]]
    steps += [(b[0] - a[0]) * 1e3 / 10 for a, b in zip(epochs, epochs[1:])]
    return {"wall": wall, "steps": steps, "eval": float(evaluation[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds of (jdist, TF)")
    parser.add_argument("--tf-python", default="/work/tfvenv/bin/python", help="a Python with TensorFlow 2.21")
    parser.add_argument("--before", default=None, help="another jdist source tree (its parent directory of "
                        "jdist/), run first in each round with it first on PYTHONPATH")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    args = parser.parse_args()

    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "TF_CONFIG")}
    jdist_env = {**base, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    path = [args.before or "", *filter(None, [base.get("PYTHONPATH")])]
    before_env = {**jdist_env, "PYTHONPATH": os.pathsep.join(path)}
    tf_env = {**base, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    with tempfile.TemporaryDirectory() as tmp:
        tf_script = Path(tmp) / GUIDE.name
        tf_script.write_text(tf_version(GUIDE.read_text()))
        variants = [("jdist", sys.executable, GUIDE, jdist_env), ("TF", args.tf_python, tf_script, tf_env)]
        if args.before:
            variants.insert(0, ("before", sys.executable, GUIDE, before_env))
        results: dict[str, list[dict]] = {name: [] for name, *_ in variants}
        for index in range(args.runs):
            for name, python, script, env in variants:
                r = run(python, script, env, args.timeout)
                results[name].append(r)
                print(f"run {index + 1} {name:6s} wall {r['wall']:6.1f} s  ms/step by epoch "
                      f"{' '.join(f'{s:7.1f}' for s in r['steps'])}  evaluate loss {r['eval']:.4g}", flush=True)
    summary = {}
    for name, runs in results.items():
        summary[name] = (statistics.median(r["steps"][0] for r in runs),
                         statistics.median(s for r in runs for s in r["steps"][1:]),
                         statistics.median(r["wall"] for r in runs))
        first, later, wall = summary[name]
        print(f"{name:6s} median: epoch 1 {first:7.1f} ms/step, epochs 2-5 {later:6.1f} ms/step, wall {wall:5.1f} s")
    t1, t2, tw = summary["TF"]
    for name in [n for n in summary if n != "TF"]:
        j1, j2, jw = summary[name]
        print(f"{name}/TF: epoch 1 {j1 / t1:.1f}x, epochs 2-5 {j2 / t2:.1f}x, wall {jw / tw:.1f}x")


if __name__ == "__main__":
    main()
