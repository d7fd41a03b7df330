"""tf.image's colour spaces and adjustments, quality measures (psnr, ssim), gradients, patches, crop_and_resize,
resize_with_pad and non-maximum suppression, against TF 2.21.

Every expected value in OBSERVED was printed by TF 2.21 (tensorflow-cpu 2.21.0) for the same call on the same
inputs (numpy's default_rng with the seeds below): per output its shape, dtype, leading values (all of them when
there are 24 or fewer) and sum. Then the ops inside jax.jit equal to the host's results, the random forms' seeds
and limits, checks against numpy computations of the definitions, and TF's errors.
"""
import base64
import io
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from tf_observed_summaries import check_summary  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

T = tf.constant
INF, NAN = float("inf"), float("nan")

F32 = np.float32
_r = np.random.default_rng(3)
IM = _r.uniform(0, 1, (2, 4, 5, 3)).astype(F32)
IM[0, 0, :4] = [[0.5, 0.5, 0.5], [0, 0, 0], [1.0, 0.2, 1.0], [0.3, 0.9, 0.9]]  # gray, black, magenta, cyan-ish
U8 = _r.integers(0, 256, (4, 5, 3)).astype(np.uint8)
_r = np.random.default_rng(4)
A = _r.uniform(0, 1, (2, 16, 18, 3)).astype(F32)
B = np.clip(A + _r.normal(0, 0.1, A.shape), 0, 1).astype(F32)
BIG = _r.uniform(0, 1, (1, 180, 180, 1)).astype(F32)
BIGB = np.clip(BIG + _r.normal(0, 0.05, BIG.shape), 0, 1).astype(F32)
UA, UB = (A * 255).astype(np.uint8), (B * 255).astype(np.uint8)
_r = np.random.default_rng(5)
_c, _s = _r.uniform(0, 1, (12, 2)), _r.uniform(0.1, 0.4, (12, 2))
BOXES = np.concatenate([_c, _c + _s], 1).astype(F32)
BOXES[3] = BOXES[3][[2, 3, 0, 1]]  # corners given in the other order
SCORES = _r.uniform(0, 1, 12).astype(F32)
SCORES[7] = SCORES[2]  # a tie
CROPS = np.array([[0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], [0.5, 0.6, 0.2, 0.1], [-0.2, -0.1, 1.3, 0.7],
                  [0.3, 0.3, 0.3, 0.3]], F32)  # inside, whole, flipped, partly outside, a point
CROP_IDX = np.array([0, 1, 1, 0, 1], np.int32)
EQ = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0.5, 1]], F32)
EQ_SCORES = np.array([0.5, 0.5, 0.9, 0.5], F32)
GRID = np.arange(32, dtype=np.int32).reshape(1, 4, 4, 2)

_r = np.random.default_rng(8)
_c, _s = _r.uniform(-0.1, 0.9, (2, 8, 1, 2)), _r.uniform(0.1, 0.5, (2, 8, 1, 2))
CB = np.concatenate([_c, _c + _s], -1).astype(np.float32)  # [batch, boxes, 1, 4]: one box for every class
CS = _r.uniform(0, 1, (2, 8, 3)).astype(np.float32)
CBQ = np.repeat(CB, 3, axis=2) + _r.uniform(-0.05, 0.05, (2, 8, 3, 4)).astype(np.float32)  # a box per class
DRAW_IMG = np.full((1, 6, 8, 3), 0.25, np.float32)
DRAW_BOXES = np.array([[[0.1, 0.2, 0.8, 0.7], [0.5, -0.2, 1.2, 0.5], [0.0, 0.0, 1.0, 1.0], [0.9, 0.9, 0.2, 0.2]]],
                      np.float32)  # inside, partly outside, the border, upside down (not drawn)
PALETTE_BOXES = np.array([[[0.0, k / 11, 1.0, k / 11] for k in range(11)]], np.float32)  # a line per colour

# (case, call, TF 2.21's [shape, dtype, leading values, sum] per output)  # observed, TF 2.21
OBSERVED = [
    ("rgb_to_hsv", lambda: tf.image.rgb_to_hsv(IM),
     [[[2, 4, 5, 3], "float32", [0, 0, 0.5, 0, 0, 0], 76.84811]]),
    ("rgb_to_hsv gray black magenta cyan", lambda: tf.image.rgb_to_hsv(IM[0, 0, :4]),
     [[[4, 3], "float32", [0, 0, 0.5, 0, 0, 0, 0.8333333, 0.8, 1, 0.5, 0.6666666, 0.9], 5.2]]),
    ("rgb_to_hsv uint8 unscaled", lambda: tf.image.rgb_to_hsv(U8),
     [[[4, 5, 3], "float32", [0.3402778, 0.9917355, 242, 0.1533333, 0.1162791, 215], 3529.078]]),
    ("rgb_to_hsv float64 host", lambda: tf.image.rgb_to_hsv(IM.astype(np.float64)),
     [[[2, 4, 5, 3], "float32", [0, 0, 0.5, 0, 0, 0], 76.84811]]),
    ("hsv_to_rgb", lambda: tf.image.hsv_to_rgb(IM),
     [[[2, 4, 5, 3], "float32", [0.25, 0.5, 0.5, 0, 0, 0], 45.72853]]),
    ("hsv_to_rgb first pixels", lambda: tf.image.hsv_to_rgb(IM[0, 0]),
     [[[5, 3], "float32", [0.25, 0.5, 0.5, 0, 0, 0, 1, 0.8, 0.8, 0.252, 0.9, 0.09000002, 0.3048756, 0.7378378,
      0.5576252], 6.692339]]),
    ("hsv round trip", lambda: tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(IM)) - IM,
     [[[2, 4, 5, 3], "float32", [0, 0, 0, 0, 0, 0], 3.229361e-07]]),
    ("rgb_to_yiq", lambda: tf.image.rgb_to_yiq(IM),
     [[[2, 4, 5, 3], "float32", [0.5, 0, -1.832843e-05, 0, 0, 0], 23.47378]]),
    ("rgb_to_yiq float64", lambda: tf.image.rgb_to_yiq(IM.astype(np.float64)),
     [[[2, 4, 5, 3], "float64", [0.5, -2.775558e-17, -1.831e-05, 0, 0, 0], 23.47378]]),
    ("yiq_to_rgb", lambda: tf.image.yiq_to_rgb(IM),
     [[[2, 4, 5, 3], "float32", [1.288406, 0.04039147, 0.7987452, 0, 0, 0], 94.1635]]),
    ("rgb_to_yuv", lambda: tf.image.rgb_to_yuv(IM),
     [[[2, 4, 5, 3], "float32", [0.5, 0, 7.450581e-09, 0, 0, 0], 22.42059]]),
    ("yuv_to_rgb", lambda: tf.image.yuv_to_rgb(IM),
     [[[2, 4, 5, 3], "float32", [1.069942, 0.0123679, 1.516031, 0, 0, 0], 111.13]]),
    ("rgb_to_yiq matrix", lambda: tf.image.rgb_to_yiq(np.eye(3, dtype=np.float32)),
     [[[3, 3], "float32", [0.299, 0.5959006, 0.2115, 0.587, -0.2745567, -0.5227362, 0.114, -0.3213439, 0.3111995],
      0.9999634]]),
    ("yiq_to_rgb matrix", lambda: tf.image.yiq_to_rgb(np.eye(3, dtype=np.float32)),
     [[[3, 3], "float32", [1, 1, 1, 0.9559863, -0.2720128, -1.10674, 0.6208248, -0.6472042, 1.704231], 4.255084]]),
    ("rgb_to_yuv matrix", lambda: tf.image.rgb_to_yuv(np.eye(3, dtype=np.float32)),
     [[[3, 3], "float32", [0.299, -0.1471412, 0.6149754, 0.587, -0.2888692, -0.5149651, 0.114, 0.4360104,
      -0.1000103], 1]]),
    ("yuv_to_rgb matrix", lambda: tf.image.yuv_to_rgb(np.eye(3, dtype=np.float32)),
     [[[3, 3], "float32", [1, 1, 1, 0, -0.3946423, 2.032062, 1.139883, -0.5806218, 0], 5.196681]]),
    ("adjust_saturation up", lambda: tf.image.adjust_saturation(IM, 1.7),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 51.59505]]),
    ("adjust_saturation down", lambda: tf.image.adjust_saturation(IM, 0.3),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 81.95974]]),
    ("adjust_saturation first pixels", lambda: tf.image.adjust_saturation(IM[0, :1], 1.7),
     [[[1, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0, 1, 0, 1, 0, 0.9, 0.9, 0.2155812, 0.481071, 0.7378378],
      6.73449]]),
    ("adjust_saturation uint8", lambda: tf.image.adjust_saturation(U8, 1.5),
     [[[4, 5, 3], "uint8", [0, 242, 10, 215, 212, 177], 6313]]),
    ("adjust_saturation uint8 first", lambda: tf.image.adjust_saturation(U8[:1], 1.5),
     [[[1, 5, 3], "uint8", [0, 242, 10, 215, 212, 177, 0, 202, 245, 209, 163, 0, 100, 73, 222], 2070]]),
    ("adjust_hue", lambda: tf.image.adjust_hue(IM, 0.2),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 58.83342]]),
    ("adjust_hue negative", lambda: tf.image.adjust_hue(IM, -0.45),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 59.36829]]),
    ("adjust_hue first pixels", lambda: tf.image.adjust_hue(IM[0, :1], 0.2),
     [[[1, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0, 1, 0.3599998, 0.2, 0.4199999, 0.3, 0.9, 0.6431092, 0.430628,
      0.7378378], 6.491575]]),
    ("adjust_hue uint8", lambda: tf.image.adjust_hue(U8, 0.3),
     [[[4, 5, 3], "uint8", [2, 40, 242, 190, 215, 208], 7397]]),
    ("adjust_hue uint8 first", lambda: tf.image.adjust_hue(U8[:1], 0.3),
     [[[1, 5, 3], "uint8", [2, 40, 242, 190, 215, 208, 240, 34, 245, 64, 209, 148, 222, 123, 125], 2307]]),
    ("adjust_gamma", lambda: tf.image.adjust_gamma(IM, 2.2, 0.9),
     [[[2, 4, 5, 3], "float32", [0.1958739, 0.1958739, 0.1958739, 0, 0, 0], 34.93848]]),
    ("adjust_gamma uint8", lambda: tf.image.adjust_gamma(U8, 0.5, 1.2),
     [[[4, 5, 3], "uint8", [27, 255, 66, 255, 255, 255], 11584]]),
    ("adjust_gamma uint8 first", lambda: tf.image.adjust_gamma(U8[:1], 0.5, 1.2),
     [[[1, 5, 3], "uint8", [27, 255, 66, 255, 255, 255, 111, 255, 255, 255, 255, 153, 227, 212, 255], 3091]]),
    ("adjust_gamma int32", lambda: tf.image.adjust_gamma(np.array([[[0, 100, 2**30]]], np.int32), 0.5),
     [[[1, 1, 3], "int32", [0, 463409, 1518500000], 1518964000]]),
    ("stateless_random_saturation", lambda: tf.image.stateless_random_saturation(IM, 0.5, 1.5, seed=(1, 2)),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 54.48802]]),
    ("stateless_random_hue", lambda: tf.image.stateless_random_hue(IM, 0.2, seed=(1, 2)),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 57.77525]]),
    ("stateless_random_saturation seed 7 8", lambda: tf.image.stateless_random_saturation(IM, 0.2, 3.0, seed=(7, 8)),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 81.49195]]),
    ("stateless_random_hue seed 7 8", lambda: tf.image.stateless_random_hue(IM, 0.5, seed=(7, 8)),
     [[[2, 4, 5, 3], "float32", [0.5, 0.5, 0.5, 0, 0, 0], 59.0853]]),
    ("psnr", lambda: tf.image.psnr(A, B, 1.0),
     [[[2], "float32", [20.64478, 20.64226], 41.28704]]),
    ("psnr uint8", lambda: tf.image.psnr(UA, UB, 255),
     [[[2], "float32", [20.63721, 20.63713], 41.27434]]),
    ("psnr one image", lambda: tf.image.psnr(A[0], B[0], 1.0),
     [[[], "float32", [20.64478], 20.64478]]),
    ("psnr equal", lambda: tf.image.psnr(A, A, 1.0),
     [[[2], "float32", [INF, INF], INF]]),
    ("psnr float64", lambda: tf.image.psnr(A.astype(np.float64), B.astype(np.float64), 1.0),
     [[[2], "float32", [20.64478, 20.64226], 41.28704]]),
    ("ssim", lambda: tf.image.ssim(A, B, 1.0),
     [[[2], "float32", [0.9492341, 0.9588397], 1.908074]]),
    ("ssim uint8", lambda: tf.image.ssim(UA, UB, 255),
     [[[2], "float32", [0.949249, 0.9587429], 1.907992]]),
    ("ssim filter args", lambda: tf.image.ssim(A, B, 1.0, filter_size=5, filter_sigma=0.8, k1=0.02, k2=0.05),
     [[[2], "float32", [0.947118, 0.9446381], 1.891756]]),
    ("ssim index map", lambda: tf.image.ssim(A, B, 1.0, return_index_map=True),
     [[[2, 6, 8], "float32", [0.9548566, 0.9557394, 0.9552061, 0.9533195, 0.9523554, 0.9514999], 91.58755]]),
    ("ssim_multiscale", lambda: tf.image.ssim_multiscale(BIG, BIGB, 1.0),
     [[[1], "float32", [0.9879786], 0.9879786]]),
    ("ssim_multiscale weights",
     lambda: tf.image.ssim_multiscale(BIG, BIGB, 1.0, power_factors=(0.5, 0.3, 0.2), filter_size=7),
     [[[1], "float32", [0.9856732], 0.9856732]]),
    ("sobel_edges", lambda: tf.image.sobel_edges(T(A)),
     [[[2, 16, 18, 3, 2], "float32", [2.980232e-08, 0, 1.788139e-07, 0, -1.192093e-07, 0], 57.76218]]),
    ("sobel_edges corner", lambda: tf.image.sobel_edges(T(A[:1, :3, :3, :1])),
     [[[1, 3, 3, 1, 2], "float32", [2.980232e-08, 0, 0, -0.9234598, 2.980232e-08, 0, -0.8511868, 0, -0.07140911,
      -0.1436824, 0.7083682, 0, 2.980232e-08, 0, 0, 0.636095, 2.980232e-08, 0], -0.6452748]]),
    ("image_gradients", lambda: tf.image.image_gradients(T(A)),
     [[[2, 16, 18, 3], "float32", [-0.1227883, -0.2353893, -0.6001199, 0.2672077, 0.3650838, 0.0529733],
      0.4925994], [[2, 16, 18, 3], "float32", [-0.8622201, 0.09602827, -0.5997572, 0.7210652, -0.432828,
      0.4951487], 2.501003]]),
    ("image_gradients uint8", lambda: tf.image.image_gradients(T(UA)),
     [[[2, 16, 18, 3], "uint8", [225, 196, 103, 68, 93, 13], 208000], [[2, 16, 18, 3], "uint8", [36, 24, 104, 184,
      146, 126], 207228]]),
    ("total_variation", lambda: tf.image.total_variation(T(A)),
     [[[2], "float32", [558.6046, 552.0233], 1110.628]]),
    ("total_variation one image", lambda: tf.image.total_variation(T(A[0])),
     [[[], "float32", [558.6046], 558.6046]]),
    ("transpose", lambda: tf.image.transpose(A),
     [[[2, 18, 16, 3], "float32", [0.9430561, 0.5113276, 0.9762437, 0.8202678, 0.2759382, 0.3761238], 876.8259]]),
    ("transpose one image", lambda: tf.image.transpose(A[0]),
     [[[18, 16, 3], "float32", [0.9430561, 0.5113276, 0.9762437, 0.8202678, 0.2759382, 0.3761238], 450.6075]]),
    ("extract_patches", lambda: tf.image.extract_patches(A, [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID"),
     [[[2, 7, 8, 27], "float32", [0.9430561, 0.5113276, 0.9762437, 0.08083602, 0.6073558, 0.3764866], 1531.073]]),
    ("extract_patches SAME rates",
     lambda: tf.image.extract_patches(A, [1, 3, 2, 1], [1, 3, 2, 1], [1, 2, 1, 1], "SAME"),
     [[[2, 6, 9, 18], "float32", [0, 0, 0, 0, 0, 0], 876.8259]]),
    ("extract_patches small",
     lambda: tf.image.extract_patches(GRID, [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID"),
     [[[1, 2, 2, 8], "int32", [0, 1, 2, 3, 8, 9], 496]]),
    ("extract_patches small SAME",
     lambda: tf.image.extract_patches(GRID[..., :1], [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
     [[[1, 2, 2, 9], "int32", [0, 2, 4, 8, 10, 12], 400]]),
    ("crop_and_resize", lambda: tf.image.crop_and_resize(IM, CROPS, CROP_IDX, [3, 4]),
     [[[5, 3, 4, 3], "float32", [0.2944679, 0.157305, 0.1092704, 0.7831919, 0.1917326, 0.5825295], 76.07686]]),
    ("crop_and_resize channel 0", lambda: tf.image.crop_and_resize(IM[..., :1], CROPS[:2], CROP_IDX[:2], [3, 4]),
     [[[2, 3, 4, 1], "float32", [0.2944679, 0.7831919, 0.6490216, 0.511059, 0.773354, 0.7481587, 0.6831439,
      0.7074308, 0.8246342, 0.4137927, 0.3989338, 0.533599, 0.1802875, 0.6616189, 0.6994289, 0.7870327, 0.5245852,
      0.4363826, 0.5054628, 0.6595438, 0.52775, 0.3901216, 0.4515005, 0.9214275], 14.06593]]),
    ("crop_and_resize flipped, outside, point",
     lambda: tf.image.crop_and_resize(IM[..., :1], CROPS[2:], CROP_IDX[2:], [3, 2]),
     [[[3, 3, 2, 1], "float32", [0.4735768, 0.4914312, 0.5550902, 0.3255498, 0.6424955, 0.3182566, 0, 0, 0,
      0.4703146, 0, 0, 0.2697769, 0.2697769, 0.2697769, 0.2697769, 0.2697769, 0.2697769], 4.895376]]),
    ("crop_and_resize nearest", lambda: tf.image.crop_and_resize(IM, CROPS, CROP_IDX, [3, 4], method="nearest"),
     [[[5, 3, 4, 3], "float32", [0, 0, 0, 1, 0.2, 1], 74.66969]]),
    ("crop_and_resize nearest channel 0",
     lambda: tf.image.crop_and_resize(IM[..., :1], CROPS[:3], CROP_IDX[:3], [2, 4], method="nearest"),
     [[[3, 2, 4, 1], "float32", [0, 1, 0.3, 0.430628, 0.9314638, 0.2981631, 0.2187154, 0.6827989, 0.1802875,
      0.5669779, 0.6236928, 0.7870327, 0.52775, 0.3886972, 0.4807656, 0.9214275, 0.5547374, 0.5547374, 0.6695333,
      0.6798842, 0.2967578, 0.2967578, 0.213867, 0.3692863], 11.97396]]),
    ("crop_and_resize extrapolation",
     lambda: tf.image.crop_and_resize(IM, CROPS, CROP_IDX, [2, 3], extrapolation_value=-1.0),
     [[[5, 2, 3, 3], "float32", [0.2944679, 0.157305, 0.1092704, 0.8891331, 0.3447261, 0.7896352], 18.2798]]),
    ("crop_and_resize 1x1", lambda: tf.image.crop_and_resize(IM, CROPS, CROP_IDX, [1, 1]),
     [[[5, 1, 1, 3], "float32", [0.7209175, 0.4970238, 0.4727848, 0.4257476, 0.3454983, 0.6723239, 0.2658529,
      0.7007445, 0.4206406, 0.7862051, 0.3070176, 0.4439245, 0.2697769, 0.7840007, 0.2799156], 7.392374]]),
    ("crop_and_resize uint8", lambda: tf.image.crop_and_resize(U8[None], CROPS[:2], [0, 0], [3, 3]),
     [[[2, 3, 3, 3], "float32", [155.9, 194.44, 140.18, 70.26, 183.8, 194.88], 6353.11]]),
    ("resize_with_pad", lambda: tf.image.resize_with_pad(IM, 6, 6),
     [[[2, 6, 6, 3], "float32", [0.5, 0.5, 0.5, 0.125, 0.125, 0.125], 74.16702]]),
    ("resize_with_pad channel 0", lambda: tf.image.resize_with_pad(IM[:1, ..., :1], 6, 6),
     [[[1, 6, 6, 1], "float32", [0.5, 0.125, 0.5833333, 0.7083335, 0.332657, 0.430628], 14.4676]]),
    ("resize_with_pad nearest", lambda: tf.image.resize_with_pad(IM[:1, ..., :1], 3, 9, method="nearest"),
     [[[1, 3, 9, 1], "float32", [0, 0, 0.5, 1, 0.430628, 0], 4.59053]]),
    ("resize_with_pad one image", lambda: tf.image.resize_with_pad(IM[0, ..., :1], 7, 5),
     [[[7, 5, 1], "float32", [0, 0, 0, 0, 0, 0.5], 12.05255]]),
    ("resize_with_pad uint8", lambda: tf.image.resize_with_pad(U8, 5, 5),
     [[[5, 5, 3], "float32", [2, 242, 12, 215, 213, 190], 7278]]),
    ("resize_with_pad antialias", lambda: tf.image.resize_with_pad(IM, 2, 3, antialias=True),
     [[[2, 2, 3, 3], "float32", [0.6186293, 0.2814452, 0.4061444, 0.6384355, 0.5099941, 0.6509109], 12.34244]]),
    ("non_max_suppression", lambda: tf.image.non_max_suppression(BOXES, SCORES, 10),
     [[[10], "int32", [5, 1, 3, 10, 11, 8, 6, 4, 9, 2], 59]]),
    ("non_max_suppression iou 0.1", lambda: tf.image.non_max_suppression(BOXES, SCORES, 10, iou_threshold=0.1),
     [[[9], "int32", [5, 1, 3, 11, 6, 4, 9, 2, 7], 48]]),
    ("non_max_suppression max 3", lambda: tf.image.non_max_suppression(BOXES, SCORES, 3, iou_threshold=0.3),
     [[[3], "int32", [5, 1, 3], 9]]),
    ("non_max_suppression score_threshold",
     lambda: tf.image.non_max_suppression(BOXES, SCORES, 10, iou_threshold=0.3, score_threshold=0.4),
     [[[6], "int32", [5, 1, 3, 10, 11, 8], 38]]),
    ("non_max_suppression none", lambda: tf.image.non_max_suppression(BOXES, SCORES, 0),
     [[[0], "int32", [], 0]]),
    ("non_max_suppression ties", lambda: tf.image.non_max_suppression(EQ, EQ_SCORES, 4, 0.5),
     [[[2], "int32", [2, 3], 5]]),
    ("non_max_suppression iou 0", lambda: tf.image.non_max_suppression(EQ, EQ_SCORES, 4, 0.0),
     [[[1], "int32", [2], 2]]),
    ("non_max_suppression iou 1", lambda: tf.image.non_max_suppression(EQ, EQ_SCORES, 4, 1.0),
     [[[4], "int32", [2, 0, 1, 3], 6]]),
    ("non_max_suppression float64",
     lambda: tf.image.non_max_suppression(BOXES.astype(np.float64), SCORES.astype(np.float64), 10),
     [[[10], "int32", [5, 1, 3, 10, 11, 8, 6, 4, 9, 2], 59]]),
    ("non_max_suppression_with_scores",
     lambda: tf.image.non_max_suppression_with_scores(BOXES, SCORES, 10, iou_threshold=0.3),
     [[[10], "int32", [5, 1, 3, 10, 11, 8, 6, 4, 9, 2], 59], [[10], "float32", [0.951023, 0.9332239, 0.8449268,
      0.7414217, 0.6743897, 0.5561598, 0.3994253, 0.3678807, 0.2401353, 0.08582579], 5.794412]]),
    ("soft-NMS",
     lambda: tf.image.non_max_suppression_with_scores(BOXES, SCORES, 10, iou_threshold=1.0, soft_nms_sigma=0.5),
     [[[10], "int32", [5, 1, 3, 11, 10, 8, 6, 4, 9, 2], 59], [[10], "float32", [0.951023, 0.9307966, 0.8449268,
      0.6743897, 0.6402313, 0.5443763, 0.3994253, 0.3678807, 0.2386676, 0.08582579], 5.677543]]),
    ("soft-NMS score_threshold",
     lambda: tf.image.non_max_suppression_with_scores(BOXES, SCORES, 10, iou_threshold=0.5, score_threshold=0.2,
                                                      soft_nms_sigma=0.3),
     [[[9], "int32", [5, 1, 3, 11, 10, 8, 6, 4, 9], 57], [[9], "float32", [0.951023, 0.9291818, 0.8449268,
      0.6743897, 0.5805656, 0.5366597, 0.3994253, 0.3678807, 0.2376942], 5.521747]]),
    ("non_max_suppression_padded",
     lambda: tf.image.non_max_suppression_padded(
         T(BOXES), T(SCORES), 6, iou_threshold=0.3, pad_to_max_output_size=True),
     [[[6], "int32", [5, 1, 3, 10, 11, 8], 38], [[], "int32", [6], 6]]),
    ("non_max_suppression_padded padding",
     lambda: tf.image.non_max_suppression_padded(
         T(BOXES), T(SCORES), 12, iou_threshold=0.1, pad_to_max_output_size=True),
     [[[12], "int32", [5, 1, 3, 11, 6, 4, 9, 2, 7, 0, 0, 0], 48], [[], "int32", [9], 9]]),
    ("non_max_suppression_padded unpadded",
     lambda: tf.image.non_max_suppression_padded(
         T(BOXES), T(SCORES), 12, iou_threshold=0.1),
     [[[9], "int32", [5, 1, 3, 11, 6, 4, 9, 2, 7], 48], [[], "int32", [9], 9]]),
    ("non_max_suppression_padded score_threshold",
     lambda: tf.image.non_max_suppression_padded(
         T(BOXES), T(SCORES), 12, iou_threshold=0.3, score_threshold=0.4, pad_to_max_output_size=True),
     [[[12], "int32", [5, 1, 3, 10, 11, 8, 0, 0, 0, 0, 0, 0], 38], [[], "int32", [6], 6]]),
    ("non_max_suppression_padded batch",
     lambda: tf.image.non_max_suppression_padded(
         T(BOXES[None]), T(SCORES[None]), 6, iou_threshold=0.3, pad_to_max_output_size=True),
     [[[1, 6], "int32", [5, 1, 3, 10, 11, 8], 38], [[1], "int32", [6], 6]]),
    ("combined_non_max_suppression", lambda: tf.image.combined_non_max_suppression(CB, CS, 3, 5, 0.3),
     [[[2, 5, 4], "float32", [0.08473156, 0.09386455, 0.3347403, 0.3947662, 0.1413521, 0.1571452, 0.6368616,
      0.3046561, 0.2187108, 0.6885489, 0.3571542, 0.9348849, 0.08473156, 0.09386455, 0.3347403, 0.3947662,
      0.1413521, 0.1571452, 0.6368616, 0.3046561, 0.5167279, 0.3522665, 0.7194058, 0.4782158], 13.7604], [[2, 5],
      "float32", [0.974488, 0.9673687, 0.8913654, 0.7821137, 0.7395751, 0.989692, 0.9482498, 0.9267701, 0.8904104,
      0.8323928], 8.942426], [[2, 5], "float32", [2, 0, 2, 1, 1, 1, 0, 2, 2, 0], 11], [[2], "int32", [5, 5], 10]]),
    ("combined_non_max_suppression threshold",
     lambda: tf.image.combined_non_max_suppression(CB, CS, 2, 8, 0.5, score_threshold=0.5),
     [[[2, 8, 4], "float32", [0.08473156, 0.09386455, 0.3347403, 0.3947662, 0.1413521, 0.1571452, 0.6368616,
      0.3046561, 0.2187108, 0.6885489, 0.3571542, 0.9348849, 0.08473156, 0.09386455, 0.3347403, 0.3947662,
      0.1413521, 0.1571452, 0.6368616, 0.3046561, 0.7138277, 0.3229842, 1, 0.5473965], 18.63805], [[2, 8],
      "float32", [0.974488, 0.9673687, 0.8913654, 0.7821137, 0.7395751, 0.6144686, 0, 0, 0.989692, 0.9482498,
      0.9267701, 0.8904104, 0.8323928, 0.6294125, 0, 0], 10.18631], [[2, 8], "float32", [2, 0, 2, 1, 1, 0, 0, 0, 1,
      0, 2, 2, 0, 1, 0, 0], 12], [[2], "int32", [6, 6], 12]]),
    ("combined_non_max_suppression pad_per_class",
     lambda: tf.image.combined_non_max_suppression(CB, CS, 2, 8, 0.5, score_threshold=0.5, pad_per_class=True),
     [[[2, 6, 4], "float32", [0.08473156, 0.09386455, 0.3347403, 0.3947662, 0.1413521, 0.1571452, 0.6368616,
      0.3046561, 0.2187108, 0.6885489, 0.3571542, 0.9348849, 0.08473156, 0.09386455, 0.3347403, 0.3947662,
      0.1413521, 0.1571452, 0.6368616, 0.3046561, 0.7138277, 0.3229842, 1, 0.5473965], 18.63805], [[2, 6],
      "float32", [0.974488, 0.9673687, 0.8913654, 0.7821137, 0.7395751, 0.6144686, 0.989692, 0.9482498, 0.9267701,
      0.8904104, 0.8323928, 0.6294125], 10.18631], [[2, 6], "float32", [2, 0, 2, 1, 1, 0, 1, 0, 2, 2, 0, 1], 12],
      [[2], "int32", [6, 6], 12]]),
    ("combined_non_max_suppression unclipped",
     lambda: tf.image.combined_non_max_suppression(CB, CS, 3, 5, 0.3, clip_boxes=False),
     [[[2, 5, 4], "float32", [0.08473156, 0.09386455, 0.3347403, 0.3947662, 0.1413521, 0.1571452, 0.6368616,
      0.3046561, 0.2187108, 0.6885489, 0.3571542, 0.9348849, 0.08473156, 0.09386455, 0.3347403, 0.3947662,
      0.1413521, 0.1571452, 0.6368616, 0.3046561, 0.5167279, 0.3522665, 0.7194058, 0.4782158], 13.73133], [[2, 5],
      "float32", [0.974488, 0.9673687, 0.8913654, 0.7821137, 0.7395751, 0.989692, 0.9482498, 0.9267701, 0.8904104,
      0.8323928], 8.942426], [[2, 5], "float32", [2, 0, 2, 1, 1, 1, 0, 2, 2, 0], 11], [[2], "int32", [5, 5], 10]]),
    ("combined_non_max_suppression boxes per class", lambda: tf.image.combined_non_max_suppression(CBQ, CS, 2, 6, 0.4),
     [[[2, 6, 4], "float32", [0.1317943, 0.1144824, 0.3301766, 0.3609616, 0.1049436, 0.126708, 0.6740728,
      0.3097399, 0.2113828, 0.7162026, 0.3830244, 0.8914438, 0.1226304, 0.101984, 0.3679239, 0.3944893, 0.1807922,
      0.1958284, 0.6598504, 0.2632914, 0.7552584, 0.2789401, 1, 0.4991138], 18.71115], [[2, 6], "float32",
      [0.974488, 0.9673687, 0.8913654, 0.7821137, 0.7395751, 0.6144686, 0.989692, 0.9482498, 0.9267701, 0.8904104,
      0.8323928, 0.6294125], 10.18631], [[2, 6], "float32", [2, 0, 2, 1, 1, 0, 1, 0, 2, 2, 0, 1], 12], [[2],
      "int32", [6, 6], 12]]),
    ("draw_bounding_boxes", lambda: tf.image.draw_bounding_boxes(DRAW_IMG, DRAW_BOXES, None),
     [[[1, 6, 8, 3], "float32", [1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0], 53.25]]),
    ("draw_bounding_boxes colors",
     lambda: tf.image.draw_bounding_boxes(DRAW_IMG, DRAW_BOXES, [[0.1, 0.2, 0.3, 0.4], [0.9, 0.8, 0.7, 0.6]]),
     [[[1, 6, 8, 3], "float32", [0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.1,
      0.2, 0.3, 0.1, 0.2, 0.3, 0.1, 0.2, 0.3], 39.45]]),
    ("draw_bounding_boxes gray", lambda: tf.image.draw_bounding_boxes(DRAW_IMG[..., :1], DRAW_BOXES[:, :1], None),
     [[[1, 6, 8, 1], "float32", [0.25, 1, 1, 1, 1, 0.25, 0.25, 0.25, 0.25, 1, 0.25, 0.25, 1, 0.25, 0.25, 0.25,
      0.25, 1, 0.25, 0.25, 1, 0.25, 0.25, 0.25], 22.5]]),
    ("draw_bounding_boxes rgba",
     lambda: tf.image.draw_bounding_boxes(np.full((1, 6, 8, 4), 0.25, np.float32), DRAW_BOXES[:, :2], None),
     [[[1, 6, 8, 4], "float32", [0.25, 0.25, 0.25, 0.25, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 0.25,
      0.25, 0.25, 0.25], 79]]),
    ("draw_bounding_boxes uint8",
     lambda: tf.image.draw_bounding_boxes(np.zeros((1, 6, 8, 3), np.uint8), DRAW_BOXES, None),
     [[[1, 6, 8, 3], "float32", [1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0], 45]]),
    ("draw_bounding_boxes palette",
     lambda: tf.image.draw_bounding_boxes(np.zeros((1, 2, 12, 3), np.float32), PALETTE_BOXES, None),
     [[[1, 2, 12, 3], "float32", [1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0.5, 0, 0.5, 0.5, 0.5, 0, 0.5, 0, 0, 0, 0,
      0.5], 28]]),
]


@pytest.mark.parametrize("case, call, want", OBSERVED, ids=[c[0] for c in OBSERVED])
def test_matches_tf(case, call, want):
    check_summary(call(), want)


# Inside compiled code: the same numbers as on the host (one compile per case).
COMPILED = [
    ("hsv", lambda x: tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(x)), (IM,)),
    ("yiq yuv", lambda x: tf.image.yuv_to_rgb(tf.image.rgb_to_yiq(x)), (IM,)),
    ("adjust_saturation", lambda x, f: tf.image.adjust_saturation(x, f), (IM, np.float32(1.7))),
    ("adjust_hue uint8", lambda x, d: tf.image.adjust_hue(x, d), (U8, np.float32(0.3))),
    ("adjust_gamma uint8", lambda x: tf.image.adjust_gamma(x, 0.5, 1.2), (U8,)),
    ("stateless_random_saturation", lambda x, s: tf.image.stateless_random_saturation(x, 0.5, 1.5, s),
     (IM, np.array([1, 2], np.int32))),
    ("stateless_random_hue", lambda x, s: tf.image.stateless_random_hue(x, 0.2, s), (IM, np.array([7, 8], np.int32))),
    ("psnr ssim", lambda a, b: (tf.image.psnr(a, b, 1.0), tf.image.ssim(a, b, 1.0)), (A, B)),
    ("ssim_multiscale", lambda a, b: tf.image.ssim_multiscale(a, b, 1.0, (0.5, 0.3, 0.2), 7), (BIG, BIGB)),
    ("sobel gradients variation", lambda a: (tf.image.sobel_edges(a), tf.image.image_gradients(a),
                                             tf.image.total_variation(a)), (A,)),
    ("extract_patches transpose", lambda a: tf.image.extract_patches(
        tf.image.transpose(a), [1, 3, 2, 1], [1, 3, 2, 1], [1, 2, 1, 1], "SAME"), (A,)),
    ("crop_and_resize", lambda x, b, i: tf.image.crop_and_resize(x, b, i, [3, 4]), (IM, CROPS, CROP_IDX)),
    ("crop_and_resize nearest", lambda x, b, i: tf.image.crop_and_resize(x, b, i, [3, 4], "nearest", -1.0),
     (IM, CROPS, CROP_IDX)),
    ("resize_with_pad", lambda x: tf.image.resize_with_pad(x, 6, 6), (IM,)),
    ("non_max_suppression_padded", lambda b, s: tf.image.non_max_suppression_padded(
        b, s, 12, iou_threshold=0.1, pad_to_max_output_size=True), (BOXES, SCORES)),
    ("combined_non_max_suppression", lambda b, s: tf.image.combined_non_max_suppression(b, s, 2, 6, 0.4), (CBQ, CS)),
    ("draw_bounding_boxes", lambda x, b: tf.image.draw_bounding_boxes(x, b, None), (DRAW_IMG, DRAW_BOXES)),
]


@pytest.mark.parametrize("case, fn, args", COMPILED, ids=[c[0] for c in COMPILED])
def test_compiled_code_gives_the_host_numbers(case, fn, args):
    host = fn(*args)
    compiled = jax.jit(fn)(*[jnp.asarray(a) for a in args])
    for want, got in zip(jax.tree.leaves(host), jax.tree.leaves(compiled)):
        assert isinstance(got, jax.Array) and not isinstance(want, jax.Array)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-5, atol=1e-5)


def test_stateless_forms_draw_tf_numbers_from_the_seed():
    """observed, TF 2.21: stateless_uniform([], (1, 2), 0.5, 1.5) is 1.3440604 and ([], (1, 2), -0.2, 0.2) is
    0.13762416, and the stateless ops equal the adjust ops by those numbers."""
    factor, delta = np.float32(1.3440604), np.float32(0.13762416)
    np.testing.assert_allclose(tf.image.stateless_random_saturation(IM, 0.5, 1.5, seed=(1, 2)),
                               tf.image.adjust_saturation(IM, factor), atol=1e-6)
    np.testing.assert_allclose(tf.image.stateless_random_hue(IM, 0.2, seed=(1, 2)), tf.image.adjust_hue(IM, delta),
                               atol=1e-6)


def test_random_forms_repeat_with_a_seed_and_stay_in_range():
    tf.random.set_seed(5)
    first = [tf.image.random_saturation(IM, 0.5, 1.5, seed=3), tf.image.random_hue(IM, 0.2, seed=4)]
    second = [tf.image.random_saturation(IM, 0.5, 1.5, seed=3), tf.image.random_hue(IM, 0.2, seed=4)]
    tf.random.set_seed(5)
    again = [tf.image.random_saturation(IM, 0.5, 1.5, seed=3), tf.image.random_hue(IM, 0.2, seed=4)]
    for a, b, c in zip(first, second, again):
        np.testing.assert_array_equal(a, c)  # set_seed restarts each op seed's sequence, as TF's
        assert not np.array_equal(a, b)  # successive calls draw anew, as TF's
    hsv, out_hsv = tf.image.rgb_to_hsv(IM), tf.image.rgb_to_hsv(first[0])
    colourful = hsv[..., 1] > 0.2
    unclipped = colourful & (out_hsv[..., 1] < 0.999)
    ratio = out_hsv[..., 1][unclipped] / hsv[..., 1][unclipped]
    ratio = ratio.numpy()
    assert ratio.size > 10 and 0.5 <= ratio.min() and ratio.max() < 1.5 and np.ptp(ratio) < 1e-4  # one factor
    turn = (tf.image.rgb_to_hsv(first[1])[..., 0] - hsv[..., 0])[colourful] % 1.0
    turn = np.minimum(turn, 1 - turn)
    assert turn.max() <= 0.2 + 1e-4 and np.ptp(turn) < 1e-3  # one delta for the whole batch


def test_random_forms_refuse_compiled_code():
    with pytest.raises(ValueError, match="stateless_random_hue"):
        jax.jit(lambda x: tf.image.random_hue(x, 0.2))(jnp.asarray(IM))
    with pytest.raises(ValueError, match="non_max_suppression_padded"):
        jax.jit(lambda b, s: tf.image.non_max_suppression(b, s, 3))(jnp.asarray(BOXES), jnp.asarray(SCORES))


def test_definitions_against_numpy():
    a, b = A.astype(np.float64), B.astype(np.float64)
    mse = ((a - b) ** 2).mean(axis=(1, 2, 3))
    np.testing.assert_allclose(tf.image.psnr(A, B, 1.0), 10 * np.log10(1 / mse), rtol=1e-5)
    np.testing.assert_allclose(tf.image.ssim(A, A, 1.0), 1.0, rtol=1e-6)
    edges = tf.image.sobel_edges(A)
    padded = np.pad(a, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect")
    dy = (padded[:, 2:, :-2] + 2 * padded[:, 2:, 1:-1] + padded[:, 2:, 2:]
          - padded[:, :-2, :-2] - 2 * padded[:, :-2, 1:-1] - padded[:, :-2, 2:])
    np.testing.assert_allclose(edges[..., 0], dy, atol=1e-5)
    np.testing.assert_allclose(tf.image.total_variation(A),
                               np.abs(np.diff(a, axis=1)).sum((1, 2, 3)) + np.abs(np.diff(a, axis=2)).sum((1, 2, 3)),
                               rtol=1e-5)
    patches = tf.image.extract_patches(A, [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
    np.testing.assert_array_equal(patches[1, 2, 3].numpy().reshape(3, 3, 3), A[1, 4:7, 6:9])
    whole = tf.image.crop_and_resize(IM, [[0, 0, 1, 1]], [1], [4, 5])  # the whole image at its own size
    np.testing.assert_allclose(whole[0], IM[1], atol=1e-6)
    yiq = tf.image.yiq_to_rgb(tf.image.rgb_to_yiq(IM))
    np.testing.assert_allclose(yiq, IM, atol=1e-4)  # TF's two matrices are inverses to about 5 digits
    np.testing.assert_allclose(tf.image.adjust_gamma(IM, 2.0, 0.5), 0.5 * IM.astype(np.float64) ** 2, rtol=1e-6)
    gray = np.full((1, 1, 3), 0.4, np.float32)
    np.testing.assert_allclose(tf.image.adjust_hue(gray, 0.3), gray)
    np.testing.assert_allclose(tf.image.adjust_saturation(IM, 0.0)[..., 0], IM.max(-1), rtol=1e-6)


ERRORS = [
    # observed, TF 2.21: FailedPreconditionError "input must have 3 channels but input only has 2 channels."
    ("hsv channels", lambda: tf.image.rgb_to_hsv(IM[..., :2]), tf.errors.FailedPreconditionError,
     "input only has 2 channels"),
    # TypeError: Cannot convert [[0.299, ...]] to EagerTensor of dtype uint8
    ("yiq uint8", lambda: tf.image.rgb_to_yiq(U8), TypeError, "EagerTensor of dtype uint8"),
    # InvalidArgumentError: input must be at least 3-D, got shape[5,3] [Op:AdjustSaturation]
    ("saturation 2-D", lambda: tf.image.adjust_saturation(IM[0, 0], 1.5), tf.errors.InvalidArgumentError,
     "at least 3-D"),
    # ValueError: delta must be in the interval [-1, 1]
    ("hue delta", lambda: tf.image.adjust_hue(IM, 1.5), ValueError, r"interval \[-1, 1\]"),
    # ValueError: Gamma should be a non-negative real number.
    ("gamma", lambda: tf.image.adjust_gamma(IM, -1.0), ValueError, "Gamma should be a non-negative"),
    # ValueError: max_delta must be <= 0.5.
    ("hue max_delta", lambda: tf.image.stateless_random_hue(IM, 0.6, (1, 2)), ValueError, "<= 0.5"),
    # ValueError: max_delta must be non-negative.
    ("random_hue negative", lambda: tf.image.random_hue(IM, -0.1), ValueError, "non-negative"),
    # ValueError: upper must be > lower.
    ("saturation range", lambda: tf.image.stateless_random_saturation(IM, 1.5, 0.5, (1, 2)), ValueError,
     "upper must be > lower"),
    # ValueError: lower must be non-negative.
    ("saturation lower", lambda: tf.image.random_saturation(IM, -0.5, 0.5), ValueError, "lower must be non-negative"),
    # InvalidArgumentError: Incompatible shapes: [2,16,18,3] vs. [2,8,18,3]
    ("psnr shapes", lambda: tf.image.psnr(A, B[:, :8], 1.0), tf.errors.InvalidArgumentError, "Incompatible shapes"),
    # InvalidArgumentError: Expected 'tf.Tensor(False, ...)' to be true. Summarized data: 2, 8, 8, 3 / 11
    ("ssim small", lambda: tf.image.ssim(A[:, :8, :8], B[:, :8, :8], 1.0), tf.errors.InvalidArgumentError,
     "filter_size 11"),
    # InvalidArgumentError: Value for attr 'T' of uint8 is not in the list of allowed values (DepthwiseConv2dNative)
    ("sobel uint8", lambda: tf.image.sobel_edges(UA), tf.errors.InvalidArgumentError, "uint8"),
    # ValueError: image_gradients expects a 4D tensor [batch_size, h, w, d], not (16, 18, 3).
    ("gradients 3-D", lambda: tf.image.image_gradients(A[0]), ValueError, "expects a 4D tensor"),
    # ValueError: 'images' must be either 3 or 4-dimensional.
    ("variation 2-D", lambda: tf.image.total_variation(A[0, 0]), ValueError, "either 3 or 4-dimensional"),
    # InvalidArgumentError: Length for attr 'ksizes' of 2 must be at least minimum 4
    ("patches sizes", lambda: tf.image.extract_patches(A, [3, 3], [1, 2, 2, 1], [1, 1, 1, 1], "VALID"),
     tf.errors.InvalidArgumentError, "'ksizes' of 2"),
    # InvalidArgumentError: input must be 4-dimensional[16,18,3]
    ("patches 3-D", lambda: tf.image.extract_patches(A[0], [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID"),
     tf.errors.InvalidArgumentError, "4-dimensional"),
    # OutOfRangeError: box_index has values outside [0, batch_size)
    ("crop index", lambda: tf.image.crop_and_resize(IM, CROPS, [0, 1, 2, 0, 0], [3, 4]), tf.errors.OutOfRangeError,
     "outside"),
    # InvalidArgumentError: Value for attr 'method' of "bicubic" is not in the list of allowed values
    ("crop method", lambda: tf.image.crop_and_resize(IM, CROPS, CROP_IDX, [3, 4], "bicubic"),
     tf.errors.InvalidArgumentError, "bicubic"),
    # InvalidArgumentError: input image must be 4-D[4,5,3]
    ("crop 3-D", lambda: tf.image.crop_and_resize(IM[0], CROPS, CROP_IDX, [3, 4]), tf.errors.InvalidArgumentError,
     "must be 4-D"),
    # InvalidArgumentError: iou_threshold must be in [0, 1]
    ("nms iou", lambda: tf.image.non_max_suppression(BOXES, SCORES, 10, 1.5), tf.errors.InvalidArgumentError,
     r"iou_threshold must be in \[0, 1\]"),
    # InvalidArgumentError: boxes must have 4 columns
    ("nms columns", lambda: tf.image.non_max_suppression(BOXES[:, :3], SCORES, 10), tf.errors.InvalidArgumentError,
     "4 columns"),
    # InvalidArgumentError: scores has incompatible shape
    ("nms scores", lambda: tf.image.non_max_suppression(BOXES, SCORES[:5], 10), tf.errors.InvalidArgumentError,
     "incompatible shape"),
    # InvalidArgumentError: output size must be non-negative
    ("nms size", lambda: tf.image.non_max_suppression(BOXES, SCORES, -1), tf.errors.InvalidArgumentError,
     "non-negative"),
    # InvalidArgumentError: The rank of the images should be 4
    ("draw 3-D", lambda: tf.image.draw_bounding_boxes(DRAW_IMG[0], DRAW_BOXES, None), tf.errors.InvalidArgumentError,
     "rank of the images should be 4"),
    # InvalidArgumentError: Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)
    ("draw 2 channels", lambda: tf.image.draw_bounding_boxes(DRAW_IMG[..., :2], DRAW_BOXES, None),
     tf.errors.InvalidArgumentError, "Channel depth"),
]


@pytest.mark.parametrize("case, call, error, match", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_as_tf(case, call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_names_are_in_tf_image_and_give_tensors():
    names = ["rgb_to_hsv", "hsv_to_rgb", "rgb_to_yiq", "yiq_to_rgb", "rgb_to_yuv", "yuv_to_rgb", "adjust_saturation",
             "adjust_hue", "adjust_gamma", "random_saturation", "random_hue", "stateless_random_saturation",
             "stateless_random_hue", "psnr", "ssim", "ssim_multiscale", "sobel_edges", "image_gradients",
             "total_variation", "transpose", "extract_patches", "crop_and_resize", "resize_with_pad",
             "non_max_suppression", "non_max_suppression_with_scores", "non_max_suppression_padded",
             "combined_non_max_suppression", "draw_bounding_boxes", "decode_png", "decode_jpeg", "decode_gif",
             "decode_bmp", "decode_image", "decode_and_crop_jpeg", "encode_png", "encode_jpeg", "is_jpeg",
             "extract_jpeg_shape"]
    assert [n for n in names if not hasattr(tf.image, n)] == []
    assert tf.image.psnr(A, B, 1.0).numpy().shape == (2,)
    with pytest.raises(AttributeError, match="ssim, ssim_multiscale.*codecs"):
        tf.image.decode_webp  # noqa: B018


# Files TF 2.21 wrote: encode_png of CODEC_RGB, of CODEC_RGB plus its red channel as alpha, of its red channel times
# 300 as uint16; encode_jpeg (defaults) of CODEC_SMOOTH.
CODEC_RGB = np.random.default_rng(6).integers(0, 256, (5, 7, 3)).astype(np.uint8)
CODEC_SMOOTH = (np.add.outer(np.arange(16) * 9, np.arange(16) * 5)[..., None] + np.array([0, 40, 80])).astype(np.uint8)
PNG_FILE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAcAAAAFCAIAAAAG+GGPAAAAeUlEQVQImQFuAJH/AXGJhOZp2lFtFVTQLnF9IOcA7R9z8AAN4tnY"
    "Avj6ldPEyScMQzWM2b9ui6ABxB/Ha3S4rC+sr0rw7tEcqxU5+6TjA+9eCJBjzZ/aVBKc6MLYrTWCHgwAVAIRoxkN8ZFROcV+vgNt"
    "BJYGLzmUOCPNBzNyucXzuwAAAABJRU5ErkJggg=="
)
PNG_ALPHA_FILE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAcAAAAFCAYAAACJmvbYAAAAnElEQVQImQGRAG7/AXGJhHHmadrmUW0VUVTQLlRxfSBx5wDt5x9z"
    "8B8ADeLZDdgC+Nj6ldP6xMknxAxDNQyM2b+MbougbgHEH8fEa3S4a6wvrKyvSvCv7tEc7qsVOav7pOP7A+9eCO+QY82Qn9pUnxKc"
    "6BLC2K3CNYIeNQwAVAwCEaMZEQ3xkQ1ROcVRfr4Dfm0Elm0GLzkGlDgjlOSkRNPUvZxwAAAAAElFTkSuQmCC"
)
PNG_GRAY16_FILE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAcAAAAFEAAAAAD8YXVHAAAAVklEQVQImQFLALT/A4RsI76SZsXgbJQjElWMAA88/SAk+OWwDhCk"
    "EIDoAOWwNxQApKG4jKApBCMoA+yUqUAOPhUYuEI+Bg16AHLYAvzm3BGU0cSCFAoEh0Id7nMHcCUAAAAASUVORK5CYII="
)
JPEG_FILE = base64.b64decode(
    "/9j/4AAQSkZJRgABAQEBLAEsAAD/2wBDAAIBAQEBAQIBAQECAgICAgQDAgICAgUEBAMEBgUGBgYFBgYGBwkIBgcJBwYGCAsICQoK"
    "CgoKBggLDAsKDAkKCgr/2wBDAQICAgICAgUDAwUKBwYHCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoK"
    "CgoKCgoKCgr/wAARCAAQABADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUF"
    "BAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVW"
    "V1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi"
    "4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAEC"
    "AxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVm"
    "Z2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq"
    "8vP09fb3+Pn6/9oADAMBAAIRAxEAPwD5H+En7Lf+q/4l3p/BX1B8JP2W/wDVf8S70/gr6A+En7Lf+q/4l3p/BXvngr4UaF4flWyt"
    "9Ma7uo22vFGMKhGMhmx15PQHkYOK/RuK+MuF+BsreY59i4YeitE5PWT35YRV5Tla75YRlKybtZM/KaGHr4mfJSjd/wBfcf/Z"
)

# (case, call, TF 2.21's [shape, dtype, leading values, sum])  # observed, TF 2.21 (JPEG with
# dct_method="INTEGER_ACCURATE": jdist decodes as that method does, see jdist.tf_compat.image_codecs)
CODECS = [
    ("png gray", lambda: tf.image.decode_png(PNG_FILE, channels=1),
     [[5, 7, 1], "uint8", [129, 178, 119, 121, 155, 145, 70, 161, 94, 186, 181, 48, 191, 132, 99, 114, 184, 51, 171,
                           165, 106, 100, 202, 151], 4892]),
    ("png rgba", lambda: tf.image.decode_png(PNG_FILE, channels=4),
     [[5, 7, 4], "uint8", [113, 137, 132, 255, 87, 242], 23063]),
    ("png as uint16", lambda: tf.image.decode_png(PNG_FILE, dtype=tf.uint16),
     [[5, 7, 3], "uint16", [29041, 35209, 33924, 22359, 62194, 24158], 3633466]),  # 257 times the bytes
    ("png alpha", lambda: tf.image.decode_png(PNG_ALPHA_FILE),
     [[5, 7, 4], "uint8", [113, 137, 132, 113, 87, 242], 18640]),
    ("png alpha to gray", lambda: tf.image.decode_png(PNG_ALPHA_FILE, channels=1),
     [[5, 7, 1], "uint8", [129, 178, 119, 121, 155, 145], 4892]),
    ("png 16-bit", lambda: tf.image.decode_png(PNG_GRAY16_FILE, dtype=tf.uint16),
     [[5, 7, 1], "uint16", [33900, 26100, 50400, 10064, 32700, 25200], 1022920]),
    ("png 16-bit as uint8", lambda: tf.image.decode_png(PNG_GRAY16_FILE),
     [[5, 7, 1], "uint8", [132, 101, 196, 39, 127, 98], 3977]),
    ("png 16-bit to rgb", lambda: tf.image.decode_png(PNG_GRAY16_FILE, channels=3, dtype=tf.uint16),
     [[5, 7, 3], "uint16", [33900, 33900, 33900, 26100, 26100, 26100], 3068760]),
    ("jpeg", lambda: tf.image.decode_jpeg(JPEG_FILE), [[16, 16, 3], "uint8", [0, 42, 74, 4, 47, 81], 106848]),
    ("jpeg gray", lambda: tf.image.decode_jpeg(JPEG_FILE, channels=1), [[16, 16, 1], "uint8", [33, 38, 43, 48, 53, 58],
                                                                       34752]),
    ("jpeg ratio 2", lambda: tf.image.decode_jpeg(JPEG_FILE, ratio=2), [[8, 8, 3], "uint8", [6, 49, 81, 18, 57, 98],
                                                                       26710]),
    ("jpeg ratio 4 gray", lambda: tf.image.decode_jpeg(JPEG_FILE, ratio=4, channels=1),
     [[4, 4, 1], "uint8", [54, 74, 94, 114, 90, 110, 130, 150, 126, 146, 166, 186, 162, 182, 192, 196], 2172]),
    ("decode_and_crop_jpeg", lambda: tf.image.decode_and_crop_jpeg(JPEG_FILE, [2, 3, 5, 6]),
     [[5, 6, 3], "uint8", [32, 74, 116, 37, 78, 124], 9362]),
    ("decode_image float", lambda: tf.image.decode_image(PNG_FILE, dtype=tf.float32),
     [[5, 7, 3], "float32", [0.4431373, 0.5372549, 0.5176471, 0.3411765, 0.9490196, 0.3686275], 55.44314]),
    ("decode_image rgba", lambda: tf.image.decode_image(PNG_FILE, channels=4), [[5, 7, 4], "uint8",
                                                                               [113, 137, 132, 255, 87, 242], 23063]),
    ("decode_gif of a png", lambda: tf.image.decode_gif(PNG_FILE), [[1, 5, 7, 3], "uint8", [113, 137, 132, 87, 242, 94],
                                                                    14138]),
    ("decode_png of a jpeg", lambda: tf.image.decode_png(JPEG_FILE), [[16, 16, 3], "uint8", [0, 42, 74, 4, 47, 81],
                                                                      106848]),
    ("extract_jpeg_shape", lambda: tf.image.extract_jpeg_shape(JPEG_FILE, output_type=tf.int64),
     [[3], "int64", [16, 16, 3], 35]),
    ("is_jpeg", lambda: tf.image.is_jpeg(JPEG_FILE), [[], "bool", [1], 1]),
    ("is_jpeg png", lambda: tf.image.is_jpeg(PNG_FILE), [[], "bool", [0], 0]),
]


@pytest.mark.parametrize("case, call, want", CODECS, ids=[c[0] for c in CODECS])
def test_codecs_match_tf(case, call, want):
    check_summary(call(), [want])


def test_codecs_round_trip_and_read_every_format():
    np.testing.assert_array_equal(tf.image.decode_png(PNG_FILE), CODEC_RGB)  # observed, TF 2.21: the same
    png = tf.image.encode_png(CODEC_RGB)
    assert png.shape == () and png.dtype == object and png.numpy()[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_array_equal(tf.image.decode_png(png), CODEC_RGB)
    deep = (CODEC_RGB[..., :1].astype(np.uint16) * 300)
    np.testing.assert_array_equal(tf.image.decode_png(tf.image.encode_png(deep, compression=9), dtype=tf.uint16), deep)
    jpeg = tf.image.encode_jpeg(CODEC_SMOOTH, quality=90)
    assert tf.image.is_jpeg(jpeg) and list(tf.image.extract_jpeg_shape(jpeg)) == [16, 16, 3]
    assert np.abs(tf.image.decode_jpeg(jpeg).numpy().astype(int) - CODEC_SMOOTH).mean() < 8  # lossy, 4:2:0 chroma
    from PIL import Image

    frames, out = [Image.fromarray(CODEC_RGB), Image.fromarray(255 - CODEC_RGB)], io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    gif = out.getvalue()
    # observed, TF 2.21 on such a file: [2, 5, 7, 3], sum 26775; expand_animations=False gives the first frame
    np.testing.assert_array_equal(tf.image.decode_gif(gif), np.stack([CODEC_RGB, 255 - CODEC_RGB]))
    np.testing.assert_array_equal(tf.image.decode_image(gif), np.stack([CODEC_RGB, 255 - CODEC_RGB]))
    np.testing.assert_array_equal(tf.image.decode_image(gif, expand_animations=False), CODEC_RGB)
    out = io.BytesIO()
    frames[0].save(out, format="BMP")
    np.testing.assert_array_equal(tf.image.decode_bmp(out.getvalue()), CODEC_RGB)
    np.testing.assert_array_equal(tf.image.decode_image(tf.constant(PNG_FILE)), CODEC_RGB)
    with pytest.raises(ValueError, match="on the host"):
        jax.jit(lambda x: tf.image.encode_png(x))(jnp.asarray(CODEC_RGB))


CODEC_ERRORS = [
    # observed, TF 2.21: InvalidArgumentError "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP
    # required. [Op:DecodeImage]"
    ("unknown", lambda: tf.image.decode_image(b"hello world"), "Unknown image file format"),
    ("channels 2", lambda: tf.image.decode_png(PNG_FILE, channels=2), "`channels` must be 0, 1, 3 or 4 but got 2"),
    ("jpeg channels 4", lambda: tf.image.decode_jpeg(JPEG_FILE, channels=4), "JPEG does not support 4 channels"),
    ("bmp of png", lambda: tf.image.decode_bmp(PNG_FILE), "Trying to decode PNG format using DecodeBmp op"),
    ("jpeg shape of png", lambda: tf.image.extract_jpeg_shape(PNG_FILE), "Invalid JPEG data, size 178"),
    ("crop window", lambda: tf.image.decode_and_crop_jpeg(JPEG_FILE, [12, 3, 5, 6]), "crop window"),
    ("two files", lambda: tf.image.decode_png([PNG_FILE, PNG_FILE]), "`contents` must be scalar but got shape"),
    ("encode float", lambda: tf.image.encode_png(CODEC_RGB.astype(np.float32)), "float32 is not in the list"),
    ("encode 2-D", lambda: tf.image.encode_png(CODEC_RGB[..., 0]), "rank 3"),
    ("encode jpeg rgba", lambda: tf.image.encode_jpeg(np.zeros((2, 2, 4), np.uint8)), "1 or 3 channels"),
]


@pytest.mark.parametrize("case, call, match", CODEC_ERRORS, ids=[c[0] for c in CODEC_ERRORS])
def test_codec_errors_as_tf(case, call, match):
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        call()
