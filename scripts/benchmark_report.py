"""The figures docs/benchmarks.md holds together, taken in one run, as one markdown table.

    python scripts/benchmark_report.py --tf-python /work/tfvenv/bin/python --markdown runs/report.md
    python scripts/benchmark_report.py --size tiny --no-tf        # every part at a toy size (what the test runs)

Each part is one of the existing benchmark scripts, run here one after another as a subprocess (never two at
once: they would share the cores) with the sizes of `--size`, writing its JSON into `--out`:

- multi-process: `benchmark_multiworker.py`, jdist against TF 2.21's MultiWorkerMirroredStrategy on 1, 2, 4
  worker processes (`jdist / TF`), and the share of a jdist step its gradient all-reduce takes;
- input: `benchmark_tfdata.py`, the tutorials' pipeline through `jdist.tf_compat.data` alone against real
  `tf.data` alone, and `Trainer.fit` fed by it against `fit` on arrays;
- ZeRO-1: `benchmark.py --strategies mirrored,zero1 --control`, `MirroredStrategy(shard_optimizer_state=True)`
  against plain Mirrored on the MLP, the CNN and the Transformer, beside an A/A control (the same Mirrored step
  built twice) that shows how far a ratio of identical programs strays in the same windows;
- fit: `benchmark_fit.py --ks 1`, `Trainer.fit` at steps_per_execution=1 against Keras 3's `fit` (JAX), against
  the Trainer's own compiled program in a hand-written loop, and against a hand-written `jax.jit` step.

Every figure is a paired ratio of variants interleaved in the same windows of that part (the median over
rounds, min-max beside it): above 1 the first variant is faster. A thread samples the load average every
`--load-every` seconds; each row says the load during its part, since the machine may be shared.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_common import resolve_tf_python  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent

# Arguments of each part's script per size. "tiny" only shows that everything runs (its numbers mean nothing).
SIZES = {
    "tiny": {
        "multiworker": ["--processes", "1", "--rounds", "2", "--steps", "2", "--warmup", "1", "--hidden", "8",
                        "--batch", "8", "--allreduce-reps", "2"],
        "tfdata": ["--examples", "128", "--batch", "32", "--buffer", "16", "--windows", "2", "--read-batches", "2"],
        "zero1": ["--models", "mlp", "--windows", "2", "--window-seconds", "0.01", "--max-steps-per-window", "1",
                  "--no-keras"],
        "fit": ["--windows", "2", "--steps", "2", "--no-keras"],
    },
    "modest": {
        "multiworker": ["--processes", "1,2,4", "--rounds", "5", "--steps", "20"],
        "tfdata": ["--windows", "5"],
        "zero1": ["--models", "mlp,cnn,transformer", "--windows", "7", "--window-seconds", "1"],
        "fit": ["--windows", "7", "--steps", "64"],
    },
}
PARTS = ("multiworker", "tfdata", "zero1", "fit")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="modest")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    parser.add_argument("--tf-python", default=None,
                        help="a Python with tensorflow (default: $JDIST_TF_PYTHON, else /work/tfvenv/bin/python)")
    parser.add_argument("--no-tf", action="store_true", help="leave out TensorFlow's variants")
    parser.add_argument("--out", default="runs/benchmark_report")
    parser.add_argument("--markdown", default=None, help="also write the table here")
    parser.add_argument("--load-every", type=float, default=5.0, help="seconds between load-average samples")
    parser.add_argument("--part-timeout", type=float, default=3600.0, help="seconds one part may take")
    args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"--parts: unknown {sorted(unknown)}; choose from {', '.join(PARTS)}")
    resolve_tf_python(parser, args)
    return args


class LoadSampler:
    """The 1-minute load average every `every` seconds on a daemon thread, until `stop()`."""

    def __init__(self, every: float):
        self.every, self.samples = every, [(time.time(), os.getloadavg()[0])]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append((time.time(), os.getloadavg()[0]))

    def between(self, start: float, end: float) -> list[float]:
        return [load for t, load in self.samples if start <= t <= end]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.time(), os.getloadavg()[0]))


def part_command(part: str, args: argparse.Namespace, out: Path) -> list[str]:
    """The subprocess that runs `part`; it writes its JSON at `result_path(part, out)`."""
    sized = SIZES[args.size][part]
    tf = [] if args.tf_python is None else ["--tf-python", args.tf_python]
    if part == "multiworker":
        return [sys.executable, str(SCRIPTS / "benchmark_multiworker.py"), *sized, "--out", str(out / part),
                *(tf or ["--no-tf"])]
    if part == "tfdata":
        return [sys.executable, str(SCRIPTS / "benchmark_tfdata.py"), *sized, "--json", str(result_path(part, out)),
                *tf]
    if part == "zero1":
        return [sys.executable, str(SCRIPTS / "benchmark.py"), *sized, "--strategies", "mirrored,zero1",
                "--control", "--out", str(out / part)]
    return [sys.executable, str(SCRIPTS / "benchmark_fit.py"), *sized, "--ks", "1", "--json",
            str(result_path(part, out)), *(["--tf", *tf] if tf else [])]


def result_path(part: str, out: Path) -> Path:
    return {"multiworker": out / part / "result.json", "tfdata": out / "tfdata.json",
            "zero1": out / part / "benchmark.json", "fit": out / "fit.json"}[part]


def run_part(part: str, args: argparse.Namespace, out: Path, sampler: LoadSampler) -> dict:
    """Runs one part; returns its JSON with when it ran and the load meanwhile (or its error)."""
    command = part_command(part, args, out)
    print(f"[{part}] {' '.join(command[1:])}", flush=True)
    start = time.time()
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=args.part_timeout,
                             cwd=SCRIPTS.parent)
    except subprocess.TimeoutExpired:
        return {"error": f"took longer than --part-timeout {args.part_timeout:.0f} s", "start": start,
                "end": time.time()}
    end = time.time()
    (out / f"{part}.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0 or not result_path(part, out).exists():
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {run.returncode}: {tail[0]}", "start": start, "end": end}
    result = json.loads(result_path(part, out).read_text())
    return {"result": result, "start": start, "end": end}


def ratio_cell(ratio: dict | None) -> str:
    if not ratio:
        return "-"
    return f"{ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})"


def figures(part: str, result: dict) -> list[tuple[str, dict | None, str]]:
    """`(figure, paired ratio, what it compares)` rows of one part's JSON."""
    rows: list[tuple[str, dict | None, str]] = []
    if part == "multiworker":
        for n, count in sorted(result["counts"].items(), key=lambda item: int(item[0])):
            rows.append((f"{n} process(es): jdist / TF MultiWorkerMirrored", count["ratio"].get("jdist/tf"),
                         "steps/s, MLP 784-512-512-10, Adam"))
            if count["allreduce_fraction"].get("jdist"):
                rows.append((f"{n} process(es): gradient all-reduce / jdist step", count["allreduce_fraction"]["jdist"],
                             "time of the all-reduce alone over a step's"))
    elif part == "tfdata":
        paired = result["paired"]
        rows.append(("input: tf_compat.data alone / tf.data alone", paired.get("jdist_data / tf_data"),
                     "examples/s reading the tutorials' pipeline"))
        rows.append(("input: fit on the pipeline / fit on arrays", paired.get("fit_pipeline / fit_arrays"),
                     "examples/s, CNN, Trainer.fit"))
        rows.append(("input: pipeline alone / fit on the pipeline", paired.get("jdist_data / fit_pipeline"),
                     "how far input is ahead of the step"))
    elif part == "zero1":
        for row, info in result["rows"].items():
            if row.endswith("/zero1"):
                model = row.split("/")[0]
                stored = info.get("optimizer_state_stored_per_device")
                note = f"steps/s; each device stores {100 * stored:.0f}% of the Adam state" if stored else "steps/s"
                rows.append((f"ZeRO-1 / Mirrored, {model}", info["paired"].get("mirrored"), note))
                control = result["rows"].get(f"{model}/mirrored", {}).get("control")
                if control:
                    rows.append((f"Mirrored / the same Mirrored step built again, {model}", control,
                                 "A/A control: the noise floor of this model's ratios"))
    elif part == "fit":
        paired = result["paired"]
        for other, what in (("keras", "Keras 3 (JAX) fit"), ("program", "its compiled program, hand loop"),
                            ("scan", "hand-written jax.jit step"), ("tf_fit", "TF Keras fit")):
            if f"jdist/{other}/k=1" in paired or other == "keras":
                rows.append((f"fit k=1: jdist Trainer.fit / {what}", paired.get(f"jdist/{other}/k=1"),
                             "steps/s, MLP 32-64-10, batch 64"))
    return rows


def table(results: dict, sampler: LoadSampler) -> list[str]:
    lines = ["| figure | paired ratio, median (min-max) | what | load average during the part (1-min: min, median, "
             "max) |", "| --- | ---: | --- | --- |"]
    for part, entry in results.items():
        loads = sampler.between(entry["start"], entry["end"]) or [os.getloadavg()[0]]
        load = f"{min(loads):.1f}, {statistics.median(loads):.1f}, {max(loads):.1f}"
        if "error" in entry:
            lines.append(f"| {part} | failed | {entry['error']} | {load} |")
            continue
        for figure, ratio, what in figures(part, entry["result"]):
            lines.append(f"| {figure} | {ratio_cell(ratio)} | {what} | {load} |")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sampler = LoadSampler(args.load_every)
    started = time.time()
    results = {}
    try:
        for part in args.parts.split(","):
            results[part] = run_part(part, args, out, sampler)
            print(f"[{part}] {'failed: ' + results[part]['error'] if 'error' in results[part] else 'done'} "
                  f"({results[part]['end'] - results[part]['start']:.0f} s, load {os.getloadavg()[0]:.2f})",
                  flush=True)
    finally:
        sampler.stop()
    loads = [load for _, load in sampler.samples]
    lines = table(results, sampler)
    lines += ["", f"`python scripts/benchmark_report.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
              f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))}-"
              f"{time.strftime('%H:%M UTC', time.gmtime())}, "
              f"{time.time() - started:.0f} s on {os.cpu_count()} cores; load average (1-min, sampled every "
              f"{args.load_every:g} s) min {min(loads):.1f}, median {statistics.median(loads):.1f}, "
              f"max {max(loads):.1f}"]
    print("\n" + "\n".join(lines))
    (out / "report.json").write_text(json.dumps({"parts": results, "load_samples": sampler.samples}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    return 1 if any("error" in entry for entry in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
