"""`tf.linalg`'s decompositions and solvers (`svd`, `qr`, `eigh`, `cholesky`, `solve`, `lstsq`, `expm`, ...).

Each computes with `jax.numpy` / `jax.lax.linalg`, so the host and compiled code give the same numbers; on
the host (numpy or Python inputs) it runs with 64-bit types enabled and returns numpy, so float64 stays
float64 as in TF. TF 2.21's semantics, observed: `svd` returns `(s, u, v)` with `v` not transposed and
`full_matrices=False`; `qr` is reduced; `eigh` (ascending eigenvalues), `cholesky` and `triangular_solve`
read one triangle only (the lower, unless `lower=False`); `cholesky` of a matrix that is not positive definite
gives NaNs, not an error, and its gradient is symmetric (eigh's lands on the lower triangle), as TF's; `inv`
and `solve` of a singular matrix are an error on the host (compiled code cannot raise on values: there they
give inf/NaN, as LAPACK does). Host values inside a traced function stay traced.
"""
from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.linalg_ops import invalid, matrix_transpose, require_float, require_matrix
from jdist.tf_compat.ops import convert_to_tensor, is_jax
from jdist.typing import Tensor, TensorLike

F = TypeVar("F", bound=Callable[..., Any])


def _host_numpy(fn: F) -> F:
    """Runs `fn` as is on JAX inputs or while JAX traces (numpy constants inside `jax.jit` / `strategy.run`);
    on host inputs outside a trace with 64-bit types, returning numpy arrays."""

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        if is_jax(args, kwargs) or _tracing():
            return fn(*args, **kwargs)
        with jax.enable_x64(True):
            return jax.tree.map(np.asarray, fn(*args, **kwargs))

    return op  # pyright: ignore[reportReturnType]


def _tracing() -> bool:
    """Whether JAX is tracing here (a new value is a tracer), so results must stay JAX values."""
    return isinstance(jnp.zeros(()), jax.core.Tracer)  # pyright: ignore[reportAttributeAccessIssue]


def _matrix(x: TensorLike, op: str, square: bool = True) -> jax.Array:
    t = convert_to_tensor(x)
    require_float(t, op)
    require_matrix(t, op, square=square)
    return jnp.asarray(t)


def _check_finite(out: Any, matrix: Any, op: str, message: str) -> None:
    """On the host, TF's error for a singular input (the result is not finite where the input was)."""
    if isinstance(out, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        return
    if np.isfinite(np.asarray(matrix)).all() and not np.isfinite(np.asarray(out)).all():
        raise invalid(f"tf.linalg.{op}: {message}")


@_host_numpy
def svd(tensor: TensorLike, full_matrices: bool = False, compute_uv: bool = True,
        name: str | None = None) -> Any:
    """`tf.linalg.svd`: `(s, u, v)` with `tensor = u @ diag(s) @ adjoint(v)` (v, not v's adjoint); `s` alone
    with `compute_uv=False`."""
    x = _matrix(tensor, "svd", square=False)
    if not compute_uv:
        return jnp.linalg.svd(x, compute_uv=False)
    u, s, vh = jnp.linalg.svd(x, full_matrices=full_matrices)
    return s, u, matrix_transpose(vh, conjugate=True)


Qr = collections.namedtuple("Qr", ["q", "r"])  # TF's result type (`tf.linalg.qr(x).q`)


@_host_numpy
def qr(input: TensorLike, full_matrices: bool = False, name: str | None = None) -> Any:  # noqa: A002
    """`tf.linalg.qr`: `Qr(q, r)`, reduced unless `full_matrices`."""
    x = _matrix(input, "qr", square=False)
    q, r = jnp.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return Qr(q, r)


def _from_lower(x: jax.Array) -> jax.Array:
    """The Hermitian matrix that `x`'s lower triangle defines (what TF's eigh and cholesky read)."""
    strict = jnp.tril(x, -1)
    return jnp.tril(x) + jnp.conj(jnp.swapaxes(strict, -1, -2))


def _cholesky(x: jax.Array) -> jax.Array:
    """TF's cholesky: the value from the lower triangle, the gradient symmetric, `(g + adjoint(g)) / 2` (TF 2.21's
    gradient, observed)."""
    hermitian = (x + jnp.conj(jnp.swapaxes(x, -1, -2))) / 2
    return jax.lax.linalg.cholesky(hermitian + jax.lax.stop_gradient(_from_lower(x) - hermitian),
                                   symmetrize_input=False)


@_host_numpy
def eigh(tensor: TensorLike, name: str | None = None) -> Any:
    """`tf.linalg.eigh`: `(e, v)`, eigenvalues ascending, of the matrix the lower triangle defines (each
    eigenvector's sign is the solver's choice, and may differ from TF's)."""
    x = _matrix(tensor, "eigh")
    # Through _from_lower the gradient lands on the lower triangle, as TF 2.21's does (observed).
    v, e = jax.lax.linalg.eigh(_from_lower(x), lower=True, symmetrize_input=False, sort_eigenvalues=True)
    return e, v


def eigvalsh(tensor: TensorLike, name: str | None = None) -> Tensor:
    """`tf.linalg.eigvalsh`: the eigenvalues of `eigh`, ascending."""
    return eigh(tensor)[0]


@_host_numpy
def cholesky(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    """`tf.linalg.cholesky`: lower `L` with `L @ adjoint(L) = input`, from the lower triangle; NaN if the
    matrix is not positive definite (TF 2.21 on CPU too)."""
    return _cholesky(_matrix(input, "cholesky"))


def _broadcast_batch(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, (*batch, *a.shape[-2:])), jnp.broadcast_to(b, (*batch, *b.shape[-2:]))


def _rhs(rhs: TensorLike, matrix: jax.Array, op: str) -> jax.Array:
    b = jnp.asarray(convert_to_tensor(rhs))
    if b.ndim < 2:
        raise invalid(f"tf.linalg.{op}: the right-hand side must be a (batch of) matrices, rank >= 2, got shape "
                      f"{tuple(b.shape)}; for one vector pass rhs[:, tf.newaxis]")
    if b.shape[-2] != matrix.shape[-2]:
        raise invalid(f"tf.linalg.{op}: Input matrix and rhs are incompatible: shapes {tuple(matrix.shape)} and "
                      f"{tuple(b.shape)}")
    if b.dtype != matrix.dtype:
        raise invalid(f"tf.linalg.{op}: matrix and rhs must have one dtype, got {matrix.dtype} and {b.dtype}")
    return b


@_host_numpy
def triangular_solve(matrix: TensorLike, rhs: TensorLike, lower: bool = True, adjoint: bool = False,
                     name: str | None = None) -> Tensor:
    """`tf.linalg.triangular_solve`: solves with the lower (default) or upper triangle of `matrix` (the other
    is ignored); batch shapes broadcast; a zero on the diagonal gives inf, not an error."""
    a = _matrix(matrix, "triangular_solve")
    a, b = _broadcast_batch(a, _rhs(rhs, a, "triangular_solve"))
    return jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=adjoint,
                                           conjugate_a=adjoint)


@_host_numpy
def cholesky_solve(chol: TensorLike, rhs: TensorLike, name: str | None = None) -> Tensor:
    """`tf.linalg.cholesky_solve`: solves `A x = rhs` given `chol = cholesky(A)`."""
    low = _matrix(chol, "cholesky_solve")
    low, b = _broadcast_batch(low, _rhs(rhs, low, "cholesky_solve"))
    y = jax.lax.linalg.triangular_solve(low, b, left_side=True, lower=True)
    return jax.lax.linalg.triangular_solve(low, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)


@_host_numpy
def solve(matrix: TensorLike, rhs: TensorLike, adjoint: bool = False, name: str | None = None) -> Tensor:
    """`tf.linalg.solve`: `matrix @ x = rhs` (or `adjoint(matrix) @ x = rhs`); rhs a (batch of) matrices."""
    a = _matrix(matrix, "solve")
    b = _rhs(rhs, a, "solve")
    if a.ndim != b.ndim:
        raise invalid(f"tf.linalg.solve: All input tensors must have the same rank, got {a.ndim} and {b.ndim}")
    out = jnp.linalg.solve(matrix_transpose(a, conjugate=True) if adjoint else a, b)
    _check_finite(out, a, "solve", "Input matrix is not invertible.")
    return out


@_host_numpy
def inv(input: TensorLike, adjoint: bool = False, name: str | None = None) -> Tensor:  # noqa: A002
    """`tf.linalg.inv`: the inverse of each matrix (of its adjoint with `adjoint=True`)."""
    a = _matrix(input, "inv")
    out = jnp.linalg.inv(matrix_transpose(a, conjugate=True) if adjoint else a)
    _check_finite(out, a, "inv", "Input is not invertible.")
    return out


@_host_numpy
def pinv(a: TensorLike, rcond: float | None = None, validate_args: bool = False, name: str | None = None) -> Tensor:
    """`tf.linalg.pinv`: singular values below `rcond * max(s)` count as zero; `rcond` defaults to
    `10 * max(rows, cols) * eps` of the dtype (TF's default)."""
    x = _matrix(a, "pinv", square=False)
    if rcond is None:
        rcond = 10.0 * max(x.shape[-2:]) * float(jnp.finfo(x.dtype).eps)
    return jnp.linalg.pinv(x, rtol=rcond)


@_host_numpy
def det(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    """`tf.linalg.det`: the determinant of each matrix."""
    return jnp.linalg.det(_matrix(input, "det"))


@_host_numpy
def slogdet(input: TensorLike, name: str | None = None) -> Any:  # noqa: A002
    """`tf.linalg.slogdet`: `(sign, log_abs_determinant)`; a singular matrix gives `(0, -inf)`."""
    sign, logabs = jnp.linalg.slogdet(_matrix(input, "slogdet"))
    return sign, logabs


@_host_numpy
def logdet(matrix: TensorLike, name: str | None = None) -> Tensor:
    """`tf.linalg.logdet`: the log determinant of a Hermitian positive definite matrix, through its Cholesky
    factor (NaN if it is not positive definite, as in TF)."""
    low = _cholesky(_matrix(matrix, "logdet"))
    return 2.0 * jnp.sum(jnp.log(jnp.real(jnp.diagonal(low, axis1=-2, axis2=-1))), axis=-1)


@_host_numpy
def lstsq(matrix: TensorLike, rhs: TensorLike, l2_regularizer: float = 0.0, fast: bool = True,
          name: str | None = None) -> Tensor:
    """`tf.linalg.lstsq`: the least-squares solution (minimum norm when underdetermined); `fast` solves the
    regularized normal equations with Cholesky, as TF does; `fast=False` uses the SVD (l2_regularizer 0 only)."""
    a = _matrix(matrix, "lstsq", square=False)
    b = _rhs(rhs, a, "lstsq")
    if not fast:
        if l2_regularizer != 0.0:
            raise ValueError("tf.linalg.lstsq: fast=False takes l2_regularizer=0.0 only (as TF's)")
        a, b = _broadcast_batch(a, b)
        return jnp.linalg.pinv(a) @ b
    rows, cols = a.shape[-2:]
    adj = jnp.conj(jnp.swapaxes(a, -1, -2))
    if rows >= cols:
        gram = adj @ a + l2_regularizer * jnp.eye(cols, dtype=a.dtype)
        return jnp.asarray(cholesky_solve(jax.lax.linalg.cholesky(gram, symmetrize_input=False), adj @ b))
    gram = a @ adj + l2_regularizer * jnp.eye(rows, dtype=a.dtype)
    return adj @ jnp.asarray(cholesky_solve(jax.lax.linalg.cholesky(gram, symmetrize_input=False), b))


@_host_numpy
def expm(input: TensorLike, name: str | None = None) -> Tensor:  # noqa: A002
    """`tf.linalg.expm`: the matrix exponential of each matrix."""
    return jax.scipy.linalg.expm(_matrix(input, "expm"))


NAMES = dict(
    svd=svd, qr=qr, eigh=eigh, eigvalsh=eigvalsh, cholesky=cholesky, cholesky_solve=cholesky_solve, solve=solve,
    triangular_solve=triangular_solve, inv=inv, pinv=pinv, det=det, slogdet=slogdet, logdet=logdet, lstsq=lstsq,
    expm=expm,
)
