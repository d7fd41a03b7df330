"""`tf.nn.conv1d`, `depthwise_conv2d` and `conv2d_transpose` against TF 2.21's outputs (observed, tensorflow-cpu
2.21.0) on small integer inputs, so the values are exact: x4 = (arange(24).reshape(1, 3, 4, 2) % 5),
x3 = (arange(10).reshape(1, 5, 2) % 4), filters k(shape) = (arange(prod(shape)).reshape(shape) % 3) - 1, all float32.
Random float inputs of the same ops agreed with TF to 2e-6."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

X4 = (np.arange(24).reshape(1, 3, 4, 2) % 5).astype(np.float32)
X3 = (np.arange(10).reshape(1, 5, 2) % 4).astype(np.float32)


def k(shape):
    return ((np.arange(np.prod(shape)).reshape(shape) % 3) - 1).astype(np.float32)


# name: (call, TF's output shape, TF's output squeezed)
TF_OUTPUTS = {
    "conv1d SAME stride 1": (lambda x3, x4: tf.nn.conv1d(x3, k((3, 2, 2)), 1, "SAME"), (1, 5, 2),
                             [[1, 1], [-2, 2], [2, -2], [-2, 2], [0, -3]]),
    "conv1d VALID stride 2": (lambda x3, x4: tf.nn.conv1d(x3, k((2, 2, 3)), 2, "VALID"), (1, 2, 3),
                              [[-6, 0, 6], [-6, 0, 6]]),
    "depthwise VALID": (lambda x3, x4: tf.nn.depthwise_conv2d(x4, k((2, 2, 2, 2)), [1, 1, 1, 1], "VALID"),
                        (1, 2, 3, 4), [[[3, -1, -1, 2], [-4, 4, 6, -5], [-6, -1, -2, 3]],
                                       [[-5, -1, 7, -6], [3, -1, -1, 2], [-4, 4, 6, -5]]]),
    "depthwise SAME stride 2": (lambda x3, x4: tf.nn.depthwise_conv2d(x4, k((3, 3, 2, 1)), [1, 2, 2, 1], "SAME"),
                                (1, 2, 2, 2), [[[-1, -1], [-1, -2]], [[-1, -1], [4, -3]]]),
    "transpose SAME stride 2": (lambda x3, x4: tf.nn.conv2d_transpose(x4, k((3, 3, 1, 2)), [1, 6, 8, 1], 2, "SAME"),
                                (1, 6, 8, 1), [[0, -1, -1, -1, -1, 4, -1, -1], [0, -1, -1, -1, -1, 4, -1, -1],
                                               [-3, -2, 3, -2, -2, 3, -2, 3], [-3, -1, 4, -1, -1, -1, -1, 4],
                                               [-4, -2, 3, -2, 3, -2, -2, 3], [-1, -1, -1, -1, 4, -1, -1, -1]]),
    "transpose SAME stride 2 odd": (lambda x3, x4: tf.nn.conv2d_transpose(x4, k((3, 3, 1, 2)), [1, 5, 7, 1], 2,
                                                                          "SAME"),
                                    (1, 5, 7, 1), [[-1, -1, -1, -1, 4, -1, -1], [-2, 3, -2, -2, 3, -2, 3],
                                                   [-1, 4, -1, -1, -1, -1, 4], [-2, 3, -2, 3, -2, -2, 3],
                                                   [-1, -1, -1, 4, -1, -1, -1]]),
    "transpose VALID stride 1": (lambda x3, x4: tf.nn.conv2d_transpose(x4, k((2, 2, 1, 2)), [1, 4, 5, 1], 1,
                                                                       "VALID"),
                                 (1, 4, 5, 1), [[0, -3, -5, 3, -1], [-2, 2, -5, -7, 3], [3, -6, 2, -5, -5],
                                                [2, 3, -2, 3, -2]]),
}


@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("name", TF_OUTPUTS)
def test_convolution_equals_tfs_output(name, on_device):
    call, shape, values = TF_OUTPUTS[name]
    x3, x4 = (jnp.asarray(X3), jnp.asarray(X4)) if on_device else (X3, X4)
    out = call(x3, x4)
    assert tuple(out.shape) == shape
    np.testing.assert_array_equal(np.squeeze(np.asarray(out)), np.asarray(values, np.float32))


def test_a_transpose_output_shape_the_input_cannot_come_from_is_refused():
    with pytest.raises(ValueError, match=r"output_shape \[1, 9, 8, 1\] gives"):
        tf.nn.conv2d_transpose(X4, k((3, 3, 1, 2)), [1, 9, 8, 1], 2, "SAME")
