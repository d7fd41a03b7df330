"""jdist.tf_compat's tf.image against values observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15.1): every
expected value below was printed by TF 2.21 for the same call with `tf` TensorFlow
(`r = <call>; list(r.shape), r.dtype.name, r.numpy().reshape(-1).tolist()`, rounded to 6 decimals), e.g.
`/work/tfvenv/bin/python -c "import tensorflow as tf, numpy as np; print(tf.image.resize(np.ones((4, 6, 1)), (3, 4)))"`.
Then the same ops under jax.jit, in a tf.data map function and inside MirroredStrategy's strategy.run, equal to
the host's result; and the random augmentations' distributions, seeds and limits."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

IMG = ((np.arange(24) * 7) % 11).astype(np.float32).reshape(4, 6, 1)
BATCH = np.stack([IMG, 10 - IMG])
ODD = np.arange(1, 36, dtype=np.float32).reshape(5, 7, 1)
U8 = np.array([[[0, 128, 255], [1, 64, 200]], [[30, 90, 150], [250, 5, 77]]], np.uint8)
PIX = np.array([0, 1, 127, 128, 254, 255], np.uint8)
FRAC = np.array([-0.5, 0.0, 0.001, 0.5, 0.998, 0.999, 1.0, 1.5], np.float32)
RGB = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0], [0.2, 0.4, 0.6]]], np.float32)

# (case, call, TF 2.21's shape, dtype and values). Notable: every method but nearest gives float32 whatever the
# input dtype (uint8, int32, float64), even at the same size; convert_image_dtype(1.0, int32) is -2147483648
# (1.0 * 2147483647.5 overflows the cast) and 2147483520 with saturate=True.
OBSERVED = [
    ("resize bilinear down", lambda: tf.image.resize(IMG, (3, 4)),
     [3, 4, 1], "float32", [2.791667, 3.666667, 8.666667, 2.666667, 7, 5.125, 6, 4.125, 4.333333, 6.583333,
     3.333333, 5.583333]),
    ("resize bilinear up", lambda: tf.image.resize(IMG, (5, 7)),
     [5, 7, 1], "float32", [0, 5.5, 4.428572, 6.5, 8.571428, 5.142857, 2, 6.3, 5.75, 3.028572, 5.1, 7.171428,
     3.742857, 0.6, 8, 4.857143, 4.964286, 6.25, 5.571428, 3.321429, 4.5, 6.4, 3.257143, 6.9, 7.4, 3.971428,
     2.900001, 8.4, 5, 1.857143, 5.5, 6, 2.571428, 1.500001, 7]),
    ("resize bilinear 1x1", lambda: tf.image.resize(IMG, [1, 1]),
     [1, 1, 1], "float32", [6.25]),
    ("resize nearest down", lambda: tf.image.resize(IMG, (3, 4), method='nearest'),
     [3, 4, 1], "float32", [0, 3, 10, 2, 7, 10, 6, 9, 5, 8, 4, 7]),
    ("resize nearest up", lambda: tf.image.resize(IMG, (5, 7), method=tf.image.ResizeMethod.NEAREST_NEIGHBOR),
     [5, 7, 1], "float32", [0, 7, 3, 10, 10, 6, 2, 9, 5, 1, 8, 8, 4, 0, 7, 3, 10, 6, 6, 2, 9, 7, 3, 10, 6, 6, 2, 9,
     5, 1, 8, 4, 4, 0, 7]),
    ("resize nearest uint8", lambda: tf.image.resize(U8, (3, 3), method='nearest'),
     [3, 3, 3], "uint8", [0, 128, 255, 1, 64, 200, 1, 64, 200, 30, 90, 150, 250, 5, 77, 250, 5, 77, 30, 90, 150,
     250, 5, 77, 250, 5, 77]),
    ("resize bicubic down", lambda: tf.image.resize(IMG, (3, 4), method='bicubic'),
     [3, 4, 1], "float32", [2.229093, 3.144078, 9.578595, 2.367522, 7.765055, 4.97998, 6.257812, 4.127737, 4.29111,
     7.076515, 2.937029, 5.887952]),
    ("resize bicubic up", lambda: tf.image.resize(IMG, (5, 7), method=tf.image.ResizeMethod.BICUBIC),
     [5, 7, 1], "float32", [-0.628204, 5.996846, 4.175198, 6.586248, 9.468261, 5.1046, 1.957761, 6.648099,
     6.179116, 1.860816, 4.762482, 8.175364, 3.580235, -0.234076, 8.838071, 4.748687, 4.709902, 6.59375, 5.750417,
     3.011067, 4.548182, 6.425139, 2.513319, 7.742034, 8.425018, 3.325468, 2.441899, 9.330441, 5.04224, 1.181299,
     5.772007, 6.601253, 2.032572, 0.917536, 7.138606]),
    ("resize area down", lambda: tf.image.resize(IMG, (3, 4), method='area'),
     [3, 4, 1], "float32", [3.666667, 3.833333, 8.166667, 2.833333, 6.666667, 5, 5.666667, 4, 4.166666, 6.166666,
     3.166667, 5.166666]),
    ("resize area up", lambda: tf.image.resize(IMG, (5, 7), method=tf.image.ResizeMethod.AREA),
     [5, 7, 1], "float32", [0, 5.833333, 4.333333, 6.5, 8.666665, 5.333334, 2, 6.75, 5.708333, 2.833333, 5,
     7.166665, 3.833334, 0.5, 8.000001, 4.666667, 5, 6.250001, 5.666666, 3.25, 4.500001, 6.499999, 3.166666,
     7.166666, 7.5, 4.166666, 2.666666, 8.499999, 5, 1.666667, 5.666666, 6, 2.666666, 1.166666, 7]),
    ("resize area antialias", lambda: tf.image.resize(IMG, (3, 4), method='area', antialias=True),
     [3, 4, 1], "float32", [3.666667, 3.833333, 8.166667, 2.833333, 6.666667, 5, 5.666667, 4, 4.166666, 6.166666,
     3.166667, 5.166666]),
    ("resize lanczos3 down", lambda: tf.image.resize(IMG, (3, 4), method='lanczos3'),
     [3, 4, 1], "float32", [2.51489, 2.827815, 10.214254, 1.998406, 8.43647, 4.53432, 6.189546, 3.984091, 3.945538,
     7.122204, 2.164838, 5.969777]),
    ("resize lanczos5 up", lambda: tf.image.resize(IMG, (5, 7), method='lanczos5'),
     [5, 7, 1], "float32", [-1.122356, 6.050567, 4.641594, 5.876171, 10.957267, 4.465547, 2.329814, 6.001521,
     6.643725, 0.950648, 4.243867, 9.638081, 2.734203, -0.377377, 10.542996, 5.428092, 3.605652, 7.378115,
     5.464373, 2.965727, 4.649896, 5.8766, 2.202319, 7.612485, 9.832752, 1.614395, 3.127378, 9.67717, 5.385224,
     1.133016, 5.039552, 7.638383, 0.562946, 1.338246, 6.969979]),
    ("resize mitchellcubic up", lambda: tf.image.resize(IMG, (5, 7), method='mitchellcubic'),
     [5, 7, 1], "float32", [0.318713, 5.55064, 4.287836, 6.469441, 8.919694, 5.031232, 2.07553, 6.312798, 5.883118,
     2.575542, 4.992269, 7.634424, 3.656518, 0.456601, 8.265722, 4.928074, 4.818406, 6.440971, 5.624433, 3.258583,
     4.460217, 6.228878, 3.081208, 7.162917, 7.889674, 3.614443, 2.860647, 8.463832, 4.924469, 1.782276, 5.636567,
     6.412501, 2.329172, 1.485933, 6.844903]),
    ("resize gaussian down", lambda: tf.image.resize(IMG, (3, 4), method='gaussian'),
     [3, 4, 1], "float32", [3.142929, 3.866602, 8.298965, 2.658549, 6.924234, 5.163434, 5.909336, 4.096588,
     4.341451, 6.460265, 3.519708, 5.534627]),
    ("resize bilinear antialias", lambda: tf.image.resize(IMG, (2, 3), antialias=True),
     [2, 3, 1], "float32", [4.918369, 5.660715, 4.102041, 4.918368, 5.464286, 4.326531]),
    ("resize bicubic antialias", lambda: tf.image.resize(IMG, (2, 3), method='bicubic', antialias=True),
     [2, 3, 1], "float32", [4.865435, 5.853684, 3.94246, 4.859936, 5.588023, 4.208167]),
    ("resize lanczos3 antialias", lambda: tf.image.resize(IMG, (2, 3), method='lanczos3', antialias=True),
     [2, 3, 1], "float32", [4.69497, 6.044229, 4.096277, 5.131483, 5.290235, 4.138986]),
    ("resize uint8 bilinear", lambda: tf.image.resize(U8, (3, 3)),
     [3, 3, 3], "float32", [0, 128, 255, 0.5, 96, 227.5, 1, 64, 200, 15, 109, 202.5, 70.25, 71.75, 170.5, 125.5,
     34.5, 138.5, 30, 90, 150, 140, 47.5, 113.5, 250, 5, 77]),
    ("resize uint8 same size", lambda: tf.image.resize(U8, (2, 2)),
     [2, 2, 3], "float32", [0, 128, 255, 1, 64, 200, 30, 90, 150, 250, 5, 77]),
    ("resize int32 bicubic", lambda: tf.image.resize(IMG.astype(np.int32), (3, 4), method='bicubic'),
     [3, 4, 1], "float32", [2.229093, 3.144078, 9.578595, 2.367522, 7.765055, 4.97998, 6.257812, 4.127737, 4.29111,
     7.076515, 2.937029, 5.887952]),
    ("resize float64 area", lambda: tf.image.resize(IMG.astype(np.float64), (3, 4), method='area'),
     [3, 4, 1], "float32", [3.666667, 3.833333, 8.166667, 2.833333, 6.666667, 5, 5.666667, 4, 4.166666, 6.166666,
     3.166667, 5.166666]),
    ("resize float64 nearest", lambda: tf.image.resize(IMG.astype(np.float64), (3, 4), method='nearest'),
     [3, 4, 1], "float64", [0, 3, 10, 2, 7, 10, 6, 9, 5, 8, 4, 7]),
    ("resize batch", lambda: tf.image.resize(BATCH, (3, 4)),
     [2, 3, 4, 1], "float32", [2.791667, 3.666667, 8.666667, 2.666667, 7, 5.125, 6, 4.125, 4.333333, 6.583333,
     3.333333, 5.583333, 7.208333, 6.333333, 1.333333, 7.333333, 3, 4.875, 4, 5.875, 5.666667, 3.416667, 6.666667,
     4.416667]),
    ("resize preserve_aspect_ratio", lambda: tf.image.resize(IMG, (8, 8), preserve_aspect_ratio=True),
     [5, 8, 1], "float32", [0, 4.375, 5.5, 3.875, 9.125, 7.5, 4.5, 2, 6.3, 5.8625, 4.1, 2.475, 7.725, 6.1, 3.1,
     0.6, 8, 5.5, 4.5625, 5.6875, 6.8125, 4.5, 3.5625, 4.5, 6.4, 3.9, 5.025, 8.9, 5.9, 2.9, 4.025, 8.4, 5, 2.5,
     3.625, 7.5, 4.5, 1.5, 2.625, 7]),
    ("resize preserve_aspect_ratio rounds", lambda: tf.image.resize(ODD, (4, 4), preserve_aspect_ratio=True),
     [3, 4, 1], "float32", [3.708333, 5.458333, 7.208333, 8.958333, 15.375, 17.125, 18.875, 20.625, 27.041666,
     28.791666, 30.541666, 32.291664]),
    ("resize preserve_aspect_ratio tall", lambda: tf.image.resize(ODD[:, :5], (10, 3), preserve_aspect_ratio=True),
     [3, 3, 1], "float32", [3.666667, 5.333333, 7, 15.333333, 17, 18.666666, 27, 28.666666, 30.333332]),
    ("flip_left_right", lambda: tf.image.flip_left_right(IMG[:2, :3]),
     [2, 3, 1], "float32", [3, 7, 0, 1, 5, 9]),
    ("flip_up_down", lambda: tf.image.flip_up_down(IMG[:2, :3]),
     [2, 3, 1], "float32", [9, 5, 1, 0, 7, 3]),
    ("flip_left_right batch", lambda: tf.image.flip_left_right(BATCH[:, :2, :3]),
     [2, 2, 3, 1], "float32", [3, 7, 0, 1, 5, 9, 7, 3, 10, 9, 5, 1]),
    ("rot90", lambda: tf.image.rot90(IMG[:2, :3]),
     [3, 2, 1], "float32", [3, 1, 7, 5, 0, 9]),
    ("rot90 k=2", lambda: tf.image.rot90(IMG[:2, :3], k=2),
     [2, 3, 1], "float32", [1, 5, 9, 3, 7, 0]),
    ("rot90 k=3", lambda: tf.image.rot90(IMG[:2, :3], k=3),
     [3, 2, 1], "float32", [9, 0, 5, 7, 1, 3]),
    ("rot90 k=-1", lambda: tf.image.rot90(IMG[:2, :3], k=-1),
     [3, 2, 1], "float32", [9, 0, 5, 7, 1, 3]),
    ("rot90 k=5", lambda: tf.image.rot90(IMG[:2, :3], k=5),
     [3, 2, 1], "float32", [3, 1, 7, 5, 0, 9]),
    ("rot90 batch", lambda: tf.image.rot90(BATCH[:, :2, :3]),
     [2, 3, 2, 1], "float32", [3, 1, 7, 5, 0, 9, 7, 9, 3, 5, 10, 1]),
    ("central_crop 0.5 odd", lambda: tf.image.central_crop(ODD, 0.5),
     [3, 5, 1], "float32", [9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 23, 24, 25, 26, 27]),
    ("central_crop 0.3 odd", lambda: tf.image.central_crop(ODD, 0.3),
     [3, 3, 1], "float32", [10, 11, 12, 17, 18, 19, 24, 25, 26]),
    ("central_crop 0.01", lambda: tf.image.central_crop(ODD, 0.01),
     [1, 1, 1], "float32", [18]),
    ("central_crop 1.0", lambda: tf.image.central_crop(IMG, 1.0),
     [4, 6, 1], "float32", [0, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0, 7]),
    ("central_crop batch", lambda: tf.image.central_crop(BATCH, 0.5),
     [2, 2, 4, 1], "float32", [5, 1, 8, 4, 3, 10, 6, 2, 5, 9, 2, 6, 7, 0, 4, 8]),
    ("crop_or_pad crop", lambda: tf.image.resize_with_crop_or_pad(ODD, 2, 4),
     [2, 4, 1], "float32", [9, 10, 11, 12, 16, 17, 18, 19]),
    ("crop_or_pad crop odd", lambda: tf.image.resize_with_crop_or_pad(ODD, 3, 3),
     [3, 3, 1], "float32", [10, 11, 12, 17, 18, 19, 24, 25, 26]),
    ("crop_or_pad pad", lambda: tf.image.resize_with_crop_or_pad(IMG[:2, :3], 5, 6),
     [5, 6, 1], "float32", [0, 0, 0, 0, 0, 0, 0, 0, 7, 3, 0, 0, 0, 9, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
     0]),
    ("crop_or_pad crop and pad", lambda: tf.image.resize_with_crop_or_pad(ODD, 8, 2),
     [8, 2, 1], "float32", [0, 0, 3, 4, 10, 11, 17, 18, 24, 25, 31, 32, 0, 0, 0, 0]),
    ("crop_or_pad batch", lambda: tf.image.resize_with_crop_or_pad(BATCH[:, :2, :3], 3, 2),
     [2, 3, 2, 1], "float32", [0, 7, 9, 5, 0, 0, 10, 3, 1, 5, 0, 0]),
    ("crop_or_pad uint8", lambda: tf.image.resize_with_crop_or_pad(U8, 3, 1),
     [3, 1, 3], "uint8", [0, 128, 255, 30, 90, 150, 0, 0, 0]),
    ("convert uint8 to float32", lambda: tf.image.convert_image_dtype(PIX, tf.float32),
     [6], "float32", [0, 0.003922, 0.498039, 0.501961, 0.996078, 1]),
    ("convert uint8 to float16", lambda: tf.image.convert_image_dtype(PIX, tf.float16),
     [6], "float16", [0, 0.003922, 0.498047, 0.501953, 0.996094, 1]),
    ("convert uint8 to float64", lambda: tf.image.convert_image_dtype(PIX, tf.float64),
     [6], "float64", [0, 0.003922, 0.498039, 0.501961, 0.996078, 1]),
    ("convert uint8 to int32", lambda: tf.image.convert_image_dtype(PIX, tf.int32),
     [6], "int32", [0, 8388608, 1065353216, 1073741824, 2130706432, 2139095040]),
    ("convert uint8 to int8", lambda: tf.image.convert_image_dtype(PIX, tf.int8),
     [6], "int8", [0, 0, 63, 64, 127, 127]),
    ("convert uint8 to uint16", lambda: tf.image.convert_image_dtype(PIX, tf.uint16),
     [6], "uint16", [0, 256, 32512, 32768, 65024, 65280]),
    ("convert uint16 to uint8",
     lambda: tf.image.convert_image_dtype(np.array([0, 255, 256, 257, 65535], np.uint16), tf.uint8),
     [5], "uint8", [0, 0, 1, 1, 255]),
    ("convert int32 to uint8",
     lambda: tf.image.convert_image_dtype(np.array([0, 2**23, 2**24 - 1, 2**24, 2**31 - 1, -5], np.int32), tf.uint8),
     [6], "uint8", [0, 1, 1, 2, 255, 255]),
    ("convert int64 to float32", lambda: tf.image.convert_image_dtype(np.array([0, 2**62], np.int64), tf.float32),
     [2], "float32", [0, 0.5]),
    ("convert float32 to uint8", lambda: tf.image.convert_image_dtype(FRAC, tf.uint8),
     [8], "uint8", [129, 0, 0, 127, 254, 255, 255, 127]),
    ("convert float32 to uint8 saturate", lambda: tf.image.convert_image_dtype(FRAC, tf.uint8, saturate=True),
     [8], "uint8", [0, 0, 0, 127, 254, 255, 255, 255]),
    ("convert float32 to int32", lambda: tf.image.convert_image_dtype(FRAC, tf.int32),
     [8], "int32", [-1073741824, 0, 2147483, 1073741824, 2143188736, 2145336192, -2147483648, -2147483648]),
    ("convert float32 to int32 saturate", lambda: tf.image.convert_image_dtype(FRAC, tf.int32, saturate=True),
     [8], "int32", [-1073741824, 0, 2147483, 1073741824, 2143188736, 2145336192, 2147483520, 2147483520]),
    ("convert float32 to int8", lambda: tf.image.convert_image_dtype(FRAC, tf.int8),
     [8], "int8", [-63, 0, 0, 63, 127, 127, 127, -65]),
    ("convert float32 to float16", lambda: tf.image.convert_image_dtype(FRAC, tf.float16),
     [8], "float16", [-0.5, 0, 0.001, 0.5, 0.998047, 0.999023, 1, 1.5]),
    ("convert float32 to float32", lambda: tf.image.convert_image_dtype(FRAC, tf.float32),
     [8], "float32", [-0.5, 0, 0.001, 0.5, 0.998, 0.999, 1, 1.5]),
    ("convert float16 to uint8", lambda: tf.image.convert_image_dtype(FRAC.astype(np.float16), tf.uint8, saturate=True),
     [8], "uint8", [0, 0, 0, 127, 255, 255, 255, 255]),
    ("per_image_standardization", lambda: tf.image.per_image_standardization(IMG[:2, :2]),
     [2, 2, 1], "float32", [-1.569614, 0.523205, 1.121153, -0.074744]),
    ("per_image_standardization uint8", lambda: tf.image.per_image_standardization(U8),
     [2, 2, 3], "float32", [-1.169185, 0.267509, 1.692979, -1.15796, -0.450838, 1.07565, -0.832459, -0.159009,
     0.514441, 1.636859, -1.113064, -0.304923]),
    ("per_image_standardization constant", lambda: tf.image.per_image_standardization(np.ones((2, 2, 1), np.float32)),
     [2, 2, 1], "float32", [0, 0, 0, 0]),
    ("per_image_standardization batch", lambda: tf.image.per_image_standardization(BATCH[:, :2, :2]),
     [2, 2, 2, 1], "float32", [-1.569614, 0.523205, 1.121153, -0.074744, 1.569614, -0.523205, -1.121153,
     0.074744]),
    ("per_image_standardization float64", lambda: tf.image.per_image_standardization(IMG[:2, :2].astype(np.float64)),
     [2, 2, 1], "float32", [-1.569614, 0.523205, 1.121153, -0.074744]),
    ("adjust_brightness", lambda: tf.image.adjust_brightness(IMG[:1, :3], 0.5),
     [1, 3, 1], "float32", [0.5, 7.5, 3.5]),
    ("adjust_brightness uint8", lambda: tf.image.adjust_brightness(U8, 0.1),
     [2, 2, 3], "uint8", [25, 153, 255, 26, 89, 225, 55, 115, 175, 255, 30, 102]),
    ("adjust_brightness uint8 down", lambda: tf.image.adjust_brightness(U8, -0.1),
     [2, 2, 3], "uint8", [0, 102, 229, 0, 38, 174, 4, 64, 124, 224, 0, 51]),
    ("adjust_brightness uint8 saturates", lambda: tf.image.adjust_brightness(U8, 0.5),
     [2, 2, 3], "uint8", [127, 255, 255, 128, 191, 255, 157, 217, 255, 255, 132, 204]),
    ("adjust_brightness int32", lambda: tf.image.adjust_brightness(np.array([[[1, 2]]], np.int32), 1),
     [1, 1, 2], "int32", [2147483520, 2147483520]),
    ("adjust_brightness float64", lambda: tf.image.adjust_brightness(IMG[:1, :2].astype(np.float64), 0.25),
     [1, 2, 1], "float64", [0.25, 7.25]),
    ("adjust_contrast", lambda: tf.image.adjust_contrast(IMG[:2, :2], 2.0),
     [2, 2, 1], "float32", [-5.25, 8.75, 12.75, 4.75]),
    ("adjust_contrast uint8", lambda: tf.image.adjust_contrast(U8, 2.0),
     [2, 2, 3], "uint8", [0, 184, 255, 0, 56, 229, 0, 108, 129, 255, 0, 0]),
    ("adjust_contrast uint8 half", lambda: tf.image.adjust_contrast(U8, 0.5),
     [2, 2, 3], "uint8", [35, 100, 213, 35, 68, 185, 50, 81, 160, 160, 38, 123]),
    ("adjust_contrast batch", lambda: tf.image.adjust_contrast(BATCH[:, :2, :2], 0.5),
     [2, 2, 2, 1], "float32", [2.625, 6.125, 7.125, 5.125, 7.375, 3.875, 2.875, 4.875]),
    ("rgb_to_grayscale", lambda: tf.image.rgb_to_grayscale(RGB),
     [2, 2, 1], "float32", [0.2989, 0.587, 0.114, 0.36298]),
    ("rgb_to_grayscale uint8", lambda: tf.image.rgb_to_grayscale(U8),
     [2, 2, 1], "uint8", [104, 60, 79, 86]),
    ("rgb_to_grayscale batch", lambda: tf.image.rgb_to_grayscale(np.stack([RGB, RGB * 0.5])),
     [2, 2, 2, 1], "float32", [0.2989, 0.587, 0.114, 0.36298, 0.14945, 0.2935, 0.057, 0.18149]),
    ("grayscale_to_rgb", lambda: tf.image.grayscale_to_rgb(tf.constant(IMG[:1, :2])),
     [1, 2, 3], "float32", [0, 0, 0, 7, 7, 7]),
    ("grayscale_to_rgb uint8", lambda: tf.image.grayscale_to_rgb(tf.constant(U8[..., :1])),
     [2, 2, 3], "uint8", [0, 0, 0, 1, 1, 1, 30, 30, 30, 250, 250, 250]),
    ("grayscale_to_rgb 2-D", lambda: tf.image.grayscale_to_rgb(tf.constant(IMG[:2, 0])),
     [2, 3], "float32", [0, 0, 0, 9, 9, 9]),
    ("grayscale_to_rgb batch", lambda: tf.image.grayscale_to_rgb(tf.constant(BATCH[:, :1, :2])),
     [2, 1, 2, 3], "float32", [0, 0, 0, 7, 7, 7, 10, 10, 10, 3, 3, 3]),
]


@pytest.mark.parametrize("call,shape,dtype,values", [c[1:] for c in OBSERVED], ids=[c[0] for c in OBSERVED])
def test_op_gives_tfs_values_shape_and_dtype(call, shape, dtype, values):
    out = np.asarray(call())
    assert list(out.shape) == shape and out.dtype == np.dtype(dtype), (out.shape, out.dtype)
    np.testing.assert_allclose(out.astype(np.float64).reshape(-1), np.asarray(values, np.float64), rtol=1e-5, atol=1e-5)


# TF 2.21's errors for the same calls: each line names what TF raised (type: message start). Where TF raises
# InvalidArgumentError from a kernel, jdist raises ValueError when the call is made.
ERRORS = [
    # ValueError: 'image' (shape (4, 6)) must be at least three-dimensional.
    ("flip of 2-D", lambda: tf.image.flip_left_right(IMG[:, :, 0]), ValueError, "at least three-dimensional"),
    ("rot90 of 2-D", lambda: tf.image.rot90(IMG[:, :, 0]), ValueError, "at least three-dimensional"),
    # ValueError: central_fraction must be within (0, 1]
    ("central_crop 0", lambda: tf.image.central_crop(ODD, 0.0), ValueError, r"within \(0, 1\]"),
    ("central_crop 1.5", lambda: tf.image.central_crop(ODD, 1.5), ValueError, r"within \(0, 1\]"),
    # ValueError: target_height must be > 0.
    ("crop_or_pad to 0", lambda: tf.image.resize_with_crop_or_pad(ODD, 0, 3), ValueError, "target_height must be > 0"),
    # ValueError: 'size' must be a 1-D Tensor of 2 elements: new_height, new_width
    ("resize size of 1", lambda: tf.image.resize(IMG, (3,)), ValueError, "1-D Tensor of 2 elements"),
    # ValueError: 'size' must be a 1-D int32 Tensor
    ("resize float size", lambda: tf.image.resize(IMG, (3.5, 4)), ValueError, "1-D int32 Tensor"),
    # ValueError: 'images' must have either 3 or 4 dimensions.
    ("resize 2-D", lambda: tf.image.resize(IMG[:, :, 0], (3, 4)), ValueError, "either 3 or 4 dimensions"),
    # ValueError: Resize method is not implemented: foo
    ("resize unknown method", lambda: tf.image.resize(IMG, (3, 4), method="foo"), ValueError, "not implemented: foo"),
    # InvalidArgumentError: output dimensions must be positive [Op:ResizeBilinear]
    ("resize to 0", lambda: tf.image.resize(IMG, (0, 4)), ValueError, "output dimensions must be positive"),
    # ValueError: Last dimension of a grayscale image should be size 1.
    ("grayscale_to_rgb of 3 channels", lambda: tf.image.grayscale_to_rgb(RGB), ValueError, "should be size 1"),
    # ValueError: A grayscale image (shape (1,)) must be at least two-dimensional.
    ("grayscale_to_rgb of 1-D", lambda: tf.image.grayscale_to_rgb(np.ones(1, np.float32)), ValueError,
     "at least two-dimensional"),
    ("rgb_to_grayscale of 2 channels", lambda: tf.image.rgb_to_grayscale(np.ones((1, 1, 2), np.float32)), ValueError,
     "must be 3"),  # TF: InvalidArgumentError: Matrix size-incompatible: In[0]: [1,2], In[1]: [3,1]
    # InvalidArgumentError: ... b'Need value.shape >= size, got ' 4, 6, 1 5, 3, 1
    ("random_crop too big", lambda: tf.image.random_crop(IMG, [5, 3, 1], seed=1), ValueError,
     "Need value.shape >= size"),
    ("stateless_random_crop too big", lambda: tf.image.stateless_random_crop(IMG, [5, 3, 1], seed=[1, 2]), ValueError,
     "Need value.shape >= size"),
    # InvalidArgumentError: Incompatible shapes: [3] vs. [2] [Op:GreaterEqual]
    ("random_crop rank", lambda: tf.image.random_crop(IMG, [2, 3], seed=1), ValueError, "one size per dimension"),
    # ValueError: max_delta must be non-negative.
    ("random_brightness negative", lambda: tf.image.random_brightness(IMG, -0.5, seed=1), ValueError, "non-negative"),
    # ValueError: upper must be > lower.
    ("random_contrast upper below lower", lambda: tf.image.random_contrast(IMG, 1.5, 0.5, seed=1), ValueError,
     "upper must be > lower"),
    # ValueError: lower must be non-negative.
    ("random_contrast negative lower", lambda: tf.image.random_contrast(IMG, -0.5, 0.5, seed=1), ValueError,
     "lower must be non-negative"),
    # AttributeError: image dtype must be either floating point or integer
    ("convert bool", lambda: tf.image.convert_image_dtype(np.array([True]), tf.float32), AttributeError,
     "image dtype must be either floating point or integer"),
    # AttributeError: dtype must be either floating point or integer
    ("convert to bool", lambda: tf.image.convert_image_dtype(FRAC, tf.bool), AttributeError,
     "dtype must be either floating point or integer"),
    # InvalidArgumentError: input must be at least 3-D, got shape[4,6] [Op:AdjustContrastv2]
    ("adjust_contrast 2-D", lambda: tf.image.adjust_contrast(IMG[:, :, 0], 2.0), ValueError, "at least 3-D"),
    # jdist's own limits in compiled code: the output shape must be known, and host draws would be frozen in
    ("resize traced size", lambda: jax.jit(lambda s: tf.image.resize(IMG, s))(jnp.array([3, 4])), ValueError,
     "must be known when the function is compiled"),
    ("random_flip compiled", lambda: jax.jit(tf.image.random_flip_left_right)(IMG), ValueError,
     "stateless_random_flip_left_right"),
    ("random_crop compiled", lambda: jax.jit(lambda x: tf.image.random_crop(x, [2, 2, 1]))(IMG), ValueError,
     "stateless_random_crop"),
    ("random_brightness compiled", lambda: jax.jit(lambda x: tf.image.random_brightness(x, 0.2))(IMG), ValueError,
     "stateless_random_brightness"),
]


@pytest.mark.parametrize("call,error,match", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


# (case, function of arrays, numpy arguments): under jax.jit on JAX arrays it gives what it gives on the host.
COMPILED = [
    ("resize", lambda x: tuple(tf.image.resize(x, (3, 5), method=m) for m in ("bilinear", "nearest", "bicubic", "area",
                                                                                "lanczos3", "mitchellcubic")),
     (BATCH,)),
    ("resize antialias and aspect", lambda x: (tf.image.resize(x, (2, 3), antialias=True),
                                               tf.image.resize(x, (2, 3), method="bicubic", antialias=True),
                                               tf.image.resize(x, (8, 8), preserve_aspect_ratio=True)), (IMG,)),
    ("resize uint8", lambda x: (tf.image.resize(x, (3, 3)), tf.image.resize(x, (3, 3), method="nearest")), (U8,)),
    ("geometry", lambda x: (tf.image.flip_left_right(x), tf.image.flip_up_down(x), tf.image.rot90(x, 3),
                            tf.image.central_crop(x, 0.5), tf.image.resize_with_crop_or_pad(x, 3, 8)), (BATCH,)),
    ("convert", lambda p, f: (tf.image.convert_image_dtype(p, tf.float32), tf.image.convert_image_dtype(p, tf.int8),
                              tf.image.convert_image_dtype(f, tf.uint8), tf.image.convert_image_dtype(f, tf.int8),
                              tf.image.convert_image_dtype(f, tf.uint8, saturate=True)), (PIX, FRAC)),
    ("adjust", lambda x, u: (tf.image.per_image_standardization(x), tf.image.adjust_brightness(u, 0.1),
                             tf.image.adjust_contrast(u, 0.5), tf.image.adjust_contrast(x, 2.0),
                             tf.image.rgb_to_grayscale(u), tf.image.grayscale_to_rgb(x)), (BATCH, U8)),
    ("stateless random", lambda x, s: (tf.image.stateless_random_flip_left_right(x, s),
                                       tf.image.stateless_random_flip_up_down(x, s),
                                       tf.image.stateless_random_crop(x, [2, 3, 3, 1], s),
                                       tf.image.stateless_random_brightness(x, 0.3, s),
                                       tf.image.stateless_random_contrast(x, 0.5, 1.5, s)),
     (BATCH, np.array([3, 4], np.int32))),
]


@pytest.mark.parametrize("fn,args", [c[1:] for c in COMPILED], ids=[c[0] for c in COMPILED])
def test_compiled_result_equals_the_hosts(fn, args):
    host = fn(*args)
    compiled = jax.jit(fn)(*[jnp.asarray(a) for a in args])
    assert all(isinstance(h, np.ndarray) for h in host)  # the host computes with numpy and returns numpy
    for h, c in zip(host, compiled, strict=True):
        assert isinstance(c, jax.Array) and c.dtype == h.dtype and c.shape == h.shape
        np.testing.assert_allclose(np.asarray(c, np.float64), np.asarray(h, np.float64), rtol=1e-5, atol=1e-5)


def _augment(image):
    """A typical preprocessing function: the deterministic ops, all of them, on one image."""
    image = tf.image.convert_image_dtype(image, tf.float32)
    image = tf.image.resize(image, (6, 6), method="bicubic", antialias=True)
    image = tf.image.resize_with_crop_or_pad(tf.image.central_crop(image, 0.75), 5, 7)
    image = tf.image.adjust_contrast(tf.image.adjust_brightness(tf.image.rot90(tf.image.flip_left_right(image)), 0.1),
                                     1.5)
    return tf.image.per_image_standardization(tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(image)))


def test_ops_in_a_dataset_map_give_the_eager_result():
    images = np.random.default_rng(0).integers(0, 256, (6, 8, 10, 3)).astype(np.uint8)
    ds = tf.data.Dataset.from_tensor_slices(images).map(_augment).batch(3)
    out = np.concatenate(list(ds.as_numpy_iterator()))
    assert out.shape == (6, 7, 5, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, np.stack([_augment(i) for i in images]), rtol=1e-6, atol=1e-6)
    # random_* draws on the host inside map, each element its own flip; the op seed's sequence repeats
    tf.random.set_seed(3)
    flipped = [np.asarray(e) for e in tf.data.Dataset.from_tensor_slices(images).map(
        lambda x: tf.image.random_flip_left_right(x, seed=5))]
    assert 0 < sum(np.array_equal(f, i[:, ::-1]) for f, i in zip(flipped, images)) < 6
    assert all(np.array_equal(f, i) or np.array_equal(f, i[:, ::-1]) for f, i in zip(flipped, images))


def test_ops_inside_mirrored_strategy_run_equal_the_host():
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 8
    images = np.random.default_rng(1).integers(0, 256, (8, 8, 10, 3)).astype(np.uint8)
    seed = np.array([7, 9], np.int32)

    def step(x, s):
        return (_augment(x),
                tf.image.stateless_random_flip_left_right(x, s), tf.image.resize(x, (4, 5), method="area"))

    outs = strategy.run(step, args=(strategy.distribute_batch(images), jnp.asarray(seed)))
    for k, out in enumerate(outs):
        got = np.concatenate([np.asarray(v) for v in strategy.experimental_local_results(out)])
        want = np.concatenate([step(images[i:i + 1], seed)[k] for i in range(8)])  # each replica's row, on the host
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------ random ops
RANDOM = [
    ("random_flip_left_right", lambda x, s: tf.image.random_flip_left_right(x, seed=s)),
    ("random_flip_up_down", lambda x, s: tf.image.random_flip_up_down(x, seed=s)),
    ("random_crop", lambda x, s: tf.image.random_crop(x, [2, 3, 4, 1], seed=s)),
    ("random_brightness", lambda x, s: tf.image.random_brightness(x, 0.3, seed=s)),
    ("random_contrast", lambda x, s: tf.image.random_contrast(x, 0.5, 1.5, seed=s)),
]


@pytest.mark.parametrize("draw", [c[1] for c in RANDOM], ids=[c[0] for c in RANDOM])
def test_random_op_seed_draws_a_sequence_that_set_seed_restarts(draw):
    # TF 2.21 (eager): random_flip_left_right(x, seed=1) twice gave different flips of a batch; the same sequence
    # in every run (as tf.random's op seeds; see test_tf_compat_math_ops).
    images = np.random.default_rng(2).uniform(0, 1, (16, 3, 5, 1)).astype(np.float32)
    tf.random.set_seed(1)
    first, second = draw(images, 11), draw(images, 11)
    tf.random.set_seed(1)
    again = draw(images, 11)
    assert first.shape == again.shape and first.dtype == images.dtype
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, second)


STATELESS = [
    ("stateless_random_flip_left_right", lambda x, s: tf.image.stateless_random_flip_left_right(x, s)),
    ("stateless_random_flip_up_down", lambda x, s: tf.image.stateless_random_flip_up_down(x, s)),
    ("stateless_random_crop", lambda x, s: tf.image.stateless_random_crop(x, [2, 3, 4, 1], s)),
    ("stateless_random_brightness", lambda x, s: tf.image.stateless_random_brightness(x, 0.3, s)),
    ("stateless_random_contrast", lambda x, s: tf.image.stateless_random_contrast(x, 0.5, 1.5, s)),
]


@pytest.mark.parametrize("draw", [c[1] for c in STATELESS], ids=[c[0] for c in STATELESS])
def test_stateless_op_is_a_function_of_its_seed(draw):
    # TF 2.21: stateless_random_*(x, seed=(1, 2)) gives the same result on every call and in every run.
    images = np.random.default_rng(2).uniform(0, 1, (16, 3, 5, 1)).astype(np.float32)
    first = draw(images, [1, 2])
    np.testing.assert_array_equal(first, draw(images, [1, 2]))
    assert not all(np.array_equal(first, draw(images, [1, s])) for s in range(3, 6))
    np.testing.assert_allclose(jax.jit(draw)(images, jnp.array([1, 2])), first, rtol=1e-6, atol=1e-6)


def test_stateless_ops_draw_tfs_numbers():
    """TF 2.21's own results for the same seeds (observed): which of a batch of 8 images flip (a batch flips where
    round(draw) is 1, one image where its draw is under 0.5), the brightness delta and the crop's corner."""
    x = np.arange(8 * 4 * 4, dtype=np.float32).reshape(8, 4, 4, 1) / 100

    def flipped(out, images):
        return [int(not np.array_equal(np.asarray(o), i)) for o, i in zip(out, images)]

    for seed, tf_flips in (((1, 2), [1, 0, 1, 0, 0, 1, 0, 0]), ((3, 4), [0, 1, 0, 0, 1, 1, 1, 0])):
        assert flipped(tf.image.stateless_random_flip_left_right(x, seed), x) == tf_flips
        assert flipped(tf.image.stateless_random_flip_up_down(x, seed), x) == tf_flips
    singles = [tf.image.stateless_random_flip_left_right(x[i], (i, 7)) for i in range(8)]
    assert flipped(singles, x) == [0, 0, 0, 0, 0, 1, 1, 0]
    brightened = np.asarray(tf.image.stateless_random_brightness(x[0], 0.3, (1, 2)))
    assert brightened[0, :, 0].tolist() == [0.20643627643585205, 0.21643628180027008, 0.22643627226352692,
                                            0.23643627762794495]
    crop = np.asarray(tf.image.stateless_random_crop(x[0], (2, 3, 1), (3, 4)))[..., 0]
    np.testing.assert_array_equal(crop, x[0, 0:2, 0:3, 0])  # TF: [[0, .01, .02], [.04, .05, .06]]


def test_random_ops_draw_tfs_distributions():
    images = np.broadcast_to(np.arange(5, dtype=np.float32)[None, None, :, None] / 4, (4000, 1, 5, 1))
    flipped = tf.image.random_flip_left_right(images, seed=21)
    is_flipped = flipped[:, 0, 0, 0] == 1.0
    # per image
    assert np.all(is_flipped | (flipped[:, 0, 0, 0] == 0.0)) and abs(is_flipped.numpy().mean() - 0.5) < 0.04
    up_down = tf.image.random_flip_up_down(np.arange(2000, dtype=np.float32).reshape(1000, 2, 1, 1), seed=2)
    assert abs(np.mean(up_down[:, 0, 0, 0] % 2 == 1) - 0.5) < 0.06
    stateless = tf.image.stateless_random_flip_left_right(images, seed=[4, 5])
    assert abs(np.mean(stateless[:, 0, 0, 0] == 1.0) - 0.5) < 0.04
    # offsets uniform over every position: all 3 x 4 of a (4, 6) image's (2, 3) windows come up
    seen = {tuple(np.asarray(tf.image.random_crop(ODD[:4, :6], [2, 3, 1], seed=7))[0, 0]) for _ in range(200)}
    assert len(seen) == 12
    starts = {float(tf.image.stateless_random_crop(ODD[:4, :6], [2, 3, 1], seed=[s, 0])[0, 0, 0]) for s in range(200)}
    assert len(starts) == 12
    deltas = [float(tf.image.random_brightness(np.zeros((1, 1, 1), np.float32), 0.2, seed=4)[0, 0, 0])
              for _ in range(400)]
    assert -0.2 <= min(deltas) < -0.18 and 0.18 < max(deltas) < 0.2  # uniform in [-max_delta, max_delta)
    factors = [float(tf.image.random_contrast(np.array([[[0.0]], [[1.0]]], np.float32), 0.5, 1.5, seed=4)[1, 0, 0])
               for _ in range(400)]  # mean 0.5: (1 - 0.5) * factor + 0.5
    assert 0.75 <= min(factors) < 0.77 and 1.23 < max(factors) < 1.25


def test_namespace_holds_tfs_image_names():
    # TF 2.21: these are tf.image's (dir(tf.image)); ResizeMethod's members are the method strings.
    names = ["resize", "ResizeMethod", "flip_left_right", "flip_up_down", "random_flip_left_right",
             "random_flip_up_down", "random_crop", "central_crop", "resize_with_crop_or_pad", "convert_image_dtype",
             "per_image_standardization", "rot90", "adjust_brightness", "adjust_contrast", "random_brightness",
             "random_contrast", "rgb_to_grayscale", "grayscale_to_rgb", "stateless_random_flip_left_right",
             "stateless_random_flip_up_down", "stateless_random_crop", "stateless_random_brightness",
             "stateless_random_contrast"]
    assert all(hasattr(tf.image, n) for n in names) and "image" in tf.__all__
    assert (tf.image.ResizeMethod.BILINEAR, tf.image.ResizeMethod.NEAREST_NEIGHBOR, tf.image.ResizeMethod.AREA,
            tf.image.ResizeMethod.LANCZOS3) == ("bilinear", "nearest", "area", "lanczos3")
    with pytest.raises(AttributeError, match="of tf.image it has"):
        tf.image.extract_glimpse  # noqa: B018
