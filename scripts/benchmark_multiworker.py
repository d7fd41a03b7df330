"""jdist's MultiWorkerMirroredStrategy side by side with TensorFlow's, as worker processes on this machine.

    python scripts/benchmark_multiworker.py --tf-python /work/tfvenv/bin/python [--processes 1,2,4] [--rounds 7]
    python scripts/benchmark_multiworker.py --no-tf --processes 2 --before /tmp/jdist-main   # jdist, before/after

For each process count n, the same program runs as n worker processes with one CPU device each (TF's
MultiWorkerMirroredStrategy uses one CPU device per worker): an MLP 784-H-H-10, Adam, softmax cross-entropy
averaged over the global batch, each worker feeding its share of every global batch from host memory.
- jdist: `python -m jdist.launch --num-workers n --devices-per-worker 1`, `MultiWorkerMirroredStrategy` +
  `make_train_step` + `distribute_batch`;
- tf: n processes with `TF_CONFIG`, each in a session of its own as the launcher starts jdist's workers,
  `tf.distribute.MultiWorkerMirroredStrategy`, `tf.function` around `strategy.run(step_fn)` with
  `compute_average_loss` and Keras's Adam, input from `distribute_datasets_from_function` (`--tf-python`: a
  Python with TensorFlow; default $JDIST_TF_PYTHON, else /work/tfvenv/bin/python);
- `--before DIR` (named jdist-before) and `--variant NAME=DIR` (repeatable): the same jdist program with the
  jdist package of another checkout (`git archive <commit> | tar -x -C DIR`), so the effect of a change is a
  paired ratio of one run.
The configurations of one n stay up together; their windows of `--steps` steps (blocked at the end) are
interleaved (A, B, C, then C, B, A, ...) for `--rounds` rounds. A ratio a/b is the median over rounds of b's
seconds per step over a's in the same round (paired: drift in the machine's load cancels); jdist/tf above 1
means jdist is faster. Every worker times its own window; a window counts as its slowest worker's. Each worker
also reports the CPU time it used (all its threads) and its voluntary context switches (how often it slept:
on a peer, on a result), summed over the workers per step.
Also interleaved, each round: the all-reduce alone, a sum over the processes of one float32 buffer of the
gradient's size (jdist: a compiled psum over the strategy's mesh; tf: `ReplicaContext.all_reduce` in a
`tf.function`, read back each time), against the ring model 2 (n-1)/n x bytes / bandwidth, with the bandwidth of
loopback TCP on this machine (one connection between two threads of this process, 64 MiB sent, best of 3:
gloo and TF's gRPC both move bytes between processes over loopback TCP here); a memcpy rate is printed beside
it. "all-reduce / jdist step" is that all-reduce's time over jdist's step time, paired per round.
Writes JSON and a PNG of the cost growth (matplotlib) to --out, prints the tables and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_common import interleave_order, paired_ratios, resolve_tf_python, summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
JDIST, TF, BEFORE = "jdist", "tf", "jdist-before"


# --- arithmetic (tested) -------------------------------------------------------------------------------------

def gradient_elements(hidden: int, inputs: int = 784, classes: int = 10) -> int:
    """Parameters of the MLP inputs-hidden-hidden-classes (kernels and biases): the gradient's float32 count."""
    return inputs * hidden + hidden + hidden * hidden + hidden + hidden * classes + classes


def ring_seconds(processes: int, nbytes: float, bandwidth: float) -> float:
    """A ring all-reduce's transfer time: each process sends and receives 2 (n-1)/n of the buffer."""
    if processes < 1 or bandwidth <= 0:
        raise ValueError(f"need processes >= 1 and a positive bandwidth, got {processes} and {bandwidth}")
    return 2 * (processes - 1) / processes * nbytes / bandwidth


def ratio_pairs(names: list[str]) -> list[tuple[str, str]]:
    """The paired ratios reported: each jdist configuration over TF, then jdist over each other configuration."""
    pairs = [(name, TF) for name in names if name != TF and TF in names]
    return pairs + [(JDIST, name) for name in names if name not in (JDIST, TF) and JDIST in names]


def summarize_count(windows: dict[str, list[float]], steps: int, allreduce: dict[str, list[float]] | None = None,
                    allreduce_reps: int = 1) -> dict:
    """One process count's result from its interleaved windows (seconds per window, one per round).

    ms/step per configuration (median, min, max over rounds); `ratio["a/b"]`: the paired ratio of a's speed
    over b's (b's seconds over a's in the same round), for jdist and jdist-before over TF and for jdist over
    jdist-before; `allreduce_ms`: one all-reduce's time per configuration; `allreduce_fraction`: the paired
    all-reduce time over the step time, per round, of each configuration.
    """
    result: dict = {"ms_per_step": {}, "ratio": {}, "allreduce_ms": {}, "allreduce_fraction": {}}
    for name, seconds in windows.items():
        result["ms_per_step"][name] = summarize([s / steps * 1e3 for s in seconds])
    for faster, slower in ratio_pairs(list(windows)):
        result["ratio"][f"{faster}/{slower}"] = summarize(paired_ratios(windows[slower], windows[faster]))
    for name, seconds in (allreduce or {}).items():
        per_op = [s / allreduce_reps for s in seconds]
        result["allreduce_ms"][name] = summarize([s * 1e3 for s in per_op])
        if name in windows:
            step = [s / steps for s in windows[name]]
            result["allreduce_fraction"][name] = summarize(paired_ratios(per_op, step))
    return result


# --- measurements on this machine ----------------------------------------------------------------------------

def loopback_bandwidth(nbytes: int = 64 << 20, repeats: int = 3) -> float:
    """Bytes/s through one loopback TCP connection (a sender and a receiver thread), best of `repeats`."""
    payload = bytearray(nbytes)
    best = 0.0
    for _ in range(repeats):
        server = socket.create_server(("127.0.0.1", 0))
        port = server.getsockname()[1]

        def send(port=port):
            with socket.create_connection(("127.0.0.1", port)) as out:
                out.sendall(payload)

        sender = threading.Thread(target=send)
        sender.start()
        conn, _ = server.accept()
        view, got = memoryview(bytearray(1 << 20)), 0
        start = time.perf_counter()
        while got < nbytes:
            n = conn.recv_into(view)
            if not n:
                break
            got += n
        elapsed = time.perf_counter() - start
        sender.join()
        conn.close()
        server.close()
        best = max(best, got / elapsed)
    return best


def memcpy_bandwidth(nbytes: int = 64 << 20, repeats: int = 5) -> float:
    """Bytes/s of one large numpy copy (a memcpy), best of `repeats`."""
    import numpy as np

    src, dst = np.ones(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = max(best, nbytes / (time.perf_counter() - start))
    return best


# --- workers -------------------------------------------------------------------------------------------------

def batches(args, count: int = 4):
    import numpy as np

    rng = np.random.default_rng(0)
    return [(rng.standard_normal((args.batch, 784), dtype=np.float32),
             rng.integers(0, 10, args.batch).astype(np.int32)) for _ in range(count)]


def serve_control(args, info: dict, commands: dict) -> None:
    """Connects to the parent and answers "NAME N" with "elapsed S C W" (S = commands[NAME](N); C the CPU seconds
    and W the voluntary context switches (waits) of this process meanwhile, all its threads) until "quit"."""
    import resource

    with socket.create_connection(("127.0.0.1", args.control), timeout=600) as conn:
        conn.settimeout(None)
        stream = conn.makefile("rw", buffering=1)
        stream.write("ready " + json.dumps(info) + "\n")
        stream.flush()
        for line in stream:
            words = line.split()
            if not words or words[0] == "quit":
                return
            try:
                cpu, waits = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
                seconds = commands[words[0]](int(words[1]))
                waits = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - waits
                stream.write(f"elapsed {seconds:.9f} {time.process_time() - cpu:.9f} {waits}\n")
            except Exception as error:  # reported to the parent, which stops the benchmark with it
                stream.write("error " + f"{type(error).__name__}: {error}".replace("\n", " ")[:500] + "\n")
            stream.flush()


def jdist_worker(args) -> None:
    import jax
    import numpy as np
    import optax
    from jax.sharding import PartitionSpec as P

    import jdist
    from jdist.models import MLP, classification_loss

    strategy = jdist.MultiWorkerMirroredStrategy()
    model = MLP(features=(args.hidden, args.hidden), num_classes=10)
    data = batches(args)
    share = strategy.local_batch_slice(args.batch)
    shares = [({"x": x[share], "y": y[share]}) for x, y in data]

    def loss_fn(params, batch):
        return classification_loss(model.apply(params, batch["x"]), batch["y"])

    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, tx=optax.adam(1e-3),
                                        params=model.init(jax.random.key(0), data[0][0][:1]))
    step = jdist.make_train_step(loss_fn, strategy)
    holder = {"state": state}

    def run_steps(steps: int) -> float:
        start = time.perf_counter()
        state, sums = holder["state"], None
        for i in range(steps):
            state, sums = step(state, strategy.distribute_batch(shares[i % len(shares)]))
        jax.block_until_ready((state, sums))
        holder["state"] = state
        return time.perf_counter() - start

    mesh, axis = strategy.mesh, strategy.data_axis
    size = gradient_elements(args.hidden)
    psum = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, axis), mesh=mesh, in_specs=P(axis), out_specs=P(axis)))
    local = strategy.num_replicas_in_sync // strategy.num_workers
    buffer = strategy.distribute_batch(np.ones((local, size), np.float32))  # one row per replica

    def run_allreduce(reps: int) -> float:
        start = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(psum(buffer))
        return time.perf_counter() - start

    for _ in range(2):
        run_steps(args.warmup)
        run_allreduce(2)
    serve_control(args, {"framework": args.name, "index": strategy.worker_index,
                         "replicas": strategy.num_replicas_in_sync, "jax": jax.__version__},
                  {"run": run_steps, "allreduce": run_allreduce})


def tf_worker(args) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    os.environ.pop("XLA_FLAGS", None)
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"] if "TF_CONFIG" in os.environ else 0
    workers = max(1, strategy.cluster_resolver.cluster_spec().num_tasks("worker")) if "TF_CONFIG" in os.environ \
        else 1
    data = batches(args)
    per_worker = args.batch // workers
    x_all = [x[index * per_worker:(index + 1) * per_worker] for x, _ in data]
    y_all = [y[index * per_worker:(index + 1) * per_worker] for _, y in data]

    def dataset_fn(context):  # this worker's share of each global batch, in order, as jdist feeds it
        import numpy as np

        ds = tf.data.Dataset.from_tensor_slices((np.concatenate(x_all), np.concatenate(y_all)))
        return ds.batch(context.get_per_replica_batch_size(args.batch), drop_remainder=True).repeat()

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(args.hidden, activation="relu"),
                                  keras.layers.Dense(args.hidden, activation="relu"), keras.layers.Dense(10)])
        optimizer = keras.optimizers.Adam(1e-3)
        optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def step_fn(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)), global_batch_size=args.batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_step(batch):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=batch), axis=None)

    def run_steps(steps: int) -> float:
        start = time.perf_counter()
        loss = None
        for _ in range(steps):
            loss = train_step(next(iterator))
        loss.numpy()
        return time.perf_counter() - start

    buffer = tf.ones((gradient_elements(args.hidden),), tf.float32)

    @tf.function
    def allreduce():
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, buffer))

    def run_allreduce(reps: int) -> float:
        start = time.perf_counter()
        for _ in range(reps):
            strategy.experimental_local_results(allreduce())[0].numpy()
        return time.perf_counter() - start

    for _ in range(2):
        run_steps(args.warmup)
        run_allreduce(2)
    serve_control(args, {"framework": TF, "index": index, "replicas": strategy.num_replicas_in_sync,
                         "tensorflow": tf.__version__, "keras": keras.__version__}, {"run": run_steps,
                                                                                     "allreduce": run_allreduce})


# --- the parent ----------------------------------------------------------------------------------------------

class Group:
    """The n worker processes of one configuration and their control connections."""

    def __init__(self, name: str, processes: list[subprocess.Popen], logs: list[Path]):
        self.name, self.processes, self.logs = name, processes, logs
        self.conns: dict[int, object] = {}
        self.info: dict = {}

    def log_tail(self) -> str:
        text = "".join(p.read_text(errors="replace") for p in self.logs if p.exists())
        return "\n".join(text.splitlines()[-25:])

    def command(self, line: str) -> tuple[float, float, int]:
        """Sends `line` to every worker; the slowest worker's seconds, the CPU seconds and the voluntary context
        switches of all workers."""
        for stream in self.conns.values():
            stream.write(line + "\n")
            stream.flush()
        seconds, cpu, waits = [], 0.0, 0
        for index, stream in sorted(self.conns.items()):
            answer = stream.readline().strip()
            if not answer.startswith("elapsed "):
                raise SystemExit(f"{self.name} worker {index} failed on {line!r}: {answer or 'no answer'}\n"
                                 f"{self.log_tail()}")
            seconds.append(float(answer.split()[1]))
            cpu += float(answer.split()[2])
            waits += int(answer.split()[3])
        return max(seconds), cpu, waits

    def close(self) -> None:
        for stream in self.conns.values():
            try:
                stream.write("quit\n")
                stream.flush()
            except OSError:
                pass
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_groups(args, n: int, names: list[str], server: socket.socket, logdir: Path) -> dict[str, Group]:
    """Starts each configuration's n workers and waits until all have connected (built and warmed up)."""
    from jdist.launch import free_ports

    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "XLA_FLAGS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    common = ["--control", str(server.getsockname()[1]), "--batch", str(args.batch), "--hidden", str(args.hidden),
              "--warmup", str(args.warmup)]
    groups: dict[str, Group] = {}
    for name in names:
        if name == TF:
            ports = free_ports(n)
            cluster = {"worker": [f"localhost:{p}" for p in ports]}
            processes, logs = [], []
            for i in range(n):
                log = logdir / f"tf-{n}-{i}.log"
                tf_env = {**env, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
                # A session of its own, as jdist's launcher starts each worker (the kernel's autogroups share
                # the CPU between sessions: both sides' workers compete alike with whatever else runs).
                processes.append(subprocess.Popen([args.tf_python, str(SCRIPT), "--role", TF] + common, env=tf_env,
                                                  stdout=log.open("w"), stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, start_new_session=True))
                logs.append(log)
            groups[name] = Group(name, processes, logs)
        else:
            log = logdir / f"{name}-{n}.log"
            jdist_env = env if name == JDIST else {**env, "PYTHONPATH": os.pathsep.join(
                p for p in (str(Path(args.variants[name]).resolve()), os.environ.get("PYTHONPATH")) if p)}
            command = [sys.executable, "-m", "jdist.launch", "--num-workers", str(n), "--devices-per-worker",
                       str(args.devices_per_worker),
                       "--", sys.executable, str(SCRIPT), "--role", JDIST, "--name", name] + common
            groups[name] = Group(name, [subprocess.Popen(command, cwd=ROOT, env=jdist_env, stdout=log.open("w"),
                                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)], [log])
    server.settimeout(5)
    deadline = time.monotonic() + args.start_timeout
    while any(len(g.conns) < n for g in groups.values()):
        for group in groups.values():
            if any(p.poll() not in (None, 0) for p in group.processes):
                raise SystemExit(f"{group.name} on {n} process(es) failed to start:\n{group.log_tail()}")
        if time.monotonic() > deadline:
            raise SystemExit("workers did not connect within --start-timeout:\n"
                             + "\n".join(f"{g.name}: {g.log_tail()}" for g in groups.values()))
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(600)
        stream = conn.makefile("rw", buffering=1)
        hello = stream.readline().strip()
        info = json.loads(hello[len("ready"):])
        group = groups[info["framework"]]
        group.conns[int(info["index"])] = stream
        group.info = info
    return groups


def measure_count(args, n: int, server: socket.socket, logdir: Path) -> dict:
    names = [JDIST] + list(args.variants) + ([TF] if args.tf_python else [])
    groups = start_groups(args, n, names, server, logdir)
    windows: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    waits: dict[str, list[int]] = {name: [] for name in names}
    allreduce: dict[str, list[float]] = {name: [] for name in names}
    try:
        for name in names:  # one discarded window each: caches, the first all-reduce of each size
            groups[name].command(f"run {args.steps}")
            groups[name].command(f"allreduce {args.allreduce_reps}")
        for round_index in range(args.rounds):
            for name in interleave_order(names, round_index):
                seconds, cpu_seconds, switches = groups[name].command(f"run {args.steps}")
                windows[name].append(seconds)
                cpu[name].append(cpu_seconds)
                waits[name].append(switches)
            for name in interleave_order(names, round_index):
                allreduce[name].append(groups[name].command(f"allreduce {args.allreduce_reps}")[0])
    finally:
        for group in groups.values():
            group.close()
    result = summarize_count(windows, args.steps, allreduce if n > 1 else None, args.allreduce_reps)
    # CPU time of all workers per step: what a step costs the machine, whoever else runs on it.
    result["cpu_ms_per_step"] = {name: summarize([c / args.steps * 1e3 for c in cpu[name]]) for name in names}
    # Voluntary context switches of all workers per step: how often a step sleeps (on a peer, on a result).
    result["waits_per_step"] = {name: summarize([w / args.steps for w in waits[name]]) for name in names}
    result["windows_s"] = windows
    result["cpu_s"] = cpu
    result["allreduce_windows_s"] = allreduce
    result["info"] = {name: g.info for name, g in groups.items()}
    return result


def plot(results: dict, nbytes: int, out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG written")
        return None
    counts = sorted(int(n) for n in results["counts"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name in results["configurations"]:
        ys = [results["counts"][str(n)]["ms_per_step"].get(name, {}).get("median") for n in counts]
        if any(y is not None for y in ys):
            left.plot(counts, ys, marker="o", label=name)
    left.set(xlabel="worker processes (1 CPU device each)", ylabel="ms per step (median)", xticks=counts,
             title=f"MLP step, global batch {results['batch']}")
    left.legend()
    multi = [n for n in counts if n > 1]
    for name in (JDIST, TF):
        ys = [results["counts"][str(n)]["allreduce_ms"].get(name, {}).get("median") for n in multi]
        if any(y is not None for y in ys):
            right.plot(multi, ys, marker="o", label=f"{name} all-reduce")
    bandwidth = results["loopback_bytes_per_s"]
    right.plot(multi, [ring_seconds(n, nbytes, bandwidth) * 1e3 for n in multi], linestyle="--",
               label=f"ring model at {bandwidth / 1e9:.1f} GB/s")
    right.set(xlabel="worker processes", ylabel="ms", xticks=multi, title=f"all-reduce of {nbytes / 1e6:.2f} MB")
    right.legend()
    fig.tight_layout()
    path = out / "multiworker_growth.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def table(results: dict, nbytes: int) -> list[str]:
    """Two markdown tables: step times and paired ratios with the all-reduce alone; then what a step costs
    all workers together (CPU time, and voluntary context switches: how often a step sleeps on a peer)."""
    bandwidth = results["loopback_bytes_per_s"]
    counts = [results["counts"][n] for n in sorted(results["counts"], key=int)]
    names = results["configurations"]
    ratios = [f"{a}/{b}" for a, b in ratio_pairs(names)]

    def ms(cell):
        return f"{cell['median']:.2f} ({cell['min']:.2f}-{cell['max']:.2f})" if cell else "-"

    def median(cell, fmt):
        return format(cell["median"], fmt) if cell else "-"

    head = ["processes"] + [f"{n} ms/step" for n in names] + [f"{r} (paired)" for r in ratios]
    head += [f"{n} all-reduce ms" for n in (JDIST, TF) if n in names] + ["ring model ms", "all-reduce / jdist step"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, c in zip(sorted(results["counts"], key=int), counts):
        row = [n] + [ms(c["ms_per_step"].get(name)) for name in names]
        row += [median(c["ratio"].get(r), ".2f") for r in ratios]
        row += [ms(c["allreduce_ms"].get(name)) for name in (JDIST, TF) if name in names]
        row += [f"{ring_seconds(int(n), nbytes, bandwidth) * 1e3:.2f}",
                median(c["allreduce_fraction"].get(JDIST), ".0%")]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    head = ["processes"] + [f"{n} CPU ms/step" for n in names] + [f"{n} waits/step" for n in names]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, c in zip(sorted(results["counts"], key=int), counts):
        row = [n] + [median(c["cpu_ms_per_step"].get(name), ".1f") for name in names]
        row += [median(c["waits_per_step"].get(name), ".0f") for name in names]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2,4", help="comma list of worker process counts")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="training steps per window")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--allreduce-reps", type=int, default=20, help="all-reduces per window")
    parser.add_argument("--batch", type=int, default=256, help="global batch")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--tf-python", default=None, help="a Python with tensorflow (default: $JDIST_TF_PYTHON, "
                                                          "else /work/tfvenv/bin/python when it exists)")
    parser.add_argument("--no-tf", action="store_true", help="jdist only")
    parser.add_argument("--devices-per-worker", type=int, default=1,
                        help="simulated CPU devices per jdist worker (TF's workers have one: above 1, add --no-tf)")
    parser.add_argument("--before", default=None, metavar="DIR",
                        help="also jdist from the checkout in DIR (its jdist package), interleaved")
    parser.add_argument("--start-timeout", type=float, default=600)
    parser.add_argument("--out", default="runs/benchmark_multiworker")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                        help="also jdist from the checkout in DIR under NAME (repeatable)")
    parser.add_argument("--role", choices=["main", JDIST, TF], default="main", help=argparse.SUPPRESS)
    parser.add_argument("--name", default=JDIST, help=argparse.SUPPRESS)
    parser.add_argument("--control", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == TF:
        return tf_worker(args)
    if args.role == JDIST:
        return jdist_worker(args)
    args.variants = {BEFORE: args.before} if args.before else {}
    for item in args.variant:
        name, _, path = item.partition("=")
        if not name or not path or name in (JDIST, TF) or name in args.variants:
            parser.error(f"--variant {item!r}: give NAME=DIR with a new name (not {JDIST!r} or {TF!r})")
        args.variants[name] = path
    if args.devices_per_worker != 1 and not args.no_tf:
        parser.error("TF's MultiWorkerMirroredStrategy uses one CPU device per worker: with --devices-per-worker "
                     f"{args.devices_per_worker} add --no-tf")
    resolve_tf_python(parser, args)
    counts = [int(c) for c in args.processes.split(",") if c]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    nbytes = 4 * gradient_elements(args.hidden)
    load_before = os.getloadavg()
    results: dict = {"configurations": [JDIST] + list(args.variants) + ([TF] if args.tf_python else []),
                     "devices_per_worker": args.devices_per_worker, "batch": args.batch, "hidden": args.hidden,
                     "steps": args.steps, "rounds": args.rounds, "gradient_bytes": nbytes, "cores": os.cpu_count(),
                     "counts": {}, "load_average_before": load_before}
    bandwidths, memcpy = [], []
    with tempfile.TemporaryDirectory(prefix="bench-mw-") as logdir, socket.create_server(("127.0.0.1", 0)) as server:
        for n in counts:
            bandwidths.append(loopback_bandwidth())
            memcpy.append(memcpy_bandwidth())
            results["counts"][str(n)] = measure_count(args, n, server, Path(logdir))
            print(f"[{n} process(es) done, load average {os.getloadavg()[0]:.2f}]", flush=True)
    results["loopback_bytes_per_s"] = statistics.median(bandwidths)
    results["memcpy_bytes_per_s"] = statistics.median(memcpy)
    results["load_average_after"] = os.getloadavg()
    (out / "result.json").write_text(json.dumps(results, indent=1))
    png = plot(results, nbytes, out)
    print(f"MLP 784-{args.hidden}-{args.hidden}-10, Adam, global batch {args.batch}; worker processes with "
          f"{args.devices_per_worker} CPU device(s) each on {os.cpu_count()} cores; {args.rounds} interleaved rounds "
          f"of {args.steps} steps (ms/step: median (min-max) over rounds); all-reduce of {nbytes / 1e6:.2f} MB "
          "float32")
    print("\n".join(table(results, nbytes)))
    print(f"loopback TCP {results['loopback_bytes_per_s'] / 1e9:.2f} GB/s (ring model's bandwidth), memcpy "
          f"{results['memcpy_bytes_per_s'] / 1e9:.2f} GB/s")
    print(f"load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; after: "
          f"{', '.join(f'{v:.2f}' for v in results['load_average_after'])}")
    print(f"wrote {out / 'result.json'}" + (f" and {png}" if png else ""))


if __name__ == "__main__":
    main()
