"""TF's guides tensor_slicing.ipynb and tf_numpy_type_promotion.ipynb, run with `import jdist.tf_compat as tf`.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21, Keras 3.15), running the guides' cells in
order and `x + y` for each pair of dtypes under dtype_conversion_mode "all" and "safe".
"""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf
import jdist.tf_compat.experimental.numpy as tnp
from jdist.tfdata import tensor_numpy


@pytest.fixture(autouse=True)
def _restore_numpy_behavior():
    saved = dict(tensor_numpy.NUMPY_BEHAVIOR)
    yield
    tensor_numpy.NUMPY_BEHAVIOR.clear()
    tensor_numpy.NUMPY_BEHAVIOR.update(saved)


def _strong(name: str):
    return tf.constant(True) if name == "bool" else tf.constant(1, dtype=getattr(tf, name))


def _operand(name: str):
    weak = {"weak_int": 1, "weak_float": 1.0, "weak_complex": 1j}
    return tf.constant(weak[name]) if name in weak else _strong(name)


_SAFE = ("In promotion mode PromoMode.SAFE, implicit dtype promotion between {} and {} is disallowed. You need to "
         "explicitly specify the dtype in your op, or relax your dtype promotion rules (such as from SAFE mode to "
         "ALL mode).")

# (mode, x, y, observed `repr` tail: dtype and weak=True, or the "safe" refusal), observed in TF 2.21
_PAIRS = [
    ("all", "int32", "float32", "float32"), ("all", "int8", "uint32", "int64"), ("all", "int64", "float16", "float16"),
    ("all", "weak_float", "float16", "float16"), ("all", "uint64", "int8", "float64 weak"),
    ("all", "int8", "weak_float", "float64 weak"), ("all", "weak_int", "uint8", "uint8"),
    ("all", "complex64", "float64", "complex128"), ("all", "weak_complex", "float16", "complex64"),
    ("all", "bfloat16", "float16", "float32"), ("all", "weak_int", "weak_float", "float32 weak"),
    ("all", "uint16", "int8", "int32"), ("safe", "int16", "int8", "int16"), ("safe", "weak_int", "uint8", "uint8"),
    ("safe", "int32", "float32", ("int32", False, "float32", False)),
    ("safe", "int8", "uint32", ("int8", False, "uint32", False)),
    ("safe", "uint8", "int8", ("uint8", False, "int8", False)),
    ("safe", "weak_float", "int32", ("float32", True, "int32", False)),
    ("safe", "float64", "complex64", ("float64", False, "complex64", False)),
]


@pytest.mark.parametrize("mode,x,y,observed", _PAIRS)
def test_promotion_lattice_pairs(mode, x, y, observed):
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode=mode)
    a, b = _operand(x), _operand(y)
    if isinstance(observed, tuple):
        shown = [f"(<dtype: '{observed[i]}'>, weak={observed[i + 1]})" for i in (0, 2)]
        with pytest.raises(TypeError) as caught:
            a + b
        assert str(caught.value) == _SAFE.format(*shown)
        return
    out = a + b
    dtype, *weak = observed.split()
    assert np.dtype(out.dtype).name == dtype
    assert repr(out).endswith(", weak=True>") == bool(weak)
    assert complex(out.numpy()) == complex(np.asarray(a).item()) + complex(np.asarray(b).item())


def test_guide_all_mode_cells():
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
    assert repr(tf.constant(10, dtype=tf.int32) + tf.constant(5.0, dtype=tf.float32)) == (
        "<tf.Tensor: shape=(), dtype=float32, numpy=15.0>")
    assert repr(tf.constant(10, dtype=tf.int8) + tf.constant(5, dtype=tf.uint32)) == (
        "<tf.Tensor: shape=(), dtype=int64, numpy=15>")
    assert repr(tf.constant(1, tf.int64) + tf.constant(3.2, tf.float16)) == (
        "<tf.Tensor: shape=(), dtype=float16, numpy=4.19921875>")
    assert repr(tf.constant(1.2) + tf.constant(3.1, tf.float16)) == (
        "<tf.Tensor: shape=(), dtype=float16, numpy=4.30078125>")
    assert repr(tf.constant(5)) == "<tf.Tensor: shape=(), dtype=int32, numpy=5, weak=True>"
    assert repr(tf.constant([5.0, 10.0, 3])) == (
        "<tf.Tensor: shape=(3,), dtype=float32, numpy=array([ 5., 10.,  3.], dtype=float32), weak=True>")
    assert repr(tf.constant(5, tf.int32)) == "<tf.Tensor: shape=(), dtype=int32, numpy=5>"
    assert repr(-tf.constant(5)) == "<tf.Tensor: shape=(), dtype=int32, numpy=-5, weak=True>"
    assert repr(tf.constant(5, tf.int16) - tf.constant(1, tf.float32)) == (
        "<tf.Tensor: shape=(), dtype=float32, numpy=4.0>")
    assert repr(tnp.array(1)) == "<tf.Tensor: shape=(), dtype=int32, numpy=1, weak=True>"
    assert repr(tnp.array(1.0)) == "<tf.Tensor: shape=(), dtype=float32, numpy=1.0, weak=True>"
    # observed: tf.constant(True) is strong, tf.constant(1j) weak complex128
    assert repr(tf.constant(True)) == "<tf.Tensor: shape=(), dtype=bool, numpy=True>"
    assert repr(tf.constant(1j)).endswith("dtype=complex128, numpy=1j, weak=True>")


def test_guide_safe_mode_cells():
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="safe")
    with pytest.raises(TypeError, match=r"PromoMode.SAFE, implicit dtype promotion between \(<dtype: 'int32'>"):
        tf.constant(10, dtype=tf.int32) + tf.constant(5.0, dtype=tf.float32)


def test_guide_tf_add_order_cells():
    a, c = np.array(1, dtype=np.int8), np.array(1, dtype=np.float16)
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="legacy")
    b = tf.constant(1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a int8 tensor but is a int32"):
        tf.add(tf.add(a, b), c)
    assert repr(tf.add(tf.add(b, a), c)) == "<tf.Tensor: shape=(), dtype=int32, numpy=3>"
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
    b = tf.constant(1)
    assert repr(tf.add(tf.add(a, b), c)) == "<tf.Tensor: shape=(), dtype=float16, numpy=3.0>"
    assert repr(tf.add(tf.add(b, a), c)) == "<tf.Tensor: shape=(), dtype=float16, numpy=3.0>"
    # observed: tf.add(int8 tensor, 2.5) in "all" is a weak float64 3.5
    assert repr(tf.add(tf.constant(1, tf.int8), 2.5)) == "<tf.Tensor: shape=(), dtype=float64, numpy=3.5, weak=True>"


def test_numpy_array_on_the_left_is_a_tensor():
    # observed: a numpy array left of a tensor's operator gives a tensor, in every mode
    out = np.array([1., 2.], np.float32) + tf.constant([1., 2.])
    assert repr(out) == "<tf.Tensor: shape=(2,), dtype=float32, numpy=array([2., 4.], dtype=float32)>"
    assert repr(np.array(3.2, np.float16) + tf.constant(1, tf.int8)) == "<tf.Tensor: shape=(), dtype=int8, numpy=4>"
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="legacy")
    out = np.array(3.2, np.float16) + tf.constant(1, tf.int8) + tf.constant(50)
    assert repr(out) == "<tf.Tensor: shape=(), dtype=float64, numpy=54.19921875>"
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
    out = np.array(3.2, np.float16) + tf.constant(1, tf.int8) + tf.constant(50)
    assert repr(out) == "<tf.Tensor: shape=(), dtype=float16, numpy=54.1875>"


def test_tensor_slicing_guide_cells():
    t1 = tf.constant([0, 1, 2, 3, 4, 5, 6, 7])
    assert tf.slice(t1, begin=[1], size=[3]).numpy().tolist() == [1, 2, 3]
    assert tf.gather(t1, indices=[0, 3, 6]).numpy().tolist() == [0, 3, 6]
    t4 = tf.constant([[0, 5], [1, 6], [2, 7], [3, 8], [4, 9]])
    assert tf.gather_nd(t4, indices=[[2], [3], [0]]).numpy().tolist() == [[2, 7], [3, 8], [0, 5]]
    t11 = tf.constant([[2, 7, 0], [9, 0, 1], [0, 3, 8]])
    t12 = tf.tensor_scatter_nd_add(t11, indices=[[0, 2], [1, 1], [2, 0]], updates=[6, 5, 4])
    assert t12.numpy().tolist() == [[2, 7, 6], [9, 5, 1], [4, 3, 8]]
    t13 = tf.tensor_scatter_nd_update(t11, indices=[[0, 2], [1, 1], [2, 0]], updates=[6, 5, 4])
    assert t13.numpy().tolist() == [[2, 7, 6], [9, 5, 1], [4, 3, 8]]
    v = tf.Variable([[1, 2, 3], [4, 5, 6]])
    v.scatter_nd_sub(indices=[[0, 1], [1, 2]], updates=[1, 1])
    assert v.numpy().tolist() == [[1, 1, 3], [4, 5, 5]]


@pytest.mark.parametrize("mode", ["legacy", "all", "safe"])
def test_constant_of_a_tensor_with_another_dtype(mode):
    # observed: legacy refuses both; "all" and "safe" cast int16 to float32 (the guide's cell), and refuse float32
    # to int32 with the "Expected tensor" TypeError ("all") or the SAFE refusal ("safe")
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode=mode)
    if mode == "legacy":
        with pytest.raises(TypeError, match=r"Expected tensor 10 with dtype tf.float32, but got dtype tf.int16."):
            tf.constant(tf.constant(10, tf.int16), tf.float32)
    else:
        assert repr(tf.constant(tf.constant(10, tf.int16), tf.float32)) == (
            "<tf.Tensor: shape=(), dtype=float32, numpy=10.0>")
    text = ("Expected tensor 10.5 with dtype tf.int32" if mode != "safe"
            else r"between \(<dtype: 'float32'>, weak=True\) and \(<dtype: 'int32'>, weak=False\) is disallowed")
    with pytest.raises(TypeError, match=text):
        tf.constant(tf.constant(10.5), tf.int32)


# Index errors, observed in TF 2.21 (InvalidArgumentError; the text before the op name is TF's)
_OUT_OF_RANGE = [
    (lambda: tf.scatter_nd([[0, 1], [2, 5]], [1, 2], [2, 3]),
     "indices[1] = [2, 5] does not index into shape [2,3] [Op:ScatterNd]"),
    (lambda: tf.gather_nd(tf.zeros([2, 3], tf.int32), [[0, 0], [0, 7]]),
     "indices[1] = [0, 7] does not index into param shape [2,3], node name: GatherNd [Op:GatherNd]"),
    (lambda: tf.tensor_scatter_nd_add(tf.zeros([2, 3], tf.int32), [[0, 0], [3, 0]], [1, 1]),
     "indices[1] = [3, 0] does not index into shape [2,3] [Op:TensorScatterAdd]"),
    (lambda: tf.tensor_scatter_nd_max(tf.zeros([2, 3], tf.int32), [[-1, 0]], [1]),
     "indices[0] = [-1, 0] does not index into shape [2,3] [Op:TensorScatterMax]"),
    (lambda: tf.tensor_scatter_nd_update(tf.zeros([2, 3], tf.int32), [[[0, 0]], [[3, 0]]], [[1], [1]]),
     "indices[1,0] = [3, 0] does not index into shape [2,3] [Op:TensorScatterUpdate]"),
    (lambda: tf.tensor_scatter_nd_update(tf.zeros([2, 3], tf.int32), [[0, 0]], [1, 2]),
     "Outer dimensions of indices and update must match. Indices shape: [1,2], updates shape:[2] "
     "[Op:TensorScatterUpdate]"),
    (lambda: tf.scatter_nd([[0]], [1, 2], [4]),
     "Dimensions [0,1) of indices[shape=[1,1]] must match dimensions [0,1) of updates[shape=[2]] [Op:ScatterNd]"),
    (lambda: tf.slice(tf.zeros([2, 3]), [1, 1], [2, 1]), "Expected size[0] in [0, 1], but got 2 [Op:Slice]"),
    (lambda: tf.slice(tf.zeros([2, 3]), [3, 0], [1, 1]), "Expected begin[0] in [0, 2], but got 3 [Op:Slice]"),
    (lambda: tf.slice(tf.zeros([2, 3]), [0, 2], [-1, 2]), "Expected size[1] in [0, 1], but got 2 [Op:Slice]"),
]


@pytest.mark.parametrize("call,text", _OUT_OF_RANGE)
def test_index_errors_are_tf_invalid_argument(call, text):
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        call()
    assert str(caught.value).split("\n")[0] == text


def test_scatter_python_float_updates_for_an_integer_tensor():
    # observed: TypeError "Cannot convert [1.5] to EagerTensor of dtype int32"; tf.scatter_nd takes the updates'
    # own dtype (float32 [1.5, 0.])
    for scatter in (tf.tensor_scatter_nd_update, tf.tensor_scatter_nd_add):
        with pytest.raises(TypeError, match=r"^Cannot convert \[1.5\] to EagerTensor of dtype int32$"):
            scatter(tf.constant([0, 1, 2]), [[1]], [1.5])
    assert repr(tf.scatter_nd([[0]], [1.5], [2])) == (
        "<tf.Tensor: shape=(2,), dtype=float32, numpy=array([1.5, 0. ], dtype=float32)>")


# observed: (shape, first values) of tf.strided_slice(tf.reshape(tf.range(24), [2, 3, 4]), begin, end, strides)
_STRIDED = [
    (([0, 0], [1, 2], [1, 1], dict(new_axis_mask=1)), (1, 2, 3, 4), [0, 1, 2, 3]),
    (([0, 1], [0, 3], [1, 1], dict(ellipsis_mask=1)), (2, 3, 2), [1, 2, 5, 6]),
    (([1, 0], [2, 0], [1, 1], dict(ellipsis_mask=2)), (1, 3, 4), [12, 13, 14, 15]),
    (([0, 0, 1], [0, 0, 3], [1, 1, 1], dict(ellipsis_mask=1, new_axis_mask=2)), (2, 3, 1, 2), [1, 2, 5, 6]),
    (([0, 1], [1, 3], [1, 1], dict(ellipsis_mask=1, shrink_axis_mask=2)), (2, 3), [1, 5, 9, 13]),
    (([0, 0], [0, 0], [1, 1], dict(ellipsis_mask=1, new_axis_mask=3)), (2, 3, 4, 1), [0, 1, 2, 3]),
]


@pytest.mark.parametrize("args,shape,first", _STRIDED)
def test_strided_slice_ellipsis_and_new_axis_masks(args, shape, first):
    x = tf.reshape(tf.range(24), [2, 3, 4])
    out = tf.strided_slice(x, args[0], args[1], args[2], **args[3])
    assert tuple(out.shape) == shape
    assert np.asarray(out).ravel().tolist()[:4] == first


@pytest.mark.parametrize("mode", ["all", "safe"])
def test_variable_assign_of_another_dtype(mode):
    # observed: the guide's cell (int32 variable, int16 tensor) is 15 in "all" and "safe"; a float32 tensor is
    # "all"'s "Variable dtype is immutable" TypeError, "safe"'s refusal; legacy is TF's ValueError (elsewhere)
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode=mode)
    v = tf.Variable(10, tf.int32)
    assert repr(v.assign_add(tf.constant(5, tf.int16))) == (
        "<tf.Variable 'UnreadVariable' shape=() dtype=int32, numpy=15>")
    assert np.dtype(v.dtype) == np.int32 and int(v.numpy()) == 15
    text = ("Variable dtype is immutable. Calling assign_add of Variable (with dtype <dtype: 'int32'>) on 5.5 "
            "requires converting 5.5 to <dtype: 'int32'>. This is disabled in the current promotion semantics. "
            "Please convert 5.5 manually before calling assign_add." if mode == "all" else _SAFE.format(
                "(<dtype: 'int32'>, weak=False)", "(<dtype: 'float32'>, weak=False)"))
    with pytest.raises(TypeError) as caught:
        v.assign_add(tf.constant(5.5, tf.float32))
    assert str(caught.value) == text
    assert int(v.numpy()) == 15


def test_legacy_python_int_wraps_into_an_integer_tensor():
    # observed (numpy behavior, legacy): int8 + 300 is 45, 300 + int8 45, uint8 + -1 is 0, int32 + 2**40 is 1,
    # int8 * 200 is -56, int8(100) < 300 False (300 read as int8 44), uint8 [1, 2] == 257 [True, False]
    tnp.experimental_enable_numpy_behavior()
    i8, u8 = tf.constant(1, tf.int8), tf.constant(1, tf.uint8)
    assert repr(i8 + 300) == repr(300 + i8) == "<tf.Tensor: shape=(), dtype=int8, numpy=45>"
    assert repr(u8 + (-1)) == "<tf.Tensor: shape=(), dtype=uint8, numpy=0>"
    assert repr(tf.constant(1, tf.int32) + 2**40) == "<tf.Tensor: shape=(), dtype=int32, numpy=1>"
    assert repr(i8 * 200) == "<tf.Tensor: shape=(), dtype=int8, numpy=-56>"
    assert not bool(tf.constant(100, tf.int8) < 300)
    assert (tf.constant([1, 2], tf.uint8) == 257).numpy().tolist() == [True, False]


def test_boolean_mask_of_another_shape():
    # observed: ValueError "Shapes (2,) and (3,) are incompatible" (the tensor's dimensions, then the mask's)
    with pytest.raises(ValueError, match=r"^Shapes \(2,\) and \(3,\) are incompatible"):
        tf.boolean_mask(tf.constant([[1., 2., 3.], [4., 5., 6.]]), [True, False, True])
    kept = tf.boolean_mask(tf.constant([[1., 2., 3.], [4., 5., 6.]]), [True, False, True], axis=1)
    assert kept.numpy().tolist() == [[1., 3.], [4., 6.]]


def test_unary_math_of_a_weak_input_is_weak():
    # observed in "all": tf.math.abs([100.0, 4.0]) (the guide's cell), tf.math.sqrt(4.), tf.math.square(3),
    # tf.math.negative(3), tf.math.sign(-2) print weak=True; a float32 tensor's tf.math.abs does not
    tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all")
    assert repr(tf.math.abs([100.0, 4.0])) == (
        "<tf.Tensor: shape=(2,), dtype=float32, numpy=array([100.,   4.], dtype=float32), weak=True>")
    assert repr(tf.math.sqrt(4.)) == "<tf.Tensor: shape=(), dtype=float32, numpy=2.0, weak=True>"
    assert repr(tf.math.square(3)) == "<tf.Tensor: shape=(), dtype=int32, numpy=9, weak=True>"
    assert repr(tf.math.negative(3)) == "<tf.Tensor: shape=(), dtype=int32, numpy=-3, weak=True>"
    assert repr(tf.math.sign(-2)) == "<tf.Tensor: shape=(), dtype=int32, numpy=-1, weak=True>"
    assert repr(tf.math.abs(tf.constant(-1., tf.float32))) == "<tf.Tensor: shape=(), dtype=float32, numpy=1.0>"
