"""jdist.tf_compat's ops, dtypes, config and errors, against values observed in TF 2.21 (tensorflow-cpu 2.21.0,
Keras 3.15.1), e.g. `/work/tfvenv/bin/python -c "import tensorflow as tf; print(tf.constant(1).dtype)"`."""
import os
import subprocess
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def test_dtypes_follow_tf():
    # Observed in TF 2.21: constant(1) int32, constant(1.0) float32, constant([1, 2]) int32, range(5) int32,
    # constant(np.float64(1.)) float64, constant(np.arange(3)) int64, constant(True) bool, range(1.0, 3.0) float32.
    assert tf.constant(1).dtype == tf.int32 and tf.constant(1.0).dtype == tf.float32
    assert tf.constant([1, 2]).dtype == tf.int32 and tf.range(5).dtype == tf.int32
    assert tf.constant(np.float64(1.0)).dtype == tf.float64 and tf.constant(np.arange(3)).dtype == tf.int64
    assert tf.constant(True).dtype == tf.bool and tf.range(1.0, 3.0).dtype == tf.float32
    np.testing.assert_array_equal(tf.range(0, 10, 3), [0, 3, 6, 9])
    assert tf.zeros(3).dtype == tf.float32 and tf.convert_to_tensor(1.0, dtype=tf.float16).dtype == tf.float16
    # DType objects: TF's repr / str / equality, and (beyond TF) usable as numpy and JAX dtypes.
    assert repr(tf.float32) == "tf.float32" and str(tf.float32) == "<dtype: 'float32'>"
    assert tf.float32 == np.float32 and tf.float32.as_numpy_dtype is np.float32 and tf.dtypes.int64 is tf.int64
    assert tf.as_dtype("float32") is tf.float32 and tf.as_dtype(np.int64) is tf.int64
    assert np.zeros(2, dtype=tf.float32).dtype == np.float32 and jnp.zeros(2, tf.bfloat16).dtype == jnp.bfloat16
    # TF 2.21: as_dtype("string") is tf.string; an unknown name is a TypeError ("Cannot convert the argument ...").
    assert tf.as_dtype("string") is tf.string and str(tf.string) == "<dtype: 'string'>"
    with pytest.raises(TypeError, match="Cannot convert"):
        tf.as_dtype("not_a_dtype")
    # TF 2.21: as_dtype(None) is a TypeError and no DType equals None (numpy alone reads None as float64).
    with pytest.raises(TypeError, match="Cannot convert"):
        tf.as_dtype(None)
    assert not tf.float64 == None and tf.float64 != None and not tf.float32 == object()  # noqa: E711
    # TF 2.21: an array gives its dtype (as_dtype(np.zeros(2, np.int8)) is int8), and equals no DType.
    assert tf.as_dtype(np.zeros(2, np.int8)) is tf.int8 and tf.as_dtype(jnp.zeros(2)) is tf.float32
    assert not tf.float32 == np.zeros(2)


def test_ops_give_tfs_values():
    # Observed in TF 2.21 (values and dtypes):
    np.testing.assert_array_equal(tf.cast(tf.constant([-1.7, 1.7, 2.5]), tf.int32), [-1, 1, 2])  # truncates
    np.testing.assert_array_equal(tf.cast(tf.constant([0.0, 2.0]), tf.bool), [False, True])
    assert int(tf.reduce_mean(tf.constant([1, 2]))) == 1 and tf.reduce_mean(tf.constant([1, 2])).dtype == tf.int32
    assert int(tf.reduce_mean(tf.constant([-7, 2]))) == -2  # divides, then truncates toward zero
    # the mean of no ints is 0, on the host and traced (TF 2.21: 0, [0 0 0]; a float mean of none is nan)
    assert int(tf.reduce_mean(tf.zeros([0], tf.int32))) == 0 and np.isnan(tf.reduce_mean(tf.zeros([0])).numpy())
    empty_mean = tf.function(lambda x: tf.reduce_mean(x, axis=0))
    np.testing.assert_array_equal(empty_mean(tf.zeros([0, 3], tf.int32)), [0, 0, 0])
    assert tf.reduce_sum([1, 2, 3]).dtype == tf.int32 and tf.reduce_sum([1.0, 2.0]).dtype == tf.float32
    assert tf.argmax(tf.constant([[1.0, 3.0], [4.0, 2.0]]), axis=1).dtype == tf.int64
    np.testing.assert_array_equal(tf.argmax(tf.constant([[1.0, 3.0], [4.0, 2.0]]), axis=1), [1, 0])
    np.testing.assert_array_equal(tf.equal(tf.constant([1, 2]), 1), [True, False])
    shape = tf.shape(tf.zeros((2, 3)))
    assert shape.dtype == tf.int32 and shape.numpy().tolist() == [2, 3]
    one_hot = tf.one_hot([0, 2], 3)
    assert one_hot.dtype == tf.float32 and one_hot.numpy().tolist() == [[1, 0, 0], [0, 0, 1]]
    coords = tf.where(tf.constant([True, False, True]))
    assert coords.dtype == tf.int64 and coords.numpy().tolist() == [[0], [2]]
    np.testing.assert_array_equal(tf.where(tf.constant([True, False]), 1.0, 2.0), [1.0, 2.0])
    quotient = tf.constant(3) / tf.constant(2)
    assert float(quotient) == 1.5 and quotient.dtype == tf.float64
    np.testing.assert_allclose(tf.nn.softmax(tf.constant([1.0, 2.0])), [0.26894143, 0.73105854], rtol=1e-6)
    np.testing.assert_allclose(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([1]), logits=tf.constant([[1.0, 2.0]])), [0.31326166], rtol=1e-6)
    np.testing.assert_allclose(tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.constant([[0.0, 1.0]]), logits=tf.constant([[1.0, 2.0]])), [0.31326166], rtol=1e-6)
    np.testing.assert_array_equal(tf.concat([[1, 2], [3]], axis=0), [1, 2, 3])
    assert tf.squeeze(tf.zeros((1, 2, 1))).shape == (2,) and tf.expand_dims(tf.zeros(2), -1).shape == (2, 1)
    assert tf.random.uniform((2,)).dtype == tf.float32 and tf.random.uniform((2,), maxval=10, dtype=tf.int32).dtype \
        == tf.int32
    assert tf.math.reduce_sum is tf.reduce_sum and tf.math.argmax is tf.argmax
    # TF 2.21: an integer draw takes int bounds only (tf.random.uniform([5], 0.5, 3, dtype=tf.int32) and 1.0 as
    # minval: TypeError "Cannot convert 0.5 to EagerTensor of dtype int32"; numpy alone truncates 0.5 to 0).
    for low, high in ((0.5, 3), (1.0, 3), (0, 2.5)):
        with pytest.raises(TypeError, match="must be ints"):
            tf.random.uniform((5,), low, high, dtype=tf.int32)
    assert set(tf.random.uniform((200,), np.int64(1), 3, dtype=tf.int32).numpy().tolist()) == {1, 2}
    # TF 2.21: labels and logits are both needed ("Both `labels` and `logits` must be provided ...").
    with pytest.raises(ValueError, match="needs both `labels` and `logits`"):
        tf.nn.sigmoid_cross_entropy_with_logits(logits=[1.0])


def test_ops_stay_numpy_on_the_host_and_jax_inside_compiled_code():
    host = [tf.reduce_sum(np.ones(3)), tf.cast(np.ones(2), tf.int32), tf.nn.relu(np.array([-1.0, 2.0])),
            tf.one_hot(np.array([1]), 2), tf.concat([np.ones(1), np.zeros(1)], 0)]
    assert all(isinstance(x, (np.ndarray, np.generic)) and not isinstance(x, jax.Array) for x in host)

    @jax.jit
    def step(x):
        y = tf.nn.relu(tf.cast(x, tf.float32)) + tf.reduce_sum(tf.one_hot(tf.argmax(x, axis=0), 3))
        assert isinstance(y, jax.core.Tracer)
        return tf.reshape(y, (tf.shape(x)[0], 1))

    np.testing.assert_array_equal(step(jnp.array([-1.0, 2.0, 0.5])), [[1.0], [3.0], [1.5]])


def test_print_writes_tfs_format_to_stderr(capsys):
    tf.print("loss", tf.constant([1.0, 2.0]), 3)
    assert capsys.readouterr().err == "loss [1 2] 3\n"  # TF 2.21's own float format (observed)
    jax.jit(lambda x: tf.print("in step", x))(jnp.arange(2))
    jax.effects_barrier()
    assert capsys.readouterr().err == "in step [0 1]\n"


def test_cross_device_ops_take_tfs_arguments():
    # Observed, TF 2.21: HierarchicalCopyAllReduce(num_packs=1), NcclAllReduce(num_packs=1),
    # ReductionToOneDevice(reduce_to_device=None, accumulation_fn=None).
    ops = tf.distribute.NcclAllReduce(num_packs=2)
    assert isinstance(ops, tf.distribute.CrossDeviceOps) and ops.num_packs == 2
    assert tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0").reduce_to_device == "/cpu:0"
    strategy = tf.distribute.MirroredStrategy(cross_device_ops=tf.distribute.HierarchicalCopyAllReduce())
    assert strategy.num_replicas_in_sync == 8


def test_unsupported_modules_name_the_alternative():
    # tf.saved_model saves Keras models (tests/test_saved_model.py); its TF-graph names are refused
    with pytest.raises(AttributeError, match=r"tf.saved_model.experimental.*Keras models"
                                             r".*model.save\('model.keras'\).*CheckpointManager"):
        tf.saved_model.experimental  # noqa: B018
    with pytest.raises(TypeError, match=r"tf.saved_model.save got a NoneType.*tf.train.Checkpoint"):
        tf.saved_model.save(None, "/tmp/x")
    with pytest.raises(AttributeError, match=r"tf.estimator.Estimator.*jdist.Trainer"):
        tf.estimator.Estimator  # noqa: B018
    with pytest.raises(AttributeError, match=r"tf.io.decode_proto.*gfile.*TFRecordWriter.*parse_example"):
        tf.io.decode_proto  # noqa: B018


def test_version_is_tfs_marked_as_jdist():
    assert tf.__version__.startswith("2.21.0+jdist.")


def test_config_lists_devices_and_refuses_a_late_split():
    assert tf.config.list_physical_devices("CPU") == [tf.config.list_physical_devices()[0]]
    assert [d.name for d in tf.config.list_logical_devices("CPU")] == [f"/device:CPU:{i}" for i in range(8)]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)  # as it is
    with pytest.raises(RuntimeError, match="cannot be modified after being initialized.*before the first array"):
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)


def test_config_splits_the_cpu_before_jax_starts():
    # The guide's order: look for GPUs first (with JAX_PLATFORMS=cpu: none, and JAX is not started), then split.
    code = ("import jdist.tf_compat as tf\nassert tf.config.list_physical_devices('GPU') == []\n"
            "cpu = tf.config.list_physical_devices('CPU')[0]\n"
            "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)\n"
            "print(len(tf.config.list_logical_devices('CPU')), tf.distribute.MirroredStrategy().num_replicas_in_sync)")
    env = {**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["3", "3"], out.stdout + out.stderr


def test_nest_spec_and_errors_as_tf():
    # Observed, TF 2.21: flatten sorts dict keys and keeps None; pack_sequence_as refills; TensorSpec's repr.
    assert tf.nest.flatten({"b": [1, None], "a": 2}) == [2, 1, None]
    assert tf.nest.map_structure(lambda x: x, (1, None)) == (1, None)
    assert tf.nest.pack_sequence_as({"b": [0, 0], "a": 0}, [7, 8, 9]) == {"b": [8, 9], "a": 7}
    spec = tf.TensorSpec((None, 2), tf.float32)
    assert repr(tf.TensorSpec((2,), tf.int32)) == "TensorSpec(shape=(2,), dtype=tf.int32, name=None)"
    assert spec.is_compatible_with(np.ones((3, 2), np.float32)) and not spec.is_compatible_with(np.ones((3, 3)))

    @tf.function(input_signature=[tf.TensorSpec((None,), tf.float32)])
    def double(x):
        return x * 2

    double(np.ones(2, np.float32))
    double(np.ones(3, np.float32))
    assert double.experimental_get_tracing_count() == 1  # TF 2.21: one trace for an input_signature
    strategy = tf.distribute.MirroredStrategy()
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(np.arange(8)).batch(8)))
    iterator.get_next()
    with pytest.raises(tf.errors.OutOfRangeError):  # TF's end of a distributed iterator
        iterator.get_next()


def test_dtensor_and_estimator_name_jdists_equivalents():
    """The DTensor documents import `tf.experimental.dtensor` (jdist's: tests/test_tf_compat_dtensor.py);
    dtensor_keras_tutorial reaches `tf.keras.dtensor.experimental`, which TF 2.21's Keras 3 lacks too;
    multi_worker_with_estimator reaches `tf.estimator`, which TF 2.21 no longer has either."""
    assert tf.experimental.dtensor.create_mesh is not None
    with pytest.raises(AttributeError, match=r"TF 2.21's tf.keras \(Keras 3\) has no tf.keras.dtensor either.*"
                                             r"jdist.Layout.*docs/layouts.md"):
        tf.keras.dtensor.experimental.optimizers.Adam  # noqa: B018
    with pytest.raises(AttributeError, match=r"tf.experimental.async_scope.*of tf.experimental it has dtensor"):
        tf.experimental.async_scope  # noqa: B018
    with pytest.raises(AttributeError, match=r"tf.experimental.dtensor.DTensorCheckpoint.*tf.train.Checkpoint"):
        tf.experimental.dtensor.DTensorCheckpoint  # noqa: B018
    for reach in (lambda: tf.estimator.ModeKeys, lambda: tf.estimator.RunConfig, lambda: tf.estimator.Estimator):
        with pytest.raises(AttributeError, match=r"tf.estimator.*TensorFlow 2.21 has no tf.estimator.*jdist.Trainer"):
            reach()


def test_ops_return_what_their_annotations_say():
    # An op annotated `ArrayLike` returns an array even for 0-d input (numpy's ufuncs and reductions return numpy
    # scalars there: those ops say `Tensor`, which admits them); `Tensor` ops return an array or a numpy scalar.
    import typing

    from jdist.tf_compat import nn_ops, ops, reductions
    from jdist.typing import ArrayLike, Tensor

    calls = {
        "convert_to_tensor": tf.convert_to_tensor, "constant": tf.constant,
        "reshape": lambda v: tf.reshape(v, tf.shape(v)),
        "fill": lambda v: tf.fill([], tf.reduce_max(v)), "zeros_like": tf.zeros_like, "ones_like": tf.ones_like,
        "expand_dims": lambda v: tf.expand_dims(v, 0), "squeeze": tf.squeeze, "concat": lambda v: tf.concat([[v]], 0),
        "stack": lambda v: tf.stack([v]), "transpose": tf.transpose, "where": lambda v: tf.where(True, v, v),
        "one_hot": lambda v: tf.one_hot(1, 2), "tile": lambda v: tf.tile(v, tf.ones_like(tf.shape(v))),
        "identity": tf.identity,
        "stop_gradient": tf.stop_gradient, "cast": lambda v: tf.cast(v, tf.int32), "argmax": lambda v: tf.argmax([v]),
        "gather": lambda v: tf.gather([v], 0), "clip_by_value": lambda v: tf.clip_by_value(v, 0, 1),
        "divide": lambda v: tf.divide(v, 2), "add_n": lambda v: tf.add_n([v, v]), "relu": tf.nn.relu,
        "softmax": lambda v: tf.nn.softmax([v]), "sigmoid": tf.nn.sigmoid, "l2_loss": tf.nn.l2_loss,
        "reduce_logsumexp": tf.reduce_logsumexp, "shape": tf.shape, "rank": tf.rank, "size": tf.size,
    }
    seen = set()
    for name, call in calls.items():
        module = next(m for m in (ops, reductions, nn_ops) if hasattr(m, name))
        annotated = typing.get_type_hints(getattr(module, name))["return"]
        assert annotated in (ArrayLike, Tensor, np.ndarray), (name, annotated)
        seen.add(annotated)
        for value in (1.5, np.float32(1.5), np.asarray(1.5, np.float32), np.ones(2, np.float32), jnp.float32(1.5)):
            result = call(value)
            assert isinstance(result, annotated), f"tf.{name}({value!r}) gave {type(result)}, annotated {annotated}"
    assert seen == {ArrayLike, Tensor, np.ndarray}
    assert isinstance(reductions.reduce_sum(np.float32(1.5)), np.generic)  # why reductions say Tensor, not ArrayLike
    # ... and tf.reduce_sum gives it as TF's 0-d tensor, with .numpy() (jdist.tf_compat.host_tensors)
    assert tf.reduce_sum(np.float32(1.5)).shape == () and isinstance(tf.reduce_sum(np.float32(1.5)).numpy(), np.generic)


# TF 2.21: tf.nn.bias_add(v, [10, 20, 30], data_format="NCHW") with v = arange(24).reshape(2, 3, 2, 2) gave
# [10, 24, 38] at [0, :, 0, 0]; data_format="XYZ" raised ValueError "`data_format` must be of the form `N...C` or
# `NC...`"; embedding_lookup([[3, 4], [.3, .4], [6, 8]], [0, 1, 2, 0], max_norm=1.0) gave [[.6, .8], [.3, .4],
# [.6, .8], [.6, .8]], and of arange(12).reshape(3, 2, 2) at [[2]] with max_norm=5 the row scaled to norm 5
# (2.0908334 first).
def test_bias_add_and_embedding_lookup_follow_tensorflows_data_format_and_max_norm():
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    np.testing.assert_allclose(np.asarray(tf.nn.bias_add(v, [10.0, 20.0, 30.0], data_format="NCHW"))[0, :, 0, 0],
                               [10, 24, 38])
    np.testing.assert_allclose(np.asarray(tf.nn.bias_add(v, [1.0, 2.0]))[0, 0, 0], [1, 3])  # channels last
    np.testing.assert_allclose(np.asarray(tf.nn.bias_add(jnp.zeros((2, 3)), [1.0, 2.0, 3.0], data_format="NC"))[1],
                               [1, 2, 3])
    with pytest.raises(ValueError, match="must be of the form"):
        tf.nn.bias_add(v, [1.0, 2.0, 3.0], data_format="XYZ")
    with pytest.raises(ValueError, match="as long as the channel axis"):
        tf.nn.bias_add(v, [1.0, 2.0, 3.0])  # the last axis holds 2
    params = np.array([[3, 4], [0.3, 0.4], [6, 8]], np.float32)
    for p in (params, jnp.asarray(params)):
        np.testing.assert_allclose(np.asarray(tf.nn.embedding_lookup(p, [0, 1, 2, 0], max_norm=1.0)),
                                   [[0.6, 0.8], [0.3, 0.4], [0.6, 0.8], [0.6, 0.8]], rtol=1e-6)
    rows = np.asarray(tf.nn.embedding_lookup(np.arange(12, dtype=np.float32).reshape(3, 2, 2), [[2]], max_norm=5.0))
    assert rows.shape == (1, 1, 2, 2) and rows[0, 0, 0, 0] == pytest.approx(2.0908334, rel=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rows), 5.0, rtol=1e-6)


@pytest.mark.parametrize("call, message", [  # TF 2.21's InvalidArgumentError texts (observed)
    (lambda: tf.matmul(tf.ones([1, 4]), tf.ones([3, 3])), r"Matrix size-incompatible: In\[0\]: \[1,4\], In\[1\]: \[3,3\]"),
    (lambda: tf.gather(tf.constant([0.0]), [1]), r"indices\[0\] = 1 is not in \[0, 1\)"),
    (lambda: tf.gather(tf.constant([[1, 2], [3, 4]]), [0, -1]), r"indices\[1\] = -1 is not in \[0, 2\)"),
    (lambda: tf.gather(tf.constant([[1, 2], [3, 4]]), [[0, 5]], axis=1), r"indices\[0,1\] = 5 is not in \[0, 2\)"),
])
def test_matmul_and_gather_check_their_inputs_as_tf(call, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        call()


def test_a_tf_function_returns_python_numbers_as_tensors():
    """TF 2.21 (TF's "Introduction to graphs"): a traced function's outputs are tensors, Python values included."""
    @tf.function
    def simple_relu(x):
        if tf.greater(x, 0):
            return x
        else:
            return 0

    assert simple_relu(tf.constant(-1)).numpy() == 0 and simple_relu(tf.constant(1)).numpy() == 1
    one, nothing, yes = tf.function(lambda: (1, None, True))()
    assert (repr(one), nothing, repr(yes)) == ("<tf.Tensor: shape=(), dtype=int32, numpy=1>", None,
                                               "<tf.Tensor: shape=(), dtype=bool, numpy=True>")
    assert repr(tf.function(lambda: 1.5)()) == "<tf.Tensor: shape=(), dtype=float32, numpy=1.5>"


def test_an_error_raised_in_a_keras_layer_keeps_its_class_and_text():
    """TF's "Introduction to modules": Keras re-raises a layer's InvalidArgumentError with one text argument;
    TF 2.21 printed "Exception encountered when calling FlexibleDense.call()" and the matmul's text."""
    class FlexibleDense(tf.keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(int(input_shape[-1]), 3))

        def call(self, inputs):
            return tf.matmul(inputs, self.w)

    layer = FlexibleDense()
    layer(tf.constant([[2.0, 2.0, 2.0]]))
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        layer(tf.constant([[2.0, 2.0, 2.0, 2.0]]))
    assert "FlexibleDense.call()" in str(caught.value) and "Matrix size-incompatible: In[0]: [1,4]" in str(caught.value)


def test_a_python_operand_takes_the_other_operands_dtype():
    """TF 2.21 (observed): `tf.maximum(0., [1, -1])` is float32 [1., 0.] (numpy would promote to float64);
    `tf.maximum(0, [1.5, -1])` is TypeError "Cannot convert [1.5, -1] to EagerTensor of dtype int32"."""
    out = tf.maximum(0., [1, -1])
    assert out.dtype == np.float32 and out.numpy().tolist() == [1.0, 0.0]
    assert tf.multiply(tf.constant([1, 2]), 2).dtype == np.int32
    assert tf.add(2.5, tf.constant([1.0])).numpy().tolist() == [3.5]
    with pytest.raises(TypeError, match=r"Cannot convert \[1.5, -1\] to EagerTensor of dtype int32"):
        tf.maximum(0, [1.5, -1])


def test_a_string_tensors_numpy_is_bytes():
    assert tf.constant("a").numpy() == b"a"  # TF 2.21: b'a'
    assert tf.constant(["a", "bc"]).numpy().tolist() == [b"a", b"bc"]
