"""`tf.linalg`'s products, constructions and norms (`matmul`, `einsum`, `diag`, `band_part`, `norm`, ...).

As `jdist.tf_compat.ops`: numpy on the host, `jax.numpy` inside compiled code, with TF 2.21's semantics
(observed): `matmul` takes (batch) matrices only, rank 2 or more, and no mixed dtypes; `norm` is the
euclidean norm of the flattened tensor by default and takes float inputs only; `l2_normalize` divides by
`sqrt(max(sum(x**2), epsilon))`; `band_part` keeps a whole half for a negative bound; `diag_part` of a band
`k=(lo, hi)` stacks the diagonals from `hi` down, right-aligning superdiagonals and left-aligning subdiagonals.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat import numpy_operands
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, xp
from jdist.tfdata import tensor_numpy
from jdist.typing import Axis, Tensor, TensorLike


def invalid(message: str) -> InvalidArgumentError:
    """TF's error type for a bad tensor argument (also a ValueError)."""
    return InvalidArgumentError(None, None, message)


def require_float(x: Any, op: str) -> None:
    """TF's linear algebra kernels take float and complex tensors only; ints are an error, not a cast."""
    if np.dtype(x.dtype).kind not in "fc" and str(x.dtype) != "bfloat16":
        raise invalid(f"tf.linalg.{op} takes float or complex tensors, got {x.dtype}; "
                      f"cast first, e.g. tf.cast(x, tf.float32)")


def require_matrix(x: Any, op: str, square: bool = False) -> None:
    if x.ndim < 2:
        raise invalid(f"tf.linalg.{op} takes a (batch of) matrices, rank >= 2; got shape {tuple(x.shape)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise invalid(f"tf.linalg.{op}: Input matrix must be square; got shape {tuple(x.shape)}")


def matrix_transpose(a: TensorLike, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """`tf.linalg.matrix_transpose`: swaps the last two axes (rank >= 2), conjugating if asked."""
    x = convert_to_tensor(a)
    require_matrix(x, "matrix_transpose")
    out = xp(x).swapaxes(x, -1, -2)
    return xp(x).conj(out) if conjugate else out


def adjoint(matrix: TensorLike, name: str | None = None) -> Tensor:
    """`tf.linalg.adjoint`: the conjugate transpose of the last two axes."""
    return matrix_transpose(matrix, conjugate=True)


def matmul(a: TensorLike, b: TensorLike, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           output_type: DTypeLike | None = None, grad_a: bool = False, grad_b: bool = False,
           name: str | None = None) -> Tensor:
    """`tf.linalg.matmul` (`tf.matmul`): batch matrix products; `*_is_sparse` are hints, as in TF's dense kernel."""
    for arg in (a, b):
        if type(arg).__name__ == "SparseTensor":
            raise TypeError("tf.linalg.matmul takes dense tensors; for a tf.SparseTensor use "
                            "tf.sparse.sparse_dense_matmul(sp, dense)")
    # a numpy operand takes the other's dtype, as in TF
    pair = numpy_operands.matched(a, b, "matmul", convert_to_tensor)
    x, y = pair if pair is not None else (convert_to_tensor(a), convert_to_tensor(b))
    for transpose, adjoint_, side in ((transpose_a, adjoint_a, "a"), (transpose_b, adjoint_b, "b")):
        if transpose and adjoint_:
            raise ValueError(f"Only one of `transpose_{side}` and `adjoint_{side}` can be True.")
    tensor_numpy.check_matmul(x, y, name)  # TF's text for a vector (observed, TF 2.21)
    if output_type is None and x.dtype != y.dtype:
        raise invalid(f"tf.linalg.matmul: both inputs must have one dtype, got {x.dtype} and {y.dtype}; "
                      "cast one with tf.cast")
    module = xp(x, y)
    given = (np.shape(x), np.shape(y))  # TF's message names the inputs as given
    if transpose_a or adjoint_a:
        x = matrix_transpose(x, conjugate=adjoint_a)
    if transpose_b or adjoint_b:
        y = matrix_transpose(y, conjugate=adjoint_b)
    if tuple(np.shape(x))[-1] != tuple(np.shape(y))[-2]:  # TF's message (observed, TF 2.21)
        a_text, b_text = (",".join(str(d) for d in shape) for shape in given)
        raise invalid(f"Matrix size-incompatible: In[0]: [{a_text}], In[1]: [{b_text}] [Op:MatMul]")
    target = numpy_dtype(output_type)
    if target is not None:
        return module.matmul(x.astype(target), y.astype(target))
    return module.matmul(x, y)


def matvec(a: TensorLike, b: TensorLike, transpose_a: bool = False, adjoint_a: bool = False,
           a_is_sparse: bool = False, b_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """`tf.linalg.matvec`: `a @ b[..., None]` without the trailing axis."""
    vector = convert_to_tensor(b)
    product = matmul(a, xp(vector).expand_dims(vector, -1), transpose_a=transpose_a, adjoint_a=adjoint_a)
    return xp(product).squeeze(product, -1)


def einsum(equation: str, *inputs: TensorLike, **kwargs: Any) -> Tensor:
    """`tf.einsum` / `tf.linalg.einsum`."""
    kwargs.pop("name", None)
    arrays = [convert_to_tensor(v) for v in inputs]
    return xp(*arrays).einsum(equation, *arrays, **kwargs)


def tensordot(a: TensorLike, b: TensorLike, axes: int | Sequence[Any], name: str | None = None) -> Tensor:
    """`tf.tensordot` / `tf.linalg.tensordot`: `axes` an int (last of a with first of b) or two axis lists."""
    x, y = convert_to_tensor(a), convert_to_tensor(b)
    pairs: Any = int(np.asarray(axes)) if np.ndim(axes) == 0 else \
        tuple(np.atleast_1d(np.asarray(side)).tolist() for side in np.asarray(axes, dtype=object))
    return xp(x, y).tensordot(x, y, pairs)


def trace(x: TensorLike, name: str | None = None) -> Tensor:
    """`tf.linalg.trace`: the sum of the main diagonal of each matrix in the batch (ints keep their dtype)."""
    t = convert_to_tensor(x)
    require_matrix(t, "trace")
    return xp(t).trace(t, axis1=-2, axis2=-1).astype(t.dtype)


def eye(num_rows: int, num_columns: int | None = None, batch_shape: Sequence[int] | None = None,
        dtype: DTypeLike = "float32", name: str | None = None) -> np.ndarray:
    """`tf.eye` / `tf.linalg.eye`: an identity matrix, repeated over `batch_shape`; on the host."""
    matrix = np.eye(int(num_rows), None if num_columns is None else int(num_columns), dtype=numpy_dtype(dtype))
    if batch_shape is None:
        return matrix
    return np.broadcast_to(matrix, (*[int(s) for s in batch_shape], *matrix.shape)).copy()


def _offset(k: Any, op: str) -> int:
    k = np.asarray(k)
    if k.size != 1:
        raise ValueError(f"jdist's tf.linalg.{op} takes one diagonal (an int k), got k={k.tolist()}; "
                         "call it once per diagonal")
    return int(k.reshape(()))


def diag(diagonal: TensorLike, name: str = "diag", k: int = 0, num_rows: int = -1, num_cols: int = -1,
         padding_value: TensorLike = 0, align: str = "RIGHT_LEFT") -> Tensor:
    """`tf.linalg.diag`: a batch of matrices with `diagonal`'s last axis on their k-th diagonal."""
    d = convert_to_tensor(diagonal)
    module = xp(d)
    k = _offset(k, "diag")
    length = d.shape[-1]
    # TF 2.21 (observed): square, length + |k|, when neither size is given; else the missing one is the least
    # that holds the diagonal (diag([1, 2], num_rows=3) is 3x2).
    if num_rows == -1 and num_cols == -1:
        rows = cols = length + abs(k)
    else:
        rows = length + max(-k, 0) if num_rows == -1 else int(num_rows)
        cols = length + max(k, 0) if num_cols == -1 else int(num_cols)
    if min(rows + min(k, 0), cols - max(k, 0)) != length:
        raise invalid(f"tf.linalg.diag: The number of rows or columns ({rows}, {cols}) is not consistent with "
                      f"k={k} and a diagonal of length {length}")
    r = np.arange(length) + max(-k, 0)
    c = np.arange(length) + max(k, 0)
    out = module.full((*d.shape[:-1], rows, cols), padding_value, dtype=d.dtype)
    if module is np:
        out[..., r, c] = d
        return out
    return out.at[..., r, c].set(d)  # pyright: ignore[reportAttributeAccessIssue]


def _diagonal(x: Any, k: int) -> Any:
    return xp(x).diagonal(x, offset=k, axis1=-2, axis2=-1)


def diag_part(input: TensorLike, name: str = "diag_part", k: int | Sequence[int] = 0,  # noqa: A002
              padding_value: TensorLike = 0, align: str = "RIGHT_LEFT") -> Tensor:
    """`tf.linalg.diag_part`: the k-th diagonal of each matrix; for `k=(lo, hi)`, diagonals `hi` down to `lo`
    stacked, padded to the longest (superdiagonals aligned right, subdiagonals left: TF's RIGHT_LEFT)."""
    x = convert_to_tensor(input)
    require_matrix(x, "diag_part")
    bounds = np.asarray(k).reshape(-1).tolist()
    if len(bounds) == 1:
        return _diagonal(x, int(bounds[0]))
    if align != "RIGHT_LEFT":
        raise ValueError(f"jdist's tf.linalg.diag_part takes align='RIGHT_LEFT' (TF's default), got {align!r}")
    module = xp(x)
    lo, hi = (int(b) for b in bounds)
    diagonals = [_diagonal(x, j) for j in range(hi, lo - 1, -1)]
    longest = max(d.shape[-1] for d in diagonals)
    rows = []
    for j, d in zip(range(hi, lo - 1, -1), diagonals):
        pad = longest - d.shape[-1]
        widths = [(0, 0)] * (d.ndim - 1) + [(pad, 0) if j > 0 else (0, pad)]
        rows.append(module.pad(d, widths, constant_values=padding_value))
    return module.stack(rows, axis=-2)


def set_diag(input: TensorLike, diagonal: TensorLike, name: str = "set_diag", k: int = 0,  # noqa: A002
             align: str = "RIGHT_LEFT") -> Tensor:
    """`tf.linalg.set_diag`: `input` with its k-th diagonal replaced by `diagonal`."""
    x, d = convert_to_tensor(input), convert_to_tensor(diagonal)
    require_matrix(x, "set_diag")
    k = _offset(k, "set_diag")
    length = _diagonal(x, k).shape[-1]
    if tuple(d.shape) != (*x.shape[:-2], length):
        raise invalid(f"tf.linalg.set_diag: the diagonal's shape must be {(*x.shape[:-2], length)} for input "
                      f"shape {tuple(x.shape)} and k={k}, got {tuple(d.shape)}")
    r = np.arange(length) + max(-k, 0)
    c = np.arange(length) + max(k, 0)
    if xp(x, d) is np:
        out = np.array(x, copy=True)
        out[..., r, c] = d
        return out
    return xp(x).asarray(x).at[..., r, c].set(d)


def band_part(input: TensorLike, num_lower: int, num_upper: int, name: str | None = None) -> Tensor:  # noqa: A002
    """`tf.linalg.band_part`: keeps `num_lower` subdiagonals and `num_upper` superdiagonals (-1: all of them)."""
    x = convert_to_tensor(input)
    require_matrix(x, "band_part")
    rows, cols = np.arange(x.shape[-2])[:, None], np.arange(x.shape[-1])[None, :]
    keep = np.ones((x.shape[-2], x.shape[-1]), bool)
    if int(num_lower) >= 0:
        keep &= rows - cols <= int(num_lower)
    if int(num_upper) >= 0:
        keep &= cols - rows <= int(num_upper)
    return xp(x).where(keep, x, xp(x).zeros_like(x))


def cross(a: TensorLike, b: TensorLike, name: str | None = None) -> Tensor:
    """`tf.linalg.cross`: the cross product of 3-element vectors along the last axis."""
    x, y = convert_to_tensor(a), convert_to_tensor(b)
    if x.shape[-1:] != (3,) or y.shape[-1:] != (3,):
        raise InvalidArgumentError(None, None, "tf.linalg.cross: Cross-products are only defined for 3-element "
                                   f"vectors; got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    return xp(x, y).cross(x, y).astype(x.dtype)


_VECTOR_ORDS = ("euclidean", 1, 2, np.inf)
_MATRIX_ORDS = ("euclidean", "fro", 1, 2, np.inf)


def _norm_axes(axis: Axis) -> tuple[int, ...] | None:
    if axis is None:
        return None
    axes = (int(axis),) if isinstance(axis, (int, np.integer)) else tuple(int(a) for a in axis)
    if len(axes) > 2 or len(set(axes)) != len(axes):
        raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got {axis}")
    return axes


def norm(tensor: TensorLike, ord: Any = "euclidean", axis: Axis = None, keepdims: bool | None = None,  # noqa: A002
         name: str | None = None, keep_dims: bool | None = None) -> Tensor:
    """`tf.norm` / `tf.linalg.norm`: a vector norm of the flattened tensor (axis None) or along one axis, or a
    matrix norm over two axes ('fro'/'euclidean', 1, 2, inf)."""
    x = convert_to_tensor(tensor)
    require_float(x, "norm")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    axes = _norm_axes(axis)
    module = xp(x)
    if axes is not None and len(axes) == 2:
        if ord not in _MATRIX_ORDS:
            raise ValueError(f"'ord' must be a supported matrix norm in {list(_MATRIX_ORDS)}, got {ord}")
        numpy_ord = "fro" if ord == "euclidean" else ord
        return module.linalg.norm(x, ord=numpy_ord, axis=axes, keepdims=keep)
    is_p = isinstance(ord, (int, float, np.number)) and not isinstance(ord, bool) and ord > 0
    if ord not in _VECTOR_ORDS and not is_p:
        raise ValueError(f"'ord' must be a supported vector norm ('euclidean', inf, or a number > 0), got {ord}")
    p = 2 if ord == "euclidean" else ord
    flat = x if axes is not None else module.reshape(x, (-1,))
    out = module.linalg.norm(flat, ord=p, axis=axes[0] if axes else 0)
    if keep:
        out = module.reshape(out, tuple(1 if axes is None or i in [a % x.ndim for a in axes] else n
                                        for i, n in enumerate(x.shape)))
    return out


def normalize(tensor: TensorLike, ord: Any = "euclidean", axis: Axis = None,  # noqa: A002
              name: str | None = None) -> tuple[Tensor, Tensor]:
    """`tf.linalg.normalize`: `(tensor / norm, norm)`, the norm with its reduced axes kept."""
    x = convert_to_tensor(tensor)
    size = norm(x, ord=ord, axis=axis, keepdims=True)
    return x / size, size  # pyright: ignore[reportOperatorIssue]


def l2_normalize(x: TensorLike, axis: Axis = None, epsilon: float = 1e-12, name: str | None = None,
                 dim: Axis = None) -> Tensor:
    """`tf.math.l2_normalize` / `tf.nn.l2_normalize`: `x / sqrt(max(sum(x**2, axis), epsilon))` (so small
    vectors are scaled by 1/sqrt(epsilon), not blown up); axis None (or `dim`, TF's old name) is all axes."""
    t = convert_to_tensor(x)
    if np.dtype(t.dtype).kind not in "fc" and str(t.dtype) != "bfloat16":
        raise TypeError(f"tf.math.l2_normalize takes float tensors, got {t.dtype}; cast first, e.g. tf.cast(x, "
                        "tf.float32)")
    axis = dim if axis is None else axis
    module = xp(t)
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    squares = module.sum(module.real(t * module.conj(t)), axis=axes, keepdims=True)
    return t / module.sqrt(module.maximum(squares, module.asarray(epsilon, dtype=squares.dtype))).astype(t.dtype)


def global_norm(t_list: Sequence[TensorLike | None], name: str | None = None) -> Tensor:
    """`tf.linalg.global_norm`: `sqrt(sum of every tensor's squared L2 norm)`; None entries are skipped."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.")
    tensors = [convert_to_tensor(t) for t in t_list if t is not None]
    if not tensors:
        return np.float32(0.0)
    module = xp(*tensors)
    total = sum(module.sum(module.square(module.abs(t))) for t in tensors)
    return module.sqrt(total).astype(tensors[0].dtype if np.dtype(tensors[0].dtype).kind == "f" else np.float32)


def tensor_diag(diagonal: TensorLike, name: str | None = None) -> Tensor:
    """The rank-2k tensor with `diagonal` (rank k) on its diagonal: `out[i, j, i, j] = diagonal[i, j]`."""
    x = convert_to_tensor(diagonal)
    module = xp(x)
    return module.reshape(module.diagflat(x), tuple(x.shape) + tuple(x.shape))


NAMES = dict(
    tensor_diag=tensor_diag,
    matmul=matmul, matvec=matvec, einsum=einsum, tensordot=tensordot, trace=trace, eye=eye, diag=diag,
    diag_part=diag_part, set_diag=set_diag, band_part=band_part, matrix_transpose=matrix_transpose,
    adjoint=adjoint, cross=cross, norm=norm, normalize=normalize, l2_normalize=l2_normalize,
    global_norm=global_norm,
)
