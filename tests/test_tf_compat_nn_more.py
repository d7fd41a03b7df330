"""tf.nn's N-d pooling, N-d and transposed convolutions, depth_to_space, dilation2d, lrn, crelu, softsign, moments
from statistics, zero_fraction, collapse_repeated and the sparse embedding lookups, against TF 2.21.

Every expected value in OBSERVED was printed by TF 2.21 (tensorflow-cpu 2.21.0) for the same call on the same
inputs (numpy's default_rng with the seeds below): per output its shape, dtype, leading values (all of them when
there are 24 or fewer) and sum. Then the ops inside jax.jit equal to the host's results, checks against numpy
computations of the definitions, and TF's errors.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tf_observed_summaries import check_summary  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.tf_compat.ops import FloatOnlyError  # noqa: E402

T = tf.constant
INF, NAN = float("inf"), float("nan")

F32 = np.float32
_r = np.random.default_rng(0)
X4 = _r.standard_normal((2, 5, 7, 3)).astype(F32)
X5 = _r.standard_normal((1, 4, 5, 6, 2)).astype(F32)
_r = np.random.default_rng(1)
W3, W2, W1, DW, PW, DF, W3T, W2T = (_r.standard_normal(s).astype(F32) for s in [
    (2, 3, 2, 2, 4), (3, 3, 3, 4), (3, 2, 3), (3, 3, 3, 2), (1, 1, 6, 4), (2, 3, 3), (2, 3, 2, 3, 2), (3, 3, 2, 3)])
FW = np.random.default_rng(2).uniform(0, 2, (2, 5, 1, 3)).astype(F32)
XI = (np.arange(2 * 5 * 7 * 3).reshape(2, 5, 7, 3) % 7).astype(np.int32)
Y1 = X4[:, 0]
XS = np.arange(64, dtype=F32).reshape(1, 2, 4, 8)

BN_M, BN_V, BN_B, BN_G = (np.array(v, np.float32)
                          for v in ([0.1, -0.2, 0.3], [1.0, 2.0, 0.5], [0.0, 1.0, -1.0], [2.0, 0.5, 1.0]))
LABELS = np.array([[1, 1, 2, 2, 3, 0], [4, 4, 4, 5, 5, 5], [1, 2, 1, 1, 0, 0]], np.int32)
PARAMS = (np.arange(15, dtype=np.float32).reshape(5, 3) - 5) / 4
_AT = [[0, 0], [0, 1], [0, 2], [2, 0], [2, 1]]
IDS = tf.SparseTensor(_AT, np.array([1, 3, 1, 4, 0], np.int64), [4, 3])
WTS = tf.SparseTensor(_AT, np.array([2.0, 0.5, 1.0, -1.0, 3.0], np.float32), [4, 3])
IDS2 = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], np.array([1, -1, 2], np.int64), [2, 2])
WTS2 = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], np.array([1.0, 1.0, 0.0], np.float32), [2, 2])

_r = np.random.default_rng(10)
GRAD, GRAD2 = _r.standard_normal((2, 3, 4, 6)).astype(np.float32), _r.standard_normal((2, 3, 5, 6)).astype(np.float32)

# (case, call, TF 2.21's [shape, dtype, leading values, sum] per output)  # observed, TF 2.21
OBSERVED = [
    ("max_pool SAME 3/2", lambda: tf.nn.max_pool(X4, 3, 2, "SAME"),
     [[[2, 3, 4, 3], "float32", [1.366463, 0.0940123, 0.6404226, 1.304, 0.947081, 0.3615951], 85.36198]]),
    ("avg_pool SAME 3/2", lambda: tf.nn.avg_pool(X4, 3, 2, "SAME"),
     [[[2, 3, 4, 3], "float32", [0.625141, -0.3097392, 0.1525071, -0.1473991, -0.130792, -0.1638906], 4.822021]]),
    ("max_pool explicit", lambda: tf.nn.max_pool(X4, 3, 2, [[0, 0], [1, 1], [1, 1], [0, 0]]),
     [[[2, 3, 4, 3], "float32", [1.366463, 0.0940123, 0.6404226, 1.304, 0.947081, 0.3615951], 85.36198]]),
    ("max_pool ksize 2 values", lambda: tf.nn.max_pool(X4, [2, 3], [1, 2], "VALID"),
     [[[2, 4, 3, 3], "float32", [1.366463, 0.947081, 0.6404226, 1.304, 0.947081, 0.3553727], 87.5206]]),
    ("max_pool ksize 4 values", lambda: tf.nn.max_pool(X4, [1, 2, 3, 1], [1, 1, 2, 1], "VALID"),
     [[[2, 4, 3, 3], "float32", [1.366463, 0.947081, 0.6404226, 1.304, 0.947081, 0.3553727], 87.5206]]),
    ("max_pool NCHW", lambda: tf.nn.max_pool(X4, 2, 2, "VALID", data_format="NCHW"),
     [[[2, 5, 3, 1], "float32", [0.1257302, 1.304, -0.2187917, 1.366463, -0.2091756, 0.5408456], 26.54957]]),
    ("max_pool int32", lambda: tf.nn.max_pool(T(XI), 2, 2, "SAME"),
     [[[2, 3, 4, 3], "int32", [3, 4, 5, 6, 3, 4], 324]]),
    ("max_pool1d", lambda: tf.nn.max_pool1d(Y1, 3, 2, "SAME"),
     [[[2, 4, 3], "float32", [0.1257302, -0.1321049, 0.6404226, 1.304, 0.947081, 0.3615951, -0.7322674, -0.2187917,
      0.04132598, 0.4116305, 1.042513, -0.1285347, -1.280394, 0.3863696, 0.6210179, 0.694172, 0.3863696, 1.420982,
      0.7875882, 0.8440787, 1.420982, 0.7875882, 0.8440787, 0.07559361], 10.65103]]),
    ("avg_pool1d", lambda: tf.nn.avg_pool1d(Y1, 3, 2, "SAME"),
     [[[2, 4, 3], "float32", [0.1153152, -0.3338871, 0.5010089, 0.04782621, -0.07062095, -0.1002714, -1.440907,
      -0.4621084, -0.5069618, -0.1603184, 0.2491272, -0.2224174, -1.765268, -0.1633492, 0.01968852, -0.4822299,
      -0.1492339, 0.3471518, 0.7359512, 0.3098139, 0.8871465, -0.3195928, 0.3545168, -0.3469605], -2.95658]]),
    ("max_pool3d", lambda: tf.nn.max_pool3d(X5, 3, 2, "SAME"),
     [[[1, 2, 3, 3, 2], "float32", [2.755808, 2.310364, 1.690569, 3.066037, 1.204396, 3.066037], 65.92196]]),
    ("avg_pool3d", lambda: tf.nn.avg_pool3d(X5, [2, 3, 2], [1, 2, 2], "SAME"),
     [[[1, 4, 3, 3, 2], "float32", [-0.3727992, 0.5273889, -0.2905246, -0.2736193, -0.2257625, 0.1918539],
      -0.1633179]]),
    ("avg_pool3d NCDHW", lambda: tf.nn.avg_pool3d(X5, 2, 1, "VALID", data_format="NCDHW"),
     [[[1, 4, 4, 5, 1], "float32", [0.3911329, 0.2342377, -0.1031319, -0.2525145, 0.09080018, -0.5350388],
      -2.996122]]),
    ("pool MAX", lambda: tf.nn.pool(X4, [3, 3], "MAX", strides=[2, 2], padding="SAME"),
     [[[2, 3, 4, 3], "float32", [1.366463, 0.0940123, 0.6404226, 1.304, 0.947081, 0.3615951], 85.36198]]),
    ("pool AVG dilated", lambda: tf.nn.pool(X4, [2, 3], "AVG", padding="VALID", dilations=[2, 1]),
     [[[2, 3, 5, 3], "float32", [0.7280362, 0.6389571, 0.4800628, 0.0704787, 0.4261346, 0.44555], -0.4426068]]),
    ("pool 1-d", lambda: tf.nn.pool(Y1, [3], "MAX", padding="SAME"),
     [[[2, 7, 3], "float32", [0.1257302, -0.1321049, 0.6404226, 1.304, 0.947081, 0.6404226], 24.06455]]),
    ("max_pool_with_argmax", lambda: tf.nn.max_pool_with_argmax(X4, 3, 2, "SAME"),
     [[[2, 3, 4, 3], "float32", [1.366463, 0.0940123, 0.6404226, 1.304, 0.947081, 0.3615951], 85.36198], [[2, 3, 4,
      3], "int64", [21, 25, 2, 6, 7, 5], 3681]]),
    ("max_pool_with_argmax batch", lambda: tf.nn.max_pool_with_argmax(X4, 2, 2, "VALID", include_batch_in_index=True),
     [[[2, 2, 3, 3], "float32", [1.366463, 0.0940123, 0.6404226, 1.304, 0.947081, 0.2201951], 33.26102], [[2, 2, 3,
      3], "int64", [21, 25, 2, 6, 7, 29], 3351]]),
    ("max_pool_with_argmax int32", lambda: tf.nn.max_pool_with_argmax(X4, 2, 2, "VALID", output_dtype=tf.int32),
     [[[2, 2, 3, 3], "float32", [1.366463, 0.0940123, 0.6404226, 1.304, 0.947081, 0.2201951], 33.26102], [[2, 2, 3,
      3], "int32", [21, 25, 2, 6, 7, 29], 1461]]),
    ("max_pool_with_argmax ties", lambda: tf.nn.max_pool_with_argmax(np.ones((1, 3, 3, 1), np.float32), 2, 1, "VALID"),
     [[[1, 2, 2, 1], "float32", [1, 1, 1, 1], 4], [[1, 2, 2, 1], "int64", [0, 1, 3, 4], 8]]),
    ("conv3d", lambda: tf.nn.conv3d(X5, W3, [1, 1, 2, 1, 1], "SAME"),
     [[[1, 4, 3, 6, 4], "float32", [0.6290166, -2.46951, 4.150247, 2.335868, -0.809871, -4.809382], 16.8042]]),
    ("conv3d VALID dilated", lambda: tf.nn.conv3d(X5, W3, [1, 1, 1, 1, 1], "VALID", dilations=[1, 2, 1, 2, 1]),
     [[[1, 2, 3, 4, 4], "float32", [4.643295, 1.047045, -2.706451, 3.270503, 1.596328, -3.387232], -65.41414]]),
    ("conv3d NCDHW", lambda: tf.nn.conv3d(np.moveaxis(X5, -1, 1), W3, [1, 1, 1, 1, 1], "SAME", data_format="NCDHW"),
     [[[1, 4, 4, 5, 6], "float32", [0.6290166, -0.809871, -1.726442, 6.2527, -5.644154, 0.5786192], 37.29643]]),
    ("convolution 2-d", lambda: tf.nn.convolution(X4, W2, strides=2, padding="SAME"),
     [[[2, 3, 4, 4], "float32", [-1.845523, -2.991248, 0.4014567, 3.583493, -0.4379373, 3.589803], 10.33009]]),
    ("convolution 2-d dilated", lambda: tf.nn.convolution(X4, W2, padding="VALID", dilations=[1, 2]),
     [[[2, 3, 3, 4], "float32", [-0.8461269, 10.31361, 0.07036618, 5.116893, -6.839686, -4.042472], 57.11494]]),
    ("convolution 1-d", lambda: tf.nn.convolution(Y1, W2[0], padding="SAME", strides=2),
     [[[2, 4, 4], "float32", [-1.720864, 0.3674059, -0.4677931, 0.3843591, -0.1681465, 2.543722], 2.791603]]),
    ("convolution 3-d", lambda: tf.nn.convolution(X5, W3, padding="VALID"),
     [[[1, 3, 3, 5, 4], "float32", [10.77318, 1.712403, 5.836227, -2.116434, -0.4045903, -1.293375], 0.3852446]]),
    ("convolution NCHW", lambda: tf.nn.convolution(np.moveaxis(X4, -1, 1), W2, padding="SAME", data_format="NCHW"),
     [[[2, 4, 5, 7], "float32", [-1.845523, -2.661342, -0.4379373, 2.141958, 2.140993, 3.165137], 102.6823]]),
    ("conv1d_transpose", lambda: tf.nn.conv1d_transpose(Y1, W1, [2, 14, 2], 2, "SAME"),
     [[[2, 14, 2], "float32", [-0.8920833, 0.1731711, -0.004663632, -0.8028777, -0.7571144, 1.136183],
      -6.062132]]),
    ("conv1d_transpose VALID", lambda: tf.nn.conv1d_transpose(Y1, W1, [2, 15, 2], 2, "VALID"),
     [[[2, 15, 2], "float32", [-0.8920833, 0.1731711, -0.004663632, -0.8028777, -0.7571144, 1.136183],
      -6.505508]]),
    ("conv1d_transpose NCW",
     lambda: tf.nn.conv1d_transpose(np.moveaxis(Y1, -1, 1), W1, [2, 2, 13], 2, "SAME", data_format="NCW"),
     [[[2, 2, 13], "float32", [-0.004663632, -0.7571144, 0.3129498, -0.0654282, 0.2090539, 0.2821722],
      -3.552672]]),
    ("conv3d_transpose", lambda: tf.nn.conv3d_transpose(X5, W3T, [1, 8, 10, 12, 3], [1, 2, 2, 2, 1], "SAME"),
     [[[1, 8, 10, 12, 3], "float32", [2.990016, -1.494149, -1.011464, -2.443479, -0.5572867, 2.099237],
      17.98542]]),
    ("conv3d_transpose VALID", lambda: tf.nn.conv3d_transpose(X5, W3T, [1, 5, 7, 7, 3], 1, "VALID"),
     [[[1, 5, 7, 7, 3], "float32", [2.990016, -1.494149, -1.011464, -0.3230093, -0.8660446, 2.591196], 38.27371]]),
    ("conv_transpose 2-d", lambda: tf.nn.conv_transpose(X4, W2T, [2, 10, 13, 2], 2, "SAME"),
     [[[2, 10, 13, 2], "float32", [-0.5615622, -0.0786699, -1.728098, -0.3479307, -0.4188279, 0.6138062],
      -78.5728]]),
    ("conv_transpose dilated", lambda: tf.nn.conv_transpose(X4, W2T, [2, 9, 11, 2], 1, "VALID", dilations=2),
     [[[2, 9, 11, 2], "float32", [-0.08756063, -1.092305, -0.3816356, -0.5361152, 1.136143, 0.5946169],
      -104.9459]]),
    ("conv_transpose NCHW",
     lambda: tf.nn.conv_transpose(np.moveaxis(X4, -1, 1), W2T, [2, 2, 10, 14], 2, "SAME", data_format="NCHW"),
     [[[2, 2, 10, 14], "float32", [-0.08756063, -0.5615622, -1.728098, -0.4188279, 0.004949331, 1.077388],
      -87.70557]]),
    ("atrous_conv2d", lambda: tf.nn.atrous_conv2d(X4, W2, 2, "SAME"),
     [[[2, 5, 7, 4], "float32", [2.963351, -5.529273, -6.730191, 1.319056, -1.409913, 3.443941], 90.74313]]),
    ("atrous_conv2d VALID", lambda: tf.nn.atrous_conv2d(X4, W2, 2, "VALID"),
     [[[2, 1, 3, 4], "float32", [1.779995, -3.309556, 8.994121, -4.990657, -12.17394, 5.767098, 2.359035,
      -0.2959224, -1.005561, 2.614594, 0.9841513, -0.03489446, 7.879637, 5.977893, 3.196829, 1.715495, 8.443821,
      -3.866098, 3.649868, -1.9196, -3.845511, 9.591636, 1.695363, -1.927347], 31.28045]]),
    ("atrous_conv2d_transpose", lambda: tf.nn.atrous_conv2d_transpose(X4, W2T, [2, 5, 7, 2], 2, "SAME"),
     [[[2, 5, 7, 2], "float32", [4.873554, -1.579384, -3.653923, -4.871261, -0.7842422, -1.015883], -44.83762]]),
    ("atrous_conv2d_transpose VALID", lambda: tf.nn.atrous_conv2d_transpose(X4, W2T, [2, 9, 11, 2], 2, "VALID"),
     [[[2, 9, 11, 2], "float32", [-0.08756063, -1.092305, -0.3816356, -0.5361152, 1.136143, 0.5946169],
      -104.9459]]),
    ("separable_conv2d", lambda: tf.nn.separable_conv2d(X4, DW, PW, [1, 1, 1, 1], "SAME"),
     [[[2, 5, 7, 4], "float32", [-2.272487, 0.7373108, 1.481922, -0.2493997, -0.06731579, 2.761069], -101.5239]]),
    ("separable_conv2d strided", lambda: tf.nn.separable_conv2d(X4, DW, PW, [1, 2, 2, 1], "VALID"),
     [[[2, 2, 3, 4], "float32", [-1.536304, -5.182139, -7.916095, 11.20209, 3.344887, -0.7296482], 23.30716]]),
    ("separable_conv2d dilated", lambda: tf.nn.separable_conv2d(X4, DW, PW, [1, 1, 1, 1], "SAME", dilations=[2, 2]),
     [[[2, 5, 7, 4], "float32", [-4.760506, -1.008439, -2.332226, 3.909135, 3.206864, -1.196684], -36.67307]]),
    ("separable_conv2d NCHW",
     lambda: tf.nn.separable_conv2d(np.moveaxis(X4, -1, 1), DW, PW, [1, 1, 1, 1], "SAME", data_format="NCHW"),
     [[[2, 4, 5, 7], "float32", [-2.272487, -0.06731579, 0.0801881, 4.204058, 1.319319, 3.974309], -101.5239]]),
    ("depth_to_space", lambda: tf.nn.depth_to_space(XS, 2),
     [[[1, 4, 8, 2], "float32", [0, 1, 2, 3, 8, 9], 2016]]),
    ("depth_to_space int32", lambda: tf.nn.depth_to_space(XS.astype(np.int32), 2),
     [[[1, 4, 8, 2], "int32", [0, 1, 2, 3, 8, 9], 2016]]),
    ("space_to_depth", lambda: tf.nn.space_to_depth(XS, 2),
     [[[1, 1, 2, 32], "float32", [0, 1, 2, 3, 4, 5], 2016]]),
    ("dilation2d", lambda: tf.nn.dilation2d(X4, DF, [1, 1, 1, 1], "SAME", "NHWC", [1, 1, 1, 1]),
     [[[2, 5, 7, 3], "float32", [1.543774, 0.006088778, 0.6855071, 2.742874, 0.9472826, 1.788247], 271.5709]]),
    ("dilation2d VALID rate", lambda: tf.nn.dilation2d(X4, DF, [1, 2, 1, 1], "VALID", "NHWC", [1, 1, 2, 1]),
     [[[2, 2, 3, 3], "float32", [2.318485, 1.085275, 1.788247, 1.855492, -0.2067436, 0.7488807], 51.30108]]),
    ("dilation2d SAME strided", lambda: tf.nn.dilation2d(X4, DF, [1, 2, 2, 1], "SAME", "NHWC", [1, 1, 1, 1]),
     [[[2, 3, 4, 3], "float32", [1.543774, 0.006088778, 0.6855071, 1.855492, 1.085275, 0.6932373], 81.05306]]),
    ("erosion2d", lambda: tf.nn.erosion2d(X4, DF, [1, 1, 1, 1], "SAME", "NHWC", [1, 1, 1, 1]),
     [[[2, 5, 7, 3], "float32", [-0.8471218, -0.8033884, -1.075142, -0.3289509, -0.6653963, -2.140472],
      -262.3094]]),
    ("erosion2d VALID rate", lambda: tf.nn.erosion2d(X4, DF, [1, 2, 1, 1], "VALID", "NHWC", [1, 1, 2, 1]),
     [[[2, 2, 3, 3], "float32", [-3.277053, -0.6653963, -2.682648, -1.684289, -0.3473692, -1.753037], -57.23617]]),
    ("lrn", lambda: tf.nn.lrn(X4),
     [[[2, 5, 7, 3], "float32", [0.1046517, -0.1099576, 0.5330564, 0.08776189, -0.4481535, 0.3025189],
      0.1093098]]),
    ("local_response_normalization",
     lambda: tf.nn.local_response_normalization(X4, depth_radius=1, bias=2.0, alpha=0.5, beta=0.75),
     [[[2, 5, 7, 3], "float32", [0.07429678, -0.07259466, 0.3528689, 0.05910208, -0.2950954, 0.1995714],
      0.5674536]]),
    ("lrn float64 host", lambda: tf.nn.lrn(X4.astype(np.float64), 1),
     [[[2, 5, 7, 3], "float32", [0.1236901, -0.1099576, 0.5359997, 0.09207626, -0.4481535, 0.3036907],
      0.7776683]]),
    ("lrn int32 host", lambda: tf.nn.lrn(np.ones((1, 2, 2, 3), np.int32)),
     [[[1, 2, 2, 3], "float32", [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], 6]]),
    ("crelu", lambda: tf.nn.crelu(X4),
     [[[2, 5, 7, 6], "float32", [0.1257302, 0, 0.6404226, 0, 0.1321049, 0], 164.3894]]),
    ("crelu axis 1", lambda: tf.nn.crelu(X4, axis=1),
     [[[2, 10, 7, 3], "float32", [0.1257302, 0, 0.6404226, 0.1049001, 0, 0.3615951], 164.3894]]),
    ("crelu int32", lambda: tf.nn.crelu(np.array([-1, 2], np.int32)),
     [[[4], "int32", [0, 2, 1, 0], 3]]),
    ("softsign", lambda: tf.nn.softsign(X4),
     [[[2, 5, 7, 3], "float32", [0.1116877, -0.1166896, 0.390401, 0.09494081, -0.3488182, 0.2655673], 1.309682]]),
    ("weighted_moments", lambda: tf.nn.weighted_moments(X4, [1, 2], FW),
     [[[2, 3], "float32", [-0.2382002, 0.008831448, 0.2251291, -0.1848243, -0.01521662, -0.001201225], -0.2054818],
      [[2, 3], "float32", [1.212138, 0.6587502, 0.6378033, 1.09641, 0.6341565, 0.97966], 5.218918]]),
    ("weighted_moments keepdims", lambda: tf.nn.weighted_moments(X4, [0, 1, 2], FW, keepdims=True),
     [[[1, 1, 1, 3], "float32", [-0.2056611, -0.005230677, 0.1122145], -0.09867728], [[1, 1, 1, 3], "float32",
      [1.142267, 0.6445096, 0.8211599], 2.607936]]),
    ("weighted_moments float16", lambda: tf.nn.weighted_moments(X4.astype(np.float16), [1], FW.astype(np.float16)),
     [[[2, 7, 3], "float16", [-0.286377, 0.09680176, 0.4423828, 1.012695, 0.09814453, 0.4604492], -1.437439], [[2,
      7, 3], "float16", [0.7661133, 0.2792969, 0.05377197, 0.487793, 0.7084961, 0.9726562], 26.664]]),
    ("weighted_moments zero weights", lambda: tf.nn.weighted_moments(X4, [1], np.zeros_like(FW)),
     [[[2, 7, 3], "float32", [0, 0, 0, 0, 0, 0], 0], [[2, 7, 3], "float32", [0, 0, 0, 0, 0, 0], 0]]),
    ("sufficient_statistics", lambda: tf.nn.sufficient_statistics(X4, [1, 2]),
     [[[], "float32", [35], 35], [[2, 3], "float32", [-4.48826, 1.704117, 12.02059, -5.761128, -2.489455,
      0.02060449], 1.006469], [[2, 3], "float32", [42.60599, 24.84958, 28.94728, 38.52241, 27.77291, 30.74217],
      193.4403], None]),
    ("sufficient_statistics shift", lambda: tf.nn.sufficient_statistics(X4, [0, 1, 2], shift=0.5, keepdims=True),
     [[[], "float32", [70], 70], [[1, 1, 1, 3], "float32", [-45.24938, -35.78534, -22.9588], -103.9935], [[1, 1, 1,
      3], "float32", [108.8778, 70.90784, 65.14826], 244.9339], [[], "float32", [0.5], 0.5]]),
    ("sufficient_statistics int32",
     lambda: tf.nn.sufficient_statistics(np.arange(6).reshape(2, 3).astype(np.int32), [1]),
     [[[], "int32", [3], 3], [[2], "int32", [3, 12], 15], [[2], "int32", [5, 50], 55], None]),
    ("normalize_moments",
     lambda: tf.nn.normalize_moments(4.0, np.array([2.0, 4.0], np.float32), np.array([10.0, 20.0], np.float32), None),
     [[[2], "float32", [0.5, 1], 1.5], [[2], "float32", [2.25, 4], 6.25]]),
    ("normalize_moments shift",
     lambda: tf.nn.normalize_moments(4.0, np.array([2.0, 4.0], np.float32), np.array([10.0, 20.0], np.float32), 0.5),
     [[[2], "float32", [1, 1.5], 2.5], [[2], "float32", [2.25, 4], 6.25]]),
    ("zero_fraction int", lambda: tf.nn.zero_fraction(np.array([0, 1, 0, 2, 0], np.int32)),
     [[[], "float32", [0.6], 0.6]]),
    ("zero_fraction float", lambda: tf.nn.zero_fraction(np.maximum(X4, 0)),
     [[[], "float32", [0.4952381], 0.4952381]]),
    ("zero_fraction empty", lambda: tf.nn.zero_fraction(np.zeros((0,), np.float32)),
     [[[], "float32", [NAN], NAN]]),
    ("batch_norm_with_global_normalization",
     lambda: tf.nn.batch_norm_with_global_normalization(X4, BN_M, BN_V, BN_B, BN_G, 0.001, True),
     [[[2, 5, 7, 3], "float32", [0.05143474, 1.023999, -0.5190505, 0.009795338, 0.8813526, -0.9129785],
      -42.46764]]),
    ("batch_norm_with_global_normalization unscaled",
     lambda: tf.nn.batch_norm_with_global_normalization(X4, BN_M, BN_V, BN_B, BN_G, 0.001, False),
     [[[2, 5, 7, 3], "float32", [0.02571737, 1.047997, -0.5190505, 0.004897669, 0.7627052, -0.9129785],
      -20.55595]]),
    ("collapse_repeated", lambda: tf.nn.collapse_repeated(LABELS, np.array([6, 5, 3], np.int32)),
     [[[3, 4], "int32", [1, 2, 3, 0, 4, 5, 0, 0, 1, 2, 1, 0], 19], [[3], "int32", [4, 2, 3], 9]]),
    ("collapse_repeated short", lambda: tf.nn.collapse_repeated(LABELS, [4, 6, 2]),
     [[[3, 2], "int32", [1, 2, 4, 5, 1, 2], 15], [[3], "int32", [2, 2, 2], 6]]),
    ("embedding_lookup_sparse sum", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, None, combiner="sum"),
     [[[3, 3], "float32", [0, 0.75, 1.5, 0, 0, 0, 0.5, 1, 1.5], 5.25]]),
    ("embedding_lookup_sparse mean", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, None),
     [[[3, 3], "float32", [0, 0.25, 0.5, 0, 0, 0, 0.25, 0.5, 0.75], 2.25]]),
    ("embedding_lookup_sparse sqrtn", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, None, combiner="sqrtn"),
     [[[3, 3], "float32", [0, 0.4330127, 0.8660254, 0, 0, 0, 0.3535534, 0.7071068, 1.06066], 3.420358]]),
    ("embedding_lookup_sparse weighted sum", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, WTS, combiner="sum"),
     [[[3, 3], "float32", [-1, -0.125, 0.75, 0, 0, 0, -5.5, -5, -4.5], -15.375]]),
    ("embedding_lookup_sparse weighted mean", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, WTS),
     [[[3, 3], "float32", [-0.2857143, -0.03571429, 0.2142857, 0, 0, 0, -2.75, -2.5, -2.25], -7.607143]]),
    ("embedding_lookup_sparse weighted sqrtn",
     lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, WTS, combiner="sqrtn"),
     [[[3, 3], "float32", [-0.4364358, -0.05455447, 0.3273268, 0, 0, 0, -1.739253, -1.581139, -1.423025],
      -4.90708]]),
    ("embedding_lookup_sparse max_norm", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, None, max_norm=1.0),
     [[[3, 3], "float32", [-0.1813859, 0.02326763, 0.2279212, 0, 0, 0, -0.102268, 0.004340529, 0.1109491],
      0.0828245]]),
    ("safe_embedding_lookup_sparse sum", lambda: tf.nn.safe_embedding_lookup_sparse(PARAMS, IDS, WTS, combiner="sum"),
     [[[4, 3], "float32", [-1, -0.125, 0.75, 0, 0, 0, -5.5, -5, -4.5, 0, 0, 0], -15.375]]),
    ("safe_embedding_lookup_sparse mean", lambda: tf.nn.safe_embedding_lookup_sparse(PARAMS, IDS, WTS),
     [[[4, 3], "float32", [-0.2857143, -0.03571429, 0.2142857, 0, 0, 0, -1.25, -1, -0.75, 0, 0, 0], -3.107143]]),
    ("safe_embedding_lookup_sparse sqrtn",
     lambda: tf.nn.safe_embedding_lookup_sparse(PARAMS, IDS, WTS, combiner="sqrtn"),
     [[[4, 3], "float32", [-0.4364358, -0.05455447, 0.3273268, 0, 0, 0, -1.25, -1, -0.75, 0, 0, 0], -3.163663]]),
    ("safe_embedding_lookup_sparse default_id",
     lambda: tf.nn.safe_embedding_lookup_sparse(PARAMS, IDS, None, default_id=2),
     [[[4, 3], "float32", [0, 0.25, 0.5, 0.25, 0.5, 0.75, 0.25, 0.5, 0.75, 0.25, 0.5, 0.75], 5.25]]),
    ("safe_embedding_lookup_sparse invalid", lambda: tf.nn.safe_embedding_lookup_sparse(PARAMS, IDS2, WTS2),
     [[[2, 3], "float32", [-0.5, -0.25, 0, 0, 0, 0], -0.75]]),
    ("safe_embedding_lookup_sparse invalid unweighted", lambda: tf.nn.safe_embedding_lookup_sparse(PARAMS, IDS2, None),
     [[[2, 3], "float32", [-0.5, -0.25, 0, 0.25, 0.5, 0.75], 0.75]]),
    ("depthwise_conv2d_backprop_input",
     lambda: tf.nn.depthwise_conv2d_backprop_input([2, 5, 7, 3], DW, GRAD, [1, 2, 2, 1], "SAME"),
     [[[2, 5, 7, 3], "float32", [1.250089, 0.3641171, 0.07686397, 0.1977599, 0.1640102, -0.6511256], 45.66647]]),
    ("depthwise_conv2d_backprop_input VALID",
     lambda: tf.nn.depthwise_conv2d_backprop_input([2, 5, 7, 3], DW, GRAD2, [1, 1, 1, 1], "VALID"),
     [[[2, 5, 7, 3], "float32", [0.5607284, -0.6072635, 1.457037, 2.941579, 1.210534, -2.01023], 64.24423]]),
    ("depthwise_conv2d_backprop_filter",
     lambda: tf.nn.depthwise_conv2d_backprop_filter(X4, [3, 3, 3, 2], GRAD, [1, 2, 2, 1], "SAME"),
     [[[3, 3, 3, 2], "float32", [-2.837055, -7.010053, -4.471097, 2.911349, -1.523439, -6.272171], 12.05456]]),
    ("depthwise_conv2d_backprop_filter VALID",
     lambda: tf.nn.depthwise_conv2d_backprop_filter(X4, [3, 3, 3, 2], GRAD2, [1, 1, 1, 1], "VALID"),
     [[[3, 3, 3, 2], "float32", [1.965373, -7.127748, 4.179883, 1.556304, -0.3437334, 6.6689], -16.50795]]),
    ("space_to_batch", lambda: tf.nn.space_to_batch(XS, [2, 2], [[0, 0], [0, 0]]),
     [[[4, 1, 2, 8], "float32", [0, 1, 2, 3, 4, 5], 2016]]),
]


@pytest.mark.parametrize("case, call, want", OBSERVED, ids=[c[0] for c in OBSERVED])
def test_matches_tf(case, call, want):
    check_summary(call(), want)


# Inside compiled code: the same numbers as on the host (one compile per case).
COMPILED = [
    ("max_pool", lambda x: tf.nn.max_pool(x, 3, 2, "SAME"), (X4,)),
    ("avg_pool3d", lambda x: tf.nn.avg_pool3d(x, [2, 3, 2], [1, 2, 2], "SAME"), (X5,)),
    ("pool", lambda x: tf.nn.pool(x, [2, 3], "AVG", padding="VALID", dilations=[2, 1]), (X4,)),
    ("max_pool_with_argmax", lambda x: tf.nn.max_pool_with_argmax(x, 3, 2, "SAME", output_dtype=tf.int32), (X4,)),
    ("conv3d", lambda x, w: tf.nn.conv3d(x, w, [1, 1, 2, 1, 1], "SAME"), (X5, W3)),
    ("conv_transpose", lambda x, w: tf.nn.conv_transpose(x, w, [2, 10, 13, 2], 2, "SAME"), (X4, W2T)),
    ("depthwise_conv2d_backprop_filter", lambda x, g: tf.nn.depthwise_conv2d_backprop_filter(
        x, [3, 3, 3, 2], g, [1, 2, 2, 1], "SAME"), (X4, GRAD)),
    ("separable_conv2d", lambda x, d, p: tf.nn.separable_conv2d(x, d, p, [1, 1, 1, 1], "SAME"), (X4, DW, PW)),
    ("depth_to_space", lambda x: tf.nn.depth_to_space(x, 2), (XS,)),
    ("space_to_depth", lambda x: tf.nn.space_to_depth(x, 2), (XS,)),
    ("erosion2d", lambda x, f: tf.nn.erosion2d(x, f, [1, 2, 1, 1], "VALID", "NHWC", [1, 1, 2, 1]), (X4, DF)),
    ("lrn", lambda x: tf.nn.lrn(x, 2), (X4,)),
    ("crelu softsign", lambda x: tf.nn.softsign(tf.nn.crelu(x)), (X4,)),
    ("weighted_moments", lambda x, w: tf.nn.weighted_moments(x, [1, 2], w), (X4, FW)),
    ("zero_fraction", lambda x: tf.nn.zero_fraction(tf.nn.relu(x)), (X4,)),
    ("safe_embedding_lookup_sparse", lambda p, i, w: tf.nn.safe_embedding_lookup_sparse(p, i, w), (PARAMS, IDS, WTS)),
    ("embedding_lookup_sparse", lambda p, i, w: tf.nn.embedding_lookup_sparse(p, i, w)[:3], (PARAMS, IDS, WTS)),
]


@pytest.mark.parametrize("case, fn, args", COMPILED, ids=[c[0] for c in COMPILED])
def test_compiled_code_gives_the_host_numbers(case, fn, args):
    host = fn(*args)
    compiled = jax.jit(fn)(*jax.tree.map(jnp.asarray, args))
    for want, got in zip(jax.tree.leaves(host), jax.tree.leaves(compiled)):
        assert isinstance(got, jax.Array) and not isinstance(want, jax.Array)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_collapse_repeated_compiled_keeps_the_input_width():
    host, host_len = tf.nn.collapse_repeated(LABELS, [6, 5, 3])
    compiled, compiled_len = jax.jit(tf.nn.collapse_repeated)(LABELS, np.array([6, 5, 3], np.int32))
    assert compiled.shape == LABELS.shape and host.shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(compiled)[:, :4], host)
    np.testing.assert_array_equal(np.asarray(compiled)[:, 4:], 0)
    np.testing.assert_array_equal(compiled_len, host_len)


def test_definitions_against_numpy():
    x = X4.astype(np.float64)
    # avg_pool SAME averages the entries inside the input only
    same = tf.nn.avg_pool(X4, 3, 2, "SAME")
    np.testing.assert_allclose(same[:, 0, 0], x[:, :2, :2].mean(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(same[:, -1, -1], x[:, 3:, 5:].mean(axis=(1, 2)), rtol=1e-5)
    # max_pool_with_argmax's flat index points at the maximum
    out, where = tf.nn.max_pool_with_argmax(X4, 3, 2, "SAME", include_batch_in_index=True)
    np.testing.assert_array_equal(X4.reshape(-1)[np.asarray(where)], out)
    # conv_transpose is the adjoint of the forward convolution: <conv(u), v> == <u, conv_transpose(v)>
    u = np.random.default_rng(9).standard_normal((2, 10, 13, 2)).astype(np.float32)
    forward = tf.nn.convolution(u, W2T, strides=2, padding="SAME")
    assert forward.shape == X4.shape
    np.testing.assert_allclose(np.sum(forward * X4, dtype=np.float64),
                               np.sum(u * tf.nn.conv_transpose(X4, W2T, u.shape, 2, "SAME"), dtype=np.float64),
                               rtol=1e-4)
    # space_to_depth undoes depth_to_space
    np.testing.assert_array_equal(tf.nn.space_to_depth(tf.nn.depth_to_space(XS, 2), 2), XS)
    # lrn: the definition written out per channel
    r = 1
    squares = np.stack([np.sum(x[..., max(0, c - r):c + r + 1] ** 2, axis=-1) for c in range(3)], axis=-1)
    np.testing.assert_allclose(tf.nn.lrn(X4, r, 2.0, 0.5, 0.75), x / (2 + 0.5 * squares) ** 0.75, rtol=1e-5)
    # weighted_moments with integer weights: the moments of the data repeated that many times
    weights = np.array([1, 3, 0, 2, 1], np.float32)
    column = X4[0, :, 0, 0]
    repeated = np.repeat(column.astype(np.float64), weights.astype(int))
    mean, variance = tf.nn.weighted_moments(column, [0], weights)
    np.testing.assert_allclose([mean, variance], [repeated.mean(), repeated.var()], rtol=1e-5)
    # normalize_moments of sufficient_statistics is moments
    counts, mean_ss, var_ss, shift = tf.nn.sufficient_statistics(X4, [0, 1, 2])
    mean, variance = tf.nn.normalize_moments(counts, mean_ss, var_ss, shift)
    np.testing.assert_allclose(mean, x.mean(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(variance, x.var(axis=(0, 1, 2)), rtol=1e-4)
    # dilation2d with a zero filter is max pooling
    np.testing.assert_array_equal(tf.nn.dilation2d(X4, np.zeros((2, 3, 3), np.float32), [1, 1, 1, 1], "SAME",
                                                   "NHWC", [1, 1, 1, 1]),
                                  tf.nn.max_pool(X4, [2, 3], 1, "SAME"))


ERRORS = [
    # observed, TF 2.21: InvalidArgumentError "Value for attr 'T' of int32 is not in the list of allowed values"
    ("avg_pool int", lambda: tf.nn.avg_pool(XI, 2, 2, "SAME"), FloatOnlyError, "floating-point"),
    # InvalidArgumentError: Value for attr 'padding' of "FULL" is not in the list of allowed values
    ("max_pool padding", lambda: tf.nn.max_pool(X4, 2, 2, "FULL"), tf.errors.InvalidArgumentError, "FULL"),
    # TypeError: Expected string for argument 'padding' not [[0, 0], ...]
    ("avg_pool explicit", lambda: tf.nn.avg_pool(X4, 2, 2, [[0, 0], [1, 1], [1, 1], [0, 0]]), TypeError,
     "Expected string"),
    # ValueError: `input.shape.rank` must be 3, 4 or 5. Received: input.shape=(7, 3) of rank 2.
    ("max_pool rank", lambda: tf.nn.max_pool(X4[0, 0], 2, 2, "SAME"), ValueError, "must be 3, 4 or 5"),
    # ValueError: pooling with 'SAME' padding is not implemented for `dilation_rate` > 1.
    ("pool dilated SAME", lambda: tf.nn.pool(X4, [2, 2], "AVG", padding="SAME", dilations=[2, 2]), ValueError,
     "not implemented for `dilation_rate` > 1"),
    # ValueError: `strides > 1` not supported in conjunction with `dilation_rate > 1`.
    ("pool dilated strided", lambda: tf.nn.pool(X4, [2, 2], "MAX", padding="VALID", dilations=[2, 2],
                                                strides=[2, 2]), ValueError, "not supported in conjunction"),
    # ValueError: 2-D MIN pooling is not supported.
    ("pool MIN", lambda: tf.nn.pool(X4, [2, 2], "MIN", padding="SAME"), ValueError, "2-D MIN pooling"),
    # InvalidArgumentError: Input depth dimension 3 should be divisible by: 4
    ("depth_to_space", lambda: tf.nn.depth_to_space(X4, 2), tf.errors.InvalidArgumentError, "divisible by: 4"),
    # InvalidArgumentError: Image width 7 and height 5 should be divisible by block_size: 2
    ("space_to_depth", lambda: tf.nn.space_to_depth(X4, 2), tf.errors.InvalidArgumentError,
     "Image width 7 and height 5"),
    # InvalidArgumentError: in must be 4-dimensional
    ("lrn 3-D", lambda: tf.nn.lrn(X4[0]), tf.errors.InvalidArgumentError, "4-dimensional"),
    # InvalidArgumentError: Value for attr 'T' of int32 is not in the list of allowed values (Softsign)
    ("softsign int", lambda: tf.nn.softsign(np.array([-1, 2], np.int32)), FloatOnlyError, "floating-point"),
    # ValueError: combiner must be one of 'mean', 'sqrtn' or 'sum', got max
    ("combiner", lambda: tf.nn.embedding_lookup_sparse(PARAMS, IDS, None, combiner="max"), ValueError,
     "combiner must be one of"),
    ("conv_transpose shape", lambda: tf.nn.conv_transpose(X4, W2T, [2, 11, 11, 2], 2, "SAME"), ValueError,
     "output_shape"),
    ("atrous rate", lambda: tf.nn.atrous_conv2d(X4, W2, 0, "SAME"), ValueError, "rate 0 cannot be less than one"),
]


@pytest.mark.parametrize("case, call, error, match", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_as_tf(case, call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_names_are_in_tf_nn_and_give_tensors():
    names = ["max_pool", "avg_pool", "max_pool1d", "avg_pool1d", "max_pool3d", "avg_pool3d", "pool",
             "max_pool_with_argmax", "conv3d", "convolution", "conv_transpose", "conv1d_transpose",
             "conv3d_transpose", "atrous_conv2d", "atrous_conv2d_transpose", "separable_conv2d", "depth_to_space",
             "space_to_depth", "dilation2d", "erosion2d", "lrn", "local_response_normalization", "crelu",
             "softsign", "weighted_moments", "sufficient_statistics", "normalize_moments", "zero_fraction",
             "batch_norm_with_global_normalization", "collapse_repeated", "embedding_lookup_sparse",
             "safe_embedding_lookup_sparse", "ctc_loss", "ctc_greedy_decoder", "depthwise_conv2d_backprop_input",
             "depthwise_conv2d_backprop_filter", "space_to_batch"]
    assert [n for n in names if not hasattr(tf.nn, n)] == []
    assert tf.nn.lrn is tf.nn.local_response_normalization and tf.nn.space_to_batch is tf.space_to_batch
    assert float(tf.nn.zero_fraction(np.array([0.0, 1.0])).numpy()) == 0.5
    assert tf.nn.max_pool(X4, 2, 2, "VALID").numpy().shape == (2, 2, 3, 3)


CTC_LOGITS = np.random.default_rng(7).standard_normal((6, 2, 5)).astype(np.float32)  # time, batch, classes
CTC_LABELS = np.array([[1, 2, 2], [3, 1, 0]], np.int32)
CTC_LABEL_LENGTH, CTC_LOGIT_LENGTH = np.array([3, 2], np.int32), np.array([6, 5], np.int32)

# observed, TF 2.21: the loss per sequence
CTC = [
    ("default blank 0", lambda: tf.nn.ctc_loss(CTC_LABELS, CTC_LOGITS, CTC_LABEL_LENGTH, CTC_LOGIT_LENGTH),
     [8.2980375289917, 6.21653938293457]),
    ("batch major", lambda: tf.nn.ctc_loss(CTC_LABELS, np.transpose(CTC_LOGITS, (1, 0, 2)), CTC_LABEL_LENGTH,
                                           CTC_LOGIT_LENGTH, logits_time_major=False),
     [8.2980375289917, 6.21653938293457]),
    ("blank -1", lambda: tf.nn.ctc_loss(CTC_LABELS, CTC_LOGITS, CTC_LABEL_LENGTH, CTC_LOGIT_LENGTH, blank_index=-1),
     [5.643059730529785, 6.108504772186279]),
    ("blank 2", lambda: tf.nn.ctc_loss(CTC_LABELS + (CTC_LABELS >= 2), CTC_LOGITS, CTC_LABEL_LENGTH,
                                       CTC_LOGIT_LENGTH, blank_index=2),
     [7.302852630615234, 4.393272399902344]),
    ("sparse labels", lambda: tf.nn.ctc_loss(tf.sparse.from_dense(np.array([[2, 3, 3], [4, 2, 0]], np.int32)),
                                             CTC_LOGITS, None, CTC_LOGIT_LENGTH, blank_index=0),
     [7.315510272979736, 5.857988357543945]),
]


@pytest.mark.parametrize("case, call, want", CTC, ids=[c[0] for c in CTC])
def test_ctc_loss_matches_tf(case, call, want):
    loss = call()
    assert loss.dtype == np.float32 and loss.shape == (2,)
    np.testing.assert_allclose(loss, want, rtol=1e-5)


def test_ctc_loss_compiled_and_its_gradient():
    loss = jax.jit(tf.nn.ctc_loss)(CTC_LABELS, jnp.asarray(CTC_LOGITS), CTC_LABEL_LENGTH, CTC_LOGIT_LENGTH)
    np.testing.assert_allclose(loss, [8.2980375289917, 6.21653938293457], rtol=1e-5)
    grad = jax.grad(lambda z: tf.nn.ctc_loss(CTC_LABELS, z, CTC_LABEL_LENGTH, CTC_LOGIT_LENGTH).sum())(
        jnp.asarray(CTC_LOGITS))
    # the gradient of -log p with respect to logits is softmax - posterior: it sums to 0 over classes
    np.testing.assert_allclose(np.asarray(grad).sum(-1), 0, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(grad)[5, 1], 0)  # the second sequence has 5 steps
    with pytest.raises(ValueError, match="`blank_index` must be provided"):
        tf.nn.ctc_loss(tf.sparse.from_dense(CTC_LABELS), CTC_LOGITS, None, CTC_LOGIT_LENGTH)


def test_ctc_greedy_decoder_as_tf():
    # observed, TF 2.21 (best classes per step [[1, 0, 3, 4, 4, 0], [2, 0, 4, 2, 4, 3]], the second 5 steps long)
    (decoded,), neg_sum = tf.nn.ctc_greedy_decoder(CTC_LOGITS, CTC_LOGIT_LENGTH)
    assert decoded.values.dtype == np.int64 and list(decoded.dense_shape) == [2, 4]
    assert decoded.indices.numpy().tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2]]
    assert decoded.values.numpy().tolist() == [1, 0, 3, 0, 2, 0, 2]
    np.testing.assert_allclose(neg_sum, [[-4.241833686828613], [-5.033633708953857]], rtol=1e-6)
    assert neg_sum.dtype == np.float32
    (decoded,), _ = tf.nn.ctc_greedy_decoder(CTC_LOGITS, CTC_LOGIT_LENGTH, blank_index=0)
    assert decoded.indices.numpy().tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [1, 3]]
    assert decoded.values.numpy().tolist() == [1, 3, 4, 2, 4, 2, 4]
    steps = np.eye(3, dtype=np.float32)[[0, 0, 1, 0]][:, None]  # observed, TF 2.21: [0, 0, 1, 0] and [0, 1, 0]
    assert tf.nn.ctc_greedy_decoder(steps, [4], merge_repeated=False)[0][0].values.numpy().tolist() == [0, 0, 1, 0]
    assert tf.nn.ctc_greedy_decoder(steps, [4])[0][0].values.numpy().tolist() == [0, 1, 0]
