"""TF's operand rule for binary operators and ops on host tensors and `tf.Variable` (jdist.tfdata.operands), TF's
errors of reductions, `reshape`, `concat` and `stack`, and text tensors' dtype.

Each expected value or error is TF 2.21's, observed (tensorflow-cpu 2.21.0 with Keras 3), written beside it; values
TF printed to 5 decimals are compared to 1e-5.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

# (expression, TF's dtype, TF's value)
VALUES = {
    "float tensor + numpy float64 array": (lambda: tf.constant([1., 2.]) + np.array([1., 2.]), "float32", [2., 4.]),
    "float tensor + numpy float64 scalar": (lambda: tf.constant([1., 2.]) + np.float64(1.0), "float32", [2., 3.]),
    "int tensor + numpy int64 scalar": (lambda: tf.constant([1, 2]) + np.int64(1), "int32", [2, 3]),
    "numpy array + float tensor": (lambda: np.array([1., 2.]) + tf.constant([1., 2.]), "float32", [2., 4.]),
    "float tensor - numpy int array": (lambda: tf.constant([1., 2.]) - np.array([1, 2]), "float32", [0., 0.]),
    "float tensor * Python int": (lambda: tf.constant(3.) * 2, "float32", 6.),
    "uint8 / Python int": (lambda: tf.constant([1], tf.uint8) / 255, "float32", [1 / 255]),
    "uint8 * Python int": (lambda: tf.constant([1], tf.uint8) * 2, "uint8", [2]),
    "uint8 * 300 wraps": (lambda: tf.constant([1], tf.uint8) * 300, "uint8", [44]),
    "int32 / int32": (lambda: tf.constant([1, 2]) / tf.constant([2, 4]), "float64", [0.5, 0.5]),
    "int tensor + list of ints": (lambda: tf.constant([1], tf.int32) + [1, 2], "int32", [2, 3]),
    "float tensor + list of ints": (lambda: tf.constant([1.], tf.float32) + [1, 2], "float32", [2., 3.]),
    "int tensor ** 2": (lambda: tf.constant([1, 2]) ** 2, "int32", [1, 4]),
    "float tensor == 1": (lambda: tf.constant([1., 2.]) == 1, "bool", [True, False]),
    "bool & bool": (lambda: tf.constant([True]) & tf.constant([False]), "bool", [False]),
    "float tensor + float variable": (lambda: tf.constant(1.5) + tf.Variable(1.), "float32", 2.5),
    "text == Python text": (lambda: tf.constant("x") == "x", "bool", True),
    "divide_no_nan": (lambda: tf.math.divide_no_nan(tf.constant([1., 2.]), tf.constant([0., 4.])), "float32",
                      [0., 0.5]),
    "rint": (lambda: tf.math.rint(tf.constant([0.5, 1.5])), "float32", [0., 2.]),
    "accumulate_n": (lambda: tf.math.accumulate_n([tf.constant([1., 2.]), tf.constant([3., 4.])]), "float32",
                     [4., 6.]),
    "lbeta": (lambda: tf.math.lbeta(tf.constant([1., 2.])), "float32", -0.6931472),
    "bessel_i0": (lambda: tf.math.bessel_i0(tf.constant([1.])), "float32", [1.2660659]),
    "zeta": (lambda: tf.math.zeta(tf.constant([2.]), tf.constant([1.])), "float32", [1.6449341]),
    "batch_normalization": (lambda: tf.nn.batch_normalization(tf.constant([1., 2.]), 1., 4., 0., 1., 1e-3),
                            "float32", [0., 0.49993753]),
    "bitcast": (lambda: tf.bitcast(tf.constant([1.], tf.float32), tf.int32), "int32", [1065353216]),
    "histogram_fixed_width": (lambda: tf.histogram_fixed_width(tf.constant([0., 0.5, 1., 5.]), [0., 5.], nbins=5),
                              "int32", [2, 1, 0, 0, 1]),
    "reduce_min of nothing": (lambda: tf.math.reduce_min(tf.constant([], tf.float32)), "float32", np.inf),
    "reduce_max of nothing": (lambda: tf.math.reduce_max(tf.constant([], tf.int32)), "int32", -2147483648),
    "reduce_max of no rows": (lambda: tf.reduce_max(tf.zeros([0, 3]), axis=0), "float32", [-np.inf] * 3),
    "count_nonzero of text": (lambda: tf.math.count_nonzero(["", "a"]), "int64", 1),
    "round of ints keeps them": (lambda: tf.math.round(tf.constant([1, 2])), "int32", [1, 2]),
    "range of an int64 bound": (lambda: tf.range(tf.constant(3, tf.int64)), "int64", [0, 1, 2]),
    "gather batch_dims=1": (lambda: tf.gather(tf.constant([[1, 2], [3, 4]]), [0, 1], axis=1, batch_dims=1),
                            "int32", [1, 4]),
    "softsign": (lambda: tf.math.softsign(tf.constant([1.])), "float32", [0.5]),
    "digamma": (lambda: tf.math.digamma(tf.constant([1.])), "float32", [-0.5772157]),
    "igamma": (lambda: tf.math.igamma(tf.constant([1.]), tf.constant([1.])), "float32", [0.6321206]),
    "erfinv": (lambda: tf.math.erfinv(tf.constant([0.5])), "float32", [0.4769363]),
    "ndtri": (lambda: tf.math.ndtri(tf.constant([0.5])), "float32", [0.]),
    "complex": (lambda: tf.abs(tf.complex(tf.constant([3.]), tf.constant([4.]))), "float32", [5.]),
    "real": (lambda: tf.math.real(tf.constant([1 + 2j])), "float64", [1.]),
    "cumulative_logsumexp": (lambda: tf.math.cumulative_logsumexp(tf.constant([0., 0.])), "float32",
                             [0., 0.6931472]),
    "unsorted_segment_prod": (lambda: tf.math.unsorted_segment_prod(tf.constant([2, 3]), tf.constant([0, 0]), 1),
                              "int32", [6]),
    "invert_permutation": (lambda: tf.math.invert_permutation(tf.constant([2, 0, 1])), "int32", [1, 2, 0]),
    "scalar_mul": (lambda: tf.math.scalar_mul(2, tf.constant([1., 2.])), "float32", [2., 4.]),
    "log_poisson_loss": (lambda: tf.nn.log_poisson_loss(tf.constant([1.]), tf.constant([0.5])), "float32",
                         [1.1487213]),
    "weighted_cross_entropy_with_logits": (lambda: tf.nn.weighted_cross_entropy_with_logits(
        tf.constant([1.]), tf.constant([0.5]), 2.), "float32", [0.94815]),
    "linalg.qr(...).q": (lambda: tf.abs(tf.linalg.qr(tf.constant([[1., 2.], [3., 4.]])).q)[0], "float32",
                         [0.3162278, 0.9486833]),
    "tensor_diag": (lambda: tf.linalg.tensor_diag(tf.constant([1., 2.])), "float32", [[1., 0.], [0., 2.]]),
    "pad_to_bounding_box": (lambda: tf.image.pad_to_bounding_box(tf.reshape(tf.range(4.), [2, 2, 1]), 1, 0, 3,
                                                                 3)[..., 0], "float32",
                            [[0., 0., 0.], [0., 1., 0.], [2., 3., 0.]]),
    "argmax passes over NaN": (lambda: tf.argmax([1., float("nan"), 3.]), "int64", 2),
    "argmin passes over NaN": (lambda: tf.argmin([float("nan"), 1., 3.]), "int64", 1),
    "argmax of all NaN": (lambda: tf.argmax([float("nan"), float("nan")]), "int64", 0),
    "argmax of a NaN last": (lambda: tf.argmax([1., 3., float("nan")]), "int64", 1),
    "crop_to_bounding_box": (lambda: tf.image.crop_to_bounding_box(tf.reshape(tf.range(9.), [3, 3, 1]), 1, 1, 2,
                                                                   2)[..., 0], "float32", [[4., 5.], [7., 8.]]),
}


@pytest.mark.parametrize("name", VALUES)
def test_value_and_dtype_as_tf(name):
    make, dtype, value = VALUES[name]
    out = make()
    assert np.dtype(out.dtype).name == dtype, name
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64), np.asarray(value, dtype=np.float64), rtol=1e-5)


MISMATCH = "cannot compute {} as input #1\\(zero-based\\) was expected to be a {} tensor but is a {} tensor"
# (expression, TF's error class, a pattern of its message)
ERRORS = {
    "int tensor * 2.0": (lambda: tf.constant(3) * 2.0, TypeError, "Cannot convert 2.0 to EagerTensor of dtype int32"),
    "2.5 * int tensor": (lambda: 2.5 * tf.constant(3), TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    "int tensor ** 0.5": (lambda: tf.constant([1, 2]) ** 0.5, TypeError, "Cannot convert 0.5"),
    "int tensor == 1.5": (lambda: tf.constant([1, 2]) == 1.5, TypeError, "Cannot convert 1.5"),
    "int + float tensors": (lambda: tf.constant([1, 2]) + tf.constant([1., 2.]), tf.errors.InvalidArgumentError,
                            MISMATCH.format("AddV2", "int32", "float")),
    "tf.add of int and float": (lambda: tf.add(tf.constant([1]), tf.constant([1.])), tf.errors.InvalidArgumentError,
                                MISMATCH.format("AddV2", "int32", "float")),
    "float < int tensors": (lambda: tf.constant([1., 2.]) < tf.constant([1, 2]), tf.errors.InvalidArgumentError,
                            MISMATCH.format("Less", "float", "int32")),
    "float == int tensors": (lambda: tf.constant([1., 2.]) == tf.constant([1, 2]), tf.errors.InvalidArgumentError,
                             MISMATCH.format("Equal", "float", "int32")),
    "double + float": (lambda: tf.constant([1.], tf.float64) + tf.constant([1.]), tf.errors.InvalidArgumentError,
                       MISMATCH.format("AddV2", "double", "float")),
    "int64 + int32": (lambda: tf.constant(2, tf.int64) + tf.constant(1), tf.errors.InvalidArgumentError,
                      MISMATCH.format("AddV2", "int64", "int32")),
    "int tensor + list with a float": (lambda: tf.constant([1], tf.int32) + [1.5, 2], tf.errors.InvalidArgumentError,
                                       MISMATCH.format("AddV2", "int32", "float")),
    "maximum of int and float": (lambda: tf.maximum(tf.constant([1]), tf.constant([1.])),
                                 tf.errors.InvalidArgumentError, MISMATCH.format("Maximum", "int32", "float")),
    "int tensor + float variable": (lambda: tf.constant(1) + tf.Variable(1.), tf.errors.InvalidArgumentError,
                                    MISMATCH.format("AddV2", "int32", "float")),
    "int variable * 2.5": (lambda: tf.Variable(1) * 2.5, TypeError, "Cannot convert 2.5 to EagerTensor of dtype int32"),
    "concat of int and float": (lambda: tf.concat([tf.constant([1]), tf.constant([1.])], 0),
                                tf.errors.InvalidArgumentError, MISMATCH.format("ConcatV2", "int32", "float")),
    "stack of int and float": (lambda: tf.stack([tf.constant(1), tf.constant(1.)]), tf.errors.InvalidArgumentError,
                               MISMATCH.format("Pack", "int32", "float")),
    "reduce_mean of bools": (lambda: tf.reduce_mean(tf.constant([True, False])), tf.errors.InvalidArgumentError,
                             "Value for attr 'T' of bool is not in the list of allowed values: float, double"),
    "reduce_sum axis out of range": (lambda: tf.reduce_sum(tf.constant([1, 2]), axis=2),
                                     tf.errors.InvalidArgumentError,
                                     r"Invalid reduction dimension \(2 for input with 1 dimension\(s\) \[Op:Sum\]"),
    "reduce_sum axis -3 of a matrix": (lambda: tf.reduce_sum(tf.zeros([2, 2]), axis=-3),
                                       tf.errors.InvalidArgumentError, r"\(-3 for input with 2 dimension\(s\)"),
    "reshape 6 values to 4 x -1": (lambda: tf.reshape(tf.range(6), [4, -1]), tf.errors.InvalidArgumentError,
                                   "Input to reshape is a tensor with 6 values, but the requested shape requires a "
                                   "multiple of 4"),
    "floordiv of ints by 0": (lambda: tf.math.floordiv(tf.constant([1]), tf.constant([0])),
                              tf.errors.InvalidArgumentError, "Integer division by zero"),
    "exp of ints": (lambda: tf.math.exp(tf.constant(1, tf.int32)), tf.errors.InvalidArgumentError,
                    "Value for attr 'T' of int32 is not in the list of allowed values: bfloat16, half, float, double, "
                    "complex64, complex128"),
    "floor of ints": (lambda: tf.math.floor(tf.constant([1, 2])), tf.errors.InvalidArgumentError,
                      "Value for attr 'T' of int32 is not in the list of allowed values"),
    "cast text to int": (lambda: tf.cast(tf.constant(["1"]), tf.int32), tf.errors.UnimplementedError,
                         "Cast string to int32 is not supported"),
    "cast int to text": (lambda: tf.cast(tf.constant([1]), tf.string), tf.errors.UnimplementedError,
                         "Cast int32 to string is not supported"),
    "one_hot of float indices": (lambda: tf.one_hot(tf.constant([1.]), 2), tf.errors.InvalidArgumentError,
                                 "Value for attr 'TI' of float is not in the list of allowed values: uint8, int8, "
                                 "int32, int64"),
    "pad_to_bounding_box too small": (lambda: tf.image.pad_to_bounding_box(tf.ones([2, 2, 1]), 2, 0, 3, 3),
                                      ValueError, "height must be <= target - offset"),
    "crop_to_bounding_box too big": (lambda: tf.image.crop_to_bounding_box(tf.ones([2, 2, 1]), 1, 0, 2, 2),
                                     ValueError, r"height must be >= target \+ offset."),
}


@pytest.mark.parametrize("name", ERRORS)
def test_error_as_tf(name):
    make, error, pattern = ERRORS[name]
    with pytest.raises(error, match=pattern):
        make()


def test_text_tensors_are_tf_string_and_numpy_code_keeps_numpy_rules():
    # TF: tf.constant(["ab"]).dtype == tf.string; .numpy() is an object array of bytes
    text = tf.constant(["ab", "é"])
    assert text.dtype == tf.string and text.numpy().tolist() == [b"ab", "é".encode()]
    assert tf.constant(np.array(["x"])).dtype == tf.string
    # numpy's own code compares an int32 tensor with an int64 array (TF's tensors become plain arrays there)
    np.testing.assert_array_equal(tf.constant([1, 2]), np.array([1, 2], dtype=np.int64))
    np.testing.assert_allclose(tf.constant([1, 2]), np.array([1.0, 2.0]))
    assert (tf.constant([1, 2]) == None) is False  # noqa: E711  TF 2: a tensor never equals None
