"""The dtype TF's eager ops give several inputs: `tf.concat`, `tf.stack`, `tf.add_n`, `tf.math.divide`,
`tf.convert_to_tensor(dtype_hint=...)`.

Every expected value and error below was observed running the same call under TF 2.21 (tensorflow-cpu). jdist's
host tensors are numpy arrays, whose promotion made each float64 before (`tf.stack([tf.constant(1.), 2])`).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import jdist.tf_compat as tf

F32 = lambda: tf.constant([1.0])  # noqa: E731
I32 = lambda: tf.constant([1])  # noqa: E731

# (call, observed value, observed dtype), TF 2.21
RESULTS = {
    "concat python float then int": (lambda: tf.concat([[1.0], [2]], 0), [1.0, 2.0], "float32"),
    "concat tensor then python": (lambda: tf.concat([F32(), [2]], 0), [1.0, 2.0], "float32"),
    "concat python then tensor": (lambda: tf.concat([[2], F32()], 0), [2.0, 1.0], "float32"),
    "concat numpy float64 then tensor": (lambda: tf.concat([np.array([2.5]), F32()], 0), [2.5, 1.0], "float32"),
    "concat tensor then numpy float64": (lambda: tf.concat([F32(), np.array([2.5])], 0), [1.0, 2.5], "float32"),
    "concat tensor then numpy int64": (lambda: tf.concat([F32(), np.array([2])], 0), [1.0, 2.0], "float32"),
    "concat numpy int64 then numpy float64": (lambda: tf.concat([np.array([2]), np.array([2.5])], 0), [2, 2],
                                              "int64"),
    "stack python int and float": (lambda: tf.stack([1, 2.0]), [1.0, 2.0], "float32"),
    "stack python float and int": (lambda: tf.stack([1.0, 2]), [1.0, 2.0], "float32"),
    "stack tensor then python": (lambda: tf.stack([tf.constant(1.0), 2]), [1.0, 2.0], "float32"),
    "stack python then tensor": (lambda: tf.stack([2, tf.constant(1.0)]), [2.0, 1.0], "float32"),
    "stack numpy float64 and tensor": (lambda: tf.stack([np.float64(2.5), tf.constant(1.0)]), [2.5, 1.0], "float32"),
    "divide int tensor by python int": (lambda: tf.math.divide(tf.constant(1), 2), 0.5, "float64"),
    "truediv of int tensors": (lambda: tf.math.truediv(tf.constant(3), tf.constant(2)), 1.5, "float64"),
    "convert with a hint it fits": (lambda: tf.convert_to_tensor(2, dtype_hint=tf.float32), 2.0, "float32"),
    "convert with a hint it does not fit": (lambda: tf.convert_to_tensor(2.5, dtype_hint=tf.int32), 2.5, "float32"),
}

# (call, observed error type, observed text), TF 2.21
ERRORS = {
    "concat python int then float": (lambda: tf.concat([[1], [2.0]], 0), TypeError,
                                     "Cannot convert [2.0] to EagerTensor of dtype int32"),
    "concat python float into an int tensor": (lambda: tf.concat([[2.5], I32()], 0), TypeError,
                                               "Cannot convert [2.5] to EagerTensor of dtype int32"),
    "add_n tensor and python int": (lambda: tf.add_n([tf.constant(1.0), 2]), tf.errors.InvalidArgumentError,
                                    "cannot compute AddN as input #1(zero-based) was expected to be a float tensor "
                                    "but is a int32 tensor"),
    "divide int tensor by python float": (lambda: tf.math.divide(tf.constant(1), 2.5), TypeError,
                                          "`x` and `y` must have the same dtype, got tf.int32 != tf.float32."),
    "divide float tensor by int tensor": (lambda: tf.math.divide(tf.constant(1.0), tf.constant(2)), TypeError,
                                          "`x` and `y` must have the same dtype, got tf.float32 != tf.int32."),
    "divide python float by int tensor": (lambda: tf.math.divide(2.5, tf.constant(1)), TypeError,
                                          "Cannot convert 2.5 to EagerTensor of dtype int32"),
}


@pytest.mark.parametrize("case", sorted(RESULTS))
def test_inputs_take_tfs_dtype(case):
    call, value, dtype = RESULTS[case]
    out = call()
    assert np.dtype(out.dtype).name == dtype
    np.testing.assert_array_equal(np.asarray(out), value)


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_inputs_tf_refuses_raise_its_error(case):
    call, kind, text = ERRORS[case]
    with pytest.raises(kind, match=re.escape(text)):
        call()


def test_the_same_rule_holds_in_a_tf_function():
    @tf.function
    def joined(x):
        return tf.concat([x, [2]], 0), tf.stack([tf.reduce_sum(x), 3]), x[0] / 2

    cat, stacked, half = joined(tf.constant([1.0]))
    # observed, TF 2.21: float32 throughout (the Python values take the tensor's dtype)
    assert [np.dtype(t.dtype).name for t in (cat, stacked, half)] == ["float32"] * 3
    np.testing.assert_array_equal(np.asarray(cat), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(stacked), [1.0, 3.0])
    assert float(half) == 0.5
