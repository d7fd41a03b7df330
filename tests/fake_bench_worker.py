"""Stands in for scripts/tf_bench_worker.py in tests: parses the same arguments, speaks the same protocol.

A window of N steps "takes" N * --seconds-per-step seconds (reported, not slept); `--fail-at W` makes the
W-th window fail, `--crash-at-start` exits before "ready", as a TensorFlow error would.
"""
import argparse
import os
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "scripts")
sys.path.insert(0, SCRIPTS)

import tf_bench_worker  # noqa: E402  (imports no TensorFlow until its main runs)
from bench_common import protocol_stdout, serve  # noqa: E402


def main() -> int:
    extra = argparse.ArgumentParser()
    extra.add_argument("--seconds-per-step", type=float, default=0.01)
    extra.add_argument("--fail-at", type=int, default=0)
    extra.add_argument("--crash-at-start", action="store_true")
    fake, rest = extra.parse_known_args()
    args = tf_bench_worker.parse_args(rest)
    channel = protocol_stdout()
    print("stray output that must not reach the protocol")
    if fake.crash_at_start:
        print("ValueError: cannot build the model", file=sys.stderr)
        return 3
    windows = []

    def run_steps(steps: int) -> float:
        windows.append(steps)
        if len(windows) == fake.fail_at:
            raise RuntimeError("You must feed a value for placeholder tensor\nsecond line")
        return steps * fake.seconds_per_step

    serve(run_steps, {"variant": args.variant, "devices": args.devices, "model": args.model,
                      "width": args.width, "k": args.steps_per_execution}, out=channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
