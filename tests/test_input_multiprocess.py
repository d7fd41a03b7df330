"""Input pipelines across 2 worker processes on localhost (JAX distributed runtime, gloo).

Each configuration starts two real processes (tests/input_multiprocess_worker.py) with
2 or 4 simulated CPU devices each, under `MultiWorkerMirroredStrategy`; they record what
their replicas received and this
file checks it: the disjoint shares the FILE and DATA policies promise, covering the
data exactly once per epoch, TF's own multi-worker expectations (input_lib_test,
2 workers x 2 replicas), and training equal to one device. Every wait is bounded.
"""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

# Worker processes that must meet in time (gloo collectives, signals, bounded waits): the README's command runs
# these in a second, serial pass, alone on the machine (pyproject.toml, marker `multiprocess`).
pytestmark = pytest.mark.multiprocess

WORKER = os.path.join(os.path.dirname(__file__), "input_multiprocess_worker.py")
TIMEOUT_S = 180
FILE_SIZES = [16, 4, 12, 8]  # example ids 0..39 split over part-0..part-3 (see the worker)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_workers(devices, out_dir):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env.pop("XLA_FLAGS", None)
    port = _free_port()
    logs = [open(os.path.join(out_dir, f"log_{i}.txt"), "w") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, WORKER, str(i), "2", str(port), str(devices), out_dir],
                              stdout=logs[i], stderr=subprocess.STDOUT, env=env) for i in range(2)]
    try:
        for proc in procs:
            proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=30)
    finally:
        for log in logs:
            log.close()
    results = []
    for i in range(2):
        path = os.path.join(out_dir, f"result_{i}.json")
        if not os.path.exists(path):
            with open(os.path.join(out_dir, f"log_{i}.txt")) as f:
                pytest.fail(f"worker {i} wrote no result (exit {procs[i].returncode}):\n{f.read()[-4000:]}")
        with open(path) as f:
            result = json.load(f)
        if "error" in result:
            pytest.fail(f"worker {i} failed:\n{result['error']}")
        results.append(result)
    return results


@pytest.fixture(scope="module")
def run2(tmp_path_factory):
    """2 workers x 2 devices: TF's own multi-worker test layout."""
    return 2, _run_workers(2, str(tmp_path_factory.mktemp("input_mp_2")))


@pytest.fixture(scope="module")
def run4(tmp_path_factory):
    """2 workers x 4 devices."""
    return 4, _run_workers(4, str(tmp_path_factory.mktemp("input_mp_4")))


@pytest.fixture(params=["run2", "run4"], ids=["2x2devices", "2x4devices"])
def run(request):
    return request.getfixturevalue(request.param)


def _chunks(rows, n):
    size = -(-len(rows) // n)
    return [rows[i * size:(i + 1) * size] for i in range(n)]


def _expected_data_split(batches, devices):
    """TF's multi-worker split: chunk k of each global batch goes to worker k % 2, local replica k // 2."""
    n = 2 * devices
    per_worker = [[], []]
    for batch in batches:
        chunks = _chunks(list(batch), n)
        for w in range(2):
            per_worker[w].append([chunks[w + 2 * j] for j in range(devices)])
    return per_worker


def _flat(steps):
    return [x for step in steps for replica in step["local"] for x in replica]


def test_data_policy_gives_each_worker_its_chunks(run):
    devices, results = run
    for name, n, batch in [("uneven", 15, 4), ("big", 45, 16)]:
        batches = [range(i, min(i + batch, n)) for i in range(0, n, batch)]
        expected = _expected_data_split(batches, devices)
        for w in range(2):
            assert [s["local"] for s in results[w]["data"][name]] == expected[w]
        # Disjoint, and together exactly the data of the epoch.
        assert sorted(_flat(results[0]["data"][name]) + _flat(results[1]["data"][name])) == list(range(n))
        assert [s["count"] for s in results[0]["data"][name]] == [len(b) for b in batches]


def test_tf_multi_worker_expectations(run2):
    _, results = run2
    # input_lib_test testUnevenDatasetBatchesMultiWorkerFourReplicas, dataset and input_fn variants.
    worker0 = [[[0], [2]], [[4], [6]], [[8], [10]], [[12], [14]]]
    worker1 = [[[1], [3]], [[5], [7]], [[9], [11]], [[13], []]]
    assert [s["local"] for s in results[0]["data"]["uneven"]] == worker0
    assert [s["local"] for s in results[1]["data"]["uneven"]] == worker1
    assert [s["local"] for s in results[0]["data"]["uneven_drop"]] == worker0[:3]
    assert [s["local"] for s in results[1]["data"]["uneven_drop"]] == worker1[:3]
    assert [s["local"] for s in results[0]["function"]["steps"]] == worker0
    assert [s["local"] for s in results[1]["function"]["steps"]] == worker1
    for w, expected in enumerate([worker0, worker1]):  # tf.data pipelines through jdist.data: the same
        assert [s["local"] for s in results[w]["data"]["tfdata"]] == expected
        assert [s["local"] for s in results[w]["function"]["tfdata"]] == expected


def test_seeded_tfdata_shuffle_splits_one_order_over_workers(run):
    _, results = run
    shuffled = [results[w]["data"]["tfdata_shuffled"] for w in range(2)]
    assert sorted(_flat(shuffled[0]) + _flat(shuffled[1])) == list(range(45))  # disjoint and complete
    assert _flat(shuffled[0]) + _flat(shuffled[1]) != list(range(45))


def test_file_policy_gives_each_worker_its_own_files(run):
    devices, results = run
    ids = np.split(np.arange(40), np.cumsum(FILE_SIZES)[:-1])
    for w in range(2):
        assert results[w]["files"]["mine"] == [f"part-{i}.npy" for i in range(w, 4, 2)]
        mine = sorted(x for i in range(w, 4, 2) for x in ids[i].tolist())
        assert sorted(_flat(results[w]["file"]["auto"])) == mine  # only its own files, each example once
    both = _flat(results[0]["file"]["auto"]) + _flat(results[1]["file"]["auto"])
    assert sorted(both) == list(range(40))
    # Worker 1 has 12 examples, worker 0 has 28: it runs out first and sends empty slots while
    # worker 0 still has data; both take the same number of steps and agree on the counts.
    counts = [[s["count"] for s in results[w]["file"]["auto"]] for w in range(2)]
    assert counts[0] == counts[1] == [8, 8, 6, 6, 4, 4, 2, 2]
    # AUTO says what it chose, once per distributed dataset.
    for w in range(2):
        log = results[w]["log"]
        assert len(log) == 10  # one line per distributed dataset the scenarios make
        assert sum("FILE (AUTO chose FILE: 4 files over 2 workers)" in line for line in log) == 3


def test_data_policy_on_files_covers_the_data_once(run):
    devices, results = run
    both = _flat(results[0]["file"]["data"]) + _flat(results[1]["file"]["data"])
    assert sorted(both) == list(range(40))
    assert [s["count"] for s in results[0]["file"]["data"]] == [8, 8, 8, 8, 8]


def test_too_few_files_for_file_policy_is_an_error_on_every_worker(run):
    _, results = run
    for w in range(2):
        assert "1 file(s) for 2 workers" in results[w]["file"]["too_few_files"]


def test_iterator_state_resumes_each_workers_stream(run):
    _, results = run
    for w in range(2):
        resume = results[w]["file"]["resume"]
        assert resume["resumed"] == resume["rest"] and resume["rest"]
        assert resume["first"] + resume["rest"] == [s["local"] for s in results[w]["file"]["auto"]]


def test_datasets_from_function_per_worker(run):
    devices, results = run
    n = 2 * devices
    for w in range(2):
        assert results[w]["function"]["contexts"] == [[2, w, n]]  # called once, with this worker's context
        stream = list(range(w, 15, 2))
        steps = [s["local"] for s in results[w]["function"]["steps"]]
        # Local replicas take consecutive per-replica batches of this worker's stream.
        expected = [[[x] for x in stream[i:i + devices]] for i in range(0, len(stream), devices)]
        expected = [e + [[]] * (devices - len(e)) for e in expected]
        expected += [[[]] * devices] * (len(steps) - len(expected))
        assert steps == expected
    assert len(results[0]["function"]["steps"]) == len(results[1]["function"]["steps"])


def test_training_matches_one_device(run):
    _, results = run
    for w in range(2):
        training = results[w]["training"]
        assert training["counts"] == [8, 8, 8, 8, 5]
        assert training["scale"] > 0.1  # it really trained
        assert training["max_abs_diff"] <= 1e-6  # float32: only the summation order differs
