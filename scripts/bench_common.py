"""What the benchmarks share with their TensorFlow workers: programs, data, paired ratios, the worker protocol.

Imports only numpy and the standard library, so the TensorFlow worker (`scripts/tf_bench_worker.py`),
which runs in another Python environment, uses the same programs and batches as the JAX side.

Worker protocol (one line each way, over the worker's stdin and a private stdout):
    worker -> "ready {json}"           after building and compiling (json: what the worker runs)
    parent -> "run N"                  run N training steps and block until they are done
    worker -> "elapsed SECONDS"        wall time of those N steps, measured inside the worker
    worker -> "error MESSAGE"          the N steps failed (the worker stays up for "quit")
    parent -> "quit"                   exit
Timing inside the worker keeps pipe latency out of the window.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence


@dataclass(frozen=True)
class Program:
    name: str
    global_batch: int
    input_shape: tuple
    num_classes: int = 10
    width: int = 1  # multiplies every hidden width (MLP units; CNN filters and dense units)

    @property
    def mlp_features(self) -> tuple:
        return (1024 * self.width, 1024 * self.width)

    @property
    def cnn_features(self) -> tuple:
        """conv1 filters, conv2 filters, dense units: the seed's 32, 64, 64 at width 1."""
        return (32 * self.width, 64 * self.width, 64 * self.width)

    @property
    def label(self) -> str:
        return self.name if self.width == 1 else f"{self.name}x{self.width}"


PROGRAMS = {
    "mlp": Program("mlp", 256, (784,)),
    "cnn": Program("cnn", 128, (28, 28, 1)),
    # A small decoder-only LM: examples are sequences of 64 byte tokens (no TensorFlow twin).
    "transformer": Program("transformer", 32, (64,), num_classes=256),
    # The fit-overhead benchmark's small model: per-step overhead dominates its steps.
    "small_mlp": Program("small_mlp", 64, (32,)),
}


def default_tf_python() -> str | None:
    """$JDIST_TF_PYTHON, else this interpreter when it can import TensorFlow, else a scratch
    environment at /work/tfvenv when there is one."""
    if os.environ.get("JDIST_TF_PYTHON"):
        return os.environ["JDIST_TF_PYTHON"]
    import importlib.util

    if importlib.util.find_spec("tensorflow"):
        return sys.executable
    scratch = Path("/work/tfvenv/bin/python")
    return str(scratch) if scratch.exists() else None


def resolve_tf_python(parser, args) -> None:
    """Sets `args.tf_python` for scripts with `--tf-python` and `--no-tf`: None under `--no-tf`, else the
    one given or `default_tf_python()`; a parser error when there is none."""
    if args.no_tf:
        args.tf_python = None
        return
    args.tf_python = args.tf_python or default_tf_python()
    if not args.tf_python:
        parser.error("no TensorFlow: pass --tf-python /path/to/python (with tensorflow), or --no-tf")


def simulate_cpu_devices(count: int) -> None:
    """Asks XLA for `count` simulated CPU devices unless XLA_FLAGS already says how many (before JAX
    initialises its backends), and Keras for its JAX backend."""
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={count}").strip()
    os.environ.setdefault("KERAS_BACKEND", "jax")


def program(name: str, width: int = 1) -> Program:
    base = PROGRAMS[name]
    return Program(base.name, base.global_batch, base.input_shape, base.num_classes, width)


def make_batches(program: Program, count: int, seed: int = 0):
    """`count` global batches of float32 inputs and int32 labels (tokens for the Transformer)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if program.name == "transformer":
        tokens = rng.integers(0, program.num_classes, (count, program.global_batch, program.input_shape[0] + 1))
        return [(t[:, :-1].astype(np.int32), t[:, 1:].astype(np.int32)) for t in tokens]
    return [
        (rng.standard_normal((program.global_batch,) + program.input_shape, dtype=np.float32),
         rng.integers(0, program.num_classes, program.global_batch).astype(np.int32))
        for _ in range(count)
    ]


def summarize(values: Sequence[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Each round's rate over the other variant's rate in the same round.

    Rounds are interleaved, so a drift in the machine's load between rounds hits both windows of a pair
    alike and cancels in the ratio; the median of these is the `paired` ratio.
    """
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"paired ratios need the same, nonzero number of windows on both sides "
                         f"({len(numerator)} vs {len(denominator)})")
    return [a / b for a, b in zip(numerator, denominator)]


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> dict:
    return summarize(paired_ratios(numerator, denominator))


def interleave_order(names: Sequence[str], round_index: int) -> list[str]:
    """A, B, C in even rounds and C, B, A in odd ones: no variant always runs first or right after another."""
    return list(names) if round_index % 2 == 0 else list(names)[::-1]


# --- worker side -------------------------------------------------------------------------------------------

def serve(run_steps: Callable[[int], float], info: dict, stdin=None, out=None) -> None:
    """Answers "run N" with "elapsed S" (S from `run_steps(N)`) until "quit" or end of input."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    out.write("ready " + json.dumps(info) + "\n")
    out.flush()
    for line in stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return
        if words[0] != "run" or len(words) != 2 or not words[1].isdigit():
            out.write(f"error bad command {line.strip()!r}: expected 'run N' or 'quit'\n")
        else:
            try:
                out.write(f"elapsed {run_steps(int(words[1])):.9f}\n")
            except Exception as error:  # reported to the parent, which records the variant as failed
                message = f"{type(error).__name__}: {error}".replace("\n", " ")[:500]
                out.write(f"error {message}\n")
        out.flush()


def protocol_stdout():
    """The worker's private channel to the parent; `sys.stdout` then goes to stderr, so stray prints and
    library logging cannot corrupt the protocol."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return channel


# --- parent side -------------------------------------------------------------------------------------------

class WorkerError(RuntimeError):
    """The worker failed to start, or a window failed; the message carries the worker's own words."""


class Worker:
    """A long-lived subprocess that runs one variant's windows on demand (see the module docstring)."""

    def __init__(self, command: Sequence[str], *, wait: bool = True, start_timeout: float = 600.0,
                 env: dict | None = None):
        self.command = list(command)
        self.info: dict = {}
        self._stderr_tail: list[str] = []
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1, env=env)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        if wait:
            self.wait_ready(start_timeout)

    def wait_ready(self, timeout: float = 600.0) -> dict:
        """Blocks until the worker has built and warmed up its program; returns what it reported."""
        if self.info:
            return self.info
        words = self._read_line(timeout)
        if not words.startswith("ready"):
            self.close()
            self._stderr_thread.join(5)
            reason = words or getattr(self, "_first_error", "") or "no output"
            raise WorkerError(f"worker did not start: {reason}\n{self.stderr_tail()}")
        self.info = json.loads(words[len("ready"):].strip() or "{}") or {"ready": True}
        return self.info

    def _drain_stderr(self) -> None:
        self._first_error = ""
        for line in self.process.stderr:
            if not self._first_error and "Error: " in line:  # e.g. "InvalidArgumentError: ...", before its noise
                self._first_error = line.strip()[:300]
            self._stderr_tail = (self._stderr_tail + [line.rstrip()])[-30:]

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr_tail[-15:])

    def _read_line(self, timeout: float) -> str:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.close()
            raise WorkerError(f"worker gave no answer within {timeout:.0f} s: {' '.join(self.command)}")
        return result[0].strip() if result else ""

    def run(self, steps: int, timeout: float = 600.0) -> float:
        """Seconds the worker took for `steps` steps."""
        if self.process.poll() is not None:
            raise WorkerError(f"worker exited (code {self.process.returncode})\n{self.stderr_tail()}")
        self.process.stdin.write(f"run {steps}\n")
        self.process.stdin.flush()
        words = self._read_line(timeout)
        if words.startswith("elapsed "):
            return float(words.split()[1])
        raise WorkerError(f"worker failed: {words[len('error '):] if words.startswith('error') else words or 'exited'}"
                          + (f"\n{self.stderr_tail()}" if not words else ""))

    def close(self, timeout: float = 30.0) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
