"""The benchmarks' machinery: paired ratios, window sizing, interleaving, and the worker protocol that drives
TensorFlow's side (exercised with a stand-in worker that speaks the same protocol, so no TensorFlow is needed)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_common  # noqa: E402
import benchmark  # noqa: E402

FAKE = str(Path(__file__).resolve().parent / "fake_bench_worker.py")


def test_paired_ratio_is_the_median_of_per_round_ratios():
    a, b = [100.0, 50.0, 200.0], [50.0, 50.0, 50.0]
    assert bench_common.paired_ratios(a, b) == [2.0, 1.0, 4.0]
    assert bench_common.paired_ratio(a, b) == {"median": 2.0, "min": 1.0, "max": 4.0}
    # Not the ratio of medians: load drift between rounds cancels within each pair.
    assert bench_common.paired_ratio([10.0, 20.0, 40.0], [5.0, 20.0, 40.0])["median"] == 1.0
    with pytest.raises(ValueError, match="same, nonzero number of windows"):
        bench_common.paired_ratios([1.0], [1.0, 2.0])


def test_interleave_order_alternates():
    assert bench_common.interleave_order("abc", 0) == ["a", "b", "c"]
    assert bench_common.interleave_order("abc", 1) == ["c", "b", "a"]


def test_window_steps_targets_seconds_and_respects_multiple_and_cap():
    assert benchmark.window_steps(0.01, 1.0, 1, 64) == 64  # capped
    assert benchmark.window_steps(0.1, 1.0, 1, 64) == 10
    assert benchmark.window_steps(0.1, 1.0, 8, 64) == 8
    assert benchmark.window_steps(5.0, 1.0, 8, 64) == 8  # at least one execution
    assert benchmark.window_steps(0.001, 1.0, 8, 60) == 56  # a multiple of k under the cap


def fake_variant(seconds_per_step, examples=10, log=None, name=None):
    def run(steps):
        if log is not None:
            log.append(name)
        return steps * seconds_per_step

    return benchmark.Variant(run, examples)


def test_interleaved_windows_rates_order_and_paired_columns():
    log = []
    variants = {"m/mirrored/jdist": fake_variant(0.01, log=log, name="j"),
                "m/mirrored/baseline": fake_variant(0.02, log=log, name="b"),
                "m/mirrored/tf": fake_variant(0.04, log=log, name="t")}
    timing = benchmark.interleaved_windows(variants, windows=3, target_seconds=0.1, max_steps=64)
    assert log[6:] == ["j", "b", "t", "t", "b", "j", "j", "b", "t"]  # after 2 warm-up/sizing calls each
    # Sized 10, 5 and 2 steps on their own; all run the median, so the paired windows do the same work.
    assert timing["steps"] == {"m/mirrored/jdist": 5, "m/mirrored/baseline": 5, "m/mirrored/tf": 5}
    assert timing["rates"]["m/mirrored/jdist"] == pytest.approx([1000.0] * 3)
    assert timing["rates"]["m/mirrored/tf"] == pytest.approx([250.0] * 3)
    columns = benchmark.paired_columns(timing["rates"], "m/mirrored", "m", "mirrored")
    assert columns["baseline"]["median"] == pytest.approx(2.0)
    assert columns["tf"]["median"] == pytest.approx(4.0)
    assert "keras" not in columns and "tf_fit" not in columns


def test_worker_protocol_with_a_stand_in_worker():
    worker = bench_common.Worker([sys.executable, FAKE, "--model", "cnn", "--width", "2", "--variant", "fit",
                                  "--devices", "4", "--steps-per-execution", "8", "--seconds-per-step", "0.5",
                                  "--fail-at", "2"], start_timeout=60)
    try:
        assert worker.info == {"variant": "fit", "devices": 4, "model": "cnn", "width": 2, "k": 8}
        assert worker.run(8, timeout=60) == pytest.approx(4.0)
        with pytest.raises(bench_common.WorkerError, match="placeholder tensor second line"):
            worker.run(8, timeout=60)  # the worker reports the failure on one line and stays up
        assert worker.run(16, timeout=60) == pytest.approx(8.0)
    finally:
        worker.close()
    assert worker.process.returncode == 0


def test_worker_that_dies_at_start_raises_with_its_stderr():
    with pytest.raises(bench_common.WorkerError, match="(?s)did not start.*cannot build the model"):
        bench_common.Worker([sys.executable, FAKE, "--crash-at-start"], start_timeout=60)


def test_tf_variant_drives_the_worker_and_a_failed_variant_is_reported(monkeypatch):
    """benchmark.tf_variant's command line parses as tf_bench_worker's; a failing window drops the variant
    with its message instead of a silent gap."""
    monkeypatch.setattr(benchmark, "WORKER", Path(FAKE))
    program = bench_common.program("mlp")
    good = benchmark.tf_variant(sys.executable, program, devices=2)()
    failing = benchmark.tf_variant(sys.executable, program, variant="fit", devices=2, steps_per_execution=4)
    failing = failing()
    failing.run = lambda steps, run=failing.run: run(steps) if steps != 4 else (_ for _ in ()).throw(
        bench_common.WorkerError("worker failed: You must feed a value for placeholder tensor"))
    try:
        timing = benchmark.interleaved_windows({"tf": good, "tf_fit": failing}, windows=2, target_seconds=0.1,
                                               max_steps=64)
    finally:
        good.close()
        failing.close()
    assert timing["rates"]["tf"] == pytest.approx([program.global_batch / 0.01] * 2)
    assert "tf_fit" not in timing["rates"]
    assert "placeholder tensor" in timing["errors"]["tf_fit"]


def test_table_reports_paired_ratios_and_fraction_of_peak():
    rows = {"cnn/mirrored": {
        "variants": {"jdist": {"median": 1280.0, "min": 1200.0, "max": 1300.0}, "tf": {"median": 640.0}},
        "paired": {"tf": {"median": 1.9}}, "errors": {"tf_fit": "crashed"},
        "flops_per_step": 1e9, "compiles_in_timed_windows": 0, "compiles_for_short_batch": 0}}
    line = benchmark.table_lines(rows, peak=20e9)[2]
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[1] == "1,280 (1,200-1,300)"
    assert cells[4] == "640" and cells[5] == "failed"
    assert cells[8] == "1.90"  # the paired ratio, not 1280 / 640
    assert cells[10] == "10.0 G" and cells[11] == "50.0%"  # 10 steps/s x 1 GFLOP of a 20 GFLOP/s peak


def test_gpu_check_runs_every_path_on_cpu(capsys):
    """scripts/gpu_check.py --cpu-smoke: the MFU table (Mirrored and OneDevice), the all-reduce against the
    ring model, and CentralStorageStrategy with its parameters in pinned_host memory, loss going down."""
    import re

    import gpu_check

    assert gpu_check.lookup(gpu_check.PEAK_BF16_FLOPS, "NVIDIA H100 80GB HBM3") == 989e12
    assert gpu_check.lookup(gpu_check.PEAK_BF16_FLOPS, "NVIDIA H100 PCIe") == 756e12
    assert gpu_check.lookup(gpu_check.PEAK_BF16_FLOPS, "NVIDIA A100-SXM4-40GB") == 312e12
    assert gpu_check.lookup(gpu_check.PEAK_BF16_FLOPS, "cpu") is None
    assert gpu_check.main(["--cpu-smoke"]) == 0
    text = capsys.readouterr().out
    rows = re.findall(r"\| (MirroredStrategy|OneDeviceStrategy) \| (\d+) \|.*\| ([\d.]+)% \| ([\d.]+) -> ([\d.]+) \|", text)
    assert [(name, n) for name, n, *_ in rows] == [("MirroredStrategy", "2"), ("OneDeviceStrategy", "1")], text
    assert all(float(last) < float(first) for *_, first, last in rows), text
    ring = re.findall(r"\| ([\d.]+) MiB \| ([\d.]+) \| ([\d.]+) \|", text)
    # 2(n-1)/n * S / B with n = 2, B = 10 GB/s (the smoke run's placeholder): S / 10 GB/s.
    assert [float(model) for *_, model in ring] == pytest.approx(
        [1e3 * float(mib) * 2 ** 20 / 10e9 for mib, *_ in ring], abs=1e-3)
    assert "memory kind 'pinned_host'" in text
    assert re.search(r"ms / step \(global batch 4\); loss [\d.]+ -> [\d.]+ \(down\)", text), text


def test_gpu_check_without_a_gpu_says_so():
    import jax

    import gpu_check

    if any(d.platform == "gpu" for d in jax.devices()):
        assert gpu_check.gpu_devices(False)
        return
    with pytest.raises(SystemExit, match="needs an NVIDIA GPU.*--cpu-smoke"):
        gpu_check.gpu_devices(False)


class _Pending:
    """Stands for a dispatched program's output: records when the loop waits for it."""

    def __init__(self, log, i):
        self.log, self.i = log, i

    def block_until_ready(self):
        self.log.append(self.i)
        return self


def test_timed_steps_waits_for_every_step_before_the_window_ends():
    """A window's time must include its last steps: a loop that returns with work still queued makes
    the variant look faster and bills the next one (a deque passed whole to jax.block_until_ready is
    a leaf, and nothing is waited for)."""
    import benchmark

    waited = []
    run = benchmark.timed_steps(lambda i: _Pending(waited, i), max_in_flight=2)
    run(5)
    assert sorted(waited) == [0, 1, 2, 3, 4]


def test_fit_benchmark_scan_loop_runs_whole_windows(monkeypatch):
    """The hand-written scan of scripts/benchmark_fit.py: one execution per k steps, each waited for."""
    import benchmark
    import benchmark_fit

    calls = []
    monkeypatch.setattr(benchmark, "timed_steps", lambda step, max_in_flight: (
        lambda n: calls.append((n, max_in_flight)) or 0.0))
    program = benchmark_fit.make_program("small_mlp")
    x, y = benchmark_fit.data(program, 16)
    variant = benchmark_fit.scan_loop(program, x, y, 8)
    variant.run(16)
    assert calls == [(2, benchmark_fit.MAX_IN_FLIGHT)]


def test_tfdata_benchmark_runs_every_variant_at_tiny_size(tmp_path):
    """scripts/benchmark_tfdata.py: the pipeline alone and feeding Trainer.fit against the arrays path, paired."""
    import json

    import benchmark_tfdata

    out = tmp_path / "tfdata.json"
    assert benchmark_tfdata.main(["--examples", "128", "--batch", "32", "--buffer", "16", "--windows", "2",
                                  "--read-batches", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["examples_per_s"]) == {"jdist_data", "fit_arrays", "fit_pipeline"}
    assert all(rate > 0 for rate in result["examples_per_s"].values())
    ratio = result["paired"]["fit_pipeline / fit_arrays"]
    assert ratio["min"] <= ratio["median"] <= ratio["max"] and result["steps_per_epoch"] == 4


def test_multiworker_benchmark_arithmetic():
    """scripts/benchmark_multiworker.py: the gradient's size, the ring model, paired ratios and the all-reduce
    fraction, from made-up windows."""
    import benchmark_multiworker as mw

    assert mw.gradient_elements(512) == 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10 == 669_706
    assert mw.ring_seconds(1, 4e6, 1e9) == 0.0
    assert mw.ring_seconds(2, 4e6, 1e9) == pytest.approx(4e-3)  # 2 (n-1)/n = 1
    assert mw.ring_seconds(4, 4e6, 1e9) == pytest.approx(6e-3)  # 1.5
    with pytest.raises(ValueError, match="positive bandwidth"):
        mw.ring_seconds(2, 1.0, 0.0)
    assert mw.ratio_pairs(["jdist", "jdist-before", "tf"]) == [
        ("jdist", "tf"), ("jdist-before", "tf"), ("jdist", "jdist-before")]

    # seconds per window of 10 steps; all-reduce windows of 10 all-reduces
    windows = {"jdist": [1.0, 4.0, 8.0], "jdist-before": [2.0, 4.0, 8.0], "tf": [3.0, 2.0, 4.0]}
    result = mw.summarize_count(windows, 10, {"jdist": [0.1, 0.2, 0.4]}, 10)
    assert result["ms_per_step"]["jdist"] == {"median": 400.0, "min": 100.0, "max": 800.0}
    # tf's seconds over jdist's per round: 3, 0.5, 0.5 -> 0.5 (not the ratio of medians, 3 / 4)
    assert result["ratio"]["jdist/tf"] == {"median": 0.5, "min": 0.5, "max": 3.0}
    assert result["ratio"]["jdist/jdist-before"]["median"] == pytest.approx(1.0)  # 2, 1, 1
    # one all-reduce (10, 20, 40 ms) over one step (100, 400, 800 ms) per round
    assert result["allreduce_fraction"]["jdist"]["median"] == pytest.approx(0.05)
    assert result["allreduce_ms"]["jdist"]["median"] == pytest.approx(20.0)


@pytest.mark.multiprocess
def test_multiworker_benchmark_runs_at_tiny_size(tmp_path):
    """Two worker processes per configuration (this checkout as jdist and as a --before variant), two rounds of
    two steps of a tiny MLP: the tables, the JSON and the PNG come out. Nothing here is timed."""
    import json
    import subprocess

    out = tmp_path / "mw"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark_multiworker.py"), "--no-tf",
                          "--processes", "2", "--rounds", "2", "--steps", "2", "--warmup", "1", "--hidden", "8",
                          "--batch", "8", "--allreduce-reps", "2", "--before", str(ROOT), "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["configurations"] == ["jdist", "jdist-before"]
    count = result["counts"]["2"]
    assert set(count["ms_per_step"]) == {"jdist", "jdist-before"} and len(count["windows_s"]["jdist"]) == 2
    assert set(count["ratio"]) == {"jdist/jdist-before"} and count["allreduce_fraction"]["jdist"]["median"] > 0
    assert count["info"]["jdist"]["replicas"] == 2
    assert "| 2 | " in run.stdout and "jdist/jdist-before (paired)" in run.stdout and "load average" in run.stdout
    assert (out / "multiworker_growth.png").stat().st_size > 0


def test_benchmark_report_runs_a_part_and_reads_every_part(tmp_path):
    """scripts/benchmark_report.py: one part (fit, at toy size, in its own process) run and tabulated with the load
    during it; the rows of the other parts' JSON, as their scripts write it, read into the same table."""
    import benchmark_report

    markdown = tmp_path / "report.md"
    assert benchmark_report.main(["--size", "tiny", "--no-tf", "--parts", "fit", "--out", str(tmp_path / "out"),
                                  "--markdown", str(markdown), "--load-every", "0.5"]) == 0
    text = markdown.read_text()
    for other in ("its compiled program, hand loop", "hand-written jax.jit step"):
        row = next(line for line in text.splitlines() if f"jdist Trainer.fit / {other}" in line)
        assert row.split(" | ")[1][0].isdigit(), row  # a measured ratio
    assert "load average" in text and "--parts fit" in text

    ratio = {"median": 1.5, "min": 1.0, "max": 2.0}
    multiworker = {"counts": {"2": {"ratio": {"jdist/tf": ratio}, "allreduce_fraction": {"jdist": ratio}},
                              "1": {"ratio": {"jdist/tf": ratio}, "allreduce_fraction": {}}}}
    rows = benchmark_report.figures("multiworker", multiworker)
    assert [r[0] for r in rows] == ["1 process(es): jdist / TF MultiWorkerMirrored",
                                    "2 process(es): jdist / TF MultiWorkerMirrored",
                                    "2 process(es): gradient all-reduce / jdist step"]
    tfdata = {"paired": {"fit_pipeline / fit_arrays": ratio, "jdist_data / fit_pipeline": ratio}}
    assert [r[1] for r in benchmark_report.figures("tfdata", tfdata)] == [None, ratio, ratio]
    zero1 = {"rows": {"cnn/mirrored": {"paired": {}, "control": ratio},
                      "cnn/zero1": {"paired": {"mirrored": ratio}, "optimizer_state_stored_per_device": 0.16}}}
    assert benchmark_report.figures("zero1", zero1) == [
        ("ZeRO-1 / Mirrored, cnn", ratio, "steps/s; each device stores 16% of the Adam state"),
        ("Mirrored / the same Mirrored step built again, cnn", ratio, "A/A control: the noise floor of this model's ratios")]
    assert benchmark_report.ratio_cell(ratio) == "1.50 (1.00-2.00)" and benchmark_report.ratio_cell(None) == "-"
