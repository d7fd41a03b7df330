"""jdist.tf_compat's numpy_function, py_function, timestamp, dynamic_partition, ensure_shape and tf.io.read_file /
write_file against TF 2.21 (tensorflow-cpu 2.21.0; observed with `/work/tfvenv/bin/python`, e.g.
`tf.dynamic_partition([10, 20, 30, 40, 50], [0, 0, 1, 1, 0], 2)`); eagerly, in a tf.data map function, under
jax.jit and inside MirroredStrategy's strategy.run."""
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# (case, call, TF 2.21's outputs as (dtype, shape, values) each). Observed: the parts keep data's order and dtype;
# an empty part keeps the trailing shape ((0, 2)).
PARTITIONS = [
    ("1-D", lambda: tf.dynamic_partition([10, 20, 30, 40, 50], [0, 0, 1, 1, 0], 2),
     [("int32", (3,), [10, 20, 50]), ("int32", (2,), [30, 40])]),
    ("rows, an empty part", lambda: tf.dynamic_partition([[1, 2], [3, 4], [5, 6]], [1, 0, 1], 3),
     [("int32", (1, 2), [[3, 4]]), ("int32", (2, 2), [[1, 2], [5, 6]]), ("int32", (0, 2), [])]),
    ("2-D partitions", lambda: tf.dynamic_partition([[1, 2], [3, 4]], [[0, 1], [1, 0]], 2),
     [("int32", (2,), [1, 4]), ("int32", (2,), [2, 3])]),
    ("floats", lambda: tf.dynamic_partition(np.array([0.5, 1.5, 2.5], np.float64), [1, 1, 0], 2),
     [("float64", (1,), [2.5]), ("float64", (2,), [0.5, 1.5])]),
]


@pytest.mark.parametrize("call,expected", [c[1:] for c in PARTITIONS], ids=[c[0] for c in PARTITIONS])
def test_dynamic_partition_gives_tfs_parts(call, expected):
    parts = call()
    assert isinstance(parts, list) and len(parts) == len(expected)
    for part, (dtype, shape, values) in zip(parts, expected):
        assert part.dtype == np.dtype(dtype) and part.shape == shape
        np.testing.assert_array_equal(np.reshape(part, -1), np.asarray(values).reshape(-1))


# TF 2.21's errors (type: message start); InvalidArgumentError is a ValueError too.
ERRORS = [
    # InvalidArgumentError: partitions[1] = 2 is not in [0, 2) [Op:DynamicPartition]
    ("partition out of range", lambda: tf.dynamic_partition([1, 2], [0, 2], 2), tf.errors.InvalidArgumentError,
     r"partitions\[1\] = 2 is not in \[0, 2\)"),
    # InvalidArgumentError: data.shape must start with partitions.shape, got data.shape = [2], partitions.shape = [1]
    ("partition shape", lambda: tf.dynamic_partition([1, 2], [0], 2), ValueError,
     r"data.shape must start with partitions.shape, got data.shape = \[2\], partitions.shape = \[1\]"),
    # InvalidArgumentError: Shape of tensor input [1,3] is not compatible with expected shape [?,2]. [Op:EnsureShape]
    ("ensure_shape size", lambda: tf.ensure_shape(tf.constant([[1, 2, 3]]), [None, 2]), tf.errors.InvalidArgumentError,
     r"Shape of tensor input \[1,3\] is not compatible with expected shape \[\?,2\]"),
    ("ensure_shape rank", lambda: tf.ensure_shape(tf.constant([[1, 2, 3]]), [3]), ValueError,
     r"input \[1,3\] is not compatible with expected shape \[3\]"),
    ("ensure_shape compiled", lambda: jax.jit(lambda x: tf.ensure_shape(x, [2]))(jnp.zeros(3)), ValueError,
     r"input \[3\] is not compatible with expected shape \[2\]"),
    # TypeError: Missing required argument: 'Tout'
    ("py_function without Tout", lambda: tf.py_function(lambda x: x, [1.0]), TypeError, "Missing required argument"),
    # NotFoundError: /tmp/.../missing; No such file or directory [Op:ReadFile]
    ("read_file missing", lambda: tf.io.read_file("/nonexistent/jdist/missing"), tf.errors.NotFoundError, "missing"),
    # jdist's own limits in compiled code
    ("dynamic_partition compiled", lambda: jax.jit(lambda d: tf.dynamic_partition(d, jnp.array([0, 1]), 2))(
        jnp.zeros(2)), ValueError, "data-dependent shapes"),
    ("timestamp compiled", lambda: jax.jit(lambda x: x + tf.timestamp())(jnp.zeros(())), ValueError,
     "outside strategy.run"),
    ("numpy_function probe fails", lambda: jax.jit(lambda x: tf.numpy_function(_positive_only, [x], tf.float32))(
        jnp.ones(2)), ValueError, r"tf.TensorSpec\(shape, dtype\)"),
]


def _positive_only(v):
    if not np.all(v > 0):
        raise ValueError("needs positive values")
    return v[:1] * 2


@pytest.mark.parametrize("call,error,match", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_ensure_shape_returns_its_input_where_the_shape_fits():
    x = tf.constant([[1, 2, 3]])
    for shape in ([None, 3], [1, 3], tf.TensorShape([1, None]), None, (None, None)):  # TF 2.21: each returns x
        assert tf.ensure_shape(x, shape) is x
    traced = jax.jit(lambda v: tf.ensure_shape(v, [None, 3]) * 2)(jnp.ones((2, 3)))
    np.testing.assert_array_equal(traced, np.full((2, 3), 2.0))


def test_numpy_function_and_py_function_eagerly():
    x = tf.constant([1.0, 2.0])
    seen = []
    # TF 2.21: numpy_function's function gets numpy arrays and its result is converted as tf.constant would (Tout
    # is not applied eagerly: float64 stays float64, a Python float is float32); lists give lists.
    out = tf.numpy_function(lambda v: seen.append(type(v)) or v * 2, [x], tf.float32)
    assert seen == [np.ndarray] and out.dtype == np.float32 and out.numpy().tolist() == [2.0, 4.0]
    assert tf.numpy_function(lambda v: v.astype(np.float64), [x], tf.float32).dtype == np.float64
    assert tf.numpy_function(lambda v: 3.0, [x], tf.float64).dtype == np.float32
    pair = tf.numpy_function(lambda v: (v * 2, v.astype(np.int64)), [x], [tf.float32, tf.int64])
    assert isinstance(pair, list) and [p.dtype for p in pair] == [np.float32, np.int64]
    assert tf.numpy_function(lambda v: None, [x], []) is None
    # TF 2.21: py_function's function gets tensors (`.numpy()`), its outputs converted to Tout
    out = tf.py_function(lambda v: v.numpy() * 2, [x], tf.float32)
    assert out.dtype == np.float32 and out.numpy().tolist() == [2.0, 4.0]
    assert tf.py_function(lambda v: np.int32(2), [x], tf.float32).dtype == np.float32
    assert tf.py_function(lambda v: np.float64(2.0), [x], tf.float32).dtype == np.float32
    both = tf.py_function(lambda v: [v, v], [x], [tf.float32, tf.float64])
    assert [b.dtype for b in both] == [np.float32, np.float64]


def test_numpy_function_in_a_dataset_map():
    # TF 2.21: Dataset.from_tensor_slices([1.0, 2.0]).map(lambda v: tf.numpy_function(lambda a: a * 2, [v],
    # tf.float32)) gives 2.0, 4.0
    ds = tf.data.Dataset.from_tensor_slices([1.0, 2.0]).map(
        lambda v: tf.numpy_function(lambda a: a * 2, [v], tf.float32))
    assert [float(v) for v in ds] == [2.0, 4.0]
    ds = tf.data.Dataset.from_tensor_slices([1.0, 2.0]).map(lambda v: tf.py_function(lambda a: a.numpy() + 1, [v],
                                                                                      tf.float32))
    assert [float(v) for v in ds] == [2.0, 3.0]


def test_numpy_function_under_jit_calls_back_with_the_values():
    calls = []

    def head(v):
        calls.append(v.copy())
        return v[:1] * 2, np.int64(v.size)

    fn = jax.jit(lambda x: tf.numpy_function(head, [x], [tf.float32, tf.int64]))
    first, size = fn(jnp.arange(3.0) + 1)
    assert first.shape == (1,) and first.dtype == jnp.float32 and float(first[0]) == 2.0
    assert size.dtype == jnp.int32 and int(size) == 3  # int64 is int32 without jax_enable_x64
    second, _ = fn(jnp.arange(3.0) + 5)  # compiled once, called back with each call's values
    assert float(second[0]) == 10.0 and [c.tolist() for c in calls[-2:]] == [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]]
    spec = jax.jit(lambda x: tf.numpy_function(_positive_only, [x], tf.TensorSpec([1], tf.float32)))(jnp.ones(2))
    assert spec.tolist() == [2.0]  # Tout as a full TensorSpec: no call on zeros needed
    typed = jax.jit(lambda x: tf.py_function(lambda v: v.numpy().sum(), [x], tf.float32))(jnp.arange(4))
    assert typed.dtype == jnp.float32 and float(typed) == 6.0


def test_numpy_function_inside_strategy_run_equals_the_host():
    strategy = tf.distribute.MirroredStrategy()
    batch = np.arange(16, dtype=np.float32).reshape(8, 2)

    def step(x):
        return tf.numpy_function(lambda v: np.sort(v, axis=1)[:, ::-1] * 2, [x], tf.float32)

    out = strategy.run(step, args=(strategy.distribute_batch(batch),))
    got = np.concatenate([np.asarray(v) for v in strategy.experimental_local_results(out)])
    np.testing.assert_array_equal(got, np.sort(batch, axis=1)[:, ::-1] * 2)


def test_timestamp_is_the_hosts_clock_in_float64():
    before = time.time()
    stamp = tf.timestamp()  # TF 2.21: a 0-d float64 tensor, seconds since the epoch
    assert stamp.shape == () and stamp.dtype == np.float64 and isinstance(stamp.numpy(), np.float64)
    assert before <= float(stamp) <= time.time()


def test_read_and_write_file(tmp_path):
    path = str(tmp_path / "a" / "b" / "x.bin")
    assert tf.io.write_file(path, b"hi\x00there") is None  # TF 2.21: makes the missing directories, returns None
    data = tf.io.read_file(path)
    assert data.numpy() == b"hi\x00there" and data.shape == ()  # TF 2.21: a string scalar, binary-safe
    tf.io.write_file(path, "text")  # text is written as UTF-8, replacing the file
    assert tf.io.read_file(path).numpy() == b"text"
    files = [str(tmp_path / f"{i}.txt") for i in range(3)]
    for i, f in enumerate(files):
        tf.io.write_file(f, str(i) * (i + 1))
    ds = tf.data.Dataset.from_tensor_slices(files).map(tf.io.read_file)  # the common input-pipeline use
    assert [v.numpy() if hasattr(v, "numpy") else v for v in ds] == [b"0", b"11", b"222"]


def test_names_are_tfs():
    for name in ("dynamic_partition", "ensure_shape", "timestamp", "numpy_function", "py_function"):
        assert name in tf.__all__ and callable(getattr(tf, name))
    assert callable(tf.io.read_file) and callable(tf.io.write_file) and callable(tf.io.gfile.exists)
