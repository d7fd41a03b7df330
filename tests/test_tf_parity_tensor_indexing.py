"""A host tensor's indexing and `tf.gather`'s index checks in a script follow TF 2.21's (observed, TF 2.21,
tensorflow-cpu, scripts in the tests below run under TF and their values recorded); library code keeps numpy's."""
import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import InvalidArgumentError
from jdist.tfdata.structure import HostTensor

OP = " [Op:StridedSlice] name: strided_slice/"
VALID = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar tf.int32/tf.int64 "
         "tensors are valid indices, got ")


def _t():
    return tf.constant([1.0, -2.0, 3.0])


@pytest.mark.parametrize("key, message", [
    # observed in TF 2.21: a list is a tuple of indices, `t[[1, 2]]` is `t[1, 2]`
    ([1, 2], "Index out of range using input dim 1; input has only 1 dims" + OP),
    (10, "slice index 10 of dimension 0 out of bounds." + OP),
    (-4, "slice index -1 of dimension 0 out of bounds." + OP),
])
def test_out_of_range_is_tf_error(key, message):
    with pytest.raises(InvalidArgumentError) as caught:
        _t()[key]
    assert str(caught.value).endswith(message)


def test_matrix_out_of_range():
    m = tf.constant([[1, 2], [3, 4]])
    with pytest.raises(InvalidArgumentError, match="slice index 5 of dimension 1 out of bounds"):
        m[0, 5]  # observed in TF 2.21
    with pytest.raises(InvalidArgumentError, match="Index out of range using input dim 2; input has only 2 dims"):
        m[0, 0, 0]  # observed in TF 2.21
    assert m[5:10].shape == (0, 2)  # observed in TF 2.21: an empty (0, 2) tensor


@pytest.mark.parametrize("key, shown", [(1.5, "1.5"), (slice(0, 1.5), "1.5"), ("a", "'a'"),
                                        (np.array([1, 2]), "array([1, 2])")])
def test_bad_key_is_type_error(key, shown):
    with pytest.raises(TypeError) as caught:  # observed in TF 2.21
        _t()[key]
    assert str(caught.value) == VALID + shown


def test_vector_tensor_key_is_type_error():
    with pytest.raises(TypeError, match="valid indices, got <tf.Tensor: shape=\\(2,\\)"):  # observed in TF 2.21
        _t()[tf.constant([1, 2])]


def test_scalar_bool_key():
    with pytest.raises(ValueError, match="^mask cannot be scalar.$"):  # observed in TF 2.21
        _t()[True]


@pytest.mark.parametrize("key, expected, shape", [
    # observed in TF 2.21 (each an EagerTensor)
    (None, [[1.0, -2.0, 3.0]], (1, 3)),
    (-1, 3.0, ()),
    (np.int64(1), -2.0, ()),
    (slice(None, None, -1), [3.0, -2.0, 1.0], (3,)),
    (slice(None, None, 2), [1.0, 3.0], (2,)),
    (slice(-2, None), [-2.0, 3.0], (2,)),
])
def test_valid_keys(key, expected, shape):
    got = _t()[key]
    assert isinstance(got, HostTensor) and got.shape == shape
    np.testing.assert_array_equal(got.numpy(), expected)


def test_tensor_scalar_key_ellipsis_and_mask():
    t = _t()
    got = t[tf.constant(1)]  # observed in TF 2.21: -2.0, shape ()
    assert isinstance(got, HostTensor) and got.shape == () and got.numpy() == -2.0
    masked = t[t > 0]  # observed in TF 2.21: [1., 3.] (tf.boolean_mask)
    assert isinstance(masked, HostTensor)
    np.testing.assert_array_equal(masked.numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(tf.constant([[1, 2], [3, 4]])[..., 0].numpy(), [1, 3])  # observed in TF 2.21


def test_library_code_keeps_numpy_indexing():
    t = _t()
    # numpy's `delete` indexes with a boolean array in a tuple (TF's rule refuses that key): numpy's result
    np.testing.assert_array_equal(np.delete(t, [0]), [-2.0, 3.0])
    np.testing.assert_array_equal(np.flip(t, 0), [3.0, -2.0, 1.0])
    with pytest.raises(TypeError, match="valid indices"):  # the same key in a script's code
        t[(np.array([False, True, True]),)]


@pytest.mark.parametrize("indices", [[1.0], []])  # observed in TF 2.21: `[]` is a float32 tensor there too
def test_gather_float_indices(indices):
    with pytest.raises(InvalidArgumentError) as caught:  # observed in TF 2.21
        tf.gather(_t(), indices)
    text = str(caught.value)
    assert text.startswith("Value for attr 'Tindices' of float is not in the list of allowed values: int16, int32, "
                           "int64") and text.endswith("[Op:GatherV2]")


def test_gather_out_of_range():
    with pytest.raises(InvalidArgumentError, match=r"^indices\[0\] = 5 is not in \[0, 3\) \[Op:GatherV2\]$"):
        tf.gather(_t(), [5])  # observed in TF 2.21


CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def test_device_of_tensor_made_in_a_device_block():
    # observed in TF 2.21 with the CPU split into 2 logical devices
    with tf.device("/CPU:1"):
        t = tf.constant([1.0, 2.0, 3.0])
        assert (t + 1).device == CPU1 and tf.zeros([2]).device == CPU1 and tf.random.uniform([2]).device == CPU1
    assert t.device == CPU1
    # an op on it outside the block runs on the default device
    for result in (t + 1, t[0], tf.reduce_sum(t), tf.identity(t), -t, tf.gather(t, [0]), tf.reshape(t, [3, 1])):
        assert result.device == CPU0
    with tf.device("/job:localhost/replica:0/task:0/device:CPU:1"):
        assert tf.constant(1.0).device == CPU1
    with tf.device("/CPU:0"):
        assert (t + 1).device == CPU0
    assert tf.constant(1.0).device == CPU0


def test_device_block_for_a_missing_device_keeps_the_default():
    with pytest.warns(UserWarning), tf.device("/CPU:99"):  # observed in TF 2.21: soft placement, CPU:0
        assert tf.constant(1.0).device == CPU0


def test_iterating_stops_at_the_end():
    rows = list(tf.constant([[1, 2], [3, 4]]))  # observed in TF 2.21: two (2,) tensors
    assert len(rows) == 2 and all(isinstance(r, HostTensor) and r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(rows[1].numpy(), [3, 4])
