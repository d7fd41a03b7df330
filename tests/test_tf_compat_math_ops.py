"""jdist.tf_compat's everyday math, array and nn ops against values observed in TF 2.21 (tensorflow-cpu 2.21.0,
Keras 3.15.1), e.g. `/work/tfvenv/bin/python -c "import tensorflow as tf; print(tf.math.floormod([7, -7], 3))"`;
and a few of them inside `strategy.run` and `jax.jit`, equal to the host's result."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

NAN, INF = float("nan"), float("inf")
F32_LOWEST = -3.4028234663852886e38
X = [0.5, -0.25, 2.0]
T = [[1, 2, 3], [4, 5, 6]]
D = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
ACT = [-2.0, -0.5, 0.0, 1.5]
IMG = np.arange(1, 33, dtype=np.float32).reshape(1, 4, 4, 2)
W = np.arange(1, 55, dtype=np.float32).reshape(3, 3, 2, 3) / 10

# (case, call, TF 2.21's output, TF 2.21's dtype). Every value below was printed by TF 2.21 for the same call
# (`r.numpy().tolist(), r.dtype.name`), with `tf` TensorFlow; tuples of outputs list each.
OBSERVED = [
    # elementwise: tf.math.<op>([0.5, -0.25, 2.0])
    ("sin", lambda: tf.math.sin(X), [0.4794255495071411, -0.24740396440029144, 0.9092974066734314], "float32"),
    ("cos", lambda: tf.cos(X), [0.8775825500488281, 0.9689124226570129, -0.416146844625473], "float32"),
    ("tan", lambda: tf.tan(X), [0.5463024973869324, -0.25534191727638245, -2.185039758682251], "float32"),
    ("asin", lambda: tf.asin(X), [0.5235987901687622, -0.252680242061615, NAN], "float32"),
    ("acos", lambda: tf.math.acos(X), [1.0471975803375244, 1.8234765529632568, NAN], "float32"),
    ("atan", lambda: tf.atan(X), [0.46364760398864746, -0.244978666305542, 1.1071487665176392], "float32"),
    ("cosh", lambda: tf.cosh(X), [1.1276259422302246, 1.0314130783081055, 3.7621958255767822], "float32"),
    ("sinh", lambda: tf.math.sinh(X), [0.5210952758789062, -0.25261232256889343, 3.6268603801727295], "float32"),
    ("floor", lambda: tf.floor(X), [0.0, -1.0, 2.0], "float32"),
    ("ceil", lambda: tf.math.ceil(X), [1.0, -0.0, 2.0], "float32"),
    ("rsqrt", lambda: tf.math.rsqrt(X), [1.4142135381698608, NAN, 0.7071067690849304], "float32"),
    ("rsqrt0", lambda: tf.math.rsqrt([0.0, 4.0]), [INF, 0.5], "float32"),
    ("reciprocal", lambda: tf.math.reciprocal(X), [2.0, -4.0, 0.5], "float32"),
    ("log1p", lambda: tf.math.log1p(X), [0.40546509623527527, -0.28768205642700195, 1.0986123085021973], "float32"),
    ("expm1", lambda: tf.math.expm1(X), [0.6487212777137756, -0.22119921445846558, 6.389056205749512], "float32"),
    ("erf", lambda: tf.math.erf(X), [0.5204998850822449, -0.27632641792297363, 0.9953223466873169], "float32"),
    ("lgamma", lambda: tf.math.lgamma([0.5, -0.5, 0.0, 3.0]),
     [0.5723649263381958, 1.2655121088027954, INF, 0.6931471824645996], "float32"),
    ("softplus", lambda: tf.math.softplus(X), [0.9740769863128662, 0.575939416885376, 2.1269280910491943], "float32"),
    ("softplus big", lambda: tf.math.softplus([100.0, -100.0, 0.0]), [100.0, 0.0, 0.6931471824645996], "float32"),
    ("log_sigmoid", lambda: tf.math.log_sigmoid(X),
     [-0.4740769863128662, -0.825939416885376, -0.12692800164222717], "float32"),
    ("log_sigmoid big", lambda: tf.math.log_sigmoid([100.0, -100.0, 0.0]), [-0.0, -100.0, -0.6931471824645996],
     "float32"),
    ("sigmoid", lambda: tf.sigmoid(X), [0.622459352016449, 0.43782350420951843, 0.8807970881462097], "float32"),
    ("sin float64", lambda: tf.sin(np.array([1.0])), [0.8414709848078965], "float64"),
    ("atan2", lambda: tf.atan2([1.0, -1.0], [-1.0, 0.0]), [2.356194496154785, -1.5707963705062866], "float32"),
    ("xlogy", lambda: tf.math.xlogy([0.0, 2.0, 0.0], [0.0, 3.0, -1.0]), [0.0, 2.1972246170043945, 0.0], "float32"),
    ("squared_difference", lambda: tf.math.squared_difference([1, 2], [4, 0]), [9, 4], "int32"),
    ("truediv int32", lambda: tf.truediv([7, -7], [2, 2]), [3.5, -3.5], "float64"),
    ("truediv int16", lambda: tf.math.truediv(np.array([7, -7], np.int16), np.array([2, 2], np.int16)),
     [3.5, -3.5], "float32"),
    ("realdiv", lambda: tf.realdiv([7.0, -7.0], [2.0, 2.0]), [3.5, -3.5], "float32"),
    ("floordiv", lambda: tf.math.floordiv([7, -7, 7, -7], [2, 2, -2, -2]), [3, -4, -4, 3], "int32"),
    ("floordiv float", lambda: tf.math.floordiv([7.0, -7.0, 7.5], [2.0, 2.0, -2.0]), [3.0, -4.0, -4.0], "float32"),
    ("floordiv by 0", lambda: tf.math.floordiv([1.0, -1.0, 0.0], [0.0, 0.0, 0.0]), [INF, -INF, NAN], "float32"),
    ("floormod", lambda: tf.math.floormod([7, -7, 7, -7], [3, 3, -3, -3]), [1, 2, -2, -1], "int32"),
    ("floormod float", lambda: tf.math.floormod([7.5, -7.5, 7.5], [2.0, 2.0, -2.0]), [1.5, 0.5, -0.5], "float32"),
    ("floormod by 0", lambda: tf.math.floormod([1.0, -1.0], [0.0, 0.0]), [NAN, NAN], "float32"),
    ("mod", lambda: tf.math.mod([7, -7], [3, 3]), [1, 2], "int32"),
    ("multiply_no_nan", lambda: tf.math.multiply_no_nan([INF, NAN, 2.0], [0.0, 0.0, 3.0]), [0.0, 0.0, 6.0],
     "float32"),
    ("logical_xor", lambda: tf.math.logical_xor([True, True, False], [True, False, False]), [False, True, False],
     "bool"),
    ("is_inf", lambda: tf.math.is_inf([INF, -INF, 1.0, NAN]), [True, True, False, False], "bool"),
    ("polyval", lambda: tf.math.polyval([2.0, 3.0, 4.0], tf.constant([1.0, 2.0])), [9.0, 18.0], "float32"),
    ("polyval int", lambda: tf.math.polyval([2, 3, 4], 2), 18, "int32"),
    ("polyval empty", lambda: tf.math.polyval([], tf.constant([1.0, 2.0])), [0.0, 0.0], "float32"),
    # scans: cumsum over T's axis 1, cumprod of [1, 2, 3, 4], each (exclusive, reverse)
    ("cumsum", lambda: tf.math.cumsum(T, axis=1), [[1, 3, 6], [4, 9, 15]], "int32"),
    ("cumsum reverse", lambda: tf.cumsum(T, axis=1, reverse=True), [[6, 5, 3], [15, 11, 6]], "int32"),
    ("cumsum exclusive", lambda: tf.cumsum(T, axis=1, exclusive=True), [[0, 1, 3], [0, 4, 9]], "int32"),
    ("cumsum both", lambda: tf.cumsum(T, axis=1, exclusive=True, reverse=True), [[5, 3, 0], [11, 6, 0]], "int32"),
    ("cumsum axis 0", lambda: tf.cumsum(T), [[1, 2, 3], [5, 7, 9]], "int32"),
    ("cumprod", lambda: tf.math.cumprod([1.0, 2.0, 3.0, 4.0]), [1.0, 2.0, 6.0, 24.0], "float32"),
    ("cumprod reverse", lambda: tf.math.cumprod([1.0, 2.0, 3.0, 4.0], reverse=True), [24.0, 24.0, 12.0, 4.0],
     "float32"),
    ("cumprod exclusive", lambda: tf.math.cumprod([1.0, 2.0, 3.0, 4.0], exclusive=True), [1.0, 1.0, 2.0, 6.0],
     "float32"),
    ("cumprod both", lambda: tf.math.cumprod([1.0, 2.0, 3.0, 4.0], exclusive=True, reverse=True),
     [24.0, 12.0, 4.0, 1.0], "float32"),
    # statistics
    ("reduce_std", lambda: tf.math.reduce_std([[1.0, 2.0], [3.0, 5.0]], axis=0), [1.0, 1.5], "float32"),
    ("reduce_std all", lambda: tf.math.reduce_std([[1.0, 2.0], [3.0, 5.0]]), 1.4790199995040894, "float32"),
    ("reduce_variance", lambda: tf.math.reduce_variance([[1.0, 2.0], [3.0, 5.0]], axis=1, keepdims=True),
     [[0.25], [1.0]], "float32"),
    ("reduce_euclidean_norm", lambda: tf.math.reduce_euclidean_norm([[3.0, 4.0], [6.0, 8.0]], axis=1), [5.0, 10.0],
     "float32"),
    ("reduce_euclidean_norm int", lambda: tf.math.reduce_euclidean_norm([[3, 4], [6, 8]], axis=1), [5, 10], "int32"),
    ("reduce_euclidean_norm int truncates", lambda: tf.math.reduce_euclidean_norm([[1, 1], [2, 3]], axis=1), [1, 3],
     "int32"),
    ("count_nonzero", lambda: tf.math.count_nonzero([[0, 1, 2], [0, 0, 3]]), 3, "int64"),
    ("count_nonzero axis", lambda: tf.math.count_nonzero([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]], axis=1), [2, 1],
     "int64"),
    ("count_nonzero keepdims", lambda: tf.math.count_nonzero([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]], axis=1,
                                                             keepdims=True, dtype=tf.int32), [[2], [1]], "int32"),
    ("count_nonzero strings", lambda: tf.math.count_nonzero(["", "a"]), 1, "int64"),
    ("count_nonzero bool", lambda: tf.math.count_nonzero([True, False, True]), 2, "int64"),
    ("bincount", lambda: tf.math.bincount([1, 1, 3, 5]), [0, 2, 0, 1, 0, 1], "int32"),
    ("bincount minlength", lambda: tf.math.bincount([1, 1, 3], minlength=6), [0, 2, 0, 1, 0, 0], "int32"),
    ("bincount maxlength", lambda: tf.math.bincount([1, 1, 3, 5], maxlength=3), [0, 2, 0], "int32"),
    ("bincount weights", lambda: tf.math.bincount([1, 1, 3], weights=[0.5, 1.0, 2.0]), [0.0, 1.5, 0.0, 2.0],
     "float32"),
    ("bincount empty", lambda: tf.math.bincount(np.zeros(0, np.int32)), [], "int32"),
    ("bincount binary", lambda: tf.math.bincount([1, 1, 3], binary_output=True), [0, 1, 0, 1], "int32"),
    ("bincount rows", lambda: tf.math.bincount([[1, 1], [0, 2]], axis=-1), [[0, 2, 0], [1, 0, 1]], "int32"),
    ("confusion_matrix", lambda: tf.math.confusion_matrix([1, 2, 4], [2, 2, 4]),
     [[0, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1]], "int32"),
    ("confusion_matrix weights", lambda: tf.math.confusion_matrix([1, 2], [2, 2], num_classes=3, weights=[0.5, 2.0],
                                                                  dtype=tf.float32),
     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 2.0]], "float32"),
    ("l2_normalize", lambda: tf.math.l2_normalize([[3.0, 4.0], [0.0, 0.0]], axis=1),
     [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]], "float32"),
    ("l2_normalize all", lambda: tf.nn.l2_normalize([[3.0, 4.0], [0.0, 0.0]]),
     [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]], "float32"),
    # segments: D's rows with ids [0, 0, 2, 2] (segment 1 empty), unsorted ids [2, 0, 2, 0] into 4 segments
    ("segment_sum", lambda: tf.math.segment_sum(D, [0, 0, 2, 2]), [[4.0, 6.0], [0.0, 0.0], [12.0, 14.0]], "float32"),
    ("segment_mean", lambda: tf.math.segment_mean(D, [0, 0, 2, 2]), [[2.0, 3.0], [0.0, 0.0], [6.0, 7.0]], "float32"),
    ("segment_max", lambda: tf.math.segment_max(D, [0, 0, 2, 2]), [[3.0, 4.0], [0.0, 0.0], [7.0, 8.0]], "float32"),
    ("segment_max int", lambda: tf.math.segment_max([1, 5, 3], [0, 0, 2]), [5, 0, 3], "int32"),
    ("segment_mean int", lambda: tf.math.segment_mean([1, 2, 4], [0, 0, 1]), [1, 4], "int32"),
    ("unsorted_segment_sum", lambda: tf.math.unsorted_segment_sum(D, [2, 0, 2, 0], 4),
     [[10.0, 12.0], [0.0, 0.0], [6.0, 8.0], [0.0, 0.0]], "float32"),
    ("unsorted_segment_mean", lambda: tf.math.unsorted_segment_mean(D, [2, 0, 2, 0], 4),
     [[5.0, 6.0], [0.0, 0.0], [3.0, 4.0], [0.0, 0.0]], "float32"),
    ("unsorted_segment_max", lambda: tf.math.unsorted_segment_max(D, [2, 0, 2, 0], 4),
     [[7.0, 8.0], [F32_LOWEST, F32_LOWEST], [5.0, 6.0], [F32_LOWEST, F32_LOWEST]], "float32"),
    ("unsorted_segment_max int", lambda: tf.math.unsorted_segment_max([1, 5, 3], [2, 0, 2], 4),
     [5, -2147483648, 3, -2147483648], "int32"),
    ("unsorted_segment_sum negative id", lambda: tf.math.unsorted_segment_sum([1.0, 2.0, 3.0], [-1, 0, 1], 2),
     [2.0, 3.0], "float32"),
    ("unsorted_segment_mean int", lambda: tf.math.unsorted_segment_mean([1, 2, 4], [0, 0, 1], 3), [1.5, 4.0, 0.0],
     "float64"),
    # rankings
    ("top_k", lambda: tf.math.top_k([[1.0, 3.0, 2.0, 3.0], [4.0, 0.0, 5.0, 1.0]], k=2),
     ([[3.0, 3.0], [5.0, 4.0]], [[1, 3], [2, 0]]), ("float32", "int32")),
    ("top_k int64", lambda: tf.nn.top_k([1.0, 3.0, 2.0], k=2, index_type=tf.int64), ([3.0, 2.0], [1, 2]),
     ("float32", "int64")),
    ("top_k ties", lambda: tf.math.top_k([2.0, 1.0, 2.0, 2.0], k=2), ([2.0, 2.0], [0, 2]), ("float32", "int32")),
    ("in_top_k", lambda: tf.math.in_top_k([0, 1, 2], [[0.1, 0.9, 0.0], [0.3, 0.3, 0.4], [0.5, 0.2, 0.5]], k=1),
     [False, False, True], "bool"),
    ("in_top_k ties", lambda: tf.nn.in_top_k([0, 2], [[0.5, 0.5, 0.0], [0.5, 0.2, 0.5]], k=1), [True, True], "bool"),
    ("in_top_k nan target", lambda: tf.math.in_top_k([0], [[NAN, 0.5, 0.0]], k=2), [False], "bool"),
    ("in_top_k nan elsewhere", lambda: tf.math.in_top_k([0], [[0.9, NAN, 0.0]], k=2), [False],
     "bool"),
    ("in_top_k inf elsewhere", lambda: tf.math.in_top_k([0], [[0.9, INF, 0.0]], k=2), [False], "bool"),
    ("in_top_k out of range", lambda: tf.math.in_top_k([5], [[0.1, 0.5, 0.0]], k=2), [False], "bool"),
    # arrays
    ("pad constant", lambda: tf.pad(T, [[1, 1], [2, 2]]),
     [[0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0], [0, 0, 0, 0, 0, 0, 0]], "int32"),
    ("pad reflect", lambda: tf.pad(T, [[1, 1], [2, 2]], mode="REFLECT"),
     [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]], "int32"),
    ("pad reflect lower case", lambda: tf.pad(T, [[1, 1], [2, 2]], mode="reflect"),
     [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]], "int32"),
    ("pad symmetric", lambda: tf.pad(T, [[1, 1], [2, 2]], mode="SYMMETRIC"),
     [[2, 1, 1, 2, 3, 3, 2], [2, 1, 1, 2, 3, 3, 2], [5, 4, 4, 5, 6, 6, 5], [5, 4, 4, 5, 6, 6, 5]], "int32"),
    ("pad constant_values", lambda: tf.pad(T, [[0, 1], [1, 0]], constant_values=9),
     [[9, 1, 2, 3], [9, 4, 5, 6], [9, 9, 9, 9]], "int32"),
    ("sort", lambda: tf.sort([3, 1, 2]), [1, 2, 3], "int32"),
    ("sort descending", lambda: tf.sort([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], direction="DESCENDING"),
     [[3.0, 2.0, 1.0], [5.0, 4.0, 0.0]], "float32"),
    ("sort int descending", lambda: tf.sort([3, 1, 2], direction="DESCENDING"), [3, 2, 1], "int32"),
    ("sort axis 0", lambda: tf.sort([[3.0, 1.0], [0.0, 5.0]], axis=0), [[0.0, 1.0], [3.0, 5.0]], "float32"),
    ("sort nan", lambda: tf.sort([3.0, NAN, 1.0]), [1.0, 3.0, NAN], "float32"),
    ("argsort", lambda: tf.argsort([3, 1, 2, 1]), [1, 3, 2, 0], "int32"),
    ("argsort stable", lambda: tf.argsort([3, 1, 2, 1], stable=True), [1, 3, 2, 0], "int32"),
    ("argsort descending", lambda: tf.argsort([3, 1, 2, 1, 3], direction="DESCENDING", stable=True),
     [0, 4, 2, 1, 3], "int32"),
    ("unique", lambda: tf.unique([1, 1, 2, 4, 4, 4, 7, 8, 8]),
     ([1, 2, 4, 7, 8], [0, 0, 1, 2, 2, 2, 3, 4, 4]), ("int32", "int32")),
    ("unique first-occurrence order", lambda: tf.unique([4, 1, 4, 2, 1]), ([4, 1, 2], [0, 1, 0, 2, 1]),
     ("int32", "int32")),
    ("unique empty", lambda: tf.unique(np.zeros(0, np.int32)), ([], []), ("int32", "int32")),
    ("unique int64", lambda: tf.unique([4.0, 1.0, 4.0], out_idx=tf.int64), ([4.0, 1.0], [0, 1, 0]),
     ("float32", "int64")),
    ("reverse", lambda: tf.reverse(T, [1]), [[3, 2, 1], [6, 5, 4]], "int32"),
    ("reverse both", lambda: tf.reverse(T, [0, -1]), [[6, 5, 4], [3, 2, 1]], "int32"),
    ("roll", lambda: tf.roll([0, 1, 2, 3, 4], shift=2, axis=0), [3, 4, 0, 1, 2], "int32"),
    ("roll two axes", lambda: tf.roll(T, shift=[1, -1], axis=[0, 1]), [[5, 6, 4], [2, 3, 1]], "int32"),
    ("roll same axis twice", lambda: tf.roll([0, 1, 2, 3, 4], shift=[1, 2], axis=[0, 0]), [2, 3, 4, 0, 1], "int32"),
    ("repeat", lambda: tf.repeat([[1, 2], [3, 4]], 2), [1, 1, 2, 2, 3, 3, 4, 4], "int32"),
    ("repeat axis", lambda: tf.repeat([[1, 2], [3, 4]], [1, 2], axis=0), [[1, 2], [3, 4], [3, 4]], "int32"),
    ("broadcast_to", lambda: tf.broadcast_to([1, 2, 3], [2, 3]), [[1, 2, 3], [1, 2, 3]], "int32"),
    ("linspace", lambda: tf.linspace(0.0, 1.0, 5), [0.0, 0.25, 0.5, 0.75, 1.0], "float32"),
    ("linspace int", lambda: tf.linspace(0, 10, 5), [0.0, 2.5, 5.0, 7.5, 10.0], "float64"),
    ("linspace vectors", lambda: tf.linspace([0.0, 1.0], [1.0, 2.0], 3), [[0.0, 1.0], [0.5, 1.5], [1.0, 2.0]],
     "float32"),
    ("linspace axis", lambda: tf.linspace([0.0, 1.0], [1.0, 2.0], 3, axis=-1), [[0.0, 0.5, 1.0], [1.0, 1.5, 2.0]],
     "float32"),
    ("linspace one", lambda: tf.linspace(2.0, 5.0, 1), [2.0], "float32"),
    ("meshgrid", lambda: tf.meshgrid([1, 2, 3], [4, 5]), ([[1, 2, 3], [1, 2, 3]], [[4, 4, 4], [5, 5, 5]]),
     ("int32", "int32")),
    ("meshgrid ij", lambda: tf.meshgrid([1, 2, 3], [4, 5], indexing="ij"),
     ([[1, 1], [2, 2], [3, 3]], [[4, 5], [4, 5], [4, 5]]), ("int32", "int32")),
    ("sequence_mask", lambda: tf.sequence_mask([1, 3, 2], 5),
     [[True, False, False, False, False], [True, True, True, False, False], [True, True, False, False, False]],
     "bool"),
    ("sequence_mask no maxlen", lambda: tf.sequence_mask([[1, 3], [2, 0]]),
     [[[True, False, False], [True, True, True]], [[True, True, False], [False, False, False]]], "bool"),
    ("sequence_mask dtype", lambda: tf.sequence_mask([1, 2], 3, dtype=tf.float32), [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]],
     "float32"),
    ("gather_nd", lambda: tf.gather_nd([[1, 2], [3, 4]], [[0, 1], [1, 0]]), [2, 3], "int32"),
    ("gather_nd rows", lambda: tf.gather_nd([[1, 2], [3, 4]], [[1], [0]]), [[3, 4], [1, 2]], "int32"),
    ("gather_nd batch_dims", lambda: tf.gather_nd([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], [[1], [0]], batch_dims=1),
     [[3, 4], [5, 6]], "int32"),
    ("scatter_nd", lambda: tf.scatter_nd([[4], [3], [1], [7]], [9, 10, 11, 12], [8]), [0, 11, 0, 10, 9, 0, 0, 12],
     "int32"),
    ("scatter_nd repeats add", lambda: tf.scatter_nd([[1], [1]], [1.0, 2.0], [3]), [0.0, 3.0, 0.0], "float32"),
    ("scatter_nd rows", lambda: tf.scatter_nd([[0], [2]], [[1, 1], [2, 2]], [3, 2]), [[1, 1], [0, 0], [2, 2]],
     "int32"),
    ("tensor_scatter_nd_update", lambda: tf.tensor_scatter_nd_update([1, 2, 3, 4], [[1], [3]], [9, 10]),
     [1, 9, 3, 10], "int32"),
    ("tensor_scatter_nd_update 2-D", lambda: tf.tensor_scatter_nd_update([[1, 2], [3, 4]], [[0, 1]], [9]),
     [[1, 9], [3, 4]], "int32"),
    ("tensor_scatter_nd_add", lambda: tf.tensor_scatter_nd_add([1, 2, 3, 4], [[1], [1]], [9, 10]), [1, 21, 3, 4],
     "int32"),
    ("boolean_mask", lambda: tf.boolean_mask([[1, 2], [3, 4], [5, 6]], [True, False, True]), [[1, 2], [5, 6]],
     "int32"),
    ("boolean_mask 2-D", lambda: tf.boolean_mask([[1, 2], [3, 4]], [[True, False], [False, True]]), [1, 4], "int32"),
    ("boolean_mask axis", lambda: tf.boolean_mask([[1, 2], [3, 4]], [False, True], axis=1), [[2], [4]], "int32"),
    ("slice", lambda: tf.slice(T, [0, 1], [2, -1]), [[2, 3], [5, 6]], "int32"),
    ("slice row", lambda: tf.slice(T, [1, 0], [1, 2]), [[4, 5]], "int32"),
    ("strided_slice", lambda: tf.strided_slice(T, [0, 0], [2, 3], [1, 2]), [[1, 3], [4, 6]], "int32"),
    ("strided_slice negative", lambda: tf.strided_slice([1, 2, 3, 4, 5], [-1], [-6], [-1]), [5, 4, 3, 2, 1],
     "int32"),
    ("strided_slice step -2", lambda: tf.strided_slice([1, 2, 3, 4, 5], [4], [0], [-2]), [5, 3], "int32"),
    ("strided_slice begin_mask", lambda: tf.strided_slice(T, [1, 1], [2, 3], begin_mask=1), [[2, 3], [5, 6]],
     "int32"),
    ("strided_slice shrink", lambda: tf.strided_slice(T, [1, 0], [2, 3], shrink_axis_mask=1), [4, 5, 6], "int32"),
    ("strided_slice clips", lambda: tf.strided_slice([1, 2, 3], [1], [10]), [2, 3], "int32"),
    ("searchsorted", lambda: tf.searchsorted([[0.0, 3.0, 9.0, 10.0], [1.0, 2.0, 3.0, 4.0]],
                                             [[2.0, 4.0, 9.0], [0.0, 2.0, 5.0]]), [[1, 2, 2], [0, 1, 4]], "int32"),
    ("searchsorted right", lambda: tf.searchsorted([0.0, 3.0, 9.0], [3.0, 9.0], side="right"), [2, 3], "int32"),
    ("searchsorted int64", lambda: tf.searchsorted([0.0, 3.0, 9.0], [3.0], out_type=tf.int64), [1], "int64"),
    # nn: activations of [-2, -0.5, 0, 1.5]
    ("gelu", lambda: tf.nn.gelu(ACT), [-0.0455002635717392, -0.1542687714099884, 0.0, 1.3997892141342163], "float32"),
    ("gelu approximate", lambda: tf.nn.gelu(ACT, approximate=True),
     [-0.04540222883224487, -0.1542859971523285, 0.0, 1.3995715379714966], "float32"),
    ("silu", lambda: tf.nn.silu(ACT), [-0.23840583860874176, -0.1887703388929367, 0.0, 1.2263617515563965],
     "float32"),
    ("swish", lambda: tf.nn.swish(ACT), [-0.23840583860874176, -0.1887703388929367, 0.0, 1.2263617515563965],
     "float32"),
    ("silu beta", lambda: tf.nn.silu(ACT, beta=2.0), [-0.03597242012619972, -0.13447071611881256, 0.0,
                                                      1.428861141204834], "float32"),
    ("leaky_relu", lambda: tf.nn.leaky_relu(ACT), [-0.4000000059604645, -0.10000000149011612, 0.0, 1.5], "float32"),
    ("leaky_relu alpha", lambda: tf.nn.leaky_relu(ACT, alpha=0.1), [-0.20000000298023224, -0.05000000074505806, 0.0,
                                                                    1.5], "float32"),
    ("leaky_relu int", lambda: tf.nn.leaky_relu([-2, 3]), [-0.4000000059604645, 3.0], "float32"),
    ("elu", lambda: tf.nn.elu(ACT), [-0.8646647334098816, -0.39346933364868164, 0.0, 1.5], "float32"),
    ("selu", lambda: tf.nn.selu(ACT), [-1.5201665163040161, -0.6917581558227539, 0.0, 1.5760514736175537], "float32"),
    ("softplus nn", lambda: tf.nn.softplus(ACT), [0.12692800164222717, 0.4740769863128662, 0.6931471824645996,
                                                  1.7014132738113403], "float32"),
    ("relu6", lambda: tf.nn.relu6(ACT), [0.0, 0.0, 0.0, 1.5], "float32"),
    # conv2d / pooling of IMG (1, 4, 4, 2) = 1..32 with W (3, 3, 2, 3) = (1..54) / 10
    ("conv2d valid stride 2", lambda: tf.nn.conv2d(IMG, W, strides=[1, 2, 2, 1], padding="VALID"),
     [[[[737.1000366210938, 757.7999267578125, 778.4999389648438]]]], "float32"),
    ("conv2d same stride 2", lambda: tf.nn.conv2d(IMG, W, strides=2, padding="SAME"),
     [[[[737.1000366210938, 757.7999267578125, 778.4999389648438], [528.5999755859375, 546.0, 563.4000244140625]],
       [[547.2000122070312, 575.4000244140625, 603.6000366210938], [339.20001220703125, 360.4000244140625,
                                                                    381.6000061035156]]]], "float32"),
    ("conv2d dilations", lambda: tf.nn.conv2d(IMG, W[:2, :2], strides=1, padding="VALID", dilations=2),
     [[[[196.40000915527344, 205.59999084472656, 214.8000030517578], [219.59999084472656, 230.40000915527344,
                                                                      241.1999969482422]],
       [[289.1999816894531, 304.8000183105469, 320.4000244140625], [312.3999938964844, 329.5999755859375,
                                                                    346.79998779296875]]]], "float32"),
    ("conv2d explicit padding", lambda: tf.nn.conv2d(IMG, W, strides=1, padding=[[0, 0], [1, 0], [0, 1], [0, 0]]),
     [[[[373.20001220703125, 382.20001220703125, 391.20001220703125], [458.4000244140625, 469.79998779296875,
                                                                       481.1999816894531],
        [304.79998779296875, 313.20001220703125, 321.6000061035156]],
       [[737.1000366210938, 757.7999267578125, 778.4999389648438], [832.5, 856.7999877929688, 881.0999145507812],
        [528.5999755859375, 546.0, 563.4000244140625]],
       [[1118.6998291015625, 1153.7999267578125, 1188.9000244140625], [1214.0999755859375, 1252.7999267578125,
                                                                       1291.5],
        [754.2000122070312, 781.2000732421875, 808.199951171875]]]], "float32"),
    # TF 2.21: conv2d of int32 input and filters is int32 (same window sums)
    ("conv2d int", lambda: tf.nn.conv2d(IMG.astype(np.int32), W.astype(np.int32), strides=2, padding="VALID"),
     [[[[644, 674, 686]]]], "int32"),
    ("max_pool2d same", lambda: tf.nn.max_pool2d(IMG, 3, 2, "SAME"),
     [[[[21.0, 22.0], [23.0, 24.0]], [[29.0, 30.0], [31.0, 32.0]]]], "float32"),
    ("max_pool2d valid", lambda: tf.nn.max_pool2d(IMG, [2, 2], [1, 2, 2, 1], "VALID"),
     [[[[11.0, 12.0], [15.0, 16.0]], [[27.0, 28.0], [31.0, 32.0]]]], "float32"),
    ("max_pool2d int", lambda: tf.nn.max_pool2d(IMG.astype(np.int32), 2, 2, "VALID"),
     [[[[11, 12], [15, 16]], [[27, 28], [31, 32]]]], "int32"),
    ("avg_pool2d same", lambda: tf.nn.avg_pool2d(IMG, 3, 2, "SAME"),
     [[[[11.0, 12.0], [14.0, 15.0]], [[23.0, 24.0], [26.0, 27.0]]]], "float32"),
    ("avg_pool2d valid", lambda: tf.nn.avg_pool2d(IMG, 2, 2, "VALID"),
     [[[[6.0, 7.0], [10.0, 11.0]], [[22.0, 23.0], [26.0, 27.0]]]], "float32"),
]


def _check(out, expected, dtype):
    np.testing.assert_allclose(np.asarray(out, dtype=np.float64) if dtype != "bool" else np.asarray(out),
                               np.asarray(expected, dtype=np.float64) if dtype != "bool" else expected,
                               rtol=2e-6, atol=1e-6)
    assert np.asarray(out).dtype == np.dtype(dtype), (np.asarray(out).dtype, dtype)
    assert np.shape(out) == np.shape(expected)


@pytest.mark.parametrize("call,expected,dtype", [c[1:] for c in OBSERVED], ids=[c[0] for c in OBSERVED])
def test_op_gives_tfs_values_and_dtype(call, expected, dtype):
    out = call()
    if isinstance(dtype, tuple):
        assert len(out) == len(expected)
        for part, want, part_dtype in zip(out, expected, dtype):
            _check(part, want, part_dtype)
    else:
        _check(out, expected, dtype)


# TF 2.21's errors for the same calls: each line names what TF raised (type: message start).
ERRORS = [
    # InvalidArgumentError: Value for attr 'T' of int32 is not in the list of allowed values (Sin, Floor, Elu, ...)
    ("sin of ints", lambda: tf.sin([1, 2]), TypeError, "floating-point"),
    ("floor of ints", lambda: tf.floor([1, 2]), TypeError, "floating-point"),
    ("reciprocal of ints", lambda: tf.math.reciprocal([2, 4]), TypeError, "floating-point"),
    ("multiply_no_nan of ints", lambda: tf.math.multiply_no_nan([1, 2], [0, 3]), TypeError, "floating-point"),
    ("realdiv of ints", lambda: tf.realdiv([7, -7], [2, 2]), TypeError, "truediv|floating-point"),
    ("elu of ints", lambda: tf.nn.elu([-2, 3]), TypeError, "floating-point"),
    ("avg_pool2d of ints", lambda: tf.nn.avg_pool2d(IMG.astype(np.int32), 2, 2, "VALID"), TypeError, "floating"),
    # TypeError: Input must be either real or complex. Received integer type <dtype: 'int32'>.
    ("reduce_std of ints", lambda: tf.math.reduce_std([1, 2]), TypeError, "floating-point"),
    # TypeError: Cannot convert 1e-12 to EagerTensor of dtype int32
    # tf.math.l2_normalize is tf.linalg's (the same object, as in TF 2.21)
    ("l2_normalize of ints", lambda: tf.math.l2_normalize([3, 4]), TypeError, "float"),
    # ValueError: `features.dtype` must be a floating point tensor.
    ("gelu of ints", lambda: tf.nn.gelu([-2, 3]), ValueError, "floating point"),
    # InvalidArgumentError: Integer division by zero [Op:FloorDiv]
    ("floordiv of ints by 0", lambda: tf.math.floordiv([1], [0]), tf.errors.InvalidArgumentError,
     "Integer division by zero"),
    # InvalidArgumentError: segment ids are not increasing [Op:SegmentSum]
    ("segment_sum of unsorted ids", lambda: tf.math.segment_sum(D, [1, 0, 0, 0]), ValueError, "not increasing"),
    # InvalidArgumentError: segment_ids[0] = 5 is out of range [0, 2)
    ("unsorted_segment_sum id out of range", lambda: tf.math.unsorted_segment_sum([1.0, 2.0, 3.0], [5, 0, 1], 2),
     ValueError, r"out of range \[0, 2\)"),
    # InvalidArgumentError: input must have at least k columns. Had 2, needed 3
    ("top_k k too big", lambda: tf.math.top_k([1.0, 3.0], k=3), ValueError, "at least k=3"),
    # InvalidArgumentError: Input arr must be non-negative!
    ("bincount of negatives", lambda: tf.math.bincount([-1, 2]), ValueError, "non-negative"),
    # InvalidArgumentError: `labels` out of bound / `labels` contains negative values
    ("confusion_matrix label out of range", lambda: tf.math.confusion_matrix([1, 5], [2, 2], num_classes=3),
     ValueError, r"`labels` must lie in \[0, 3\)"),
    ("confusion_matrix negative label", lambda: tf.math.confusion_matrix([-1, 2], [2, 2]), ValueError, "labels"),
    # ValueError: Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or "SYMMETRIC".
    ("pad mode", lambda: tf.pad(T, [[0, 0], [0, 0]], mode="EDGE"), ValueError, "CONSTANT"),
    # InvalidArgumentError: paddings must be less than the dimension size: 2, 0 not less than 2 [Op:MirrorPad]
    ("pad reflect too wide", lambda: tf.pad(T, [[2, 0], [0, 0]], mode="REFLECT"), ValueError, "less than"),
    # TypeError: Cannot convert 1.5 to EagerTensor of dtype int32
    ("pad float constant on ints", lambda: tf.pad(T, [[0, 1], [1, 0]], constant_values=1.5), TypeError, "1.5"),
    # ValueError: Argument `direction` should be one of ASCENDING, DESCENDING. Received: direction=UP
    ("argsort direction", lambda: tf.argsort([3, 1], direction="UP"), ValueError, "direction=UP"),
    # InvalidArgumentError: indices[0] = [7] does not index into shape [4]
    ("tensor_scatter_nd_update out of range", lambda: tf.tensor_scatter_nd_update([1, 2, 3, 4], [[7]], [9]),
     IndexError, r"\[7\] does not index into shape \[4\]"),
    ("gather_nd out of range", lambda: tf.gather_nd([1, 2], [[5]]), IndexError, "does not index into"),
    # ValueError: `rate` must be a scalar tensor or a float in the range [0, 1). Received: rate=1.0
    ("dropout rate 1", lambda: tf.nn.dropout(np.ones(3, np.float32), rate=1.0), ValueError, r"range \[0, 1\)"),
    ("dropout negative rate", lambda: tf.nn.dropout(np.ones(3, np.float32), rate=-0.1), ValueError, "rate=-0.1"),
    # ValueError: `x.dtype` must be a floating point tensor as `x` will be scaled.
    ("dropout of ints", lambda: tf.nn.dropout(np.ones(3, np.int32), rate=0.5), ValueError, "floating point"),
    # InvalidArgumentError: seed must have shape [2], not [] / not [3]
    ("stateless seed scalar", lambda: tf.random.stateless_uniform([3], seed=1), ValueError, r"shape \[2\]"),
    ("stateless seed of 3", lambda: tf.random.stateless_normal([3], seed=[1, 2, 3]), ValueError, r"shape \[2\]"),
    # ValueError: For integer `dtype` argument <dtype: 'int32'>, argument `minval` and `maxval` must be both None
    ("stateless int without maxval", lambda: tf.random.stateless_uniform([3], seed=[1, 2], dtype=tf.int32),
     ValueError, "both None or not None"),
    # jdist's own limits in compiled code (TF traces these into a graph; XLA needs static shapes)
    ("boolean_mask compiled", lambda: jax.jit(lambda a: tf.boolean_mask(a, a > 1))(jnp.arange(3)), ValueError,
     "data-dependent shape"),
    ("unique compiled", lambda: jax.jit(tf.unique)(jnp.arange(3)), ValueError, "data-dependent length"),
    ("bincount compiled without length", lambda: jax.jit(tf.math.bincount)(jnp.arange(3)), ValueError,
     "minlength=n and maxlength=n"),
    ("segment_sum compiled", lambda: jax.jit(tf.math.segment_sum)(jnp.ones(3), jnp.arange(3)), ValueError,
     "unsorted_segment_sum"),
    # dropout in compiled code draws a new mask per run: tests/test_tf_parity_random_in_function.py
]


@pytest.mark.parametrize("call,error,match", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


SEQ = np.array([[0.0, 3.0, 9.0, 10.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
SCORES = np.array([[0.1, 0.9, 0.0, 0.4], [0.3, 0.3, 0.4, -1.0]], np.float32)
# (case, function of arrays, numpy arguments): under jax.jit on JAX arrays it gives what it gives on the host.
COMPILED = [
    ("floordiv floormod", lambda a, b: (tf.math.floordiv(a, b), tf.math.floormod(a, b)),
     (np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -3, -3], np.int32))),
    ("elementwise", lambda x: (tf.math.erf(x), tf.math.lgamma(x + 3), tf.math.xlogy(x, x * x), tf.math.log_sigmoid(x),
                               tf.math.softplus(x), tf.atan2(x, 1 - x), tf.math.rsqrt(x * x + 1)),
     (np.array([0.0, -0.5, 2.0], np.float32),)),
    ("scans", lambda x: (tf.cumsum(x, axis=1, exclusive=True, reverse=True), tf.math.cumprod(x, exclusive=True),
                         tf.math.reduce_std(x, axis=0), tf.math.count_nonzero(x > 2, axis=1)),
     (np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32),)),
    ("segments", lambda d, i: (tf.math.unsorted_segment_sum(d, i, 4), tf.math.unsorted_segment_max(d, i, 4),
                               tf.math.unsorted_segment_mean(d, i, 4)),
     (np.array(D, np.float32), np.array([2, 0, 2, -1], np.int32))),
    ("rankings", lambda s, t: (*tf.math.top_k(s, k=2), tf.math.in_top_k(t, s, 2), tf.argsort(s, direction="DESCENDING"),
                               tf.sort(s, axis=0)),
     (SCORES, np.array([3, 1], np.int32))),
    ("counting", lambda a, b: (tf.math.bincount(a, minlength=6, maxlength=6),
                               tf.math.confusion_matrix(a, b, num_classes=6)),
     (np.array([1, 1, 3, 5], np.int32), np.array([1, 2, 3, 4], np.int32))),
    ("arrays", lambda t: (tf.pad(t, [[1, 1], [2, 2]], mode="REFLECT"), tf.pad(t, [[0, 1], [1, 0]], constant_values=9),
                          tf.roll(t, [1, -1], [0, 1]), tf.reverse(t, [1]), tf.strided_slice(t, [0, 2], [2, 0], [1, -1]),
                          tf.slice(t, [0, 1], [2, -1]), tf.repeat(t, 2, axis=1), tf.broadcast_to(t[:1], [3, 3])),
     (np.array(T, np.int32),)),
    ("indexing", lambda p, i: (tf.gather_nd(p, i), tf.scatter_nd(i, tf.gather_nd(p, i), [2, 2]),
                               tf.tensor_scatter_nd_update(p, i, [9, 8]), tf.tensor_scatter_nd_add(p, i, [9, 8])),
     (np.array([[1, 2], [3, 4]], np.int32), np.array([[0, 1], [1, 0]], np.int32))),
    ("search and masks", lambda s, v, n: (tf.searchsorted(s, v), tf.searchsorted(s, v, side="right"),
                                          tf.sequence_mask(n, 4, dtype=tf.float32), tf.linspace(s[:, 0], s[:, 3], 3)),
     (SEQ, np.array([[2.0, 9.0, 11.0], [0.0, 2.0, 5.0]], np.float32), np.array([1, 3], np.int32))),
    ("nn", lambda x, w: (tf.nn.conv2d(x, w, 2, "SAME"), tf.nn.max_pool2d(x, 3, 2, "SAME"),
                         tf.nn.avg_pool2d(x, 3, 2, "SAME"), tf.nn.gelu(x), tf.nn.gelu(x, approximate=True),
                         tf.nn.selu(x / 16 - 1), tf.nn.leaky_relu(x - 5), tf.nn.l2_normalize(x, axis=-1)),
     (IMG, W)),
    ("stateless random", lambda seed: (tf.random.stateless_uniform([4], seed), tf.random.stateless_normal([4], seed),
                                       tf.random.stateless_uniform([4], seed, 0, 10, dtype=tf.int32)),
     (np.array([3, 4], np.int32),)),
]


@pytest.mark.parametrize("fn,args", [c[1:] for c in COMPILED], ids=[c[0] for c in COMPILED])
def test_compiled_result_equals_the_hosts(fn, args):
    host = fn(*args)
    compiled = jax.jit(fn)(*[jnp.asarray(a) for a in args])
    assert all(not isinstance(h, jax.Array) for h in host)  # the host computes with numpy and returns numpy
    assert len(host) == len(compiled)
    for h, c in zip(host, compiled):
        assert isinstance(c, jax.Array)
        assert c.dtype == jax.dtypes.canonicalize_dtype(np.asarray(h).dtype)  # int64 is int32 without x64
        np.testing.assert_allclose(np.asarray(c, np.float64), np.asarray(h, np.float64), rtol=1e-5, atol=1e-5)


def test_ops_inside_mirrored_strategy_run_equal_the_whole_batch_on_the_host():
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 8
    batch = np.linspace(-3, 3, 8 * 6, dtype=np.float32).reshape(8, 6)

    def step(x):
        values, indices = tf.math.top_k(tf.nn.gelu(x), k=3)
        return (tf.math.cumsum(tf.nn.silu(x), axis=1, exclusive=True, reverse=True), values, indices,
                tf.math.floormod(x, 1.5), tf.pad(x, [[0, 0], [1, 1]], mode="SYMMETRIC"),
                tf.math.unsorted_segment_sum(tf.transpose(x), np.array([0, 1, 0, 1, 2, 2]), 3))

    outs = strategy.run(step, args=(strategy.distribute_batch(batch),))
    per_row = [step(batch[i:i + 1]) for i in range(8)]  # the host, one replica's rows at a time
    for k, out in enumerate(outs):
        gathered = np.concatenate([np.asarray(v) for v in strategy.experimental_local_results(out)],
                                  axis=1 if k == 5 else 0)
        expected = np.concatenate([r[k] for r in per_row], axis=1 if k == 5 else 0)
        np.testing.assert_allclose(gathered, expected, rtol=1e-5, atol=1e-6)


def test_dropout_keeps_one_minus_rate_scaled_and_repeats_by_seed():
    x = np.ones(20000, np.float32)
    out = tf.nn.dropout(x, rate=0.25, seed=1)
    # TF 2.21: dropout(ones(1000), rate=0.25, seed=1) held only 0 and 1.3333334 (float32), 76% kept.
    assert out.dtype == np.float32 and set(np.unique(out).tolist()) == {0.0, np.float32(4 / 3)}
    assert abs(np.mean(out != 0) - 0.75) < 0.02
    np.testing.assert_array_equal(tf.nn.dropout(x, rate=0.0), x)
    # TF 2.21: two calls with seed=4 gave different masks (TF's op seed starts a sequence, it does not fix a mask);
    # a fresh process repeats the sequence.
    first, second = tf.nn.dropout(x[:64], 0.5, seed=1234), tf.nn.dropout(x[:64], 0.5, seed=1234)
    assert not np.array_equal(first, second)
    rows = tf.nn.dropout(np.ones((6, 5), np.float32), rate=0.5, noise_shape=[6, 1], seed=3)
    # TF 2.21: a [4, 1] noise_shape keeps or drops whole rows
    assert all(len(set(r)) == 1 for r in rows.numpy().tolist())
    # On JAX values the mask is a function of the key: the same key, the same mask; it runs under jit.
    key = jax.random.key(0)
    compiled = jax.jit(lambda a, k: tf.nn.dropout(a, 0.5, seed=k))(jnp.ones(1000), key)
    np.testing.assert_array_equal(compiled, tf.nn.dropout(jnp.ones(1000), 0.5, seed=key))
    assert abs(float(jnp.mean(compiled != 0)) - 0.5) < 0.06 and set(np.unique(compiled).tolist()) == {0.0, 2.0}


def test_dropout_inside_run_draws_a_mask_per_replica_from_the_steps_key():
    strategy = tf.distribute.MirroredStrategy()
    key = jax.random.key(5)

    def step(k):
        return tf.nn.dropout(jnp.ones(64), 0.5, seed=k)

    masks = [np.asarray(m) for m in strategy.experimental_local_results(strategy.run(step, args=(key,)))]
    assert len(masks) == 8 and len({m.tobytes() for m in masks}) == 8  # TF's replicas draw their own masks
    for i, mask in enumerate(masks):  # each replica's: the key folded with its replica id
        np.testing.assert_array_equal(mask, tf.nn.dropout(jnp.ones(64), 0.5, seed=jax.random.fold_in(key, i)))


_MASKS = ("import numpy as np, jdist.tf_compat as tf\n"
          "def masks(seed):\n"
          "    x = np.ones(32, np.float32)\n"
          "    calls = [tf.nn.dropout(x, 0.5, seed=seed) for _ in range(2)]\n"
          "    return ''.join(str(int(v)) for v in np.concatenate(calls))\n")


def test_dropout_sequence_repeats_in_a_new_process():
    import subprocess
    import sys

    scope = {}
    exec(_MASKS, scope)
    here = scope["masks"](987654)  # a seed no other test uses: this process's first calls with it, as a new one's
    there = subprocess.run([sys.executable, "-c", _MASKS + "print(masks(987654))"], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert there == here and len(here) == 64 and here[:32] != here[32:]


@pytest.mark.parametrize("draw", [lambda: tf.random.uniform([3], seed=7), lambda: tf.random.normal([3], seed=7),
                                  lambda: tf.random.shuffle(np.arange(8), seed=7),
                                  lambda: tf.random.truncated_normal([3], seed=7)],
                         ids=["uniform", "normal", "shuffle", "truncated_normal"])
def test_an_op_seed_draws_a_sequence_that_set_seed_restarts(draw):
    # TF 2.21 (eager): uniform([2], seed=7) twice gave [0.484, 0.506] then [0.265, 0.631], the same two in every
    # run; after set_seed(1), two calls and then set_seed(1) again: the third equals the first.
    tf.random.set_seed(1)
    first, second = np.asarray(draw()), np.asarray(draw())
    tf.random.set_seed(1)
    again = np.asarray(draw())
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, again)


def test_random_ops_give_tfs_distributions_shapes_and_dtypes():
    # TF 2.21: truncated_normal([20000], seed=1): float32, max |x| 1.9999999, std 0.882, mean -0.005; with
    # mean=3, stddev=2, dtype float64: values in (-1, 7).
    t = tf.random.truncated_normal([20000], seed=1)
    assert t.dtype == np.float32 and t.shape == (20000,) and np.max(np.abs(t)) <= 2.0
    assert abs(np.std(t) - 0.88) < 0.02 and abs(np.mean(t)) < 0.03
    t64 = tf.random.truncated_normal([20000], mean=3.0, stddev=2.0, dtype=tf.float64, seed=1)
    assert t64.dtype == np.float64 and t64.numpy().min() >= -1.0 and t64.numpy().max() <= 7.0
    # TF 2.21: categorical(log([[.1, .9], [.8, .2]]), 5000, seed=2): int64, shape (2, 5000), row means .904, .2012;
    # dtype=int32 gives int32; a -inf logit is never drawn.
    c = tf.random.categorical(np.log([[0.1, 0.9], [0.8, 0.2]]), 5000, seed=2)
    assert c.dtype == np.int64 and c.shape == (2, 5000)
    np.testing.assert_allclose(c.numpy().mean(axis=1), [0.9, 0.2], atol=0.03)
    assert tf.random.categorical([[0.0, 0.0]], 2, dtype=tf.int32).dtype == np.int32
    assert set(tf.random.categorical([[-np.inf, 0.0]], 50).numpy().reshape(-1).tolist()) == {1}
    # TF 2.21: stateless_normal([3], seed=[1, 2]) twice: equal, float32; float64 on request; stateless_uniform
    # float32 in [0, 1); ints in [minval, maxval).
    n1, n2 = tf.random.stateless_normal([3], seed=[1, 2]), tf.random.stateless_normal([3], seed=[1, 2])
    assert n1.dtype == np.float32 and isinstance(n1, np.ndarray) and np.array_equal(n1, n2)
    assert not np.array_equal(n1, tf.random.stateless_normal([3], seed=[1, 3]))
    assert tf.random.stateless_normal([2], seed=[1, 2], mean=1.0, stddev=0.5, dtype=tf.float64).dtype == np.float64
    u = tf.random.stateless_uniform([4000], seed=[1, 2], minval=2.0, maxval=4.0)
    assert u.dtype == np.float32
    assert u.numpy().min() >= 2.0 and u.numpy().max() < 4.0 and abs(u.numpy().mean() - 3.0) < 0.05
    ints = tf.random.stateless_uniform([4000], seed=[5, 6], minval=0, maxval=10, dtype=tf.int32)
    assert ints.dtype == np.int32 and set(np.unique(ints).tolist()) == set(range(10))
    big = tf.random.stateless_normal([20000], seed=[7, 8])
    assert abs(np.mean(big)) < 0.03 and abs(np.std(big) - 1.0) < 0.03


def test_namespaces_hold_tfs_names_where_tf_has_them():
    # TF 2.21: hasattr(tf, name) for these top-level names; tf.ceil, tf.floormod, tf.top_k are tf.math's only;
    # realdiv is top-level only; log_sigmoid is not in tf.nn.
    top = ["sin", "cos", "tan", "asin", "acos", "atan", "atan2", "cosh", "sinh", "floor", "sigmoid", "truediv",
           "realdiv", "cumsum", "pad", "sort", "argsort", "unique", "reverse", "roll", "repeat", "broadcast_to",
           "linspace", "meshgrid", "sequence_mask", "gather_nd", "scatter_nd", "tensor_scatter_nd_update",
           "tensor_scatter_nd_add", "boolean_mask", "slice", "strided_slice", "searchsorted"]
    math = ["ceil", "rsqrt", "reciprocal", "log1p", "expm1", "erf", "lgamma", "softplus", "log_sigmoid", "xlogy",
            "squared_difference", "floordiv", "floormod", "mod", "multiply_no_nan", "logical_xor", "is_inf", "polyval",
            "cumprod", "reduce_std", "reduce_variance", "reduce_euclidean_norm", "count_nonzero", "bincount",
            "segment_sum", "segment_mean", "segment_max", "unsorted_segment_sum", "unsorted_segment_mean",
            "unsorted_segment_max", "top_k", "in_top_k", "confusion_matrix", "l2_normalize"]
    nn = ["dropout", "l2_normalize", "gelu", "silu", "swish", "leaky_relu", "elu", "selu", "softplus", "relu6",
          "conv2d", "max_pool2d", "avg_pool2d", "bias_add", "moments", "top_k", "in_top_k", "sigmoid"]
    random = ["truncated_normal", "categorical", "stateless_normal", "stateless_uniform"]
    assert all(name in tf.__all__ and hasattr(tf, name) for name in top)
    assert all(hasattr(tf.math, name) for name in top[:13] + math if name != "realdiv")
    assert all(hasattr(tf.nn, name) for name in nn) and all(hasattr(tf.random, name) for name in random)
    for missing in ("ceil", "floormod", "top_k"):
        with pytest.raises(AttributeError):
            getattr(tf, missing)
    with pytest.raises(AttributeError):
        tf.nn.log_sigmoid  # noqa: B018
