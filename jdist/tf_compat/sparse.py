"""`tf.SparseTensor` and `tf.sparse`: TF's COO sparse tensors as a JAX pytree, with TF 2.21's semantics.

A `SparseTensor` holds `indices` (int64, `[nnz, rank]`, row-major order expected), `values` (`[nnz]`) and a
static `dense_shape`; it passes into and out of `strategy.run` and `jax.jit` (indices and values are its
leaves, the shape is part of its structure). On the host the ops check their input as TF does (observed):
`to_dense` rejects out-of-order, repeated and out-of-bounds indices (`validate_indices=False` keeps the order
and repeat checks off, the last repeat wins). Compiled code cannot raise on values, so there they are not
checked, and ops whose result size depends on values (`from_dense`, sparse + sparse `add`, `slice`, `retain`
by a traced mask) are host only.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.experimental.sparse
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jax.typing import DTypeLike

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat.dtype_table import DType, as_dtype, numpy_dtype, string
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.linalg_ops import invalid
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.tfdata import tensor_text
from jdist.typing import ArrayLike, Axis, Tensor, TensorLike


@jax.tree_util.register_pytree_node_class
class SparseTensor:
    """`tf.SparseTensor(indices, values, dense_shape)`: `values[i]` sits at `indices[i]` of a `dense_shape`
    tensor, the rest is zero."""

    def __init__(self, indices: TensorLike, values: TensorLike, dense_shape: Sequence[int] | TensorLike):
        shape = tuple(int(d) for d in np.asarray(dense_shape).reshape(-1))
        idx = convert_to_tensor(indices)
        idx = idx.astype(jax.dtypes.canonicalize_dtype(np.int64)) if is_jax(idx) else np.asarray(idx, np.int64)
        vals = convert_to_tensor(values)
        if idx.ndim != 2:
            raise ValueError(f"SparseTensor: indices must have rank 2 ([nnz, rank]), got shape {tuple(idx.shape)}")
        if vals.ndim != 1 or vals.shape[0] != idx.shape[0]:
            raise ValueError(f"SparseTensor: values must be a vector with one entry per index row; got values "
                             f"shape {tuple(vals.shape)} for {idx.shape[0]} indices")
        if idx.shape[1] != len(shape):
            raise ValueError(f"SparseTensor: each index has {idx.shape[1]} coordinates but dense_shape {list(shape)} "
                             f"has rank {len(shape)}")
        self._indices: ArrayLike = idx
        self._values: ArrayLike = vals
        self._shape = shape

    @property
    def indices(self) -> ArrayLike:
        return as_tensors(self._indices)  # host parts are tensors with `.numpy()`, rows too, as in TF

    @property
    def values(self) -> ArrayLike:
        return as_tensors(self._values)

    @property
    def dense_shape(self) -> Any:
        return as_tensors(np.asarray(self._shape, np.int64))

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._shape)

    @property
    def dtype(self) -> DType:
        return string if np.dtype(self._values.dtype).kind in "OSU" else as_dtype(self._values.dtype)

    def get_shape(self) -> TensorShape:
        return self.shape

    @classmethod
    def from_value(cls, sparse_tensor_value: Any) -> SparseTensor:
        """A SparseTensor from one, or from any value with `indices`, `values` and `dense_shape`."""
        value = sparse_tensor_value
        if not all(hasattr(value, a) for a in ("indices", "values", "dense_shape")):
            raise TypeError(f"Argument sparse_tensor_value={value!r} is neither a SparseTensor nor "
                            "SparseTensorValue; build one with tf.SparseTensor(indices, values, dense_shape) or "
                            "tf.sparse.from_dense")
        return cls(value.indices, value.values, value.dense_shape)

    def with_values(self, new_values: TensorLike) -> SparseTensor:
        """This sparse tensor's indices and shape with other values."""
        return SparseTensor._make(self._indices, convert_to_tensor(new_values), self._shape)

    @classmethod
    def _make(cls, indices: Any, values: Any, shape: tuple[int, ...]) -> SparseTensor:
        out = object.__new__(cls)
        out._indices, out._values, out._shape = indices, values, shape
        return out

    def tree_flatten(self) -> tuple[tuple[Any, Any], tuple[int, ...]]:
        return (self._indices, self._values), self._shape

    @classmethod
    def tree_unflatten(cls, shape: tuple[int, ...], children: Sequence[Any]) -> SparseTensor:
        return cls._make(children[0], children[1], shape)

    def _scaled(self, other: TensorLike, op: Callable[[Any, Any], Any]) -> SparseTensor:
        if np.ndim(other) == 0 and not is_jax(other):  # a Python or numpy scalar takes the values' dtype, as in TF
            other = np.asarray(other, dtype=np.dtype(self._values.dtype))
        other = convert_to_tensor(other)
        if other.ndim == 0:
            return self.with_values(op(self._values, other))
        dense = xp(other).broadcast_to(other, self._shape)
        return self.with_values(op(self._values, dense[tuple(self._indices[:, i] for i in range(len(self._shape)))]))

    def __mul__(self, other: TensorLike) -> SparseTensor:
        """Sparse times dense (broadcast to the dense shape) or a scalar: a SparseTensor, as in TF."""
        return self._scaled(other, lambda v, o: v * o)

    __rmul__ = __mul__

    def __truediv__(self, other: TensorLike) -> SparseTensor:
        return self._scaled(other, lambda v, o: v / o)

    def __repr__(self) -> str:
        """TF's (observed, TF 2.21): each part printed as a tensor; a traced one as JAX shows it."""
        parts = [(name, value) for name, value in (("indices", self._indices), ("values", self._values),
                                                   ("dense_shape", self.dense_shape))]
        shown = [f"{name}={repr(v) if isinstance(v, Tracer) else tensor_text.tensor_str(v)}" for name, v in parts]
        return f"SparseTensor({', '.join(shown)})"


def _traced(*values: Any) -> bool:
    """Whether any of `values` is a tracer (compiled code: its values are unknown)."""
    return any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(values))  # pyright: ignore[reportAttributeAccessIssue]


def _sparse(value: Any, op: str) -> SparseTensor:
    if isinstance(value, jax.experimental.sparse.BCOO):  # a Keras layer's sparse output (TF's is a SparseTensor)
        value = value if _traced(value.data) else value.sum_duplicates()
        return SparseTensor(value.indices, value.data, value.shape)
    if not isinstance(value, SparseTensor):
        raise TypeError(f"tf.sparse.{op}: Input must be a SparseTensor, got {type(value).__name__}; "
                        "make one with tf.sparse.from_dense(x)")
    return value


def _coords(sp: SparseTensor) -> tuple[Any, ...]:
    return tuple(sp.indices[:, i] for i in range(len(sp.shape)))


def _validate(sp: SparseTensor, order: bool) -> None:
    """TF's host-side checks: bounds always, order and repeats when `order`."""
    idx = np.asarray(sp.indices)
    shape = np.asarray(sp.shape)
    for i, row in enumerate(idx):
        if (row < 0).any() or (row >= shape).any():
            raise invalid(f"indices[{i}] = {row.tolist()} is out of bounds: need 0 <= index < {shape.tolist()}")
        if order and i > 0:
            previous = tuple(idx[i - 1].tolist())
            if tuple(row.tolist()) == previous:
                raise invalid(f"indices[{i}] = {row.tolist()} is repeated")
            if tuple(row.tolist()) < previous:
                raise invalid(f"indices[{i}] = {row.tolist()} is out of order. Many sparse ops require sorted "
                              "indices. Use `tf.sparse.reorder` to create a correctly ordered copy.")


def to_dense(sp_input: SparseTensor, default_value: TensorLike | None = None, validate_indices: bool = True,
             name: str | None = None) -> Tensor:
    """`tf.sparse.to_dense`: the dense tensor, `default_value` (0) where there is no entry."""
    sp = _sparse(sp_input, "to_dense")
    module = xp(sp.indices, sp.values)
    if not _traced(sp.indices):  # concrete values (host or eager JAX) are checked as TF checks them
        _validate(sp, order=validate_indices)
    text = np.dtype(sp.values.dtype).kind in "OSU"
    fill = (b"" if text else 0) if default_value is None else default_value
    if isinstance(fill, str):  # text is held as UTF-8 bytes, as TF's (`to_dense(st, '')` fills b'')
        fill = fill.encode()
    out = module.full(sp.shape, fill, dtype=sp.values.dtype)
    if module is np:
        out[_coords(sp)] = sp.values
        return out
    return out.at[_coords(sp)].set(sp.values)


def from_dense(tensor: TensorLike, name: str | None = None) -> SparseTensor:
    """`tf.sparse.from_dense`: the non-zero entries, in row-major order; on the host."""
    x = convert_to_tensor(tensor)
    if _traced(x):
        raise ValueError("tf.sparse.from_dense has a data-dependent number of entries, which compiled code "
                         "(strategy.run, jax.jit) cannot produce; convert on the host, or build "
                         "tf.SparseTensor(indices, values, dense_shape) from indices of a fixed count")
    x = np.asarray(x)
    indices = np.argwhere(x != 0).astype(np.int64)
    return SparseTensor(indices, x[tuple(indices.T)], x.shape)


def reorder(sp_input: SparseTensor, name: str | None = None) -> SparseTensor:
    """`tf.sparse.reorder`: the entries sorted into row-major order."""
    sp = _sparse(sp_input, "reorder")
    module = xp(sp.indices, sp.values)
    order = module.lexsort(tuple(sp.indices[:, i] for i in reversed(range(len(sp.shape)))))
    return SparseTensor._make(sp.indices[order], sp.values[order], tuple(sp.shape))


def transpose(sp_input: SparseTensor, perm: Sequence[int] | None = None, name: str | None = None) -> SparseTensor:
    """`tf.sparse.transpose`: axes permuted (reversed by default), entries reordered."""
    sp = _sparse(sp_input, "transpose")
    perm = list(reversed(range(len(sp.shape)))) if perm is None else [int(p) for p in perm]
    moved = SparseTensor._make(sp.indices[:, perm], sp.values, tuple(sp.shape[p] for p in perm))
    return reorder(moved)


def sparse_dense_matmul(sp_a: SparseTensor | TensorLike, b: SparseTensor | TensorLike, adjoint_a: bool = False,
                        adjoint_b: bool = False, name: str | None = None) -> Tensor:
    """`tf.sparse.sparse_dense_matmul`: a rank-2 SparseTensor times a dense matrix, or dense times sparse."""
    if not isinstance(sp_a, SparseTensor):
        if not isinstance(b, SparseTensor):
            raise TypeError("tf.sparse.sparse_dense_matmul: one operand must be a SparseTensor; for two dense "
                            "matrices use tf.linalg.matmul")
        # op(a) @ op(sp) = adjoint(adjoint(op(sp)) @ adjoint(op(a))), each adjoint(op(.)) a flag flipped
        out = sparse_dense_matmul(b, sp_a, adjoint_a=not adjoint_b, adjoint_b=not adjoint_a)
        return xp(out).conj(xp(out).swapaxes(out, -1, -2))
    sp = _sparse(sp_a, "sparse_dense_matmul")
    dense = convert_to_tensor(b)  # pyright: ignore[reportArgumentType]
    if len(sp.shape) != 2 or dense.ndim != 2:
        raise invalid(f"tf.sparse.sparse_dense_matmul takes a rank-2 SparseTensor and matrix, got shapes "
                      f"{list(sp.shape)} and {tuple(dense.shape)}")
    module = xp(sp.indices, sp.values, dense)
    rows, cols = sp.indices[:, 0], sp.indices[:, 1]
    values, (m, k) = sp.values, sp.shape
    if adjoint_a:
        rows, cols, values, (m, k) = cols, rows, module.conj(values), (k, m)
    if adjoint_b:
        dense = module.conj(module.swapaxes(dense, 0, 1))
    if dense.shape[0] != k:
        raise invalid(f"Cannot multiply A and B because inner dimension does not match: {k} vs. {dense.shape[0]}. "
                      f"Did you forget a transpose? Dimensions of A: {[m, k]}. Dimensions of B: {list(dense.shape)}")
    products = values[:, None] * dense[cols]
    out = module.zeros((m, dense.shape[1]), dtype=products.dtype)
    if module is np:
        np.add.at(out, rows, products)
        return out
    return out.at[rows].add(products)


def _reduce(sp: SparseTensor, axis: Axis, keepdims: bool, kind: str) -> tuple[Any, Any]:
    """The dense reduction of the entries (sum or max), and how many entries each output position got."""
    module = xp(sp.indices, sp.values)
    rank = len(sp.shape)
    axes = range(rank) if axis is None else [a % rank for a in np.atleast_1d(np.asarray(axis)).tolist()]
    kept = [i for i in range(rank) if i not in axes]
    out_shape = tuple(1 if i in axes else n for i, n in enumerate(sp.shape)) if keepdims else \
        tuple(sp.shape[i] for i in kept)
    # each entry's position in the flattened output (size-1 axes of keepdims do not move it)
    kept_shape = [sp.shape[i] for i in kept]
    strides = [int(np.prod(kept_shape[j + 1:])) for j in range(len(kept))]
    flat = module.zeros_like(sp.indices[:, 0]) if rank else module.zeros(0, np.int64)
    for i, stride in zip(kept, strides):
        flat = flat + sp.indices[:, i] * stride
    size = int(np.prod(out_shape))
    dtype = np.dtype(sp.values.dtype)
    start = 0 if kind == "sum" else (-np.inf if dtype.kind == "f" else np.iinfo(dtype).min)
    counts = module.zeros(size, np.int32)
    total = module.full(size, start, dtype=dtype)
    if module is np:
        np.add.at(counts, flat, 1)
        (np.add if kind == "sum" else np.maximum).at(total, flat, sp.values)
    else:
        counts = counts.at[flat].add(1)
        total = total.at[flat].add(sp.values) if kind == "sum" else total.at[flat].max(sp.values)
    counts, total = module.reshape(counts, out_shape), module.reshape(total, out_shape)
    return module.where(counts > 0, total, module.zeros_like(total)), counts


def _reduced(sp_input: SparseTensor, axis: Axis, keepdims: bool, output_is_sparse: bool, kind: str) -> Any:
    sp = _sparse(sp_input, f"reduce_{kind}")
    dense, counts = _reduce(sp, axis, keepdims, kind)
    if not output_is_sparse:
        return dense
    if is_jax(dense):
        raise ValueError(f"tf.sparse.reduce_{kind}(output_is_sparse=True) has a data-dependent number of "
                         "entries, which compiled code cannot produce; use output_is_sparse=False there")
    indices = np.argwhere(counts > 0).astype(np.int64)
    return SparseTensor(indices, dense[tuple(indices.T)], dense.shape)


def reduce_sum(sp_input: SparseTensor, axis: Axis = None, keepdims: bool = False, output_is_sparse: bool = False,
               name: str | None = None) -> Any:
    """`tf.sparse.reduce_sum`: the sum of the entries over `axis` (all axes by default), a dense tensor."""
    return _reduced(sp_input, axis, keepdims, output_is_sparse, "sum")


def reduce_max(sp_input: SparseTensor, axis: Axis = None, keepdims: bool = False, output_is_sparse: bool = False,
               name: str | None = None) -> Any:
    """`tf.sparse.reduce_max`: the max of the entries present (not of the implicit zeros); 0 where none are."""
    return _reduced(sp_input, axis, keepdims, output_is_sparse, "max")


def add(a: SparseTensor | TensorLike, b: SparseTensor | TensorLike, threshold: float = 0,
        name: str | None = None) -> Any:
    """`tf.sparse.add`: sparse + dense is dense; sparse + sparse is sparse (entries at one index summed, sums
    with magnitude below `threshold` dropped; on the host)."""
    if not isinstance(a, SparseTensor):
        a, b = b, a
    sp = _sparse(a, "add")
    if not isinstance(b, SparseTensor):
        dense = convert_to_tensor(b)
        if tuple(dense.shape) != tuple(sp.shape):
            raise invalid(f"tf.sparse.add: Operands' shapes do not match: {list(sp.shape)} and {list(dense.shape)}")
        if xp(dense, sp.values) is np:
            out = np.array(dense, copy=True)
            np.add.at(out, _coords(sp), sp.values)
            return out
        return jnp.asarray(dense).at[_coords(sp)].add(sp.values)
    if tuple(b.shape) != tuple(sp.shape):
        raise invalid(f"tf.sparse.add: Operands' shapes do not match: {list(sp.shape)} and {list(b.shape)}")
    if is_jax(sp.indices, sp.values, b.indices, b.values):
        raise ValueError("tf.sparse.add of two SparseTensors has a data-dependent number of entries, which "
                         "compiled code cannot produce; there add tf.sparse.to_dense of one to the other")
    indices = np.concatenate([np.asarray(sp.indices), np.asarray(b.indices)])
    values = np.concatenate([np.asarray(sp.values), np.asarray(b.values)])
    unique, inverse = np.unique(indices, axis=0, return_inverse=True)
    sums = np.zeros(len(unique), values.dtype)
    np.add.at(sums, inverse.reshape(-1), values)
    keep = np.abs(sums) >= threshold
    return SparseTensor(unique[keep], sums[keep], sp.shape)


def eye(num_rows: int, num_columns: int | None = None, dtype: DTypeLike = "float32",
        name: str | None = None) -> SparseTensor:
    """`tf.sparse.eye`: the identity as a SparseTensor."""
    cols = int(num_rows if num_columns is None else num_columns)
    diagonal = np.arange(min(int(num_rows), cols), dtype=np.int64)
    return SparseTensor(np.stack([diagonal, diagonal], 1), np.ones(len(diagonal), numpy_dtype(dtype)),
                        (int(num_rows), cols))


def map_values(op: Callable[..., Any], *args: Any, **kwargs: Any) -> SparseTensor:
    """`tf.sparse.map_values`: `op` applied to the values of the SparseTensor arguments (one set of indices)."""
    sparse = [a for a in (*args, *kwargs.values()) if isinstance(a, SparseTensor)]
    if not sparse:
        raise ValueError("tf.sparse.map_values: no SparseTensor among the arguments; call op directly")
    first = sparse[0]
    for other in sparse[1:]:
        if tuple(other.shape) != tuple(first.shape) or (not is_jax(other.indices, first.indices) and
                                                        not np.array_equal(other.indices, first.indices)):
            raise invalid("tf.sparse.map_values: the SparseTensors must have the same indices and dense_shape")
    def unwrap(v: Any) -> Any:
        return v.values if isinstance(v, SparseTensor) else v

    return first.with_values(op(*map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()}))


def concat(axis: int, sp_inputs: Sequence[SparseTensor], expand_nonconcat_dims: bool = False,
           name: str | None = None) -> SparseTensor:
    """`tf.sparse.concat`: SparseTensors joined along `axis` (the other dimensions equal), entries reordered."""
    parts = [_sparse(sp, "concat") for sp in sp_inputs]
    if not parts or expand_nonconcat_dims:
        raise ValueError("jdist's tf.sparse.concat takes a non-empty list and expand_nonconcat_dims=False")
    rank = len(parts[0].shape)
    axis = int(axis) % rank
    for sp in parts[1:]:
        if [n for i, n in enumerate(sp.shape) if i != axis] != [n for i, n in enumerate(parts[0].shape) if i != axis]:
            raise invalid(f"tf.sparse.concat: shapes {list(parts[0].shape)} and {list(sp.shape)} differ outside "
                          f"axis {axis}")
    module = xp(*[(sp.indices, sp.values) for sp in parts])
    offsets = np.cumsum([0] + [sp.shape[axis] for sp in parts[:-1]])
    shifted = [sp.indices + module.asarray(np.eye(rank, dtype=np.int64)[axis] * offset, dtype=sp.indices.dtype)
               for sp, offset in zip(parts, offsets)]
    shape = tuple(sum(sp.shape[axis] for sp in parts) if i == axis else n for i, n in enumerate(parts[0].shape))
    joined = SparseTensor._make(module.concatenate(shifted), module.concatenate([sp.values for sp in parts]), shape)
    return reorder(joined)


def reshape(sp_input: SparseTensor, shape: Sequence[int], name: str | None = None) -> SparseTensor:
    """`tf.sparse.reshape`: the same entries in row-major order of a new shape (one dimension may be -1)."""
    sp = _sparse(sp_input, "reshape")
    size = int(np.prod(sp.shape))
    new = [int(n) for n in np.asarray(shape).reshape(-1)]
    if new.count(-1) == 1:
        known = int(np.prod([n for n in new if n != -1]))
        new[new.index(-1)] = size // known if known else 0
    if int(np.prod(new)) != size:
        raise invalid(f"tf.sparse.reshape: cannot reshape a SparseTensor of shape {list(sp.shape)} ({size} "
                      f"elements) to {list(np.asarray(shape).reshape(-1))}")
    module = xp(sp.indices, sp.values)
    flat = module.zeros_like(sp.indices[:, 0])
    for i, n in enumerate(sp.shape):
        flat = flat * n + sp.indices[:, i]
    coords = []
    for n in reversed(new):
        coords.append(flat % n)
        flat = flat // n
    return SparseTensor._make(module.stack(coords[::-1], axis=1), sp.values, tuple(new))


def retain(sp_input: SparseTensor, to_retain: TensorLike) -> SparseTensor:
    """`tf.sparse.retain`: the entries where `to_retain` (one bool per entry) is true; a host mask."""
    sp = _sparse(sp_input, "retain")
    if _traced(to_retain):
        raise ValueError("tf.sparse.retain with a mask computed in compiled code has a data-dependent number of "
                         "entries; pass a host (numpy) mask, or multiply the values by the mask instead")
    keep = np.asarray(to_retain, bool)
    if keep.shape != (sp.values.shape[0],):
        raise invalid(f"tf.sparse.retain: to_retain must be a bool vector of length {sp.values.shape[0]}, got shape "
                      f"{keep.shape}")
    return SparseTensor._make(sp.indices[keep], sp.values[keep], tuple(sp.shape))


def slice(sp_input: SparseTensor, start: Sequence[int], size: Sequence[int],  # noqa: A001
          name: str | None = None) -> SparseTensor:
    """`tf.sparse.slice`: the entries in the box at `start` of `size` (clipped to the shape), shifted; host only."""
    sp = _sparse(sp_input, "slice")
    if _traced(sp.indices):
        raise ValueError("tf.sparse.slice has a data-dependent number of entries, which compiled code cannot "
                         "produce; slice tf.sparse.to_dense(sp) there")
    first = np.asarray(start, np.int64).reshape(-1)
    # a box past the shape's end is empty there (observed: TF gives a 0-length dimension, no error)
    end = np.maximum(np.minimum(first + np.asarray(size, np.int64).reshape(-1), np.asarray(sp.shape)), first)
    idx = np.asarray(sp.indices)
    keep = ((idx >= first) & (idx < end)).all(axis=1)
    return SparseTensor(idx[keep] - first, np.asarray(sp.values)[keep], tuple((end - first).tolist()))


NAMES = dict(
    SparseTensor=SparseTensor, to_dense=to_dense, from_dense=from_dense, reorder=reorder, transpose=transpose,
    sparse_dense_matmul=sparse_dense_matmul, reduce_sum=reduce_sum, reduce_max=reduce_max, add=add, eye=eye,
    map_values=map_values, concat=concat, reshape=reshape, retain=retain, slice=slice,
)
