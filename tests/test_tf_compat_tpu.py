"""jdist.tf_compat's TPU setup names and `tf.device`, against TF 2.21 (tensorflow-cpu 2.21.0) observed on this
CPU-only machine, e.g. `/work/tfvenv/bin/python -c "import tensorflow as tf;
r = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='local'); print(r.num_accelerators())"`."""
import os
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402

# TF 2.21 without TPUs: TPUClusterResolver(tpu='local') constructs; its master() '', cluster_spec() ClusterSpec({}),
# num_accelerators() {'TPU': 0}, task_type 'worker', task_id 0, environment '', get_job_name() 'worker';
# experimental_connect_to_cluster(it) returns None.
TF_LOCAL_RESOLVER = {"master": "", "num_accelerators": {"TPU": 0}, "task_type": "worker", "task_id": 0,
                     "environment": "", "job_name": "worker"}
# ... TPUClusterResolver() and (tpu='') raise ValueError with this text; initialize_tpu_system(local resolver)
# raises tf.errors.NotFoundError whose message starts with the second.
TF_NO_NAME = "Please provide a TPU Name to connect to."
TF_NOT_FOUND = "TPUs not found in the cluster."


def test_local_tpu_resolver_on_a_machine_without_tpus_is_tfs():
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    assert resolver.master() == TF_LOCAL_RESOLVER["master"] and resolver.get_master() == ""
    assert resolver.cluster_spec().as_dict() == {}
    assert resolver.num_accelerators() == TF_LOCAL_RESOLVER["num_accelerators"]
    assert (resolver.task_type, resolver.task_id) == (TF_LOCAL_RESOLVER["task_type"], TF_LOCAL_RESOLVER["task_id"])
    assert resolver.environment == TF_LOCAL_RESOLVER["environment"]
    assert resolver.get_job_name() == TF_LOCAL_RESOLVER["job_name"]
    assert tf.config.experimental_connect_to_cluster(resolver) is None
    with pytest.raises(tf.errors.NotFoundError, match=rf"^{TF_NOT_FOUND}.*TPUStrategy\(devices=jax.devices"):
        tf.tpu.experimental.initialize_tpu_system(resolver)
    with pytest.raises(tf.errors.NotFoundError, match=TF_NOT_FOUND):
        tf.distribute.cluster_resolver.TPUClusterResolver.connect(tpu="local")
    with pytest.raises(jdist.tpu.TPUNotFoundError, match=r"TPUStrategy\(devices=jax.devices"):
        tf.distribute.TPUStrategy(resolver)  # TF 2.21: IndexError "index 0 is out of bounds" here


@pytest.mark.parametrize("kwargs", [{}, {"tpu": ""}], ids=["none", "empty"])
def test_unnamed_tpu_without_tpus_raises_tfs_error_and_the_way_to_cpu(kwargs):
    with pytest.raises(ValueError, match=rf"^{TF_NO_NAME}.*TPUStrategy\(devices=jax.devices\(\"cpu\"\)\)"):
        tf.distribute.cluster_resolver.TPUClusterResolver(**kwargs)


def test_remote_tpus_and_other_clusters_are_refused_naming_the_alternative():
    """TF constructs a resolver for `grpc://...` and talks to it; JAX runs on the TPU hosts, so jdist refuses."""
    with pytest.raises(ValueError, match=r"cannot connect to a remote TPU.*tpu='local'"):
        tf.distribute.cluster_resolver.TPUClusterResolver(tpu="grpc://10.0.0.1:8470")
    other = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec({"worker": ["a:1"]}))
    with pytest.raises(NotImplementedError, match="jax.distributed.initialize"):
        tf.config.experimental_connect_to_cluster(other)
    with pytest.raises(AttributeError, match=r"tf.tpu.experimental.embedding.*keras.layers.Embedding"):
        tf.tpu.experimental.embedding.TableConfig  # noqa: B018
    with pytest.raises(AttributeError, match=r"tf.compat.v1.estimator.*TensorFlow 2.21 has no tf.estimator"):
        tf.compat.v1.estimator.Estimator  # noqa: B018


def test_tpu_strategy_on_cpu_devices_equals_mirrored():
    """What the TPU documents' strategy does here: `TPUStrategy(devices=...)` on the 8 CPU devices runs the
    guide's `matmul_fn` per replica as MirroredStrategy does (the replicas' values are the single product)."""
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    strategy = tf.distribute.TPUStrategy(devices=jax.devices("cpu"))
    assert strategy.num_replicas_in_sync == 8

    @tf.function
    def matmul_fn(x, y):
        return tf.matmul(x, y)

    z = strategy.run(matmul_fn, args=(a, b))
    for value in strategy.experimental_local_results(z):  # TF 2.21's MirroredStrategy on 8 logical CPUs: the same
        np.testing.assert_array_equal(value, [[22.0, 28.0], [49.0, 64.0]])


# TF 2.21, eager on one CPU: every one of these names places on CPU:0 (soft placement for the missing /GPU:0,
# /TPU:0 and /CPU:1); 'foo' raises ValueError "Unknown attribute 'foo' is encountered while parsing the device
# spec: 'foo'."; tf.device(a function) raises RuntimeError "tf.device does not support functions.".
TF_ACCEPTED = ["/CPU:0", "cpu:0", "/device:CPU:0", "", None, "/job:localhost/replica:0/task:0/device:CPU:0", "CPU",
               "/cpu:0", "/CPU"]


@pytest.mark.parametrize("name", TF_ACCEPTED)
def test_device_names_tf_accepts(name):
    with tf.device(name):
        x = jnp.ones(2)
    assert x.devices() == {jax.devices()[0]}


def test_device_places_arrays_on_the_named_device_and_soft_places_missing_ones():
    for name, index in [("/CPU:3", 3), ("/job:localhost/replica:0/task:0/device:CPU:5", 5), ("cpu:1", 1)]:
        with tf.device(name):
            x = jnp.arange(3.0) * 2
        assert x.devices() == {jax.devices("cpu")[index]}
        np.testing.assert_array_equal(x, [0.0, 2.0, 4.0])
    assert jnp.ones(1).devices() == {jax.devices()[0]}  # the block's device ends with it
    for missing in ("/GPU:0", "/TPU:0", "/CPU:99"):
        with pytest.warns(UserWarning, match="soft placement"), tf.device(missing):
            x = jnp.ones(2)
        assert x.devices() == {jax.devices()[0]}


def test_device_refuses_what_tf_refuses():
    with pytest.raises(ValueError, match=r"^Unknown attribute 'foo' is encountered while parsing the device spec: "
                                         r"'foo'\.$"):
        with tf.device("foo"):
            pass
    with pytest.raises(RuntimeError, match=r"^tf.device does not support functions\.$"):
        with tf.device(lambda op: "/cpu:0"):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tf.device("/CPU:0"):  # an existing device: no warning
            pass


def test_compat_v1_imports_as_tf_scripts_import_it():
    """TF's migration guides start with `import tensorflow.compat.v1 as tf1`; the port's line finds tf.compat.v1,
    whose estimator raises the way forward (the guides' TF1 cells)."""
    import jdist.tf_compat.compat.v1 as tf1

    assert tf1 is tf.compat.v1 and tf1.ConfigProto is tf.compat.v1.ConfigProto
    with pytest.raises(AttributeError, match=r"tf.compat.v1.estimator.*jdist.Trainer"):
        tf1.estimator.Estimator  # noqa: B018
    with pytest.raises(AttributeError, match=r"tf.compat.v1.layers.*TF1 graphs"):
        tf1.layers  # noqa: B018
