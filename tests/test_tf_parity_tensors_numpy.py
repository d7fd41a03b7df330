"""Tensors as numpy sees them, TF's op errors, and the guide "NumPy API on TensorFlow" (`tf.experimental.numpy`).

Every expected value and error text here was observed in TF 2.21 (tensorflow-cpu 2.21, Keras 3.15), running the
same expression with `import tensorflow as tf` (and `import tensorflow.experimental.numpy as tnp`).
"""
from __future__ import annotations

import re
import types

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.tfdata import tensor_numpy

tnp = tf.experimental.numpy


@pytest.fixture
def numpy_behavior():
    """`tnp.experimental_enable_numpy_behavior()` is process-wide (as TF's): put it back after the test."""
    saved = dict(tensor_numpy.NUMPY_BEHAVIOR)
    tnp.experimental_enable_numpy_behavior()
    yield
    tensor_numpy.NUMPY_BEHAVIOR.update(saved)


# --- t.dtype is TF's DType in a script's code -----------------------------------------------------------------

def test_tensor_dtype_prints_as_tf_dtype():
    t = tf.constant([1.0, 2.0])
    # observed in TF 2.21: print(t.dtype) -> <dtype: 'float32'>, repr tf.float32
    assert str(t.dtype) == "<dtype: 'float32'>" and repr(t.dtype) == "tf.float32"
    assert str(tf.reduce_sum(t).dtype) == "<dtype: 'float32'>"
    assert t.dtype == tf.float32 and t.dtype == np.float32 and t.dtype == "float32"
    assert t.dtype.is_floating and t.dtype.name == "float32" and t.dtype.as_numpy_dtype is np.float32
    assert str(tf.constant([1, 2]).dtype) == "<dtype: 'int32'>"
    # jdist's DType is also numpy's dtype to numpy and to code written against numpy (TF refuses np.zeros here)
    assert np.zeros(2, t.dtype).dtype == np.float32 and t.dtype.kind == "f" and t.dtype.itemsize == 4


def test_library_code_reads_numpy_dtype():
    t = tf.constant([1, 2])
    assert isinstance(tensor_numpy.dtype_for(t, _library_frame()), np.dtype)
    assert (t + 1).numpy().dtype == np.int32  # jdist's own operators read numpy's dtype


def _library_frame():
    return types.SimpleNamespace(f_globals={"__name__": "jdist.tf_compat.ops"})


# --- numpy functions and numpy scalars on tensors -------------------------------------------------------------

def test_numpy_functions_of_tensors_give_numpy_values():
    a = tf.constant([1.0, 2.0])
    # observed in TF 2.21: np.add(t, 1), np.multiply(t, t), np.sqrt(t) are np.ndarray; np.sum(t) np.float32
    for result, expected in ((np.add(a, 1), [2.0, 3.0]), (np.multiply(a, a), [1.0, 4.0]),
                             (np.sqrt(tf.constant([4.0])), [2.0])):
        assert type(result) is np.ndarray and result.dtype == np.float32
        np.testing.assert_allclose(result, expected)
    assert type(np.add(tf.constant([1, 2]), 1)) is np.ndarray
    assert type(np.sum(a)) is np.float32 and np.sum(a) == 3.0
    assert type(np.add(tf.constant(2.0), 1)) is np.float32


@pytest.mark.parametrize("expr, dtype, values", [
    # observed in TF 2.21: a numpy scalar on the left follows TF's operand rule (the tensor's dtype)
    (lambda: np.float32(2) * tf.constant([1.0, 2.0]), "float32", [2.0, 4.0]),
    (lambda: np.float64(2) * tf.constant([1.0, 2.0]), "float32", [2.0, 4.0]),
    (lambda: np.int32(1) + tf.constant([1, 2]), "int32", [2, 3]),
    (lambda: np.int64(1) + tf.constant([1, 2]), "int32", [2, 3]),
    (lambda: np.int32(1) + tf.constant([1.0, 2.0]), "float32", [2.0, 3.0]),
    (lambda: np.float32(2) / tf.constant([1, 2]), "float64", [2.0, 1.0]),
    (lambda: np.int64(7) // tf.constant([2, 3]), "int32", [3, 2]),
    (lambda: np.float32(2) < tf.constant([1.0, 2.0]), "bool", [False, False]),
])
def test_numpy_scalar_on_the_left(expr, dtype, values):
    result = expr()
    assert str(result.dtype) == f"<dtype: '{dtype}'>"
    np.testing.assert_array_equal(result.numpy(), values)


def test_argmax_output_types():
    # observed in TF 2.21: int64 by default (host tensors keep it), int32 with output_type=tf.int32
    assert tf.argmax([1, 3, 2]).dtype == tf.int64 and int(tf.argmax([1, 3, 2])) == 1
    assert tf.math.argmin(tf.constant([[1, 3], [4, 0]]), axis=1).numpy().tolist() == [0, 1]
    assert tf.argmax([1, 3, 2], output_type=tf.int32).dtype == tf.int32


def test_tensor_spec_shape_is_a_tensor_shape():
    spec = tf.TensorSpec([None, 3])
    # observed in TF 2.21: TensorShape([None, 3]), printed (None, 3); the spec prints shape=(None, 3)
    assert isinstance(spec.shape, tf.TensorShape) and repr(spec.shape) == "TensorShape([None, 3])"
    assert str(spec.shape) == "(None, 3)" and spec.shape.as_list() == [None, 3]
    assert repr(spec) == "TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)"
    # observed in TF 2.21: spec.dtype is a DType (repr tf.float32, printed <dtype: 'float32'>), also element_spec's
    assert repr(spec.dtype) == "tf.float32" and str(spec.dtype) == "<dtype: 'float32'>" and spec.dtype == np.float32
    assert str(tf.data.Dataset.range(3).element_spec.dtype) == "<dtype: 'int64'>"
    assert repr(tf.TensorSpec(shape=None)) == "TensorSpec(shape=<unknown>, dtype=tf.float32, name=None)"
    unknown = tf.TensorSpec(shape=None).shape  # observed: TensorShape(None), rank None, printed <unknown>
    assert isinstance(unknown, tf.TensorShape) and unknown.rank is None and str(unknown) == "<unknown>"
    assert tf.TensorSpec(shape=None) == tf.TensorSpec(None) and tf.TensorSpec(None).is_compatible_with(
        np.ones(2, np.float32))


def test_item_assignment_is_type_error():
    # observed in TF 2.21: "'tensorflow.python.framework.ops.EagerTensor' object does not support item assignment"
    with pytest.raises(TypeError, match="EagerTensor' object does not support item assignment"):
        tf.constant([1, 2])[0] = 5


# --- TF's eager op errors end in [Op:Name] ----------------------------------------------------------------------

_A, _B = [1.0, 2.0], [1.0, 2.0, 3.0]


@pytest.mark.parametrize("expr, op", [
    (lambda: tf.constant(_A) + tf.constant(_B), "AddV2"),
    (lambda: tf.constant(_A) - tf.constant(_B), "Sub"),
    (lambda: tf.constant(_A) * tf.constant(_B), "Mul"),
    (lambda: tf.constant(_A) / tf.constant(_B), "RealDiv"),
    (lambda: tf.constant(_A) // tf.constant(_B), "FloorDiv"),
    (lambda: tf.constant(_A) < tf.constant(_B), "Less"),
    (lambda: tf.constant([1, 2]) & tf.constant([1, 2, 3]), "BitwiseAnd"),
    (lambda: tf.constant([True, False]) & tf.constant([True, False, True]), "LogicalAnd"),
    (lambda: tf.add(tf.constant(_A), tf.constant(_B)), "AddV2"),
    (lambda: tf.multiply(tf.constant(_A), tf.constant(_B)), "Mul"),
    (lambda: tf.maximum(tf.constant(_A), tf.constant(_B)), "Maximum"),
])
def test_incompatible_shapes_error(expr, op):
    # observed in TF 2.21: InvalidArgumentError "... Incompatible shapes: [2] vs. [3] [Op:AddV2] name: "
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"Incompatible shapes: \[2\] vs. \[3\] \[Op:{op}\]"):
        expr()


def test_op_errors_name_the_op():
    # observed in TF 2.21 (the texts after TF's "{{function_node __wrapped__...}} " prefix)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Matrix size-incompatible: In\[0\]: \[2,3\], In\[1\]: \[2,3\] \[Op:MatMul\]"):
        tf.matmul(tf.ones([2, 3]), tf.ones([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"^indices = 5 is not in \[0, 2\) \[Op:GatherV2\]"):
        tf.gather(tf.constant([1, 2]), 5)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0,1\] = 3 is not in \[0, 2\) \[Op:GatherV2"):
        tf.gather(tf.constant([[1, 2]]), [[0, 3]], axis=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,3] vs. shape[1] = [2,2] "
            "[Op:ConcatV2] name: concat")):
        tf.concat([tf.ones([2, 3]), tf.ones([2, 2])], 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,3] vs. shape[1] = [2] [Op:ConcatV2]")):
        tf.concat([tf.ones([2, 3]), tf.ones([2])], 0)
    assert tf.concat([tf.ones([2, 3]), tf.ones([1, 3])], 0).shape == (3, 3)


# --- the guide "NumPy API on TensorFlow" (site/en/guide/tf_numpy.ipynb), cell by cell --------------------------

def test_guide_ndarray_attributes(numpy_behavior):
    ones = tnp.ones([5, 3], dtype=tnp.float32)
    # observed: "Created ND array with shape = (5, 3), rank = 2, dtype = <dtype: 'float32'> on device = /job:..."
    text = f"shape = {ones.shape}, rank = {ones.ndim}, dtype = {ones.dtype} on device = {ones.device}"
    assert text == ("shape = (5, 3), rank = 2, dtype = <dtype: 'float32'> on device = "
                    "/job:localhost/replica:0/task:0/device:CPU:0")
    assert isinstance(ones, tf.Tensor) and isinstance(ones, tnp.ndarray)
    assert str(ones.T.shape) == "(3, 5)" and str(ones.reshape(-1).shape) == "(15,)"
    assert tnp.float32 is np.float32 and tnp.newaxis is None  # observed: TF's tnp dtypes are numpy's


def test_guide_type_promotion(numpy_behavior):
    values = [tnp.asarray(1, dtype=d) for d in (tnp.int32, tnp.int64, tnp.float32, tnp.float64)]
    table = [f"{v1.dtype.name} + {v2.dtype.name} => {(v1 + v2).dtype.name}"
             for i, v1 in enumerate(values) for v2 in values[i + 1:]]
    assert table == ["int32 + int64 => int64", "int32 + float32 => float64", "int32 + float64 => float64",
                     "int64 + float32 => float64", "int64 + float64 => float64", "float32 + float64 => float64"]
    assert tnp.asarray(1).dtype.name == "int64" and tnp.asarray(1.).dtype.name == "float64"
    # observed in TF 2.21 with numpy behavior: tf ops' operands promote as numpy's
    assert (tf.constant([1, 2]) + tf.constant([1., 2.])).dtype == tf.float64
    assert (tf.constant([1, 2]) + 1.5).dtype == tf.float64
    assert (tf.constant([1., 2.]) * 2.5).dtype == tf.float32
    assert (tnp.asarray([1, 2], dtype=tnp.int32) + np.int64(1)).dtype == tf.int64


def test_guide_prefer_float32(numpy_behavior):
    tnp.experimental_enable_numpy_behavior(prefer_float32=True)
    assert tnp.asarray(1.).dtype.name == "float32" and tnp.add(1., 2.).dtype.name == "float32"
    # observed: linspace of Python numbers float32; ones, sqrt(2), a float64 numpy array keep float64
    assert tnp.linspace(0, 1, 3).dtype == tf.float32 and tnp.ones([2]).dtype == tf.float64
    assert tnp.sqrt(2).dtype == tf.float64 and tnp.add(np.ones(2), 1.).dtype == tf.float64
    tnp.experimental_enable_numpy_behavior(prefer_float32=False)
    assert tnp.asarray(1.).dtype.name == "float64" and tnp.add(1., 2.).dtype.name == "float64"


def test_guide_broadcasting_and_indexing(numpy_behavior):
    assert str((tnp.ones([2, 3]) + tnp.ones([3]) + tnp.ones([1, 2, 1])).shape) == "(1, 2, 3)"
    x = tnp.arange(24).reshape(2, 3, 4)
    assert str(x[1, tnp.newaxis, 1:3, ...]) == \
        "tf.Tensor(\n[[[16 17 18 19]\n  [20 21 22 23]]], shape=(1, 2, 4), dtype=int64)"
    assert str(x[:, (True, False, True)]) == ("tf.Tensor(\n[[[ 0  1  2  3]\n  [ 8  9 10 11]]\n\n [[12 13 14 15]\n"
                                              "  [20 21 22 23]]], shape=(2, 2, 4), dtype=int64)")
    assert str(x[1, (0, 0, 1), tnp.asarray([0, 1, 1])]) == "tf.Tensor([12 13 17], shape=(3,), dtype=int64)"
    with pytest.raises(TypeError):  # "Currently, TensorFlow NumPy does not support mutation."
        tnp.arange(6)[1] = -1


def test_guide_model_and_interop(numpy_behavior):
    size = 32
    stddev = tnp.sqrt(size).astype(tnp.float32)
    w1 = tnp.random.randn(size, 64).astype(tnp.float32) / stddev
    bias, w2 = tnp.random.randn(64).astype(tnp.float32), tnp.random.randn(64, 2).astype(tnp.float32) / 8
    out = tnp.matmul(tnp.maximum(tnp.matmul(tnp.ones([2, 32], dtype=tnp.float32), w1) + bias, 0), w2)
    assert out.shape == (2, 2) and out.dtype == tf.float32
    np_sum = np.sum(tnp.ones([2, 3]))  # observed: "sum = 6.0. Class: <class 'numpy.float64'>"
    assert type(np_sum) is np.float64 and float(np_sum) == 6.0
    tnp_sum = tnp.sum(np.ones([2, 3]))  # observed: a tensor (EagerTensor), float64
    assert isinstance(tnp_sum, tf.Tensor) and tnp_sum.dtype == tf.float64 and float(tnp_sum) == 6.0
    assert str(tnp.ones([2]) + np.ones([2])) == "tf.Tensor([2. 2.], shape=(2,), dtype=float64)"
    x = tf.constant([1, 2])
    assert str(tnp.asarray(x)) == str(tf.convert_to_tensor(tnp.asarray(x))) == \
        "tf.Tensor([1 2], shape=(2,), dtype=int32)"
    assert type(x.numpy()) is np.ndarray
    assert str(tf.reduce_sum(tnp.ones([2, 3], tnp.float32))) == "tf.Tensor(6.0, shape=(), dtype=float32)"
    assert str(tnp.sum(tf.ones([2, 3]))) == "tf.Tensor(6.0, shape=(), dtype=float32)"


def test_tnp_in_compiled_code_and_missing_names():
    @tf.function
    def f(x):
        return tnp.sum(tnp.square(x) + 1)

    assert float(f(tf.constant([1.0, 2.0]))) == 7.0
    import jdist.tf_compat.experimental.numpy as imported  # `import tensorflow.experimental.numpy as tnp`
    assert imported is tnp
    with pytest.raises(AttributeError, match=r"tf\.experimental\.numpy\.no_such_name.*docs/tf_mapping\.md"):
        tnp.no_such_name  # noqa: B018



def test_unary_operators_give_tensors():
    t = tf.constant([-1.0, 2.0])
    # observed in TF 2.21: -t, abs(t), ~b are tensors; np.negative(t), np.abs(t) numpy arrays, np.mean(t) np.float32
    for result, expected in ((-t, [1.0, -2.0]), (abs(t), [1.0, 2.0])):
        assert isinstance(result, tf.Tensor) and result.numpy().tolist() == expected
    assert (~tf.constant([True, False])).numpy().tolist() == [False, True]
    assert (-tf.constant(-3)).numpy() == 3
    assert type(np.negative(t)) is np.ndarray and type(np.abs(t)) is np.ndarray
    assert type(np.mean(t)) is np.float32

