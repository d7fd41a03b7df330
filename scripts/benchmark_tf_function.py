"""`tf.function` against eager execution: TF's "Introduction to graphs" power loop, in jdist and in TensorFlow.

    python scripts/benchmark_tf_function.py                                  # jdist only
    python scripts/benchmark_tf_function.py --tf-python /path/to/tf/venv/bin/python   # TF side by side

The guide's program: `power(x, 100)`, 100 chained 10x10 int32 matmuls, called `--calls` times eagerly and through
`tf.function` (traced once, then its compiled program). Each round times jdist's eager and traced calls and, with
`--tf-python`, TensorFlow's in a worker process running the same code, round after round (interleaved), so the
ratios compare runs made at the same time. Prints each round and the median seconds per 1000 calls.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROGRAM = """
import timeit

import numpy as np

x = tf.constant(np.random.default_rng(0).integers(-1, 2, size=(10, 10)).astype(np.int32))

def power(x, y):
    result = tf.eye(10, dtype=tf.int32)
    for _ in range(y):
        result = tf.matmul(x, result)
    return result

power_as_graph = tf.function(power)
assert (np.asarray(power(x, 100)) == np.asarray(power_as_graph(x, 100))).all()

def measure(calls):
    eager = timeit.timeit(lambda: np.asarray(power(x, 100)), number=calls)
    graph = timeit.timeit(lambda: np.asarray(power_as_graph(x, 100)), number=calls)
    return eager, graph
"""

WORKER = """
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
exec(PROGRAM)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "quit":
        break
    print(json.dumps(measure(int(line))), flush=True)
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="calls per timing (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--tf-python", default=None, help="a Python with tensorflow installed, for TF's side")
    args = parser.parse_args(argv)

    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jdist.tf_compat as tf

    scope = {"tf": tf}
    exec(PROGRAM, scope)
    worker = None
    if args.tf_python:
        worker = subprocess.Popen([args.tf_python, "-c", f"PROGRAM = {PROGRAM!r}\n{WORKER}"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert worker.stdout is not None and worker.stdin is not None
        if worker.stdout.readline().strip() != "ready":
            raise SystemExit("the TensorFlow worker did not start")
    scope["measure"](10)  # warm: compiles every op and the traced program
    rows = []
    try:
        for round_ in range(args.rounds):
            eager, graph = scope["measure"](args.calls)
            row = {"jdist eager": eager, "jdist function": graph}
            if worker is not None:
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.write(f"{args.calls}\n")
                worker.stdin.flush()
                tf_eager, tf_graph = json.loads(worker.stdout.readline())
                row.update({"TF eager": tf_eager, "TF function": tf_graph})
            rows.append(row)
            print(f"round {round_ + 1}: " + ", ".join(f"{k} {v * 1000 / args.calls:.3f} s" for k, v in row.items()),
                  flush=True)
    finally:
        if worker is not None and worker.stdin is not None:
            worker.stdin.write("quit\n")
            worker.stdin.flush()
            worker.wait(timeout=60)
    medians = {k: statistics.median(r[k] for r in rows) * 1000 / args.calls for k in rows[0]}
    print("median seconds per 1000 calls: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()))
    print(f"jdist eager / jdist function: {medians['jdist eager'] / medians['jdist function']:.2f}x")
    if worker is not None:
        print(f"TF eager / TF function: {medians['TF eager'] / medians['TF function']:.2f}x; "
              f"jdist function / TF function: {medians['jdist function'] / medians['TF function']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
