"""Cluster resolvers, communication options and the pre-connection checks: pure Python, no processes."""
import json
import re
import socket
import sys
import threading
import time

import pytest

import jdist
from jdist.cluster import (
    ClusterSpec,
    SimpleClusterResolver,
    SlurmClusterResolver,
    TFConfigClusterResolver,
    expand_hostlist,
    expand_tasks_per_node,
    resolve_cluster,
    runtime,
    runtime_settings,
)

CHIEF_CLUSTER = {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]}
WORKER_CLUSTER = {"worker": ["host0:2222", "host1:2222", "host2:2222"]}


def set_tf_config(monkeypatch, cluster, task=None, **extra):
    config = {"cluster": cluster, **extra}
    if task is not None:
        config["task"] = {"type": task[0], "index": task[1]}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("TF_CONFIG", "SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NTASKS",
                 "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                 runtime.FAILURE_TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------ TF_CONFIG: TF's cases
@pytest.mark.parametrize("task, process_id, is_chief", [
    (("chief", 0), 0, True),
    (("worker", 0), 1, False),
    (("worker", 1), 2, False),
])
def test_with_chief_ids_offset_by_chief_count(monkeypatch, task, process_id, is_chief):
    set_tf_config(monkeypatch, CHIEF_CLUSTER, task)
    r = TFConfigClusterResolver()
    assert (r.task_type, r.task_id) == task
    assert r.process_id == process_id
    assert r.num_workers == 3
    assert r.is_chief is is_chief
    assert r.coordinator_address == "host0:2222"  # chief:0 hosts the coordinator


@pytest.mark.parametrize("index, is_chief", [(0, True), (1, False), (2, False)])
def test_without_chief_worker_zero_is_chief(monkeypatch, index, is_chief):
    set_tf_config(monkeypatch, WORKER_CLUSTER, ("worker", index))
    r = TFConfigClusterResolver()
    assert r.process_id == index
    assert r.num_workers == 3
    assert r.is_chief is is_chief
    assert r.coordinator_address == "host0:2222"
    assert r.task_name(0) == "worker:0"


def test_ps_and_evaluator_are_not_training_processes(monkeypatch):
    cluster = {**CHIEF_CLUSTER, "ps": ["host3:2222"], "evaluator": ["host4:2222"]}
    set_tf_config(monkeypatch, cluster, ("worker", 1))
    r = TFConfigClusterResolver()
    assert r.num_workers == 3 and r.process_id == 2
    set_tf_config(monkeypatch, cluster, ("evaluator", 0))
    assert r.is_chief and r.num_workers == 1 and r.process_id == 0  # an evaluator is its own chief (TF)
    assert r.coordinator_address is None
    set_tf_config(monkeypatch, cluster, ("ps", 0))
    with pytest.raises(ValueError, match="There is no id for task_type 'ps'"):
        r.process_id


def test_evaluator_may_be_missing_from_cluster(monkeypatch):
    set_tf_config(monkeypatch, CHIEF_CLUSTER, ("evaluator", 0))
    r = TFConfigClusterResolver()
    assert r.is_chief and r.num_workers == 1


def test_no_tf_config_is_a_single_worker(monkeypatch):
    for value in (None, "", "  "):
        if value is None:
            monkeypatch.delenv("TF_CONFIG", raising=False)
        else:
            monkeypatch.setenv("TF_CONFIG", value)
        r = TFConfigClusterResolver()
        assert r.cluster_spec().as_dict() == {}
        assert (r.task_type, r.task_id) == (None, None)
        assert (r.num_workers, r.process_id, r.is_chief, r.coordinator_address) == (1, 0, True, None)
        assert r.master() == ""


def test_tf_config_is_read_at_access_time(monkeypatch):
    r = TFConfigClusterResolver()
    assert r.num_workers == 1
    set_tf_config(monkeypatch, WORKER_CLUSTER, ("worker", 2))
    assert (r.num_workers, r.process_id, r.is_chief) == (3, 2, False)


def test_constructor_overrides_task(monkeypatch):
    set_tf_config(monkeypatch, WORKER_CLUSTER, ("worker", 0))
    r = TFConfigClusterResolver(task_type="worker", task_id=1)
    assert (r.task_type, r.task_id, r.process_id, r.is_chief) == ("worker", 1, 1, False)


def test_string_index_and_sparse_cluster_are_accepted(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": {"1": "host1:2222", "0": "host0:2222"}},
        "task": {"type": "worker", "index": "1"},
    }))
    r = TFConfigClusterResolver()
    assert r.cluster_spec().job_tasks("worker") == ["host0:2222", "host1:2222"]
    assert (r.task_id, r.process_id) == (1, 1)


def test_master_follows_tf(monkeypatch):
    set_tf_config(monkeypatch, WORKER_CLUSTER, ("worker", 1), rpc_layer="grpc")
    r = TFConfigClusterResolver()
    assert r.master() == "grpc://host1:2222"
    assert r.master("worker", 2, rpc_layer="") == "host2:2222"
    set_tf_config(monkeypatch, {"worker": ["host0:2222"]}, ("worker", 0))
    assert r.master() == ""  # a one-task cluster has no master
    set_tf_config(monkeypatch, WORKER_CLUSTER, ("worker", 1), session_master="grpc://elsewhere:1")
    assert r.master() == "grpc://elsewhere:1"


def test_one_worker_cluster_needs_no_coordinator(monkeypatch):
    set_tf_config(monkeypatch, {"worker": ["localhost:1"]}, ("worker", 0))
    r = TFConfigClusterResolver()
    assert (r.num_workers, r.coordinator_address, r.is_chief) == (1, None, True)


# ---------------------------------------------------------------- bad configs
@pytest.mark.parametrize("cluster, task, message", [
    ({"chief": ["h0:1", "h1:1"], "worker": ["h2:1"]}, ("worker", 0),
     r"There must be at most one 'chief' job\. Got 2 chief tasks: \['h0:1', 'h1:1'\]"),
    (WORKER_CLUSTER, ("worker", 3),
     r"The `task_id` 3 exceeds the maximum id of worker\. .*3 task\(s\), so valid indices are 0\.\.2"),
    ({"worker": ["h0:1"], "master": ["h1:1"]}, ("worker", 0),
     r"Disallowed task type found in cluster spec\. .*Unknown job name\(s\): \['master'\]"),
    (WORKER_CLUSTER, ("master", 0), r"Unrecognized task_type: 'master', valid task types are"),
    (WORKER_CLUSTER, ("chief", 0), r"`task_type` 'chief' not found in cluster_spec\."),
    ({**CHIEF_CLUSTER, "evaluator": ["h8:1", "h9:1"]}, ("worker", 0), r"at most one 'evaluator' job"),
    (WORKER_CLUSTER, ("worker", -1), r"non-negative integer, got -1"),
    ({"worker": ["host0", "host1:2222"]}, ("worker", 1), r"'host0' \(worker:0\) is not 'host:port'"),
    ({"worker": ["host0:99999", "host1:2222"]}, ("worker", 1), r"'host0:99999' \(worker:0\) is not 'host:port'"),
    ({"worker": "host0:2222"}, ("worker", 0), r"must list its task addresses.*\['host0:2222'\]"),
    ({"worker": {"0": "h0:1", "2": "h2:1"}}, ("worker", 0), r"every index 0\.\.1 must be present"),
])
def test_bad_configs_name_the_offending_value(monkeypatch, cluster, task, message):
    set_tf_config(monkeypatch, cluster, task)
    with pytest.raises(ValueError, match=message):
        TFConfigClusterResolver().process_id


def test_malformed_json_shows_the_text(monkeypatch):
    text = '{"cluster": {"worker": ["h0:1", "h1:1"]}, "task": {"type": "worker", "index": 1'
    monkeypatch.setenv("TF_CONFIG", text)
    with pytest.raises(ValueError, match=r"TF_CONFIG is not valid JSON \(.* line 1, column \d+\): ") as info:
        TFConfigClusterResolver().num_workers
    assert repr(text) in str(info.value)


def test_non_object_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '["worker", 0]')
    with pytest.raises(ValueError, match=r"must be a JSON object .* got list"):
        TFConfigClusterResolver().task_type


def test_missing_task_is_an_error(monkeypatch):
    set_tf_config(monkeypatch, WORKER_CLUSTER)
    with pytest.raises(ValueError, match=r"names no task for this process.*\"task\""):
        TFConfigClusterResolver().process_id


def test_non_integer_index(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": WORKER_CLUSTER, "task": {"type": "worker", "index": "one"}}))
    with pytest.raises(ValueError, match=r"task index must be an integer, got 'one'"):
        TFConfigClusterResolver().task_id


def test_task_without_cluster(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"task": {"type": "worker", "index": 1}}))
    with pytest.raises(ValueError, match=r"worker:1 but the cluster spec is empty"):
        TFConfigClusterResolver().num_workers


# ------------------------------------------------------------ SimpleClusterResolver
def test_simple_resolver_is_explicit_and_validated():
    r = SimpleClusterResolver(ClusterSpec(CHIEF_CLUSTER), task_type="worker", task_id=1, rpc_layer="grpc")
    assert (r.process_id, r.num_workers, r.is_chief, r.coordinator_address) == (2, 3, False, "host0:2222")
    assert r.master() == "grpc://host2:2222"
    with pytest.raises(ValueError, match="exceeds the maximum id of worker"):
        SimpleClusterResolver(CHIEF_CLUSTER, task_type="worker", task_id=2).process_id
    assert SimpleClusterResolver({}).num_workers == 1


# ---------------------------------------------------------------------- SLURM
def test_expand_hostlist_keeps_zero_padding_and_order():
    assert expand_hostlist("node[01-03,07]") == ["node01", "node02", "node03", "node07"]
    assert expand_hostlist("n[1-2],m5,o[3-4,6,7-9]") == ["n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"]
    assert expand_hostlist("r[1-2]n[08-09]") == ["r1n08", "r1n09", "r2n08", "r2n09"]
    assert expand_hostlist("single") == ["single"]


@pytest.mark.parametrize("bad", ["n[1-", "n[3-1]", "n[a-b]", "a,,b", "n]1["])
def test_bad_hostlist(bad):
    with pytest.raises(ValueError, match=r'Invalid hostlist format "' + re.escape(bad) + '"'):
        expand_hostlist(bad)


def test_expand_tasks_per_node():
    assert expand_tasks_per_node("3(x2),2,1") == [3, 3, 2, 1]
    with pytest.raises(ValueError, match="Invalid tasks-per-node"):
        expand_tasks_per_node("2(x)")


SLURM_ENV = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "node[01-02]",
             "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}


def test_slurm_resolver_lays_tasks_out_per_node():
    r = SlurmClusterResolver(environ=SLURM_ENV)
    assert r.cluster_spec().as_dict() == {
        "worker": ["node01:8888", "node01:8889", "node02:8888", "node02:8889"]}
    assert (r.task_type, r.task_id, r.process_id, r.num_workers) == ("worker", 3, 3, 4)
    assert (r.is_chief, r.coordinator_address) == (False, "node01:8888")
    assert r.local_device_ids is None


def test_slurm_resolver_jobs_ports_and_gpus():
    env = {**SLURM_ENV, "SLURM_PROCID": "0"}
    r = SlurmClusterResolver(jobs={"chief": 1, "worker": 3}, port_base=1234, environ=env)
    assert (r.task_type, r.task_id, r.is_chief, r.coordinator_address) == ("chief", 0, True, "node01:1234")
    r = SlurmClusterResolver(gpus_per_node=4, gpus_per_task=2, environ=SLURM_ENV)
    assert r.local_device_ids == [2, 3]  # second task on its node
    with pytest.raises(RuntimeError, match="more GPUs per node then available"):
        SlurmClusterResolver(gpus_per_node=2, gpus_per_task=2, environ=SLURM_ENV)


def test_slurm_resolver_falls_back_to_job_variables():
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "a,b"}
    r = SlurmClusterResolver(environ=env)
    assert r.cluster_spec().job_tasks("worker") == ["a:8888", "b:8888"]
    assert r.process_id == 1


def test_slurm_resolver_errors():
    with pytest.raises(RuntimeError, match="SLURM_PROCID not found in environment. Not running inside a SLURM step"):
        SlurmClusterResolver(environ={})
    with pytest.raises(RuntimeError, match="Requested 3 tasks but only 4 were assigned"):
        SlurmClusterResolver(jobs={"worker": 3}, environ=SLURM_ENV)
    with pytest.raises(RuntimeError, match="SLURM_PROCID=7 is outside the step's 4 tasks"):
        SlurmClusterResolver(environ={**SLURM_ENV, "SLURM_PROCID": "7"})


# ------------------------------------------------------------------ detection
def test_detection_order(monkeypatch):
    assert resolve_cluster().num_workers == 1
    for key, value in SLURM_ENV.items():
        monkeypatch.setenv(key, value)
    assert isinstance(resolve_cluster(), SlurmClusterResolver)
    set_tf_config(monkeypatch, WORKER_CLUSTER, ("worker", 1))
    r = resolve_cluster()
    assert isinstance(r, TFConfigClusterResolver) and r.process_id == 1


# ------------------------------------------------------------------ checks before connecting
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_coordinator_is_named_within_the_timeout():
    port = _closed_port()
    with pytest.raises(ConnectionError, match=rf"coordinator chief:0 at 127\.0\.0\.1:{port} after 1 s"):
        runtime.wait_for_coordinator(f"127.0.0.1:{port}", timeout=1.0, name="chief:0")


def test_initialize_checks_the_coordinator_before_touching_jax():
    import jax

    port = _closed_port()
    r = SimpleClusterResolver({"worker": [f"127.0.0.1:{port}", "127.0.0.1:1"]}, task_type="worker", task_id=1)
    with pytest.raises(ConnectionError, match=rf"worker:0 at 127\.0\.0\.1:{port}"):
        jdist.cluster.initialize(r, initialization_timeout=1)
    assert not jax.distributed.is_initialized()


def test_busy_coordinator_port_is_reported_on_the_chief():
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(OSError, match=rf"Port {port} of chief:0 .* already in use"):
            runtime.check_port_free(f"localhost:{port}", "chief:0")


# ------------------------------------------------------------------ CommunicationOptions
def test_communication_options_validation():
    with pytest.raises(ValueError, match="bytes_per_pack must be non-negative"):
        jdist.CommunicationOptions(bytes_per_pack=-1)
    assert jdist.CommunicationOptions(implementation="ring").implementation is jdist.CommunicationImplementation.RING
    assert jdist.CommunicationOptions(implementation="Nccl").implementation is jdist.CommunicationImplementation.NCCL
    with pytest.raises(ValueError, match=r"Unknown communication implementation 'gloo'"):
        jdist.CommunicationOptions(implementation="gloo")
    with pytest.raises(ValueError, match="implementation should be a jdist.CommunicationImplementation"):
        jdist.CommunicationOptions(implementation=3)
    with pytest.raises(ValueError, match="timeout_seconds must be positive"):
        jdist.CommunicationOptions(timeout_seconds=0)
    assert jdist.CollectiveCommunication is jdist.CommunicationImplementation


def test_communication_options_merge_prefers_non_defaults():
    base = jdist.CommunicationOptions(bytes_per_pack=10, timeout_seconds=5, implementation="ring")
    merged = base.merge(jdist.CommunicationOptions(timeout_seconds=9))
    assert (merged.bytes_per_pack, merged.timeout_seconds, merged.implementation.name) == (10, 9, "RING")
    assert base.timeout_seconds == 5


def test_timeout_maps_to_watchdog_and_jax_timeouts(monkeypatch):
    s = runtime_settings(jdist.CommunicationOptions(timeout_seconds=20))
    assert (s.failure_timeout, s.heartbeat_timeout_seconds, s.shutdown_timeout_seconds) == (20, 50, 100)
    assert runtime_settings(None).failure_timeout == 60
    monkeypatch.setenv(runtime.FAILURE_TIMEOUT_ENV, "7")
    assert runtime_settings(jdist.CommunicationOptions()).failure_timeout == 7
    assert runtime_settings(jdist.CommunicationOptions(timeout_seconds=3)).failure_timeout == 3
    monkeypatch.setenv(runtime.FAILURE_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match="JDIST_FAILURE_TIMEOUT='soon' is not a number"):
        runtime_settings(None)


# ------------------------------------------------------------------ watchdog
class FakeKeyValueClient:
    """The coordination service's key-value store, shared by the fake processes of one test."""

    def __init__(self, store):
        self.store = store

    def key_value_set(self, key, value, allow_overwrite=False):
        self.store[key] = value

    def key_value_dir_get(self, prefix):
        return [(k, v) for k, v in list(self.store.items()) if k.startswith(prefix)]


def _watchdog(store, pid, timeout=0.5):
    from jdist.cluster.watchdog import Watchdog

    exits = []
    dog = Watchdog(FakeKeyValueClient(store), pid, ["chief:0", "worker:0"], timeout, interval=0.05,
                   exit_fn=exits.append)
    return dog, exits


def _wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.02)
    return predicate()


def test_watchdog_names_a_peer_that_stops_responding(capfd):
    from jdist.cluster.watchdog import EXIT_PEER_FAILED

    store = {}
    survivor, exits = _watchdog(store, 0)
    thread = threading.Thread(target=survivor._loop, daemon=True)
    thread.start()
    store["jdist/watchdog/alive/1"] = "1"  # the peer posts once, then dies
    assert _wait_for(lambda: exits == [EXIT_PEER_FAILED]), exits
    survivor.stop()
    assert "worker:0 (process 1) stopped responding" in capfd.readouterr().err


def test_watchdog_tolerates_a_peer_that_exited_normally(capfd):
    store = {"jdist/watchdog/exited/1": "1"}
    survivor, exits = _watchdog(store, 0, timeout=0.2)
    thread = threading.Thread(target=survivor._loop, daemon=True)
    thread.start()
    time.sleep(0.6)
    survivor.stop()
    thread.join(1)
    assert exits == []  # a finished peer is not a dead one (the chief may still be writing files)
    err = capfd.readouterr().err
    assert err.count("worker:0 (process 1) ended its program") == 1  # but it is mentioned, once


def test_uncaught_exception_is_published_and_stops_peers(capfd, monkeypatch):
    from jdist.cluster.watchdog import EXIT_FAILED, EXIT_PEER_FAILED

    store = {}
    failing, failing_exits = _watchdog(store, 1)
    peer, peer_exits = _watchdog(store, 0)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    failing.start()
    peer_thread = threading.Thread(target=peer._loop, daemon=True)
    peer_thread.start()
    try:
        raise KeyError("bad batch")
    except KeyError:
        sys.excepthook(*sys.exc_info())
    assert failing_exits == [EXIT_FAILED]
    assert store["jdist/watchdog/failed/1"] == "KeyError: 'bad batch'"
    assert _wait_for(lambda: peer_exits == [EXIT_PEER_FAILED]), peer_exits
    peer.stop()
    err = capfd.readouterr().err
    assert "worker:0 (process 1) failed (KeyError); the other workers were told to stop." in err
    assert "worker:0 (process 1) failed: KeyError: 'bad batch'. Stopping chief:0 (process 0)" in err


def test_broken_collective_is_blamed_on_the_dead_peer(capfd, monkeypatch):
    """A survivor's collective may raise when the peer's socket closes: the peer is named, not the survivor."""
    from jdist.cluster.watchdog import EXIT_PEER_FAILED, is_transport_error

    JaxRuntimeError = type("JaxRuntimeError", (RuntimeError,), {})
    error = JaxRuntimeError("UNKNOWN: Gloo all-reduce failed: Read error [127.0.0.1]:1: Connection reset by peer")
    assert is_transport_error(error) and not is_transport_error(RuntimeError(str(error)))
    store = {"jdist/watchdog/alive/1": "1"}  # the peer posted once, then died
    survivor, exits = _watchdog(store, 0, timeout=0.3)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    survivor.start()
    sys.excepthook(JaxRuntimeError, error, None)
    survivor.stop()
    assert exits == [EXIT_PEER_FAILED]
    assert "jdist/watchdog/failed/0" not in store
    assert "worker:0 (process 1) stopped responding" in capfd.readouterr().err
