"""jdist.tf_compat's `tf.linalg`, against values observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15.1).

Each expected value was printed by TF, e.g.
`/work/tfvenv/bin/python -c "import tensorflow as tf; print(tf.linalg.svd([[1.,2.,3.],[4.,5.,6.]]))"`,
with A = [[4, 1], [2, 3]], S = [[4, 2], [2, 3]] (symmetric positive definite), M = [[1, 2, 3], [4, 5, 6]]
(float32). Decompositions' signs are LAPACK's, which TF's CPU kernels and JAX's share (observed equal here).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

A = np.array([[4.0, 1.0], [2.0, 3.0]], np.float32)
S = np.array([[4.0, 2.0], [2.0, 3.0]], np.float32)
M = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
B4 = np.arange(1.0, 17.0, dtype=np.float32).reshape(4, 4)
BATCH = np.arange(8.0, dtype=np.float32).reshape(2, 2, 2)
C = np.array([[1 + 2j, 3j], [1, 2 - 1j]], np.complex64)
L = tf.linalg


def _signed(eigh):
    """`(e, v)` with each eigenvector's sign chosen so its first entry is positive."""
    e, v = eigh
    return e, v * np.sign(v[..., :1, :])

# (id, call, TF 2.21's result: an array, or a tuple of arrays for ops returning several)
OBSERVED = [
    ("svd", lambda: L.svd(M), ([9.508033752, 0.772869349], [[-0.38631773, -0.92236584], [-0.92236584, 0.38631773]],
                               [[-0.42866713, 0.80596411], [-0.56630695, 0.11238240], [-0.70394677, -0.58119917]])),
    ("svd_full", lambda: L.svd(M, full_matrices=True)[2],
     [[-0.42866713, 0.80596411, 0.40824845], [-0.56630695, 0.11238240, -0.81649661],
      [-0.70394677, -0.58119917, 0.40824825]]),
    ("svd_no_uv", lambda: L.svd(M, compute_uv=False), [9.508033752, 0.772869349]),
    ("norm", lambda: tf.norm(M), 9.539392471),
    ("norm_axis1", lambda: tf.norm(M, axis=1), [3.741657495, 8.774964333]),
    ("norm_ord1_axis1", lambda: tf.norm(M, ord=1, axis=1), [6.0, 15.0]),
    ("norm_inf_axis0", lambda: tf.norm(M, ord=np.inf, axis=0), [4.0, 5.0, 6.0]),
    ("norm_ord3_flat", lambda: tf.norm(M, ord=3), 7.611662865),
    ("norm_ord1_flat", lambda: tf.norm(M, ord=1), 21.0),
    ("norm_fro", lambda: tf.norm(M, ord="fro", axis=[-2, -1]), 9.539392471),
    ("norm_euclidean_matrix", lambda: tf.norm(M, ord="euclidean", axis=[0, 1]), 9.539392471),
    ("norm_1_matrix", lambda: tf.norm(M, ord=1, axis=[-2, -1]), 9.0),
    ("norm_inf_matrix", lambda: tf.norm(M, ord=np.inf, axis=[-2, -1]), 15.0),
    ("norm_2_matrix", lambda: tf.norm(M, ord=2, axis=(-2, -1)), 9.508033752),
    ("norm_keepdims", lambda: tf.norm(M, axis=1, keepdims=True), [[3.741657495], [8.774964333]]),
    ("norm_keepdims_flat", lambda: tf.norm(M, keepdims=True), [[9.539392471]]),
    ("qr", lambda: L.qr(M), ([[-0.24253559, -0.97014254], [-0.97014254, 0.24253553]],
                             [[-4.12310553, -5.33578348, -6.54846191], [0.0, -0.72760725, -1.45521402]])),
    ("qr_tall", lambda: L.qr(M.T), ([[-0.26726115, 0.87287152], [-0.53452247, 0.21821791], [-0.80178368, -0.43643576]],
                                    [[-3.74165750, -8.55235863], [0.0, 1.96396077]])),
    ("qr_tall_full", lambda: L.qr(M.T, full_matrices=True)[1], [[-3.74165750, -8.55235863], [0.0, 1.96396077],
                                                                 [0.0, 0.0]]),
    ("band_1_-1", lambda: L.band_part(B4, 1, -1), [[1, 2, 3, 4], [5, 6, 7, 8], [0, 10, 11, 12], [0, 0, 15, 16]]),
    ("band_-1_0", lambda: L.band_part(B4, -1, 0), [[1, 0, 0, 0], [5, 6, 0, 0], [9, 10, 11, 0], [13, 14, 15, 16]]),
    ("band_0_0", lambda: L.band_part(B4, 0, 0), np.diag(np.float32([1, 6, 11, 16]))),
    ("band_nonsquare", lambda: L.band_part(M, 0, 1), [[1, 2, 0], [0, 5, 6]]),
    ("diag_batch", lambda: L.diag([[1.0, 2.0], [3.0, 4.0]]), [[[1, 0], [0, 2]], [[3, 0], [0, 4]]]),
    ("diag_k1", lambda: L.diag([1.0, 2.0], k=1), [[0, 1, 0], [0, 0, 2], [0, 0, 0]]),
    ("diag_k-1_shape_padding", lambda: L.diag([1.0, 2.0], k=-1, num_rows=3, num_cols=2, padding_value=9),
     [[9, 9], [1, 9], [9, 2]]),
    ("diag_num_rows", lambda: L.diag([1.0, 2.0], num_rows=3), [[1, 0], [0, 2], [0, 0]]),
    ("diag_num_cols", lambda: L.diag([1.0, 2.0], num_cols=3), [[1, 0, 0], [0, 2, 0]]),
    ("diag_int", lambda: L.diag(np.array([1, 2], np.int32)), np.array([[1, 0], [0, 2]], np.int32)),
    ("diag_part", lambda: L.diag_part(M), [1.0, 5.0]),
    ("diag_part_k1", lambda: L.diag_part(M, k=1), [2.0, 6.0]),
    ("diag_part_batch", lambda: L.diag_part(BATCH), [[0.0, 3.0], [4.0, 7.0]]),
    ("diag_part_band", lambda: L.diag_part(B4, k=(-1, 1)), [[0, 2, 7, 12], [1, 6, 11, 16], [5, 10, 15, 0]]),
    ("set_diag", lambda: L.set_diag(M, [9.0, 8.0]), [[9, 2, 3], [4, 8, 6]]),
    ("set_diag_k1", lambda: L.set_diag(M, [9.0, 8.0], k=1), [[1, 9, 3], [4, 5, 8]]),
    ("matmul_transpose_a", lambda: L.matmul(M, M, transpose_a=True), [[17, 22, 27], [22, 29, 36], [27, 36, 45]]),
    ("matmul_transpose_b", lambda: tf.matmul(M, M, transpose_b=True), [[14, 32], [32, 77]]),
    ("matmul_is_sparse_hints", lambda: L.matmul(A, A, a_is_sparse=True, b_is_sparse=True), [[18, 7], [14, 11]]),
    ("matmul_adjoint_b", lambda: L.matmul(C, C, adjoint_b=True), np.array([[14, -2 + 8j], [-2 - 8j, 6]], np.complex64)),
    ("matmul_adjoint_a", lambda: L.matmul(C, C, adjoint_a=True), np.array([[6, 8 + 2j], [8 - 2j, 14]], np.complex64)),
    ("matmul_int", lambda: L.matmul(np.array([[1, 2], [3, 4]], np.int32), np.array([[1], [1]], np.int32)),
     np.array([[3], [7]], np.int32)),
    ("matmul_output_type", lambda: L.matmul(np.array([[1, 2]], np.int8), np.array([[1], [1]], np.int8),
                                            output_type=tf.int32), np.array([[3]], np.int32)),
    ("matmul_broadcast", lambda: L.matmul(np.ones((2, 1, 2, 3), np.float32), np.ones((3, 3, 2), np.float32)),
     np.full((2, 3, 2, 2), 3.0, np.float32)),
    ("l2_normalize", lambda: L.l2_normalize([3.0, 4.0]), [0.6, 0.8]),
    ("l2_normalize_below_epsilon", lambda: L.l2_normalize([1e-7, 0.0]), [0.1, 0.0]),  # 1e-7 / sqrt(1e-12)
    ("l2_normalize_zeros", lambda: tf.math.l2_normalize([0.0, 0.0]), [0.0, 0.0]),
    ("l2_normalize_axis", lambda: tf.nn.l2_normalize(M, axis=1),
     [[0.26726124, 0.53452247, 0.80178368], [0.45584232, 0.56980288, 0.68376350]]),
    ("l2_normalize_all_axes", lambda: L.l2_normalize(M),
     [[0.10482848, 0.20965695, 0.31448543], [0.41931391, 0.52414238, 0.62897086]]),
    ("l2_normalize_epsilon", lambda: L.l2_normalize([3.0, 4.0], epsilon=100.0), [0.3, 0.4]),
    ("l2_normalize_dim", lambda: L.l2_normalize(M, dim=0),
     [[0.24253564, 0.37139067, 0.44721359], [0.97014254, 0.92847669, 0.89442718]]),
    ("normalize", lambda: L.normalize(M, ord=1, axis=1),
     ([[1 / 6, 1 / 3, 0.5], [4 / 15, 1 / 3, 0.4]], [[6.0], [15.0]])),
    # Eigenvectors' signs are the solver's choice (TF's CPU kernel is Eigen's, JAX's LAPACK's): compared up to
    # each column's sign, with the columns scaled so their first entry is positive.
    ("eigh", lambda: _signed(L.eigh(S)), ([1.43844724, 5.56155252], [[0.61541218, 0.78820544],
                                                                      [-0.78820544, 0.61541218]])),
    # TF reads the lower triangle only: A's eigh is S's.
    ("eigh_lower_triangle", lambda: _signed(L.eigh(A)), ([1.43844724, 5.56155252],
                                                         [[0.61541218, 0.78820544], [-0.78820544, 0.61541218]])),
    ("eigvalsh", lambda: L.eigvalsh([[2.0, 0.0], [0.0, 1.0]]), [1.0, 2.0]),
    ("global_norm", lambda: L.global_norm([np.array([3.0, 4.0], np.float32), np.array([[12.0]], np.float32)]), 13.0),
    ("global_norm_none", lambda: L.global_norm([np.array([3.0, 4.0], np.float32), None]), 5.0),
    ("global_norm_empty", lambda: L.global_norm([]), 0.0),
    ("einsum", lambda: tf.einsum("ij,jk->ik", M, M.T), [[14, 32], [32, 77]]),
    ("tensordot_1", lambda: tf.tensordot(M, M.T, 1), [[14, 32], [32, 77]]),
    ("tensordot_lists", lambda: L.tensordot(M, M, [[0], [0]]), [[17, 22, 27], [22, 29, 36], [27, 36, 45]]),
    ("tensordot_0", lambda: tf.tensordot([1.0, 2.0], [3.0, 4.0], 0), [[3, 4], [6, 8]]),
    ("tensordot_2", lambda: tf.tensordot(M, M, 2), 91.0),
    ("trace", lambda: L.trace(M), 6.0),
    ("trace_batch", lambda: L.trace(BATCH), [3.0, 11.0]),
    ("trace_int", lambda: L.trace(np.array([[1, 2], [3, 4]], np.int32)), np.int32(5)),
    ("det", lambda: L.det(A), 10.0),
    ("det_batch", lambda: L.det(np.stack([A, S])), [10.0, 8.0]),
    ("slogdet", lambda: L.slogdet([[1.0, 2.0], [3.0, 4.0]]), (-1.0, 0.693147182)),
    ("slogdet_singular", lambda: L.slogdet([[1.0, 2.0], [2.0, 4.0]]), (0.0, -np.inf)),
    ("logdet", lambda: L.logdet(S), 2.079441547),
    ("logdet_not_positive_definite", lambda: L.logdet([[1.0, 2.0], [3.0, 4.0]]), np.nan),
    ("inv", lambda: L.inv(A), [[0.3, -0.1], [-0.2, 0.4]]),
    ("inv_float64", lambda: L.inv(A.astype(np.float64)), np.array([[0.3, -0.1], [-0.2, 0.4]])),
    ("pinv", lambda: L.pinv(M), [[-0.94444519, 0.44444475], [-0.11111114, 0.11111112], [0.72222263, -0.22222239]]),
    ("pinv_singular", lambda: L.pinv([[1.0, 2.0], [2.0, 4.0]]), [[0.04, 0.08], [0.08, 0.16]]),
    ("pinv_rcond", lambda: L.pinv([[1.0, 0.0], [0.0, 1e-3]], rcond=1e-2), [[1.0, 0.0], [0.0, 0.0]]),
    ("solve", lambda: L.solve(A, [[1.0], [2.0]]), [[0.1], [0.6]]),
    ("solve_adjoint", lambda: L.solve(A, [[1.0], [2.0]], adjoint=True), [[-0.1], [0.7]]),
    # TF reads the lower triangle only (A's upper 1 is ignored) unless lower=False.
    ("triangular_solve", lambda: L.triangular_solve(A, [[1.0], [2.0]]), [[0.25], [0.5]]),
    ("triangular_solve_upper", lambda: L.triangular_solve(A, [[1.0], [2.0]], lower=False), [[1 / 12], [2 / 3]]),
    ("triangular_solve_adjoint", lambda: L.triangular_solve(A, [[1.0], [2.0]], adjoint=True), [[-1 / 12], [2 / 3]]),
    ("triangular_solve_broadcast", lambda: L.triangular_solve(np.stack([A, S]), [[1.0], [2.0]]),
     [[[0.25], [0.5]], [[0.25], [0.5]]]),
    ("triangular_solve_singular", lambda: L.triangular_solve([[0.0, 0.0], [1.0, 1.0]], [[1.0], [2.0]]),
     [[np.inf], [-np.inf]]),
    ("cholesky", lambda: L.cholesky(S), [[2.0, 0.0], [1.0, 1.41421354]]),
    ("cholesky_lower_triangle", lambda: L.cholesky([[4.0, 100.0], [2.0, 3.0]]), [[2.0, 0.0], [1.0, 1.41421354]]),
    ("cholesky_solve", lambda: L.cholesky_solve(L.cholesky(S), [[1.0], [2.0]]), [[-0.125], [0.75]]),
    ("matvec", lambda: L.matvec(M, [1.0, 1.0, 1.0]), [6.0, 15.0]),
    ("matvec_transpose_a", lambda: L.matvec(M, [1.0, 1.0], transpose_a=True), [5.0, 7.0, 9.0]),
    ("eye", lambda: L.eye(2), np.eye(2, dtype=np.float32)),
    ("eye_batch", lambda: L.eye(2, num_columns=3, batch_shape=[2], dtype=tf.int32),
     np.array([[[1, 0, 0], [0, 1, 0]]] * 2, np.int32)),
    ("eye_float64", lambda: tf.eye(2, dtype=tf.float64), np.eye(2)),
    ("matrix_transpose", lambda: L.matrix_transpose(BATCH), [[[0, 2], [1, 3]], [[4, 6], [5, 7]]]),
    ("matrix_transpose_conjugate", lambda: L.matrix_transpose(C, conjugate=True),
     np.array([[1 - 2j, 1], [-3j, 2 + 1j]], np.complex64)),
    ("adjoint", lambda: L.adjoint(C), np.array([[1 - 2j, 1], [-3j, 2 + 1j]], np.complex64)),
    ("adjoint_real", lambda: L.adjoint(M), M.T),
    ("cross", lambda: L.cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]), [0.0, 0.0, 1.0]),
    ("cross_batch", lambda: L.cross([[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]]), [[-3.0, 6.0, -3.0]]),
    ("cross_int", lambda: L.cross(np.array([1, 0, 0], np.int32), np.array([0, 1, 0], np.int32)),
     np.array([0, 0, 1], np.int32)),
    ("lstsq", lambda: L.lstsq(M.T, [[1.0], [2.0], [4.0]]), [[1.72222], [-0.222222]]),
    ("lstsq_l2_regularizer", lambda: L.lstsq(M.T, [[1.0], [2.0], [4.0]], l2_regularizer=0.5),
     [[1.01754177], [0.07017631]]),
    ("lstsq_underdetermined", lambda: L.lstsq(M, [[1.0], [2.0]]), [[-0.0555554], [0.1111112], [0.2777777]]),
    ("lstsq_not_fast", lambda: L.lstsq(M.T, [[1.0], [2.0], [4.0]], fast=False), [[1.72222197], [-0.22222213]]),
    ("expm", lambda: L.expm([[0.0, 1.0], [-1.0, 0.0]]), [[0.54030228, 0.84147096], [-0.84147108, 0.54030234]]),
    ("expm_batch", lambda: L.expm(np.stack([np.zeros((2, 2)), np.eye(2)]).astype(np.float32)),
     [np.eye(2), np.e * np.eye(2)]),
]


@pytest.mark.parametrize("call, expected", [case[1:] for case in OBSERVED], ids=[case[0] for case in OBSERVED])
def test_linalg_gives_tfs_values(call, expected):
    got = call()
    expected_parts = expected if isinstance(expected, tuple) else (expected,)
    got_parts = got if isinstance(got, tuple) else (got,)
    assert len(got_parts) == len(expected_parts)
    for value, want in zip(got_parts, expected_parts):
        dtype = want.dtype if isinstance(want, (np.ndarray, np.generic)) else np.float32  # lists: float32
        want = np.asarray(want)
        assert isinstance(value, (np.ndarray, np.generic)), type(value)  # host inputs give numpy results
        assert value.dtype == dtype
        assert value.shape == want.shape
        np.testing.assert_allclose(value, want, rtol=2e-5, atol=2e-6)


def test_float_results_keep_float64():
    # TF 2.21: tf.linalg.inv of a float64 matrix is float64 (JAX computes on the host with 64-bit types on).
    assert L.inv(A.astype(np.float64)).dtype == np.float64 and L.svd(M.astype(np.float64))[0].dtype == np.float64


# (id, call, TF 2.21's error type, a fragment of jdist's message)
ERRORS = [
    ("norm_fro_of_vector", lambda: tf.norm(M, ord="fro"), ValueError, "supported vector norm"),
    ("norm_ord0", lambda: tf.norm(M, ord=0), ValueError, "supported vector norm"),
    ("norm_ord-1", lambda: tf.norm(M, ord=-1, axis=1), ValueError, "supported vector norm"),
    ("norm_three_axes", lambda: tf.norm(M, axis=[0, 1, 2]), ValueError, "tuple of 2 unique integers"),
    ("norm_int", lambda: tf.norm(np.array([3, 4], np.int32)), tf.errors.InvalidArgumentError, "cast first"),
    ("matmul_vectors", lambda: L.matmul([1.0, 2.0], [3.0, 4.0]), tf.errors.InvalidArgumentError, "ndims must be >= 2"),
    # two tensors of different dtypes (TF 2.21 casts a numpy operand: matmul(np float64, np float32) is float64)
    ("matmul_mixed_dtypes", lambda: L.matmul(tf.constant(np.ones((1, 1))), tf.constant(np.ones((1, 1), np.float32))),
     tf.errors.InvalidArgumentError, "one dtype"),
    ("matmul_transpose_and_adjoint", lambda: L.matmul(C, C, transpose_a=True, adjoint_a=True), ValueError,
     "Only one of `transpose_a` and `adjoint_a`"),
    ("matmul_sparse", lambda: L.matmul(tf.SparseTensor([[0, 0]], [1.0], [2, 2]), A), TypeError,
     "sparse_dense_matmul"),
    ("l2_normalize_int", lambda: L.l2_normalize(np.array([3, 4], np.int32)), TypeError, "float"),
    ("global_norm_not_a_list", lambda: L.global_norm(np.array([3.0, 4.0])), TypeError, "sequence of tensors"),
    ("det_int", lambda: L.det(np.array([[1, 2], [3, 4]], np.int32)), tf.errors.InvalidArgumentError, "cast first"),
    ("det_not_square", lambda: L.det(M), tf.errors.InvalidArgumentError, "must be square"),
    ("inv_singular", lambda: L.inv([[1.0, 2.0], [2.0, 4.0]]), tf.errors.InvalidArgumentError, "not invertible"),
    ("inv_not_square", lambda: L.inv(M), tf.errors.InvalidArgumentError, "must be square"),
    ("solve_singular", lambda: L.solve([[1.0, 2.0], [2.0, 4.0]], [[1.0], [2.0]]), tf.errors.InvalidArgumentError,
     "not invertible"),
    ("solve_vector_rhs", lambda: L.solve(A, [1.0, 2.0]), tf.errors.InvalidArgumentError, "rank >= 2"),
    ("solve_incompatible", lambda: L.solve(A, [[1.0], [2.0], [3.0]]), tf.errors.InvalidArgumentError, "incompatible"),
    ("lstsq_vector_rhs", lambda: L.lstsq(M, [1.0, 2.0]), tf.errors.InvalidArgumentError, "rank >= 2"),
    ("cholesky_not_square", lambda: L.cholesky(M), tf.errors.InvalidArgumentError, "must be square"),
    ("expm_not_square", lambda: L.expm(M), tf.errors.InvalidArgumentError, "must be square"),
    ("matrix_transpose_vector", lambda: L.matrix_transpose([1.0, 2.0]), ValueError, "rank >= 2"),
    ("cross_two_elements", lambda: L.cross([1.0, 2.0], [3.0, 4.0]), tf.errors.OpError, "3-element vectors"),
    ("set_diag_wrong_length", lambda: L.set_diag(M, [9.0, 8.0, 7.0]), tf.errors.InvalidArgumentError,
     "diagonal's shape"),
    ("diag_inconsistent_shape", lambda: L.diag([1.0, 2.0], k=-1, num_rows=4, num_cols=3),
     tf.errors.InvalidArgumentError, "not consistent"),
    ("linear_operator", lambda: L.LinearOperatorDiag, AttributeError, "LinearOperator classes.*tf.linalg.diag"),
    ("not_provided", lambda: L.sqrtm, AttributeError, "docs/tf_mapping.md"),
]


@pytest.mark.parametrize("call, error, message", [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS])
def test_linalg_rejects_what_tf_rejects(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_tf_aliases_are_tfs():
    # TF 2.21: tf.linalg.matmul is tf.matmul, and einsum, tensordot, eye, norm are tf.linalg's at the top level;
    # l2_normalize is tf.math's and tf.nn's.
    assert L.matmul is tf.matmul and L.einsum is tf.einsum and L.tensordot is tf.tensordot
    assert L.eye is tf.eye and L.norm is tf.norm
    assert L.l2_normalize is tf.math.l2_normalize is tf.nn.l2_normalize


SIX = np.array([[4.0, 2.0, 0.5], [2.0, 3.0, 0.25], [0.5, 0.25, 2.0]], np.float32)
RHS = np.array([[1.0, 0.0], [2.0, 1.0], [0.5, -1.0]], np.float32)
# (id, function of a matrix and a right-hand side): run inside strategy.run, and on the host.
IN_RUN = [
    ("svd", lambda x, b: L.svd(x)),
    ("qr", lambda x, b: L.qr(x)),
    ("eigh", lambda x, b: L.eigh(x)),
    ("cholesky_solve", lambda x, b: L.cholesky_solve(L.cholesky(x), b)),
    ("solve", lambda x, b: L.solve(x, b, adjoint=True)),
    ("triangular_solve", lambda x, b: L.triangular_solve(x, b, lower=False)),
    ("inv_det_logdet", lambda x, b: (L.inv(x), L.det(x), L.logdet(x), L.slogdet(x))),
    ("pinv_lstsq", lambda x, b: (L.pinv(x), L.lstsq(x, b, l2_regularizer=0.1))),
    ("expm", lambda x, b: L.expm(x / 4)),
    ("products", lambda x, b: (tf.matmul(x, b, transpose_a=True), L.matvec(x, b[:, 0]), tf.einsum("ij,jk->ik", x, b),
                               tf.tensordot(x, b, 1), L.trace(x), L.cross(x, b[:, 0]))),
    ("structure", lambda x, b: (L.band_part(x, 0, -1), L.diag(L.diag_part(x)), L.set_diag(x, b[:, 0]),
                                L.diag_part(x, k=(-1, 1)), L.adjoint(x))),
    ("norms", lambda x, b: (tf.norm(x), tf.norm(x, ord=2, axis=[0, 1]), L.l2_normalize(b, axis=0),
                            L.global_norm([x, b]), L.normalize(b, axis=0))),
]


@pytest.mark.parametrize("fn", [case[1] for case in IN_RUN], ids=[case[0] for case in IN_RUN])
def test_linalg_inside_strategy_run_equals_host(fn):
    strategy = tf.distribute.MirroredStrategy()
    expected = fn(SIX, RHS)
    result = strategy.run(fn, args=(jnp.asarray(SIX), jnp.asarray(RHS)))
    for replica in strategy.experimental_local_results(result):
        for got, want in zip(jax.tree.leaves(replica), jax.tree.leaves(expected), strict=True):
            np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)


def test_singular_inside_compiled_code_gives_non_finite_values():
    # Compiled code cannot raise on values: a singular matrix gives inf/NaN there (the host raises, as TF does).
    out = jax.jit(L.inv)(jnp.asarray([[1.0, 2.0], [2.0, 4.0]]))
    assert not np.isfinite(np.asarray(out)).all()


def test_numpy_constants_inside_compiled_code():
    # Host values inside a traced function (tf.eye is numpy) stay part of the traced computation.
    step = jax.jit(lambda x: x @ L.inv(tf.eye(2) * 2.0) + L.det(np.float32([[2.0, 0.0], [0.0, 2.0]])))
    np.testing.assert_allclose(step(jnp.ones((2, 2))), np.full((2, 2), 4.5))
    assert tf.tensordot(M, M.T, np.int64(1)).numpy().tolist() == [[14, 32], [32, 77]]  # axes as a numpy int


W = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
# (id, scalar function of a matrix, input, TF 2.21's gradient): printed by tf.GradientTape, e.g.
# `with tf.GradientTape() as t: t.watch(x); y = tf.reduce_sum(W * tf.linalg.cholesky(x))` then t.gradient(y, x).
# TF's cholesky gradient is symmetric; eigh's lands on the lower triangle it reads.
GRADIENTS = [
    ("cholesky", lambda x: jnp.sum(W * L.cholesky(x)), S, [[0.22855341, 0.04289323], [0.04289323, 1.41421342]]),
    ("cholesky_lower_triangle", lambda x: jnp.sum(W * L.cholesky(x)), A,
     [[0.22855341, 0.04289323], [0.04289323, 1.41421342]]),
    ("eigh", lambda x: jnp.sum(W[0] * L.eigh(x)[0]), A, [[1.62126780, 0.0], [0.97014242, 1.37873209]]),
    ("eigvalsh", lambda x: jnp.sum(W[0] * L.eigvalsh(x)), A, [[1.62126780, 0.0], [0.97014242, 1.37873209]]),
    ("logdet", lambda x: L.logdet(x), A, [[0.375, -0.25], [-0.25, 0.5]]),
    ("triangular_solve", lambda x: jnp.sum(W * L.triangular_solve(x, jnp.ones((2, 2)))), A,
     [[0.10416667, 0.0], [-0.58333337, -0.38888890]]),
    ("det", lambda x: L.det(x), A, [[3.0, -2.0], [-1.0, 4.0]]),
    ("l2_normalize_of_zeros", lambda x: jnp.sum(W * L.l2_normalize(x - x)), A, [[0.0, 0.0], [0.0, 0.0]]),
]


@pytest.mark.parametrize("fn, x, expected", [case[1:] for case in GRADIENTS], ids=[case[0] for case in GRADIENTS])
def test_gradients_are_tfs(fn, x, expected):
    np.testing.assert_allclose(jax.grad(fn)(jnp.asarray(x)), expected, rtol=2e-5, atol=2e-6)
