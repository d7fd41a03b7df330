"""`tf.train.ClusterSpec`, `tf.distribute.Server`, `tf.compat.v1.ConfigProto` and tf_keras's legacy names under
`jdist.tf_compat`, as TF's parameter-server tutorial uses them."""
from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

SPARSE = {"worker": ["a:1", "b:2"], "ps": {0: "p:1", 3: "p:4"}}


def test_cluster_spec_follows_tf():
    # Observed with TF 2.21: tf.train.ClusterSpec(SPARSE) and the calls below.
    c = tf.train.ClusterSpec(SPARSE)
    assert c.as_dict() == {"worker": ["a:1", "b:2"], "ps": {0: "p:1", 3: "p:4"}}
    assert c.jobs == ["worker", "ps"]
    assert (c.num_tasks("ps"), c.num_tasks("worker")) == (2, 2)
    assert c.task_indices("ps") == [0, 3]
    assert c.task_address("ps", 3) == "p:4"
    assert c.job_tasks("ps") == ["p:1", None, None, "p:4"]
    assert repr(c) == "ClusterSpec({'ps': {0: 'p:1', 3: 'p:4'}, 'worker': ['a:1', 'b:2']})"
    assert c == tf.train.ClusterSpec(c) and c == tf.train.ClusterSpec(SPARSE)
    assert not tf.train.ClusterSpec({})
    assert tf.train.ClusterSpec({"worker": {0: "a:1", 1: "b:1"}}).as_dict() == {"worker": ["a:1", "b:1"]}


@pytest.mark.parametrize("call, error, message", [
    (lambda c: c.task_address("ps", 1), ValueError, "No task with index 1 in job 'ps'"),
    (lambda c: c.num_tasks("x"), ValueError, "No such job in cluster: 'x'"),
    (lambda c: c.task_address("worker", 5), ValueError, "No task with index 5 in job 'worker'"),
    (lambda c: tf.train.ClusterSpec({"w": "a:1"}), TypeError,
     "The tasks for job 'w' must be a list or a dictionary from integers to strings"),
    (lambda c: tf.train.ClusterSpec(["a"]), TypeError, "`cluster` must be a dictionary mapping one or more job"),
])
def test_cluster_spec_errors_are_tfs(call, error, message):
    # TF 2.21's exception types and the start of its messages (observed); jdist's name the fix too.
    with pytest.raises(error, match=message):
        call(tf.train.ClusterSpec(SPARSE))


def test_sparse_training_jobs_are_refused_where_processes_need_their_tasks():
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": {0: "a:1", 2: "c:1"}}), task_type="worker", task_id=0)
    with pytest.raises(ValueError, match=r"every index 0\.\.1 must be present"):
        _ = resolver.process_id


def test_server_records_its_task_and_config():
    cluster = tf.train.ClusterSpec({"worker": ["localhost:45671"], "ps": ["localhost:45672"]})
    config = tf.compat.v1.ConfigProto()
    config.inter_op_parallelism_threads = 4
    server = tf.distribute.Server(cluster, job_name="worker", task_index=0, config=config, protocol="grpc")
    assert server.target == "grpc://localhost:45671"  # TF 2.21 printed this for the same call (observed)
    assert server.config.inter_op_parallelism_threads == 4
    assert tf.distribute.Server(tf.train.ClusterSpec({"ps": ["h:1"]})).target == "grpc://h:1"
    with pytest.raises(RuntimeError, match="ClusterCoordinator start"):
        server.join()
    with pytest.raises(ValueError, match="job_name must be given"):
        tf.distribute.Server(cluster)
    with pytest.raises(AttributeError, match="TF1 graphs"):
        _ = tf.compat.v1.Session


def test_legacy_optimizers_are_keras3s_classes_with_tf_kerass_defaults():
    import keras

    sgd, rms = tf.keras.optimizers.legacy.SGD(), tf.keras.optimizers.legacy.RMSprop(learning_rate=0.1)
    assert isinstance(sgd, keras.optimizers.SGD) and isinstance(rms, keras.optimizers.RMSprop)  # RMSprop: a subclass
    assert float(sgd.learning_rate) == pytest.approx(0.01)
    assert (rms.rho, rms.epsilon, rms.centered) == (0.9, 1e-7, False)
    with pytest.raises(ValueError, match="InverseTimeDecay"):
        tf.keras.optimizers.legacy.SGD(decay=0.1)


def test_metric_reset_states_and_extensionless_model_checkpoint(tmp_path):
    accuracy = tf.keras.metrics.Accuracy()
    accuracy.update_state([1, 0], [1, 1])
    assert float(accuracy.result()) == 0.5
    accuracy.reset_states()
    assert float(accuracy.result()) == 0.0
    checkpoint = tf.keras.callbacks.ModelCheckpoint(filepath=str(tmp_path / "ckpt"))
    model = tf.keras.Sequential([tf.keras.layers.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), epochs=1, verbose=0, callbacks=[checkpoint])
    assert (tmp_path / "ckpt" / "model.keras").is_file()
