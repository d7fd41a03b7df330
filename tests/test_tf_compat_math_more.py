"""More of TF's math names: tf.math elementwise and special functions, segment and scatter ops, array ops,
`switch_case`, `vectorized_map`, `fingerprint`, `tf.bitwise`, more of `tf.random`, and `tf.signal`.

Values marked `# observed, TF 2.21` were printed by TensorFlow 2.21 (tensorflow-cpu) on the same inputs."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

import jdist.tf_compat as tf

F32 = np.float32
D = np.array([[1.0, 2.0], [3.0, -4.0], [5.0, 6.0], [0.5, 8.0]], F32)
X3 = np.array([0.5, 1.5, 3.0], F32)


def _i32(values) -> np.ndarray:
    return np.array(values, np.int32)


def _as(dtype):
    return lambda values: np.array(values, dtype)


_as_int8, _as_int64, _as_uint8 = _as(np.int8), _as(np.int64), _as(np.uint8)
_as_float64, _as_complex64, _as_complex128 = _as(np.float64), _as(np.complex64), _as(np.complex128)


def _f32(values) -> np.ndarray:
    return np.array(values, np.float32)


CASES = [  # (name, call, expected, dtype): all # observed, TF 2.21
    ("truncatediv", lambda: tf.truncatediv(_i32([-7, 7]), _i32([2, -2])), [-3, -3], np.int32),
    ("truncatediv_i8", lambda: tf.truncatediv(_as_int8([-7]), _as_int8([2])), [-3], np.int8),
    ("truncatediv_f", lambda: tf.truncatediv(_f32([-7.0, 7.0]), _f32([2.0, -2.0])), [-3.0, -3.0], F32),
    ("truncatediv_f64", lambda: tf.truncatediv(_as_float64([-7.5]), _as_float64([2.0])), [-3.0], np.float64),
    ("truncatemod", lambda: tf.truncatemod(_i32([-7, 7, -7]), _i32([3, -3, -3])), [-1, 1, -1], np.int32),
    ("truncatemod_f", lambda: tf.truncatemod(_f32([-7.5, 7.5]), _f32([2.0, -2.0])), [-1.5, 1.5], F32),
    ("xdivy", lambda: tf.math.xdivy(_f32([0.0, 0.0, 1.0]), _f32([0.0, 2.0, 0.0])), [0.0, 0.0, np.inf], F32),
    ("xdivy_nan", lambda: tf.math.xdivy(_as_float64([0.0]), _as_float64([np.nan])), [0.0], np.float64),
    ("reciprocal_no_nan", lambda: tf.math.reciprocal_no_nan(_f32([0.0, 2.0, -0.0])), [0.0, 0.5, 0.0], F32),
    ("reciprocal_no_nan_c", lambda: tf.math.reciprocal_no_nan(_as_complex128([1 + 2j, 0j])), [0.2 - 0.4j, 0j],
     np.complex128),
    ("xlog1py", lambda: tf.math.xlog1py(_f32([0.0, 2.0, 0.0]), _f32([-1.0, 1.0, np.nan])), [0.0, 1.3862944, 0.0], F32),
    ("zero_fraction", lambda: tf.math.zero_fraction(_i32([0, 1, 0, 2])), 0.5, F32),
    ("zero_fraction_i64", lambda: tf.math.zero_fraction(_as_int64([[0, 1], [0, 2]])), 0.5, F32),
    ("zero_fraction_f64", lambda: tf.math.zero_fraction(_as_float64([0.0, 1.0])), 0.5, F32),
    ("zero_fraction_bool", lambda: tf.math.zero_fraction(np.array([True, False])), 0.5, F32),
    ("zero_fraction_empty", lambda: tf.math.zero_fraction(_f32([])), np.nan, F32),
    ("is_non_decreasing", lambda: tf.math.is_non_decreasing([1, 1, 2]), True, np.bool_),
    ("is_non_decreasing_2d", lambda: tf.math.is_non_decreasing([[1, 2], [3, 3]]), True, np.bool_),
    ("is_strictly_increasing", lambda: tf.math.is_strictly_increasing([1, 1, 2]), False, np.bool_),
    ("is_strictly_increasing_empty", lambda: tf.math.is_strictly_increasing([]), True, np.bool_),
    ("acosh", lambda: tf.math.acosh(_f32([0.5, 1.0, 2.0])), [np.nan, 0.0, 1.316957950592041], F32),
    ("asinh", lambda: tf.asinh(_f32([-1.0, 0.0, 2.0])), [-0.8813735842704773, 0.0, 1.4436354637145996], F32),
    ("atanh", lambda: tf.atanh(_f32([1.0, -1.0, 2.0, 0.5])), [np.inf, -np.inf, np.nan, 0.5493061542510986], F32),
    ("erfc", lambda: tf.math.erfc(_f32([0.5])), [0.47950011], F32),
    ("erfc_f64", lambda: tf.math.erfc(_as_float64([-1.0, 0.0, 3.0])),
     [1.8427007929497148, 1.0, 2.209049699858544e-05], np.float64),
    ("erfcinv", lambda: tf.math.erfcinv(_f32([0.5, 0.0, 2.0])), [0.4769363, np.inf, -np.inf], F32),
    ("polygamma", lambda: tf.math.polygamma(_f32([0.0, 1.0, 2.0]), _f32([0.5, 0.5, 2.0])),
     [-1.9635107517242432, 4.934802055358887, -0.4041138291358948], F32),
    ("polygamma_fraction", lambda: tf.math.polygamma(_f32([0.5, -1.0]), _f32([0.5, 0.5])), [np.nan, np.nan], F32),
    ("betainc", lambda: tf.math.betainc(_f32([0.5, 2.0]), _f32([0.5, 3.0]), _f32([0.3, 0.7])),
     [0.36901015043258667, 0.9162999987602234], F32),
    ("bessel_i0e", lambda: tf.math.bessel_i0e(X3), [0.6450353860855103, 0.3674336373806, 0.24300038814544678], F32),
    ("bessel_i1", lambda: tf.math.bessel_i1(X3), [0.2578943371772766, 0.9816663861274719, 3.953371047973633], F32),
    ("bessel_i1e", lambda: tf.math.bessel_i1e(X3), [0.15642082691192627, 0.21903938055038452, 0.1968267560005188],
     F32),
    ("scalar_mul", lambda: tf.scalar_mul(2, _i32([1, 2])), [2, 4], np.int32),
    ("scalar_mul_f", lambda: tf.math.scalar_mul(2.5, _f32([1.0, 2.0])), [2.5, 5.0], F32),
    ("segment_min", lambda: tf.math.segment_min(D, [0, 0, 2, 2]), [[1.0, -4.0], [0.0, 0.0], [0.5, 6.0]], F32),
    ("segment_min_int", lambda: tf.math.segment_min(_i32([3, 1, 2]), [0, 0, 2]), [1, 0, 2], np.int32),
    ("segment_prod", lambda: tf.math.segment_prod(D, [0, 0, 2, 2]), [[3.0, -8.0], [1.0, 1.0], [2.5, 48.0]], F32),
    ("segment_prod_int", lambda: tf.math.segment_prod(_i32([2, 3, 4]), [0, 0, 1]), [6, 4], np.int32),
    ("unsorted_segment_min", lambda: tf.math.unsorted_segment_min(D, [1, -1, 1, 0], 3),
     [[0.5, 8.0], [1.0, 2.0], [3.4028235e38, 3.4028235e38]], F32),
    ("unsorted_segment_min_int", lambda: tf.math.unsorted_segment_min(_i32([3, 1, 2]), [0, 0, 2], 4),
     [1, 2147483647, 2, 2147483647], np.int32),
    ("unsorted_segment_sqrt_n", lambda: tf.math.unsorted_segment_sqrt_n(D, [1, 1, 1, 0], 3),
     [[0.5, 8.0], [5.1961527, 2.309401], [0.0, 0.0]], F32),
    ("unsorted_segment_sqrt_n_f64", lambda: tf.math.unsorted_segment_sqrt_n(_as_float64([1, 2, 3]), [0, 0, 0], 2),
     [3.46410162, 0.0], np.float64),
    ("tensor_scatter_nd_sub", lambda: tf.tensor_scatter_nd_sub(_i32([1, 2, 3, 4]), [[1], [1], [3]], _i32([5, 6, 7])),
     [1, -9, 3, -3], np.int32),
    ("tensor_scatter_nd_sub_rows", lambda: tf.tensor_scatter_nd_sub(np.ones((2, 3), F32), [[0]], _f32([[1, 2, 3]])),
     [[0.0, -1.0, -2.0], [1.0, 1.0, 1.0]], F32),
    ("tensor_scatter_nd_max", lambda: tf.tensor_scatter_nd_max(_i32([1, 2, 3, 4]), [[1], [1], [3]], _i32([5, 6, 1])),
     [1, 6, 3, 4], np.int32),
    ("tensor_scatter_nd_min", lambda: tf.tensor_scatter_nd_min(_i32([1, 2, 3, 4]), [[1], [1], [3]], _i32([5, -6, 1])),
     [1, -6, 3, 1], np.int32),
    ("dynamic_stitch", lambda: tf.dynamic_stitch([[6], [4, 1], [[5, 2], [0, 3]]],
                                                 [_f32([61]), _f32([41, 11]), _f32([[51, 21], [1, 31]])]),
     [1.0, 11.0, 21.0, 31.0, 41.0, 51.0, 61.0], F32),
    ("dynamic_stitch_repeat", lambda: tf.dynamic_stitch([[0, 1], [1, 3]], [_i32([[1, 1], [2, 2]]),
                                                                           _i32([[3, 3], [4, 4]])]),
     [[1, 1], [3, 3], [0, 0], [4, 4]], np.int32),
    ("unravel_index", lambda: tf.unravel_index([22, 41, 37], (7, 6)), [[3, 6, 6], [4, 5, 1]], np.int32),
    ("unravel_index_scalar", lambda: tf.unravel_index(5, (2, 3)), [1, 2], np.int32),
    ("unravel_index_i64", lambda: tf.unravel_index(_as_int64([5]), _as_int64([2, 3])), [[1], [2]], np.int64),
    ("reverse_sequence", lambda: tf.reverse_sequence(np.arange(12, dtype=np.int32).reshape(3, 4), [2, 4, 0],
                                                     seq_axis=1, batch_axis=0),
     [[1, 0, 2, 3], [7, 6, 5, 4], [8, 9, 10, 11]], np.int32),
    ("histogram_fixed_width_bins", lambda: tf.histogram_fixed_width_bins([-1.0, 0.0, 1.5, 2.0, 5.0, 15], [0.0, 5.0],
                                                                         nbins=5), [0, 0, 1, 2, 4, 4], np.int32),
    ("histogram_fixed_width_bins_edges", lambda: tf.histogram_fixed_width_bins(
        _f32([0.0, 0.99, 1.0, 4.999, 5.0]), [0.0, 5.0], nbins=5, dtype="int64"), [0, 0, 1, 4, 4], np.int32),
    ("broadcast_dynamic_shape", lambda: tf.broadcast_dynamic_shape([2, 1, 3], [4, 1]), [2, 4, 3], np.int32),
    ("broadcast_dynamic_shape_i64", lambda: tf.broadcast_dynamic_shape(_as_int64([5, 1]), _as_int64([3])), [5, 3],
     np.int64),
    ("parallel_stack", lambda: tf.parallel_stack([_i32([1, 2]), _i32([3, 4])]), [[1, 2], [3, 4]], np.int32),
    ("fingerprint_text", lambda: tf.fingerprint(np.array([b"hello", b""], object)),
     [[232, 12, 56, 49, 169, 229, 139, 180], [79, 64, 144, 47, 59, 106, 225, 154]], np.uint8),
    ("fingerprint_int", lambda: tf.fingerprint(_i32([[1, 2], [3, 4]])),
     [[76, 18, 253, 133, 168, 204, 240, 10], [254, 162, 60, 240, 103, 244, 53, 255]], np.uint8),
    ("fingerprint_float", lambda: tf.fingerprint(_f32([1.5])), [[64, 181, 56, 72, 223, 224, 189, 72]], np.uint8),
    ("fingerprint_bool", lambda: tf.fingerprint(np.array([True])), [[62, 88, 126, 177, 19, 76, 162, 71]], np.uint8),
    ("fingerprint_3d", lambda: tf.fingerprint(np.zeros((2, 2, 2), np.uint8)),
     [[191, 100, 99, 247, 252, 22, 120, 249]] * 2, np.uint8),
    ("fingerprint_text_row", lambda: tf.fingerprint(np.array([[b"ab", b"c"]], object)),
     [[65, 83, 39, 149, 164, 245, 170, 22]], np.uint8),
    ("fingerprint_empty_rows", lambda: tf.fingerprint(np.zeros((2, 0), np.int32)),
     [[79, 64, 144, 47, 59, 106, 225, 154]] * 2, np.uint8),
    ("right_shift", lambda: tf.bitwise.right_shift(_i32([-8, 8, -1]), _i32([1, 1, 40])), [-4, 4, -1], np.int32),
    ("right_shift_negative", lambda: tf.bitwise.right_shift(_i32([16]), _i32([-1])), [16], np.int32),
    ("left_shift", lambda: tf.bitwise.left_shift(_i32([1, -1, 1]), _i32([31, 1, 40])),
     [-2147483648, -2, -2147483648], np.int32),
    ("left_shift_u8", lambda: tf.bitwise.left_shift(_as_uint8([1, 255]), _as_uint8([7, 1])), [128, 254], np.uint8),
    ("invert_u8", lambda: tf.bitwise.invert(_as_uint8([0, 5])), [255, 250], np.uint8),
    ("invert", lambda: tf.bitwise.invert(_i32([0, 5])), [-1, -6], np.int32),
    ("bitwise_and", lambda: tf.bitwise.bitwise_and(_i32([12]), _i32([10])), [8], np.int32),
    ("bitwise_or_scalar", lambda: tf.bitwise.bitwise_or(_as_int64([12]), 3), [15], np.int64),
    ("bitwise_xor", lambda: tf.bitwise.bitwise_xor(_i32([[1], [2]]), _i32([3, 4])), [[2, 5], [1, 6]], np.int32),
]
SPECIAL = {  # tf.math.special at 0.5, 1.5, 3.0 (float32) # observed, TF 2.21
    "bessel_i0": [1.063483476638794, 1.6467232704162598, 4.88079309463501],
    "bessel_i0e": [0.6450353860855103, 0.3674336373806, 0.24300038814544678],
    "bessel_i1": [0.2578943371772766, 0.9816663861274719, 3.953371047973633],
    "bessel_i1e": [0.15642082691192627, 0.21903938055038452, 0.1968267560005188],
    "bessel_j0": [0.9384698867797852, 0.5118277072906494, -0.2600519061088562],
    "bessel_j1": [0.24226847290992737, 0.5579365491867065, 0.3390589654445648],
    "bessel_k0": [0.924419105052948, 0.2138056457042694, 0.034739505499601364],
    "bessel_k0e": [1.5241093635559082, 0.9582104086875916, 0.6977616548538208],
    "bessel_k1": [1.6564409732818604, 0.2773878574371338, 0.04015643149614334],
    "bessel_k1e": [2.7310094833374023, 1.2431660890579224, 0.8065634965896606],
    "bessel_y0": [-0.44451871514320374, 0.3824489414691925, 0.37685003876686096],
    "bessel_y1": [-1.4714723825454712, -0.41230863332748413, 0.3246743977069855],
    "dawsn": [0.42443639039993286, 0.4282490909099579, 0.17827101051807404],
    "expint": [0.4542198181152344, 3.301285743713379, 9.933833122253418],
    "fresnel_cos": [0.4923442006111145, 0.4452612102031708, 0.6057207584381104],
    "fresnel_sin": [0.06473242491483688, 0.6975048780441284, 0.4963130056858063],
    "spence": [0.5822403430938721, -0.4484141767024994, -1.43674635887146],
}


@pytest.mark.parametrize("name, call, expected, dtype", CASES, ids=[c[0] for c in CASES])
def test_values_and_dtypes_are_tfs(name, call, expected, dtype):
    out = call()
    assert np.asarray(out).dtype == np.dtype(dtype), name
    if np.dtype(dtype).kind in "iub":
        np.testing.assert_array_equal(np.asarray(out), np.asarray(expected, dtype))
    else:
        np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=2e-6, atol=1e-7)
    assert hasattr(out, "numpy")  # a tensor, as TF's


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_functions_are_tfs_on_the_host_and_in_compiled_code(name):
    fn = getattr(tf.math.special, name)
    np.testing.assert_allclose(fn(X3), SPECIAL[name], rtol=3e-6)
    assert fn(X3).dtype == np.float32
    np.testing.assert_allclose(jax.jit(fn)(jnp.asarray(X3)), SPECIAL[name], rtol=3e-5)
    with pytest.raises(TypeError, match="floating-point"):  # TF: int32 not in the allowed values
        fn(_i32([1]))


EDGES = {  # at -1 and 0 # observed, TF 2.21 (scipy differs below 0)
    "bessel_y0": [-np.inf, -np.inf], "bessel_y1": [-np.inf, np.nan], "bessel_k0": [np.inf, np.inf],
    "bessel_k0e": [np.inf, np.inf], "bessel_k1": [np.inf, np.inf], "bessel_k1e": [np.inf, np.inf],
    "bessel_j0": [0.7651976943016052, 1.0], "bessel_j1": [-0.4400506019592285, 0.0],
    "dawsn": [-0.5380795001983643, 0.0], "expint": [np.nan, -np.inf], "spence": [np.nan, 1.644934058189392],
    "fresnel_cos": [-0.7798933982849121, 0.0], "fresnel_sin": [-0.4382591247558594, 0.0],
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_special_functions_at_and_below_zero_are_tfs(name):
    fn = getattr(tf.math.special, name)
    edge = _f32([-1.0, 0.0])
    np.testing.assert_allclose(fn(edge), EDGES[name], rtol=3e-6)
    np.testing.assert_allclose(jax.jit(fn)(jnp.asarray(edge)), EDGES[name], rtol=3e-6)


def test_ops_in_compiled_code_match_the_host():
    x, y = _f32([-7.5, 0.0, 3.0, 2.0]), _f32([2.0, 0.0, -2.0, 0.5])
    ints = _i32([-7, 7, 9, -9])

    def step(x, y, ints):
        return dict(
            tdiv=tf.truncatediv(ints, np.int32(2)), tmod=tf.truncatemod(ints, np.int32(4)),
            fdiv=tf.truncatediv(x, y + 1.0), xdivy=tf.math.xdivy(x, y), rnn=tf.math.reciprocal_no_nan(y),
            xlog1py=tf.math.xlog1py(x, y), zf=tf.math.zero_fraction(y), inc=tf.math.is_non_decreasing(y),
            poly=tf.math.polygamma(tf.abs(tf.round(y)), x + 9.0), atanh=tf.math.atanh(y / 4.0),
            erfcinv=tf.math.erfcinv(jnp.abs(y) / 3.0 + 0.1), seg=tf.math.unsorted_segment_min(x, ints % 3, 3),
            sqrt_n=tf.math.unsorted_segment_sqrt_n(x, ints % 2, 2), smin=tf.math.segment_min(x, np.array([0, 0, 1, 1])),
            sub=tf.tensor_scatter_nd_sub(x, np.array([[0], [0]]), y[:2]), hist=tf.histogram_fixed_width_bins(
                x, [-5.0, 5.0], nbins=4), rev=tf.reverse_sequence(ints[None], np.array([3]), seq_axis=1),
            unravel=tf.unravel_index(tf.abs(ints), np.array([3, 4])), shift=tf.bitwise.right_shift(ints, 1),
            topk=tf.math.approx_min_k(x, 2), fp=tf.fingerprint(ints.reshape(2, 2)),
            s2b=tf.space_to_batch_nd(x.reshape(1, 4, 1), [2], [[0, 0]]),
        )

    host = step(x, y, ints)
    device = jax.jit(step)(x, y, ints)
    for key in host:
        for h, d in zip(jax.tree.leaves(host[key]), jax.tree.leaves(device[key])):
            np.testing.assert_allclose(np.asarray(d), np.asarray(h), rtol=1e-5, err_msg=key)
    np.testing.assert_array_equal(host["tdiv"], [-3, 3, 4, -4])
    np.testing.assert_array_equal(host["tmod"], np.fmod([-7, 7, 9, -9], 4))
    np.testing.assert_array_equal(host["topk"].values, [-7.5, 0.0])


def test_space_to_batch_and_back():
    x = np.arange(1, 17, dtype=np.int32).reshape(1, 4, 4, 1)
    batched = tf.space_to_batch(x, [2, 2], [[0, 0], [0, 0]])
    assert batched.shape == (4, 2, 2, 1)
    # observed, TF 2.21
    np.testing.assert_array_equal(batched[..., 0], [[[1, 3], [9, 11]], [[2, 4], [10, 12]], [[5, 7], [13, 15]],
                                                    [[6, 8], [14, 16]]])
    np.testing.assert_array_equal(tf.batch_to_space(batched, [2, 2], [[0, 0], [0, 0]]), x)
    odd = np.arange(1, 7, dtype=np.int32).reshape(1, 2, 3, 1)
    padded = tf.space_to_batch(odd, [2, 2], [[0, 0], [0, 1]])
    np.testing.assert_array_equal(padded[..., 0], [[[1, 3]], [[2, 0]], [[4, 6]], [[5, 0]]])  # observed, TF 2.21
    np.testing.assert_array_equal(tf.batch_to_space(padded, [2, 2], [[0, 0], [0, 1]]), odd)
    # observed, TF 2.21
    np.testing.assert_array_equal(tf.space_to_batch_nd(np.arange(1, 9).reshape(2, 4, 1), [2], [[1, 1]])[..., 0],
                                  [[0, 2, 4], [0, 6, 8], [1, 3, 0], [5, 7, 0]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="not divisible by block_shape"):
        tf.space_to_batch(odd, [2, 2], [[0, 0], [0, 0]])


def test_unique_with_counts_and_static_shapes():
    y, idx, count = tf.unique_with_counts([4, 1, 4, 2, 1, 4])  # observed, TF 2.21
    np.testing.assert_array_equal(y, [4, 1, 2])
    np.testing.assert_array_equal(idx, [0, 1, 0, 2, 1, 0])
    np.testing.assert_array_equal(count, [3, 2, 1])
    assert count.dtype == np.int32
    result = tf.unique_with_counts(_f32([4.0, 1.0]), out_idx=tf.int64)
    assert result.idx.dtype == np.int64 and result.count.dtype == np.int64 and result.y.dtype == np.float32
    with pytest.raises(tf.errors.InvalidArgumentError, match="unique expects a 1D vector"):
        tf.unique_with_counts([[4, 1]])
    assert tf.broadcast_static_shape(tf.TensorShape([2, 1, 3]), tf.TensorShape([4, 1])) == tf.TensorShape([2, 4, 3])
    assert tf.broadcast_static_shape(tf.TensorShape([None, 1, 3]), tf.TensorShape([4, 1])).as_list() == [None, 4, 3]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        tf.broadcast_static_shape(tf.TensorShape([2, 3]), tf.TensorShape([4, 1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Incompatible shapes: \[2, 3\] vs. \[4, 1\]"):
        tf.broadcast_dynamic_shape([2, 3], [4, 1])


@pytest.mark.parametrize("call, error, match", [  # TF 2.21's error types (observed)
    (lambda: tf.truncatediv(_i32([1]), _i32([0])), ZeroDivisionError, "division by zero"),
    (lambda: tf.math.xdivy(_i32([0, 2]), _i32([0, 2])), TypeError, "floating-point"),
    (lambda: tf.math.reciprocal_no_nan(_i32([0, 2])), TypeError, "floating-point"),
    (lambda: tf.math.acosh(_i32([1, 2])), TypeError, "floating-point"),
    (lambda: tf.math.unsorted_segment_sqrt_n(_i32([3, 1, 2]), [0, 0, 2], 4), TypeError, "floating-point"),
    (lambda: tf.math.is_non_decreasing(np.array([b"a"], object)), TypeError, "Expected x to be numeric"),
    (lambda: tf.scalar_mul(_f32([2.0, 3.0]), _f32([1.0, 2.0])), ValueError, "must be a 0-D value"),
    (lambda: tf.math.unsorted_segment_min(D, [1, 1, 5, 0], 3), ValueError, "out of range"),
    (lambda: tf.math.segment_prod(D, [1, 0, 2, 2]), ValueError, "sorted"),
    (lambda: tf.tensor_scatter_nd_min(_i32([1, 2, 3, 4]), [[9]], _i32([5])), IndexError, "does not index"),
    (lambda: tf.unravel_index([6], (2, 3)), tf.errors.InvalidArgumentError, "index is out of bound"),
    (lambda: tf.unravel_index(_f32([1.0]), (2, 3)), TypeError, "int32 or int64"),
    (lambda: tf.reverse_sequence(np.zeros((3, 4)), [5, 4, 0], seq_axis=1), tf.errors.InvalidArgumentError,
     r"seq_lens\(0\) > input.dims\(1\)"),
    (lambda: tf.fingerprint(np.array(b"a", object)), tf.errors.InvalidArgumentError, "at least one dimension"),
    (lambda: tf.fingerprint(np.array([b"a"], object), method="bad"), tf.errors.InvalidArgumentError,
     "Unsupported fingerprint method: bad"),
    (lambda: tf.bitwise.bitwise_and(_f32([1.0]), _f32([1.0])), tf.errors.InvalidArgumentError, "int8, int16"),
    (lambda: tf.bitwise.bitwise_and(np.array([True]), np.array([True])), tf.errors.InvalidArgumentError, "bool"),
    (lambda: tf.bitwise.bitwise_and(_i32([1]), _as_int64([1])), tf.errors.InvalidArgumentError,
     "expected to be a int32 tensor but is a int64 tensor"),
    (lambda: tf.math.approx_max_k(_i32([[1, 5, 3, 2]]), 2), TypeError, "floating-point"),
])
def test_errors_are_tfs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_approx_top_k_is_exact():
    x = _f32([[1.0, 5.0, 3.0, 2.0]])
    values, indices = tf.math.approx_max_k(x, 2)  # observed, TF 2.21: [[5, 3]], [[1, 2]] int32
    np.testing.assert_array_equal(values, [[5.0, 3.0]])
    np.testing.assert_array_equal(indices, [[1, 2]])
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(tf.math.approx_min_k(x, 2).indices, [[0, 3]])
    np.testing.assert_array_equal(tf.math.approx_max_k(_f32([[1.0, 5.0], [3.0, 2.0]]), 1, reduction_dimension=0)
                                  .values, [[3.0, 5.0]])


def test_switch_case():
    branches = [lambda: np.int32(10), lambda: np.int32(20)]
    assert tf.switch_case(np.int32(1), branches) == 20  # observed, TF 2.21
    assert tf.switch_case(np.int32(5), branches, default=lambda: np.int32(99)) == 99  # observed, TF 2.21
    assert tf.switch_case(np.int32(-1), branches, default=lambda: np.int32(99)) == 99  # observed, TF 2.21
    assert tf.switch_case(np.int32(0), [(1, lambda: 1), (0, lambda: 2)]) == 2  # observed, TF 2.21
    assert tf.switch_case(np.int64(0), {0: lambda: "a"}) == "a"
    compiled = jax.jit(lambda i: tf.switch_case(i, [lambda: jnp.int32(10), lambda: jnp.int32(20)]))
    # observed, TF 2.21 (in a tf.function): 7 and -3 run the last branch
    assert [int(compiled(jnp.int32(i))) for i in (0, 1, 7, -3)] == [10, 20, 20, 20]
    with_default = jax.jit(lambda i: tf.switch_case(i, branches[:1], default=lambda: jnp.int32(99)))
    assert [int(with_default(jnp.int32(i))) for i in (0, 1, -1)] == [10, 99, 99]
    with pytest.raises(ValueError, match=r"contiguous range of \[0 to 2\) but found \{0,2\}"):
        tf.switch_case(np.int32(2), {0: lambda: 10, 2: lambda: 20})
    with pytest.raises(ValueError, match="at least one item"):
        tf.switch_case(np.int32(1), [])
    with pytest.raises(TypeError, match="2-tuple"):
        tf.switch_case(np.int32(0), [1])
    with pytest.raises(TypeError, match="key must be a Python `int`"):
        tf.switch_case(np.int32(0), {"a": lambda: 1})
    with pytest.raises(TypeError, match="must be an integer Tensor"):
        tf.switch_case(_f32(1.0), [lambda: 1])


def test_vectorized_map():
    out = tf.vectorized_map(lambda r: tf.reduce_sum(r) * 2, _i32([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(out, [6, 14])  # observed, TF 2.21
    pair = tf.vectorized_map(lambda a: (a[0] + a[1], a[0]), (_i32([1, 2]), _i32([3, 4])))
    np.testing.assert_array_equal(pair[0], [4, 6])  # observed, TF 2.21
    np.testing.assert_array_equal(pair[1], [1, 2])
    python_if = tf.vectorized_map(lambda r: r * 2 if float(r.sum()) > 3 else r, _f32([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(python_if, [[1, 2], [6, 8]])
    with pytest.raises(ValueError, match="cannot be batched"):
        tf.vectorized_map(lambda r: r * 2 if float(r.sum()) > 3 else r, _f32([[1, 2]]), fallback_to_while_loop=False)
    compiled = jax.jit(lambda m: tf.vectorized_map(lambda r: tf.reduce_max(r), m))
    np.testing.assert_array_equal(compiled(jnp.asarray(D)), [2.0, 3.0, 6.0, 8.0])


def test_stateless_draws_are_deterministic_and_distributed_as_tfs():
    r, seed = tf.random, [1, 2]
    gamma = r.stateless_gamma([20000, 2], seed, alpha=_f32([1.0, 5.0]), beta=2.0)
    assert gamma.shape == (20000, 2) and gamma.dtype == np.float32
    np.testing.assert_allclose(gamma.numpy().mean(0), [0.5, 2.5], rtol=0.03)  # mean alpha / beta
    np.testing.assert_allclose(gamma.numpy().var(0), [0.25, 1.25], rtol=0.06)  # variance alpha / beta**2
    np.testing.assert_array_equal(gamma, r.stateless_gamma([20000, 2], seed, alpha=_f32([1.0, 5.0]), beta=2.0))
    assert not np.array_equal(gamma, r.stateless_gamma([20000, 2], [1, 3], alpha=_f32([1.0, 5.0]), beta=2.0))
    poisson = r.stateless_poisson([20000], seed, lam=3.0)
    assert poisson.dtype == np.int32
    assert abs(poisson.numpy().mean() - 3.0) < 0.06 and abs(poisson.numpy().var() - 3.0) < 0.15
    binomial = r.stateless_binomial([20000], seed, counts=10.0, probs=0.3)
    assert binomial.dtype == np.int32
    assert abs(binomial.numpy().mean() - 3.0) < 0.05 and abs(binomial.numpy().var() - 2.1) < 0.1
    as_float = r.stateless_binomial([20000], seed, counts=10.0, probs=0.3, output_dtype=tf.float32)
    assert as_float.dtype == np.float32 and np.array_equal(as_float, binomial)
    draws = r.stateless_categorical(np.log([[0.2, 0.8], [0.9, 0.1]]), 20000, seed)
    assert draws.shape == (2, 20000) and draws.dtype == np.int64  # observed, TF 2.21: int64
    np.testing.assert_allclose(draws.numpy().mean(1), [0.8, 0.1], atol=0.015)
    narrow = r.stateless_categorical(np.log([[0.2, 0.8], [0.9, 0.1]]), 20000, seed, dtype=tf.int32)
    assert narrow.dtype == np.int32 and np.array_equal(narrow, draws)
    normal = r.stateless_truncated_normal([20000], seed, mean=1.0, stddev=2.0)
    assert normal.numpy().min() >= -3.0 and normal.numpy().max() <= 5.0 and abs(normal.numpy().mean() - 1.0) < 0.04
    np.testing.assert_allclose(normal.numpy().std(), 2.0 * 0.8796, rtol=0.02)  # a normal cut at 2 sd: sd 0.8796
    bounded = r.stateless_parameterized_truncated_normal([20000], [5, 6], minvals=-1.0, maxvals=1.0)
    assert bounded.dtype == np.float32 and bounded.numpy().min() >= -1.0 and bounded.numpy().max() <= 1.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="must end with broadcasted shape"):
        r.stateless_gamma([3], seed, alpha=_f32([1.0, 5.0]))  # observed, TF 2.21
    with pytest.raises(ValueError, match="shape \\[2\\]"):
        r.stateless_poisson([3], [1, 2, 3], lam=1.0)
    compiled = jax.jit(lambda s: (r.stateless_categorical(jnp.log(jnp.array([[0.2, 0.8]])), 20000, s),
                                  r.stateless_truncated_normal([20000], s, mean=1.0, stddev=2.0)))
    traced_draws, traced_normal = compiled(jnp.asarray(seed))
    assert traced_draws.shape == (1, 20000) and abs(float(traced_draws.mean()) - 0.8) < 0.015
    assert float(traced_normal.min()) >= -3.0 and abs(float(traced_normal.std()) - 2.0 * 0.8796) < 0.04
    np.testing.assert_array_equal(compiled(jnp.asarray(seed))[1], traced_normal)


def test_stateless_truncated_normal_gives_tfs_numbers():
    r = tf.random
    # observed, TF 2.21
    np.testing.assert_allclose(r.stateless_truncated_normal([3, 7], [7, -3]), [
        [0.51473767, 1.1838536, 0.6135526, 0.45309275, 1.0124135, -0.017789517, 0.006400739],
        [-0.43188763, -1.1040087, -0.8521795, -0.36173153, 1.0302259, 0.18360972, 0.27066982],
        [-0.09222811, 1.3143767, 0.42252523, 0.037387308, -0.09057012, -1.3895005, 1.8403987]], rtol=1e-6)
    np.testing.assert_allclose(r.stateless_truncated_normal([5], [1, 2], mean=1.0, stddev=2.0),
                               [2.0882201, 1.4147606, 1.1471286, 1.092869, 1.3364118], rtol=1e-6)
    wide = r.stateless_truncated_normal([5], [7, -3], dtype=tf.float64)
    assert wide.dtype == np.float64
    np.testing.assert_allclose(wide, [-0.145610778, 1.207765482, -0.288486046, -0.142622083, 0.665411023],
                               rtol=1e-8)
    # a list key is TF's tuple key (an error for a 1-D tensor): the values are read through numpy, as in TF
    np.testing.assert_allclose(r.stateless_truncated_normal([2000], [1, 2]).numpy()[[0, 999, 1998, 1999]],
                               [0.5441101, -0.5632602, -0.4184576, 0.42112538], rtol=1e-6)
    half = r.stateless_truncated_normal([3], [1, 2], dtype=tf.float16)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, np.array([0.544, 0.2074, 0.07355], np.float16))


def test_stateful_gamma_poisson_and_rng_state():
    r = tf.random
    gamma = r.gamma([2, 3], _f32([1.0, 2.0]), seed=1)
    assert gamma.shape == (2, 3, 2) and gamma.dtype == np.float32  # observed, TF 2.21
    assert r.gamma([2], 2.0, beta=_f32([1.0, 3.0])).shape == (2, 2)  # observed, TF 2.21
    poisson = r.poisson([4000], _f32([1.0, 20.0]), seed=3)
    assert poisson.shape == (4000, 2) and poisson.dtype == np.float32  # observed, TF 2.21: float32
    np.testing.assert_allclose(poisson.numpy().mean(0), [1.0, 20.0], rtol=0.05)
    assert r.poisson([2], 3.0, dtype=tf.int32).dtype == np.int32
    # observed, TF 2.21
    np.testing.assert_array_equal(r.create_rng_state(5, "philox"), [5, 0, 0])
    np.testing.assert_array_equal(r.create_rng_state(5, "threefry"), [5, 0])
    np.testing.assert_array_equal(r.create_rng_state(5, r.Algorithm.AUTO_SELECT), [5, 0, 0])
    np.testing.assert_array_equal(r.create_rng_state(2**70, 1), [0, 64, 0])
    np.testing.assert_array_equal(r.create_rng_state(-1, 1), [-1, -1, -1])
    np.testing.assert_array_equal(r.create_rng_state([1, 2], 1), [0, 1, 2])
    assert r.create_rng_state(5, 1).dtype == np.int64
    assert [a.value for a in r.Algorithm] == [1, 2, 3] and r.Algorithm.PHILOX.name == "PHILOX"
    with pytest.raises(ValueError, match="unsupported value"):
        r.create_rng_state(5, "mt")


SIGNAL_X = np.sin(np.arange(16) / 3.0).astype(F32)


def test_signal_values_are_tfs():
    s = tf.signal
    # observed, TF 2.21
    np.testing.assert_allclose(s.hann_window(4), [0.0, 0.5, 1.0, 0.5])
    np.testing.assert_allclose(s.hann_window(4, periodic=False), [0.0, 0.75, 0.74999994, 0.0], atol=1e-7)
    np.testing.assert_allclose(s.hann_window(3), [0.0, 1.0, 0.0], atol=1e-7)  # odd: as symmetric
    np.testing.assert_allclose(s.hann_window(1), [1.0])
    np.testing.assert_allclose(s.hamming_window(4), [0.08000001, 0.54, 1.0, 0.54], rtol=1e-6)
    np.testing.assert_allclose(s.hamming_window(5, periodic=False), [0.08000001, 0.54, 1.0, 0.54, 0.08000001],
                               rtol=1e-6)
    assert s.hann_window(3, dtype=tf.float64).dtype == np.float64
    np.testing.assert_allclose(s.kaiser_window(5), [5.2773448e-05, 2.1567266e-01, 1.0, 2.1567266e-01, 5.2773448e-05],
                               rtol=1e-5)  # observed, TF 2.21
    np.testing.assert_allclose(s.kaiser_window(4, beta=3.0), [0.20488471, 0.8712419, 0.8712419, 0.20488471], rtol=1e-6)
    np.testing.assert_allclose(s.kaiser_window(1), [1.0])
    np.testing.assert_allclose(s.vorbis_window(6), [0.10502934, 0.70710677, 0.9944691, 0.9944691, 0.70710677,
                                                    0.10502925], rtol=1e-6)  # observed, TF 2.21
    np.testing.assert_allclose(s.kaiser_bessel_derived_window(6), [0.007131026, 0.70710677, 0.99997455, 0.99997455,
                                                                   0.70710677, 0.007131026], rtol=1e-5)  # observed
    np.testing.assert_array_equal(s.frame(np.arange(7, dtype=np.int32), 3, 2), [[0, 1, 2], [2, 3, 4], [4, 5, 6]])
    np.testing.assert_array_equal(s.frame(np.arange(7, dtype=np.int32), 3, 2, pad_end=True, pad_value=-1),
                                  [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6, -1, -1]])
    assert s.frame(np.arange(8).reshape(4, 2), 2, 1, axis=0).shape == (3, 2, 2)
    assert s.frame(np.arange(2), 3, 2).shape == (0, 3)
    np.testing.assert_array_equal(s.overlap_and_add(np.arange(1, 7, dtype=np.int32).reshape(3, 2), 1), [1, 5, 9, 6])
    np.testing.assert_array_equal(s.overlap_and_add(np.arange(1.0, 13.0, dtype=F32).reshape(2, 2, 3), 2),
                                  [[1, 2, 7, 5, 6], [7, 8, 19, 11, 12]])
    np.testing.assert_allclose(s.fft(_as_complex64([1, 2, 0, 0])), [3, 1 - 2j, -1, 1 + 2j])
    assert s.fft(_as_complex64([1, 2])).dtype == np.complex64
    np.testing.assert_allclose(s.rfft(_f32([1, 2, 3, 4])), [10, -2 + 2j, -2])
    assert s.rfft(_f32([1, 2])).dtype == np.complex64 and s.rfft(_as_float64([1, 2])).dtype == np.complex128
    np.testing.assert_allclose(s.rfft(_f32([1, 2, 3, 4]), fft_length=[6]),
                               [10, -3.5 - 4.330127j, 2.5 + 0.8660253j, -2], rtol=1e-6)
    irfft = s.irfft(_as_complex64([10, -2 + 2j, -2]))
    np.testing.assert_allclose(irfft, [1, 2, 3, 4], rtol=1e-6)
    assert irfft.dtype == np.float32
    np.testing.assert_allclose(s.fft2d(np.arange(4.0).reshape(2, 2).astype(np.complex64)), [[6, -2], [-4, 0]])
    np.testing.assert_allclose(s.ifft2d(s.fft2d(_as_complex64([[1, 2], [3, 4j]]))), [[1, 2], [3, 4j]], atol=1e-6)
    np.testing.assert_array_equal(s.fftshift(np.arange(5)), [3, 4, 0, 1, 2])
    np.testing.assert_array_equal(s.ifftshift(np.arange(5)), [2, 3, 4, 0, 1])
    np.testing.assert_array_equal(s.fftshift(np.arange(6).reshape(2, 3), axes=1), [[2, 0, 1], [5, 3, 4]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="complex64, complex128"):
        s.fft(_f32([1.0, 2.0]))


def test_stft_mel_and_dct_are_tfs():
    s = tf.signal
    spectrum = s.stft(SIGNAL_X, 8, 4)
    assert spectrum.shape == (3, 5) and spectrum.dtype == np.complex64
    np.testing.assert_allclose(spectrum[0], [3.4574556, -1.9718323 + 0.27936873j, 0.20810425 - 0.07341665j,
                                             0.02795649 - 0.01155886j, 0.01408732], atol=3e-6)  # observed, TF 2.21
    assert s.stft(SIGNAL_X, 6, 4, fft_length=8).shape == (3, 5) and s.stft(SIGNAL_X, 8, 4, pad_end=True).shape == (4, 5)
    back = s.inverse_stft(spectrum, 8, 4, window_fn=s.inverse_stft_window_fn(4))
    # observed, TF 2.21 (the middle samples are the signal again)
    np.testing.assert_allclose(back[:6], [0.0, 0.00935631, 0.3091849, 0.8174087, 0.9719379, 0.99540794], atol=3e-6)
    np.testing.assert_allclose(back[4:12], SIGNAL_X[4:12], atol=3e-6)
    np.testing.assert_allclose(s.inverse_stft(spectrum, 8, 4)[:4], [0.0, 0.00701723, 0.15459245, 0.6130565],
                               atol=3e-6)  # observed, TF 2.21
    mel = s.linear_to_mel_weight_matrix(4, 5, 16, 0.0, 8.0)
    np.testing.assert_allclose(mel, [[0, 0, 0, 0], [0.7446892, 0.25531077, 0, 0], [0, 0.4928976, 0.5071024, 0],
                                     [0, 0, 0.24470934, 0.7552907], [0, 0, 0, 0]], atol=5e-6)  # observed, TF 2.21
    default = s.linear_to_mel_weight_matrix()
    assert default.shape == (129, 20) and abs(float(tf.reduce_sum(default)) - 110.80084228515625) < 1e-3  # observed
    v = _f32([1.0, 2.0, 3.0, 4.0])
    for kwargs, expected in [  # observed, TF 2.21
        ({}, [20.0, -6.3086443, 0.0, -0.44834089]),
        ({"norm": "ortho"}, [5.0, -2.2304425, 0.0, -0.15851244]),
        ({"type": 1}, [15.0, -4.0, 0.0, -1.0]),
        ({"type": 3}, [11.999626, -9.102943, 2.6176615, -1.5143447]),
        ({"type": 4}, [10.181593, -9.446695, 5.010298, -4.689565]),
        ({"n": 6}, [20.0, 4.242641, -10.392304, 0.0, 4.0, -4.2426414]),
    ]:
        np.testing.assert_allclose(s.dct(v, **kwargs), expected, rtol=2e-6, atol=1e-6, err_msg=str(kwargs))
        np.testing.assert_allclose(jax.jit(lambda x, kw=kwargs: s.dct(x, **kw))(v), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.idct(v), [11.999626, -9.102943, 2.6176615, -1.5143447], rtol=2e-6)  # observed
    np.testing.assert_allclose(s.idct(v, norm="ortho"), [4.388955, -3.0719295, 1.0719299, -0.388955], rtol=2e-6)
    np.testing.assert_allclose(s.mfccs_from_log_mel_spectrograms(v[None]),
                               [[7.0710678, -2.2304425, 0.0, -0.15851244]], rtol=2e-6, atol=1e-6)  # observed


def test_signal_in_compiled_code_matches_the_host():
    s = tf.signal

    def step(x):
        spectrum = s.stft(x, 8, 4)
        return dict(stft=spectrum, back=s.inverse_stft(spectrum, 8, 4), frames=s.frame(x, 5, 3, pad_end=True),
                    ola=s.overlap_and_add(s.frame(x, 4, 2), 2), fft=s.ifft(s.fft(x.astype(np.complex64))),
                    rfft2d=s.irfft2d(s.rfft2d(x.reshape(4, 4))), shift=s.fftshift(x))

    host, device = step(SIGNAL_X), jax.jit(step)(jnp.asarray(SIGNAL_X))
    for key in host:
        np.testing.assert_allclose(np.asarray(device[key]), np.asarray(host[key]), atol=2e-5, err_msg=key)
    np.testing.assert_allclose(np.reshape(host["rfft2d"], -1), SIGNAL_X, atol=1e-6)


def test_special_matches_scipy_off_the_observed_points():
    x = np.linspace(0.1, 6.0, 7).astype(F32)
    np.testing.assert_allclose(tf.math.special.bessel_k1e(x), sp.k1e(x), rtol=1e-6)
    np.testing.assert_allclose(tf.math.special.spence(x), sp.spence(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(tf.math.erfcinv(tf.math.erfc(x[:3])), x[:3], rtol=1e-5)
    assert tf.acosh is tf.math.acosh and tf.scalar_mul is tf.math.scalar_mul
    assert {"bitwise", "signal", "switch_case", "unique_with_counts", "fingerprint"} <= set(dir(tf))
