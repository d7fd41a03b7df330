"""jdist.tf_compat's `tf.SparseTensor` and `tf.sparse`, against values observed in TF 2.21 (tensorflow-cpu 2.21.0),
e.g. `/work/tfvenv/bin/python -c "import tensorflow as tf; sp = tf.SparseTensor([[0, 0], [1, 2]], [1., 2.], [3, 4]);
print(tf.sparse.reduce_sum(sp, axis=1))"`."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

SP = tf.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0], dense_shape=[3, 4])
UNORDERED = tf.SparseTensor(indices=[[1, 2], [0, 0]], values=[2.0, 1.0], dense_shape=[3, 4])
REPEATED = tf.SparseTensor(indices=[[0, 0], [0, 0]], values=[2.0, 1.0], dense_shape=[3, 4])
OUT_OF_BOUNDS = tf.SparseTensor(indices=[[0, 0], [5, 0]], values=[2.0, 1.0], dense_shape=[3, 4])
DENSE_SP = [[1, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]]


def test_sparse_tensor_has_tfs_attributes():
    # TF 2.21: indices int64, values float32 (from Python floats), dense_shape int64, shape TensorShape([3, 4]).
    assert SP.indices.dtype == np.int64 and SP.values.dtype == np.float32 and SP.dense_shape.dtype == np.int64
    assert SP.shape == tf.TensorShape([3, 4]) and SP.get_shape().as_list() == [3, 4] and SP.dtype is tf.float32
    assert SP.dense_shape.numpy().tolist() == [3, 4] and tf.sparse.SparseTensor is tf.SparseTensor
    assert tf.SparseTensor([[0, 1]], [1], [3, 4]).dtype is tf.int32
    copy = tf.SparseTensor.from_value(SP)  # TF 2.21: an equal SparseTensor (not the same object)
    assert copy.indices.numpy().tolist() == [[0, 0], [1, 2]] and copy.shape == SP.shape


# (id, call, TF 2.21's result: an array, or (indices, values, dense_shape) for a SparseTensor)
OBSERVED = [
    ("to_dense", lambda: tf.sparse.to_dense(SP), np.float32(DENSE_SP)),
    ("to_dense_default_value", lambda: tf.sparse.to_dense(SP, default_value=-1.0),
     np.float32([[1, -1, -1, -1], [-1, -1, 2, -1], [-1, -1, -1, -1]])),
    ("to_dense_unordered_unvalidated", lambda: tf.sparse.to_dense(UNORDERED, validate_indices=False),
     np.float32(DENSE_SP)),
    ("to_dense_repeated_unvalidated", lambda: tf.sparse.to_dense(REPEATED, validate_indices=False),
     np.float32([[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])),  # the last repeat wins
    ("reorder", lambda: tf.sparse.reorder(UNORDERED), ([[0, 0], [1, 2]], np.float32([1, 2]), [3, 4])),
    ("from_dense", lambda: tf.sparse.from_dense([[0.0, 3.0], [4.0, 0.0]]), ([[0, 1], [1, 0]], np.float32([3, 4]),
                                                                          [2, 2])),
    ("from_dense_int", lambda: tf.sparse.from_dense(np.int32([[0, 3], [4, 0]])), ([[0, 1], [1, 0]], np.int32([3, 4]),
                                                                                  [2, 2])),
    ("sparse_dense_matmul", lambda: tf.sparse.sparse_dense_matmul(SP, np.arange(8.0, dtype=np.float32).reshape(4, 2)),
     np.float32([[0, 1], [8, 10], [0, 0]])),
    ("sparse_dense_matmul_adjoint_a",
     lambda: tf.sparse.sparse_dense_matmul(SP, np.arange(6.0, dtype=np.float32).reshape(3, 2), adjoint_a=True),
     np.float32([[0, 1], [0, 0], [4, 6], [0, 0]])),
    ("sparse_dense_matmul_adjoint_b",
     lambda: tf.sparse.sparse_dense_matmul(SP, np.arange(8.0, dtype=np.float32).reshape(2, 4), adjoint_b=True),
     np.float32([[0, 4], [4, 12], [0, 0]])),
    ("dense_sparse_matmul", lambda: tf.sparse.sparse_dense_matmul(np.arange(6.0, dtype=np.float32).reshape(2, 3), SP),
     np.float32([[0, 0, 2, 0], [3, 0, 8, 0]])),
    ("reduce_sum", lambda: tf.sparse.reduce_sum(SP), np.float32(3)),
    ("reduce_sum_axis1", lambda: tf.sparse.reduce_sum(SP, axis=1), np.float32([1, 2, 0])),
    ("reduce_sum_keepdims", lambda: tf.sparse.reduce_sum(SP, axis=0, keepdims=True), np.float32([[1, 0, 2, 0]])),
    ("reduce_sum_sparse", lambda: tf.sparse.reduce_sum(SP, axis=1, output_is_sparse=True),
     ([[0], [1]], np.float32([1, 2]), [3])),
    ("reduce_sum_axes", lambda: tf.sparse.reduce_sum(SP, axis=[0, 1]), np.float32(3)),
    ("reduce_max_axis1", lambda: tf.sparse.reduce_max(SP, axis=1), np.float32([1, 2, 0])),
    # the max of the entries present: -2, not the implicit 0; a row without entries gives 0
    ("reduce_max_negative", lambda: tf.sparse.reduce_max(tf.SparseTensor([[0, 1]], [-2.0], [2, 2]), axis=1),
     np.float32([-2, 0])),
    ("add_sparse_sparse", lambda: tf.sparse.add(SP, tf.SparseTensor([[0, 0], [2, 3]], [10.0, 20.0], [3, 4])),
     ([[0, 0], [1, 2], [2, 3]], np.float32([11, 2, 20]), [3, 4])),
    ("add_keeps_zero_sums", lambda: tf.sparse.add(SP, tf.SparseTensor([[0, 0]], [-1.0], [3, 4])),
     ([[0, 0], [1, 2]], np.float32([0, 2]), [3, 4])),
    ("add_threshold", lambda: tf.sparse.add(SP, tf.SparseTensor([[0, 0]], [-0.5], [3, 4]), threshold=0.6),
     ([[1, 2]], np.float32([2]), [3, 4])),
    ("add_sparse_dense", lambda: tf.sparse.add(SP, np.ones((3, 4), np.float32)), np.float32(DENSE_SP) + 1),
    ("add_dense_sparse", lambda: tf.sparse.add(np.ones((3, 4), np.float32), SP), np.float32(DENSE_SP) + 1),
    ("transpose", lambda: tf.sparse.transpose(SP), ([[0, 0], [2, 1]], np.float32([1, 2]), [4, 3])),
    ("eye", lambda: tf.sparse.eye(2), ([[0, 0], [1, 1]], np.float32([1, 1]), [2, 2])),
    ("map_values", lambda: tf.sparse.map_values(tf.math.square, SP), ([[0, 0], [1, 2]], np.float32([1, 4]), [3, 4])),
    ("concat", lambda: tf.sparse.concat(1, [SP, SP]), ([[0, 0], [0, 4], [1, 2], [1, 6]], np.float32([1, 1, 2, 2]),
                                                       [3, 8])),
    ("reshape", lambda: tf.sparse.reshape(SP, [4, 3]), ([[0, 0], [2, 0]], np.float32([1, 2]), [4, 3])),
    ("reshape_inferred", lambda: tf.sparse.reshape(SP, [-1, 3]), ([[0, 0], [2, 0]], np.float32([1, 2]), [4, 3])),
    ("retain", lambda: tf.sparse.retain(SP, [True, False]), ([[0, 0]], np.float32([1]), [3, 4])),
    ("slice", lambda: tf.sparse.slice(SP, [0, 1], [2, 3]), ([[1, 1]], np.float32([2]), [2, 3])),
    ("slice_clipped", lambda: tf.sparse.slice(SP, [1, 1], [5, 5]), ([[0, 1]], np.float32([2]), [2, 3])),
    ("concat_reshape_retain", lambda: tf.sparse.retain(tf.sparse.reshape(tf.sparse.concat(0, [SP, SP]), [-1, 6]),
                                                       np.array([True, False, True, True])),
     ([[0, 0], [2, 0], [3, 0]], np.float32([1, 1, 2]), [4, 6])),
    ("times_scalar", lambda: SP * 2.0, ([[0, 0], [1, 2]], np.float32([2, 4]), [3, 4])),
    ("times_dense", lambda: SP * np.ones((3, 4), np.float32) * 3, ([[0, 0], [1, 2]], np.float32([3, 6]), [3, 4])),
    ("divided", lambda: SP / 2.0, ([[0, 0], [1, 2]], np.float32([0.5, 1]), [3, 4])),
]


@pytest.mark.parametrize("call, expected", [case[1:] for case in OBSERVED], ids=[case[0] for case in OBSERVED])
def test_sparse_gives_tfs_values(call, expected):
    got = call()
    if isinstance(expected, tuple):
        indices, values, dense_shape = expected
        assert isinstance(got, tf.SparseTensor)
        assert got.indices.dtype == np.int64 and got.indices.numpy().tolist() == indices
        assert got.values.dtype == values.dtype and got.dense_shape.numpy().tolist() == dense_shape
        np.testing.assert_allclose(got.values, values)
    else:
        assert isinstance(got, (np.ndarray, np.generic)) and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected)


# (id, call, TF 2.21's error type, a fragment of TF's message)
ERRORS = [
    ("unordered", lambda: tf.sparse.to_dense(UNORDERED), tf.errors.InvalidArgumentError,
     r"indices\[1\] = \[0, 0\] is out of order.*tf.sparse.reorder"),
    ("repeated", lambda: tf.sparse.to_dense(REPEATED), tf.errors.InvalidArgumentError,
     r"indices\[1\] = \[0, 0\] is repeated"),
    ("out_of_bounds", lambda: tf.sparse.to_dense(OUT_OF_BOUNDS), tf.errors.InvalidArgumentError,
     r"indices\[1\] = \[5, 0\] is out of bounds: need 0 <= index < \[3, 4\]"),
    ("out_of_bounds_unvalidated", lambda: tf.sparse.to_dense(OUT_OF_BOUNDS, validate_indices=False),
     tf.errors.InvalidArgumentError, "out of bounds"),
    ("to_dense_of_dense", lambda: tf.sparse.to_dense(np.ones((2, 2))), TypeError, "Input must be a SparseTensor"),
    ("inner_dimension", lambda: tf.sparse.sparse_dense_matmul(SP, np.ones((3, 2), np.float32)),
     tf.errors.InvalidArgumentError, "inner dimension does not match: 4 vs. 3"),
    ("add_shapes", lambda: tf.sparse.add(SP, tf.SparseTensor([[0, 0]], [1.0], [3, 5])),
     tf.errors.InvalidArgumentError, "shapes do not match"),
    ("from_value_of_dense", lambda: tf.SparseTensor.from_value(np.ones((2, 2))), TypeError,
     "neither a SparseTensor nor SparseTensorValue"),
    ("indices_rank", lambda: tf.SparseTensor(indices=[0, 1], values=[1.0], dense_shape=[3]), ValueError, "rank 2"),
    ("values_count", lambda: tf.SparseTensor(indices=[[0, 1]], values=[1.0, 2.0], dense_shape=[3, 4]), ValueError,
     "one entry per index row"),
    ("shape_rank", lambda: tf.SparseTensor(indices=[[0, 1]], values=[1.0], dense_shape=[3]), ValueError,
     "has rank 1"),
    ("cross_hashed_batch", lambda: tf.sparse.cross_hashed([np.array([["a"]]), np.array([["d"], ["e"]])]),
     tf.errors.InvalidArgumentError, "Expected batch size 1 got 2 at dense tensor 1"),  # observed, TF 2.21
]


@pytest.mark.parametrize("call, error, message", [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS])
def test_sparse_rejects_what_tf_rejects(call, error, message):
    with pytest.raises(error, match=message):
        call()


DENSE = np.arange(8.0, dtype=np.float32).reshape(4, 2)
IN_RUN = [
    ("to_dense", lambda sp, b: tf.sparse.to_dense(sp, default_value=-1.0)),
    ("sparse_dense_matmul", lambda sp, b: (tf.sparse.sparse_dense_matmul(sp, b),
                                           tf.sparse.sparse_dense_matmul(b.T, sp, adjoint_b=True))),
    ("reduce", lambda sp, b: (tf.sparse.reduce_sum(sp, axis=0), tf.sparse.reduce_max(sp, axis=1, keepdims=True))),
    ("add_dense", lambda sp, b: tf.sparse.add(sp, jnp.ones((3, 4)) if isinstance(b, jax.Array) else np.ones((3, 4),
                                                                                                         np.float32))),
    ("structure", lambda sp, b: tf.sparse.to_dense(tf.sparse.transpose(tf.sparse.reorder(sp * 2.0)))),
    ("returned", lambda sp, b: tf.sparse.map_values(lambda v: v + 1, sp)),
    ("concat_reshape_retain", lambda sp, b: tf.sparse.retain(tf.sparse.reshape(tf.sparse.concat(0, [sp, sp]), [-1, 6]),
                                                             np.array([True, False, True, True]))),
]


@pytest.mark.parametrize("fn", [case[1] for case in IN_RUN], ids=[case[0] for case in IN_RUN])
def test_sparse_inside_strategy_run_equals_host(fn):
    """A SparseTensor is a pytree: it goes into strategy.run (and comes out of it) as its indices and values."""
    strategy = tf.distribute.MirroredStrategy()
    expected = fn(UNORDERED if fn is IN_RUN[4][1] else SP, DENSE)
    sp = UNORDERED if fn is IN_RUN[4][1] else SP
    result = strategy.run(fn, args=(sp, jnp.asarray(DENSE)))
    for replica in strategy.experimental_local_results(result):
        assert jax.tree.structure(replica) == jax.tree.structure(expected)
        for got, want in zip(jax.tree.leaves(replica), jax.tree.leaves(expected), strict=True):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_value_sized_ops_name_the_way_in_compiled_code():
    with pytest.raises(ValueError, match="data-dependent number of entries"):
        jax.jit(tf.sparse.from_dense)(jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="data-dependent number of entries.*to_dense"):
        jax.jit(tf.sparse.add)(SP, SP)


def test_eager_jax_values_are_checked_as_on_the_host():
    # Concrete JAX indices (outside compiled code) are checked as TF checks them; from_dense of a JAX array works.
    on_device = tf.SparseTensor(jnp.asarray([[1, 2], [0, 0]]), jnp.asarray([2.0, 1.0]), [3, 4])
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of order"):
        tf.sparse.to_dense(on_device)
    assert tf.sparse.from_dense(jnp.asarray([[0.0, 3.0]])).indices.numpy().tolist() == [[0, 1]]
