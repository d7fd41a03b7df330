"""TF's guides "Introduction to Tensors", "Tensor slicing" and "Effective TensorFlow 2" under jdist.

Every expected value and error text here was observed in TF 2.21 (tensorflow-cpu 2.21, Keras 3.15), running the
same expression with `import tensorflow as tf`.
"""
from __future__ import annotations

import operator
import re

import jax.numpy as jnp
import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.tfdata import operands


def _i32():
    return tf.constant([1, 2])


# --- the guides' printed output (observed in TF 2.21) ---------------------------------------------------------

GUIDE_PRINTS = [
    ("tf.constant(4)", "tf.Tensor(4, shape=(), dtype=int32)"),
    ("tf.constant([[1, 2], [3, 4], [5, 6]], dtype=tf.float16)",
     "tf.Tensor(\n[[1. 2.]\n [3. 4.]\n [5. 6.]], shape=(3, 2), dtype=float16)"),
    ("tf.matmul(tf.constant([[1, 2], [3, 4]]), tf.constant([[1, 1], [1, 1]]))",
     "tf.Tensor(\n[[3 3]\n [7 7]], shape=(2, 2), dtype=int32)"),
    ("tf.math.argmax(tf.constant([[4.0, 5.0], [10.0, 1.0]]))", "tf.Tensor([1 0], shape=(2,), dtype=int64)"),
    ("tf.nn.softmax(tf.constant([[4.0, 5.0], [10.0, 1.0]]))",
     "tf.Tensor(\n[[2.6894143e-01 7.3105860e-01]\n [9.9987662e-01 1.2339458e-04]], shape=(2, 2), dtype=float32)"),
    ("tf.cast(tf.cast(tf.constant([2.2, 3.3, 4.4], dtype=tf.float64), tf.float16), tf.uint8)",
     "tf.Tensor([2 3 4], shape=(3,), dtype=uint8)"),
    ("tf.multiply(tf.reshape(tf.constant([1, 2, 3]), [3, 1]), tf.range(1, 5))",
     "tf.Tensor(\n[[ 1  2  3  4]\n [ 2  4  6  8]\n [ 3  6  9 12]], shape=(3, 4), dtype=int32)"),
    ("tf.strings.split(tf.constant('Gray wolf'), sep=' ')", "tf.Tensor([b'Gray' b'wolf'], shape=(2,), dtype=string)"),
    ("tf.ragged.constant([[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]])",
     "<tf.RaggedTensor [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]>"),
    ("tf.slice(tf.constant([[[1, 3, 5, 7], [9, 11, 13, 15]], [[17, 19, 21, 23], [25, 27, 29, 31]]]), "
     "begin=[1, 1, 0], size=[1, 1, 2])", "tf.Tensor([[[25 27]]], shape=(1, 1, 2), dtype=int32)"),
    ("tf.gather_nd(np.reshape(np.arange(18), [2, 3, 3]), indices=[[0, 0, 0], [1, 2, 1]])",
     "tf.Tensor([ 0 16], shape=(2,), dtype=int64)"),
    ("tf.scatter_nd(indices=tf.constant([[1], [3], [5], [7], [9]]), updates=tf.constant([2, 4, 6, 8, 10]), "
     "shape=tf.constant([10]))", "tf.Tensor([ 0  2  0  4  0  6  0  8  0 10], shape=(10,), dtype=int32)"),
    ("tf.tensor_scatter_nd_min(tf.constant([[-2, -7, 0], [-9, 0, 1], [0, -3, -8]]), indices=[[0, 2], [1, 1], "
     "[2, 0]], updates=[-6, -5, -4])",
     "tf.Tensor(\n[[-2 -7 -6]\n [-9 -5  1]\n [-4 -3 -8]], shape=(3, 3), dtype=int32)"),
]


@pytest.mark.parametrize("expression, printed", GUIDE_PRINTS)
def test_guide_prints(expression: str, printed: str) -> None:
    assert str(eval(expression)) == printed  # noqa: S307 - the table above


def test_guide_reshape_error() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            "Input to reshape is a tensor with 30 values, but the requested shape requires a multiple of 7 "
            "[Op:Reshape]")):
        tf.reshape(tf.zeros([3, 2, 5], tf.int32), [7, -1])


# --- convert_to_tensor / constant of a tensor of another dtype ----------------------------------------------

CONVERSIONS = [  # (value, dtype, TF's dtype names in its ValueError)
    ("tf.constant([1, 2])", tf.float32, "float32", "int32"),
    ("tf.constant([1, 2])", "float32", "float32", "int32"),
    ("tf.constant([1, 2])", np.float32, "float32", "int32"),
    ("tf.constant([1., 2.])", tf.float64, "float64", "float32"),
    ("tf.constant([1, 2])", tf.int64, "int64", "int32"),
    ("tf.constant([1], tf.uint8)", tf.int32, "int32", "uint8"),
    ("tf.constant(True)", tf.int32, "int32", "bool"),
    ("tf.constant('a')", tf.int32, "int32", "string"),
    ("tf.constant(1., tf.float16)", tf.float32, "float32", "float16"),
]


@pytest.mark.parametrize("value, dtype, want, have", CONVERSIONS)
def test_convert_to_tensor_never_casts_a_tensor(value: str, dtype, want: str, have: str) -> None:
    tensor = eval(value)  # noqa: S307 - the table above
    with pytest.raises(ValueError, match=re.escape(f"Tensor conversion requested dtype {want} for Tensor with dtype "
                                                   f"{have}: {tensor!r}")):
        tf.convert_to_tensor(tensor, dtype=dtype)


def test_constant_of_a_tensor_of_another_dtype_is_type_error() -> None:
    with pytest.raises(TypeError, match=re.escape("Expected tensor [1 2] with dtype tf.float32, but got dtype "
                                                  "tf.int32.")):
        tf.constant(_i32(), dtype=tf.float32)
    with pytest.raises(TypeError, match=re.escape("Expected tensor [1. 2.] with dtype tf.int32, but got dtype "
                                                  "tf.float32.")):
        tf.constant(tf.constant([1., 2.]), dtype=tf.int32)
    with pytest.raises(TypeError, match=re.escape("Expected tensor b'a' with dtype tf.int32, but got dtype "
                                                  "tf.string.")):
        tf.constant(tf.constant("a"), tf.int32)
    with pytest.raises(TypeError, match=re.escape("Expected tensor [1 2] with dtype tf.float32")):
        tf.constant(_i32(), tf.float32, shape=[2])


def test_conversions_that_tf_allows() -> None:
    same = tf.convert_to_tensor(_i32(), dtype=tf.int32)
    assert same.dtype == np.int32 and same.numpy().tolist() == [1, 2]
    hinted = tf.convert_to_tensor(tf.constant([1., 2.]), dtype_hint=tf.int32)  # a hint never casts a tensor
    assert hinted.dtype == np.float32
    assert tf.constant(_i32(), shape=[2, 1]).shape == (2, 1)
    cast = tf.convert_to_tensor(np.array([1.5, 2.]), dtype=tf.int32)  # numpy is cast (truncated)
    assert cast.dtype == np.int32 and cast.numpy().tolist() == [1, 2]
    packed = tf.convert_to_tensor([_i32()], tf.float32)  # a list holding tensors is packed and converted
    assert packed.dtype == np.float32 and packed.numpy().tolist() == [[1., 2.]]
    mixed = tf.convert_to_tensor([tf.constant(1), 2], dtype=tf.float32)
    assert mixed.dtype == np.float32 and mixed.numpy().tolist() == [1., 2.]


def test_conversion_of_variables() -> None:
    variable = tf.Variable([1, 2])
    with pytest.raises(ValueError, match=re.escape("Incompatible type conversion requested to type float32 for "
                                                   "`tf.Variable of type int32.")):
        tf.convert_to_tensor(variable, dtype=tf.float32)
    value = tf.constant(variable, dtype=tf.float32)  # tf.constant casts a variable's value
    assert np.asarray(value).dtype == np.float32 and np.asarray(value).tolist() == [1., 2.]
    # TF's text starts "initial_value: " (the prefix is not given here)
    with pytest.raises(ValueError, match="Tensor conversion requested dtype float32 for Tensor with dtype int32"):
        tf.Variable(_i32(), dtype=tf.float32)


def test_conversion_in_tf_function() -> None:
    @tf.function
    def convert(x):
        return tf.convert_to_tensor(x, tf.float32)

    with pytest.raises(ValueError, match="Tensor conversion requested dtype float32 for Tensor with dtype int32"):
        convert(_i32())


def test_device_array_stands_for_its_64_bit_dtype() -> None:
    # JAX without x64 holds int64 as int32: a device int32 array is the int64 tensor asked for
    out = tf.convert_to_tensor(jnp.asarray([1, 2], jnp.int32), dtype=tf.int64)
    assert out.tolist() == [1, 2]
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype int32"):
        tf.convert_to_tensor(jnp.asarray([1, 2], jnp.int32), dtype=tf.float32)


# --- the operators with a Python or numpy operand -------------------------------------------------------------

PY_FLOAT_ERRORS = [  # (operator, tensor first?, operand, error type, TF's text)
    ("add", True, 2.5, tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor"),
    ("add", True, [2.5, 1.], tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor"),
    ("add", False, 2.5, TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("add", False, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
    ("truediv", True, 2.5, TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("truediv", True, 2.0, TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("truediv", True, [2.5, 1.], TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("truediv", False, 2.5, TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("truediv", False, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
    ("sub", True, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
    ("mul", True, 2.5, TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("mul", False, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
    ("floordiv", True, 2.5, TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("mod", True, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
    ("pow", False, 2.5, TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("lt", True, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
    ("eq", False, [2.5, 1.], TypeError, "Cannot convert [2.5, 1.0] to EagerTensor of dtype int32"),
]


@pytest.mark.parametrize("op, tensor_first, operand, error, text", PY_FLOAT_ERRORS)
def test_python_float_with_an_int_tensor(op: str, tensor_first: bool, operand, error: type, text: str) -> None:
    fn = getattr(operator, op)
    with pytest.raises(error, match=re.escape(text)):
        fn(_i32(), operand) if tensor_first else fn(operand, _i32())


NUMPY_OPERANDS = [  # (operator, tensor first?, numpy operand, TF's dtype, TF's values) with int32 [1, 2]
    ("add", True, np.array([1.5, 2.]), "int32", [2, 4]),
    ("add", False, np.array([1.5, 2.]), "int32", [2, 4]),
    ("add", True, np.float64(2.5), "int32", [3, 4]),
    ("sub", False, np.array([1.5, 2.]), "int32", [0, 0]),
    ("mul", True, np.array([1.5, 2.]), "int32", [1, 4]),
    ("truediv", True, np.array([1.5, 2.]), "float64", [1., 1.]),
    ("truediv", False, np.array([1.5, 2.]), "float64", [1., 1.]),
    ("truediv", True, np.float64(2.5), "float64", [0.5, 1.]),
    ("floordiv", True, np.float64(2.5), "int32", [0, 1]),
    ("mod", False, np.array([1.5, 2.]), "int32", [0, 0]),
    ("pow", True, np.array([1.5, 2.]), "int32", [1, 4]),
    ("lt", True, np.float64(2.5), "bool", [True, False]),
    ("eq", False, np.array([1.5, 2.]), "bool", [True, True]),
]


@pytest.mark.parametrize("op, tensor_first, operand, dtype, values", NUMPY_OPERANDS)
def test_numpy_operand_takes_the_tensors_dtype(op: str, tensor_first: bool, operand, dtype: str, values) -> None:
    fn = getattr(operator, op)
    out = fn(_i32(), operand) if tensor_first else fn(operand, _i32())
    assert isinstance(out, np.ndarray) and hasattr(out, "numpy")  # a tensor, not a numpy array
    assert out.dtype == np.dtype(dtype) and out.numpy().tolist() == values


def test_float_tensor_with_numpy_float64_operand() -> None:
    out = tf.constant([1., 2.]) + np.array([1., 2.])
    assert out.dtype == np.float32 and out.numpy().tolist() == [2., 4.]
    out = np.array([1., 2.]) + tf.constant([1., 2.])
    assert out.dtype == np.float32
    out = tf.constant([1., 2.]) * np.float64(2.5)
    assert out.dtype == np.float32 and out.numpy().tolist() == [2.5, 5.]
    out = np.array([1, 2]) - tf.constant([1, 2], tf.uint8)
    assert out.dtype == np.uint8 and out.numpy().tolist() == [0, 0]


# --- true division: tf.math.divide, tf.math.truediv, `/` -----------------------------------------------------

DIVISIONS = [  # (expression, TF's dtype, TF's values)
    ("tf.math.divide(_i32(), 2)", "float64", [0.5, 1.]),
    ("tf.math.divide(_i32(), np.float64(2.5))", "float64", [0.5, 1.]),  # numpy cast to int32 first
    ("tf.math.divide(_i32(), np.array([2.5, 1]))", "float64", [0.5, 2.]),
    ("tf.math.divide(np.array([2.5, 1]), _i32())", "float64", [2., 0.5]),
    ("tf.math.divide(2, _i32())", "float64", [2., 1.]),
    ("tf.math.divide(2, 3)", "float64", [2 / 3]),
    ("tf.math.divide(2.5, 2)", "float32", [1.25]),
    ("tf.math.divide(np.array([3.]), 2)", "float64", [1.5]),
    ("tf.math.divide(np.array([3], np.uint8), 2)", "float32", [1.5]),
    ("tf.math.divide(tf.constant([1., 2.]), np.array([2]))", "float32", [0.5, 1.]),
    ("tf.math.divide(np.array([2]), tf.constant([1., 2.]))", "float32", [2., 1.]),
    ("tf.math.divide([1, 2], [2, 4])", "float64", [0.5, 0.5]),
    ("tf.math.divide([1., 2.], [2, 4])", "float32", [0.5, 0.5]),
    ("tf.math.divide(tf.constant([1, 2], tf.uint8), 2)", "float32", [0.5, 1.]),
    ("tf.math.divide(tf.constant([3], tf.int16), 2)", "float32", [1.5]),
    ("tf.math.divide(tf.constant([3], tf.int64), 2)", "float64", [1.5]),
    ("tf.math.divide(tf.constant([3], tf.float16), 2)", "float16", [1.5]),
    ("tf.math.divide(np.float32(1), np.array([2.]))", "float32", [0.5]),
    ("tf.math.truediv(_i32(), np.array([2.5, 1]))", "float64", [0.5, 2.]),
    ("tf.math.truediv(tf.constant([1, 2], tf.uint8), 2)", "float32", [0.5, 1.]),
    ("tf.math.truediv(2, 3)", "float64", [2 / 3]),
    ("tf.constant([1, 2], tf.uint8) / 2", "float32", [0.5, 1.]),
]


DIVISION_ERRORS = [  # (expression, TF's error type, TF's text)
    ("tf.math.divide(_i32(), 2.5)", TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.divide(_i32(), 2.5)", TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.divide(_i32(), 2.5, name='d')", TypeError,
     "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.math.truediv(_i32(), 2.5)", TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.math.truediv(2.5, _i32())", TypeError, "`x` and `y` must have the same dtype, got tf.float32 != tf.int32."),
    ("tf.math.truediv(np.array([2.5, 1]), _i32())", TypeError,
     "`x` and `y` must have the same dtype, got tf.float64 != tf.int32."),
    ("tf.math.divide(2.5, _i32())", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.divide([1, 2], 2.5)", TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.math.divide(2, 3.5)", TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.math.divide(np.array([3]), 2.5)", TypeError,
     "`x` and `y` must have the same dtype, got tf.int64 != tf.float32."),
    ("tf.math.divide(_i32(), tf.constant([1., 2.]))", TypeError,
     "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    ("tf.math.divide(tf.constant([1., 2.]), _i32())", TypeError,
     "`x` and `y` must have the same dtype, got tf.float32 != tf.int32."),
    ("tf.math.divide(_i32(), tf.constant([1, 2], tf.uint8))", TypeError,
     "`x` and `y` must have the same dtype, got tf.int32 != tf.uint8."),
    ("tf.math.divide(_i32(), tf.constant([1, 2], tf.int64))", TypeError,
     "`x` and `y` must have the same dtype, got tf.int32 != tf.int64."),
    ("tf.math.divide(tf.constant(True), 2)", TypeError,
     "`x` and `y` must have the same dtype, got tf.bool != tf.int32."),
    ("_i32() / tf.constant([1., 2.])", TypeError, "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
]


# --- one dtype for two tensors (operands.same_dtype) ----------------------------------------------------------

MIXED_INTS = [  # (expression, TF's op, expected dtype, got dtype)
    ("tf.add_n([_i32(), tf.constant([1, 2], tf.uint8)])", "AddN", "int32", "uint8"),
    ("tf.add_n([tf.constant([1, 2], tf.uint8), _i32()])", "AddN", "uint8", "int32"),
    ("tf.add_n([_i32(), tf.constant([1, 2], tf.int64)])", "AddN", "int32", "int64"),
    ("_i32() + tf.constant([1, 2], tf.uint8)", "AddV2", "int32", "uint8"),
    ("tf.constant([1, 2], tf.uint8) + _i32()", "AddV2", "uint8", "int32"),
    ("tf.add(_i32(), tf.constant([1, 2], tf.uint8))", "AddV2", "int32", "uint8"),
    ("_i32() + tf.constant([1, 2], tf.int64)", "AddV2", "int32", "int64"),
    ("tf.concat([_i32(), tf.constant([1, 2], tf.uint8)], 0)", "ConcatV2", "int32", "uint8"),
    ("tf.stack([_i32(), tf.constant([1, 2], tf.int64)])", "Pack", "int32", "int64"),
]


def test_concat_and_stack_errors_name_the_op() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[Op:ConcatV2\] name: concat$"):
        tf.concat([_i32(), tf.constant([1], tf.uint8)], 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[Op:ConcatV2\] name: cc$"):
        tf.concat([_i32(), tf.constant([1], tf.uint8)], 0, name="cc")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[Op:Pack\] name: stack$"):
        tf.stack([_i32(), tf.constant([1, 2], tf.int64)])


@pytest.mark.parametrize("expression, op, expected, got", MIXED_INTS)
def test_int_and_uint_tensors_are_two_dtypes(expression: str, op: str, expected: str, got: str) -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            f"cannot compute {op} as input #1(zero-based) was expected to be a {expected} tensor but is a {got} "
            f"tensor [Op:{op}]")):
        eval(expression)  # noqa: S307 - the table above


def test_same_dtype_rule() -> None:
    host64, device32 = np.array([1], np.int64), jnp.asarray([1], jnp.int32)
    assert operands.same_dtype(np.int32, np.int32)
    assert not operands.same_dtype(np.int32, np.uint8)
    assert not operands.same_dtype(np.int32, np.int64)
    assert operands.same_dtype(host64.dtype, device32.dtype, host64, device32)  # JAX's 32 bits for int64
    assert not operands.same_dtype(np.uint8, device32.dtype, np.array([1], np.uint8), device32)
    assert operands.same_dtype(np.dtype(object), np.dtype("S1"))  # text is one dtype, tf.string


# --- tf.add and the tf.math binary ops: TF's conversion of two operands -----------------------------------------

BINARY_VALUES = [  # (expression, TF's dtype, TF's values)
    ("tf.math.floordiv(_i32(), np.float64(2.5))", "int32", [0, 1]),
    ("tf.math.floordiv(np.array([2.5, 3.]), _i32())", "int32", [2, 1]),
    ("tf.math.floordiv(tf.constant([1., 2.]), np.array([2., 3.]))", "float32", [0., 0.]),
    ("tf.math.floordiv(2, tf.constant([1., 2.]))", "float32", [2., 1.]),
    ("tf.math.floordiv(7., 2)", "float32", [3.]),
    ("tf.math.floormod(_i32(), np.float64(2.5))", "int32", [1, 0]),
    ("tf.math.floormod(np.array([2., 3.]), tf.constant([1., 2.]))", "float32", [0., 1.]),
    ("tf.math.floormod(tf.constant([1., 2.]), 2)", "float32", [1., 0.]),
    ("tf.math.squared_difference(_i32(), np.float64(2.5))", "int32", [1, 0]),
    ("tf.math.squared_difference(np.array([2.5, 3.]), _i32())", "int32", [1, 1]),
    ("tf.math.squared_difference(7., 2)", "float32", [25.]),
    ("tf.math.squared_difference(2, tf.constant([1., 2.]))", "float32", [1., 0.]),
    ("tf.math.atan2(tf.constant([1., 2.]), 2)", "float32", [0.4636476, 0.7853982]),
    ("tf.math.atan2(np.array([2., 3.]), tf.constant([1., 2.]))", "float32", [1.1071488, 0.98279375]),
    ("tf.math.xlogy(tf.constant([1., 2.]), np.array([2., 3.]))", "float32", [0.6931472, 2.1972246]),
    ("tf.math.xlogy(7., 2)", "float32", [4.852030277252197]),
    ("tf.add(tf.constant([1., 2.]), 1)", "float32", [2., 3.]),
    ("tf.add(tf.constant([1., 2.]), [1, 2])", "float32", [2., 4.]),
    ("tf.add(_i32(), np.array([1.5, 1.]))", "int32", [2, 3]),
]


@pytest.mark.parametrize("expression, dtype, values", DIVISIONS + BINARY_VALUES)
def test_operands_take_tfs_dtype(expression: str, dtype: str, values: list) -> None:
    out = eval(expression)  # noqa: S307 - the table above
    assert out.dtype == np.dtype(dtype), expression
    np.testing.assert_allclose(np.reshape(out.numpy(), -1), values, rtol=1e-6)


BINARY_ERRORS = [  # (expression, TF's error type, TF's text)
    ("tf.math.floordiv(_i32(), 2.5)", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.floordiv(2.5, _i32())", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.floormod(_i32(), 2.5)", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.squared_difference(2.5, _i32())", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.atan2(_i32(), 2.5)", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.xlogy(2.5, _i32())", TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    ("tf.math.floordiv(_i32(), tf.constant([1, 2], tf.uint8))", tf.errors.InvalidArgumentError,
     "cannot compute FloorDiv as input #1(zero-based) was expected to be a int32 tensor but is a uint8 tensor"),
    ("tf.math.floordiv(tf.constant([1., 2.]), _i32())", tf.errors.InvalidArgumentError,
     "cannot compute FloorDiv as input #1(zero-based) was expected to be a float tensor but is a int32 tensor"),
    ("tf.math.floormod(_i32(), tf.constant([1, 2], tf.uint8))", tf.errors.InvalidArgumentError,
     "cannot compute FloorMod as input #1(zero-based) was expected to be a int32 tensor but is a uint8 tensor"),
    ("tf.math.squared_difference(tf.constant([1., 2.]), _i32())", tf.errors.InvalidArgumentError,
     "cannot compute SquaredDifference as input #1(zero-based) was expected to be a float tensor but is a int32"),
    ("tf.math.atan2(tf.constant([1., 2.]), _i32())", tf.errors.InvalidArgumentError,
     "cannot compute Atan2 as input #1(zero-based) was expected to be a float tensor but is a int32 tensor"),
    ("tf.math.xlogy(tf.constant([1., 2.]), _i32())", tf.errors.InvalidArgumentError,
     "cannot compute Xlogy as input #1(zero-based) was expected to be a float tensor but is a int32 tensor"),
    ("tf.math.atan2(7, 2)", tf.errors.InvalidArgumentError,
     "Value for attr 'T' of int32 is not in the list of allowed values: bfloat16, half, float, double"),
    ("tf.add(_i32(), 2.5)", tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor"),
    ("tf.add(_i32(), [2.5, 1.])", tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor"),
    ("tf.add(1.5, _i32())", tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a float tensor but is a int32 tensor"),
    ("tf.add(1, tf.constant([1., 2.]))", tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor"),
    ("tf.add([1, 2], tf.constant([1., 2.]))", tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float tensor"),
    ("tf.add(np.array([1.5, 1.]), _i32())", tf.errors.InvalidArgumentError,
     "cannot compute AddV2 as input #1(zero-based) was expected to be a double tensor but is a int32 tensor"),
    ("tf.math.multiply(1.5, _i32())", TypeError, "Cannot convert 1.5 to EagerTensor of dtype int32"),
]


@pytest.mark.parametrize("expression, error, text", DIVISION_ERRORS + BINARY_ERRORS)
def test_operand_errors(expression: str, error: type, text: str) -> None:
    with pytest.raises(error, match=re.escape(text)):
        eval(expression)  # noqa: S307 - the table above


# Observed in TF 2.21: text given with tf.string, or joined to a string tensor, is held as UTF-8 bytes; a number
# is not text (data_performance's `tf.concat((steps, [["Train"]]), 0)` compares as bytes after).
@pytest.mark.parametrize("make, expected", [
    (lambda: tf.constant("a", dtype=tf.string), b"a"),
    (lambda: tf.convert_to_tensor(["a", "b"], dtype=tf.string), [b"a", b"b"]),
    (lambda: tf.concat((tf.constant([["a"]]), [["Train"]]), 0), [[b"a"], [b"Train"]]),
    (lambda: tf.stack([tf.constant("a"), "b"]), [b"a", b"b"]),
    (lambda: tf.constant(np.array(["x", "y"], dtype=object)), [b"x", b"y"]),
    (lambda: tf.constant([b"q", "r"]), [b"q", b"r"]),
    (lambda: tf.concat([tf.constant(["a"]), np.array(["x"])], 0), [b"a", b"x"]),
    (lambda: tf.stack([tf.constant("a"), np.array("x")]), [b"a", b"x"]),
    (lambda: tf.concat([tf.constant(["a"]), np.array(["y"], dtype=object)], 0), [b"a", b"y"]),
])
def test_text_is_held_as_bytes(make, expected):
    assert np.asarray(make()).tolist() == expected


def test_a_number_is_not_a_string_tensor():
    with pytest.raises(TypeError, match="Cannot convert 1 to EagerTensor of dtype string"):
        tf.constant(1, dtype=tf.string)
