"""The op rules TF's beginner tutorials lean on (quickstart, customization, keras, load_data), as TF 2.21 applies
them: a numpy operand of a `tf.math` binary function takes the op's dtype instead of numpy's promotion,
`tf.linspace` converts `stop` to `start`'s dtype, and `tf.nn.softmax` rounds as TF's kernel.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) on this machine.
"""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.tf_compat.error_types import InvalidArgumentError


def _f32():
    return tf.constant([1.0, 2.0])


def _i32():
    return tf.constant([1, 2])


# (expression, dtype, values): observed in TF 2.21, Keras 3.15
NUMPY_OPERANDS = [
    ("tf.math.multiply(_f32(), np.array([2.0, 3.0]))", "float32", [2.0, 6.0]),
    ("tf.math.multiply(np.array([2.0, 3.0]), _f32())", "float32", [2.0, 6.0]),
    ("tf.math.add(_i32(), np.array([2.5, 3.5]))", "int32", [3, 5]),
    ("tf.math.add(_i32(), np.array([2, 3], np.int64))", "int32", [3, 5]),
    ("tf.math.add(_f32(), np.float64(0.5))", "float32", [1.5, 2.5]),
    ("tf.math.add(2, np.array([1.5], np.float32))", "int32", [3]),
    ("tf.math.add(2.0, np.array([1], np.int64))", "float32", [3.0]),
    ("tf.math.add(np.array([1.5], np.float32), np.array([1.5]))", "float32", [3.0]),
    ("tf.math.add(np.array([1.5]), np.array([1.5], np.float32))", "float64", [3.0]),
    ("tf.math.add(np.array([1]), np.array([1.5]))", "int64", [2]),
    ("tf.math.subtract(_f32(), np.array([1, 1], np.int32))", "float32", [0.0, 1.0]),
    ("tf.math.subtract(np.array([1.5, 2.0]), _i32())", "int32", [0, 0]),
    ("tf.math.multiply(np.array([1.5, 2.0]), _i32())", "int32", [1, 4]),
    ("tf.math.multiply(np.array([2.0], np.float32), tf.constant([1]))", "int32", [2]),
    ("tf.math.multiply(np.array([2], np.int32), tf.constant([1.5]))", "float32", [3.0]),
    ("tf.math.multiply(np.array([1.5]), tf.constant([1.0], tf.float16))", "float16", [1.5]),
    ("tf.math.multiply(tf.constant([1], tf.uint8), np.array([300]))", "uint8", [44]),
    ("tf.math.multiply(np.ones([2]), 42)", "float64", [42.0, 42.0]),
    ("tf.math.multiply(tf.Variable([1.0, 2.0]), np.array([2.0, 3.0]))", "float32", [2.0, 6.0]),
    ("tf.math.multiply(np.array([2.0, 3.0]), tf.Variable([1.0, 2.0]))", "float32", [2.0, 6.0]),
    ("tf.math.maximum(_f32(), np.array([0.0, 5.0]))", "float32", [1.0, 5.0]),
    ("tf.math.maximum(np.array([1.5, 2.0]), _i32())", "int32", [1, 2]),
    ("tf.math.minimum(np.array([0, 5]), _f32())", "float32", [0.0, 2.0]),
    ("tf.math.pow(_f32(), np.array([2, 2]))", "float32", [1.0, 4.0]),
    ("tf.math.pow(np.array([1.5, 2.0]), _i32())", "int32", [1, 4]),
    ("tf.math.equal(_i32(), np.array([1.0, 2.5]))", "bool", [True, True]),
    ("tf.math.equal(np.array([1.5, 2.0]), _i32())", "bool", [True, True]),
    ("tf.math.not_equal(np.array([1.5, 2.0]), _i32())", "bool", [False, False]),
    ("tf.math.greater(np.array([1.5, 2.0]), _i32())", "bool", [False, False]),
    ("tf.math.less_equal(np.array([1.5, 2.0]), _i32())", "bool", [True, True]),
    ("tf.math.greater(np.array([1.5]), tf.constant([1.0], tf.float16))", "bool", [True]),
    ("tf.math.equal(np.array([1.5]), tf.constant([1.0], tf.float16))", "bool", [False]),
    ("tf.matmul(tf.constant([[1.0]]), np.array([[2.0]]))", "float32", [[2.0]]),
    ("tf.matmul(np.ones((1, 1)), np.ones((1, 1), np.float32))", "float64", [[1.0]]),
    ("tf.matmul(np.ones((1, 1), np.float32), np.ones((1, 1)))", "float32", [[1.0]]),
    ("tf.math.divide(_f32(), np.array([2.0, 2.0]))", "float32", [0.5, 1.0]),
    ("tf.math.divide(np.array([1.0]), tf.constant([2.0]))", "float32", [0.5]),
    ("tf.math.divide(tf.Variable([1.0]), np.array([2.0]))", "float32", [0.5]),
    ("tf.math.divide(_i32(), np.array([2.0, 2.0]))", "float64", [0.5, 1.0]),
    ("tf.math.divide(tf.constant([3]), np.array([2], np.int64))", "float64", [1.5]),
]


@pytest.mark.parametrize("expression, dtype, values", NUMPY_OPERANDS)
def test_numpy_operand_takes_tf_dtype(expression: str, dtype: str, values: list) -> None:
    out = eval(expression)  # noqa: S307 - the table above
    assert np.asarray(out).dtype == np.dtype(dtype), expression
    assert np.asarray(out).tolist() == values, expression


# A numpy value given first to tf.math.add or tf.matmul keeps its dtype: another tensor dtype is TF's error (TF 2.21).
@pytest.mark.parametrize("expression, text", [
    ("tf.math.add(np.array([2.5, 3.5]), _i32())", "cannot compute AddV2 as input #1(zero-based) was expected to be "
                                                 "a double tensor but is a int32 tensor [Op:AddV2] name: "),
    ("tf.math.add(np.array([1.0]), tf.constant([1.0], tf.float16))", "cannot compute AddV2 as input #1(zero-based) "
                                                                     "was expected to be a double tensor but is a half "
                                                                     "tensor [Op:AddV2] name: "),
    ("tf.matmul(np.array([[2.0]]), tf.constant([[1.0]]))", "cannot compute MatMul as input #1(zero-based) was "
                                                           "expected to be a double tensor but is a float tensor "
                                                           "[Op:MatMul] name: "),
    ("tf.linalg.matmul(np.array([[2]]), tf.constant([[1.0]]))", "cannot compute MatMul as input #1(zero-based) was "
                                                                "expected to be a int64 tensor but is a float tensor "
                                                                "[Op:MatMul] name: "),
    ("tf.math.add(tf.constant([1.0]), np.array(['a']))", "cannot compute AddV2 as input #1(zero-based) was expected "
                                                         "to be a float tensor but is a string tensor [Op:AddV2] "
                                                         "name: "),
])
def test_numpy_operand_errors(expression: str, text: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        eval(expression)  # noqa: S307 - the table above
    assert str(caught.value.message if hasattr(caught.value, "message") else caught.value).startswith(text)


def test_numpy_operand_in_compiled_function() -> None:
    """The same rule inside `tf.function` (TF 2.21: every output float32)."""
    @tf.function
    def step(x):
        return (tf.math.multiply(x, np.array([2.0, 3.0])), tf.maximum(x, np.float64(1.5)),
                tf.matmul(x[None], np.ones((2, 1))), tf.linspace(0.0, 250, 3))

    got = [np.asarray(v) for v in step(tf.constant([1.0, 2.0]))]
    assert [v.dtype.name for v in got] == ["float32"] * 4
    assert [v.tolist() for v in got] == [[2.0, 6.0], [1.5, 2.0], [[3.0]], [0.0, 125.0, 250.0]]


# (expression, dtype, values): observed in TF 2.21
LINSPACE = [
    ("tf.linspace(0.0, 250, 3)", "float32", [0.0, 125.0, 250.0]),
    ("tf.linspace(0, 10, 3)", "float64", [0.0, 5.0, 10.0]),
    ("tf.linspace(np.float64(0), 1, 3)", "float64", [0.0, 0.5, 1.0]),
    ("tf.linspace(0.0, np.float64(1), 3)", "float32", [0.0, 0.5, 1.0]),
    ("tf.linspace(tf.constant(0.0), 1, 3)", "float32", [0.0, 0.5, 1.0]),
    ("tf.linspace(tf.constant(0), 4, 3)", "float64", [0.0, 2.0, 4.0]),
    ("tf.linspace(0, np.float32(4), 3)", "float64", [0.0, 2.0, 4.0]),
    ("tf.linspace([0.0, 1.0], [1, 2], 3)", "float32", [[0.0, 1.0], [0.5, 1.5], [1.0, 2.0]]),
    ("tf.linspace(tf.constant(0.0, tf.float16), 1, 3)", "float16", [0.0, 0.5, 1.0]),
    ("tf.linspace(np.array(0.0, np.float32), 1, 3)", "float32", [0.0, 0.5, 1.0]),
    ("tf.linspace(0.0, 1.0, tf.constant(3))", "float32", [0.0, 0.5, 1.0]),
    ("tf.linspace(0.0, 1.0, 0)", "float32", []),
]


@pytest.mark.parametrize("expression, dtype, values", LINSPACE)
def test_linspace_dtype(expression: str, dtype: str, values: list) -> None:
    out = np.asarray(eval(expression))  # noqa: S307 - the table above
    assert out.dtype == np.dtype(dtype), expression
    assert out.tolist() == values, expression


def test_linspace_errors() -> None:
    # TF 2.21's errors (observed): a tensor `stop` of another dtype, a Python float for an integer start, a float num
    with pytest.raises(ValueError, match=r"^stop: Tensor conversion requested dtype int32 for Tensor with dtype "
                                         r"float32: <tf\.Tensor: shape=\(\), dtype=float32, numpy=1\.0>$"):
        tf.linspace(tf.constant(0), tf.constant(1.0), 3)
    with pytest.raises(ValueError, match=r"^stop: Tensor conversion requested dtype float32 for Tensor with dtype "
                                         r"float64"):
        tf.linspace(0.0, tf.constant(1.0, tf.float64), 3)
    with pytest.raises(TypeError, match=r"^Cannot convert 250\.0 to EagerTensor of dtype int32"):
        tf.linspace(0, 250.0, 3)
    with pytest.raises(TypeError, match=r"^Cannot convert 1 to EagerTensor of dtype bool"):
        tf.linspace(True, 1, 3)
    with pytest.raises(TypeError, match=r"^Argument `tensor` \(name: num\) must be of type integer\. Received "
                                        r"`tensor` = 2\.0 of dtype: <dtype: 'float32'>$"):
        tf.linspace(0.0, 1.0, 2.0)


@pytest.mark.parametrize("logits, axis, expected", [
    # TF 2.21's float32 results, to the last bit (observed)
    ([1.0, 2.0], -1, [0.26894143, 0.7310586]),
    ([[1.0, 2.0], [3.0, 4.0]], 0, [[0.11920291, 0.11920291], [0.880797, 0.880797]]),
    ([[1.0, 2.0, 30.0]], -1, [[2.5436657e-13, 6.9144002e-13, 1.0]]),
])
def test_softmax_rounds_as_tf(logits: list, axis: int, expected: list) -> None:
    host = np.asarray(tf.nn.softmax(np.asarray(logits, np.float32), axis=axis))
    assert host.dtype == np.float32
    np.testing.assert_array_equal(host, np.asarray(expected, np.float32))
    compiled = np.asarray(tf.function(lambda x: tf.nn.softmax(x, axis=axis))(tf.constant(logits)))
    np.testing.assert_allclose(compiled, np.asarray(expected, np.float32), rtol=2e-7, atol=0)
