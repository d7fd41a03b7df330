"""TF's ops on a `tf.RaggedTensor`, and the `tf.ragged` functions beyond `constant`.

TF dispatches its ops on ragged arguments (`tf.add(rt, 3)`, `tf.concat([a, b], axis=1)`, `tf.reduce_mean(rt,
axis=1)`, `tf.strings.substr(words, 0, 2)`): `dispatch` wraps those ops of the assembled namespaces once, so that
a ragged argument takes the path here and dense arguments go straight to the op (one type check). Elementwise
ops act on the flat values, the row partition kept; the others work row by row on the host.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat.dtype_table import as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.ragged import RaggedTensor, concat_rows, from_rows
from jdist.tf_compat.ragged_factories import constant
from jdist.tf_compat.ragged_shape import DynamicRaggedShape, RowPartition, with_shape

# ops whose first argument's values map one to one onto the result's (the rest are options)
_FLAT = frozenset("""abs negative square sqrt rsqrt exp expm1 log log1p sin cos tan tanh sigmoid softplus relu
round floor ceil sign logical_not cast saturate_cast reciprocal is_nan is_inf is_finite erf identity as_string
length lower upper strip substr regex_replace regex_full_match to_number to_hash_bucket_fast ones_like
zeros_like""".split())
_BINARY = frozenset("""add subtract multiply divide truediv floordiv floormod mod pow maximum minimum equal
not_equal less less_equal greater greater_equal logical_and logical_or logical_xor squared_difference""".split())
_REDUCE = frozenset("reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_any reduce_all".split())


def _ragged(value: Any) -> bool:
    return isinstance(value, (RaggedTensor, DynamicRaggedShape, RaggedTensorSpec)) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, RaggedTensor) for v in value))


def _dispatching(name: str, op: Callable[..., Any]) -> Callable[..., Any]:
    ragged_op = _ragged_version(name, op)

    @functools.wraps(op)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if any(_ragged(a) for a in args) or any(_ragged(v) for v in kwargs.values()):
            return ragged_op(*args, **kwargs)
        return op(*args, **kwargs)

    wrapped._jdist_ragged = True  # pyright: ignore[reportAttributeAccessIssue]
    return wrapped


def install(top: dict, math: Any, strings: Any, nn: Any, ragged: Any, experimental: Any) -> None:
    """TF's dispatch on ragged arguments in `top` (the `tf` module's names) and those namespaces, and the
    `tf.ragged` and `tf.experimental` names of this module."""
    dispatch(top, math.__dict__, strings.__dict__, nn.__dict__)
    ragged.__dict__.update(RAGGED)
    experimental.__dict__.update(DynamicRaggedShape=DynamicRaggedShape, RowPartition=RowPartition)


def dispatch(*namespaces: dict) -> None:
    """Wraps, in place, the ops of `namespaces` that TF dispatches on ragged arguments (one wrapper per op)."""
    made: dict[int, Callable[..., Any]] = {}
    names = _FLAT | _BINARY | _REDUCE | {"concat", "stack", "tile", "gather", "join", "map_fn", "where",
                                         "embedding_lookup", "size", "add_n", "reverse", "shape", "reshape",
                                         "zeros", "ones", "fill"}
    for namespace in namespaces:
        for name in names & namespace.keys():
            op = namespace[name]
            if callable(op) and not getattr(op, "_jdist_ragged", False):
                namespace[name] = made.setdefault(id(op), _dispatching(name, op))


def _ragged_version(name: str, op: Callable[..., Any]) -> Callable[..., Any]:
    if name in _FLAT:
        return lambda x, *args, **kwargs: x.with_flat_values(np.asarray(op(x.flat_values, *args, **kwargs)))
    if name in _BINARY:
        return lambda x, y, name=None: _binary(op, x, y)
    if name in _REDUCE:
        kind = name.replace("reduce_", "")
        return lambda input_tensor, axis=None, keepdims=False, name=None: reduce(kind, input_tensor, axis, keepdims,
                                                                                 op)
    return functools.partial(_OTHERS[name], op)


def _binary(op: Callable[..., Any], x: Any, y: Any) -> Any:
    if isinstance(x, RaggedTensor):
        return x._elementwise(y, lambda a, b: np.asarray(op(a, b)))
    return y._elementwise(x, lambda a, b: np.asarray(op(b, a)))


def reduce(name: str, rt: RaggedTensor, axis: Any, keepdims: bool, op: Callable[..., Any]) -> Any:
    """`tf.reduce_<name>` of a ragged tensor: over all values, across rows (axis 0), along a ragged or inner
    dimension. TF's mean of integers is float64 (observed, TF 2.21), an empty row gives the identity."""
    flat = rt.flat_values
    if name == "mean" and flat.dtype.kind in "iu":
        rt, flat = rt.with_flat_values(flat.astype(np.float64)), flat.astype(np.float64)
    if axis is None:
        return as_tensors(np.asarray(op(flat)))
    rank = rt.shape.rank
    axis = int(np.asarray(axis))
    axis = axis + rank if axis < 0 else axis
    if axis == 0 and rt.ragged_rank == 1:
        rows = rt._rows()
        width = max([len(r) for r in rows], default=0)
        cols = [np.stack([r[j] for r in rows if len(r) > j]) for j in range(width)]
        out = np.stack([np.asarray(op(c, axis=0)) for c in cols]) if cols else flat[:0]
        return as_tensors(out[None] if keepdims else out)
    if axis == 1 and rt.ragged_rank == 1:
        return rt.reduce_rows(name, lambda values, along: np.asarray(op(values, axis=along)), 1, keepdims)
    if axis >= 2:
        inner = rt.values
        if isinstance(inner, RaggedTensor):
            return rt.with_values(reduce(name, inner, axis - 1, keepdims, op))
        return rt.with_values(np.asarray(op(inner, axis=axis - 1, keepdims=keepdims)))
    raise NotImplementedError(f"tf.reduce_{name} of a RaggedTensor {rt.shape} along axis {axis} is not provided: "
                              "use .to_tensor() first")


def _concat(op: Callable[..., Any], values: Any, axis: int, name: Any = None) -> Any:
    """`tf.concat` with ragged inputs: rows one after the other (axis 0), or each row joined (axis >= 1)."""
    like = next(v for v in values if isinstance(v, RaggedTensor))
    parts = [v if isinstance(v, RaggedTensor) else _dense_as_ragged(v, like) for v in values]
    ranks = {p.shape.rank for p in parts}
    if len(ranks) > 1:
        raise ValueError(f"Shape {parts[-1].shape} must have rank {like.shape.rank}")
    axis = int(axis) + like.shape.rank if int(axis) < 0 else int(axis)
    if axis == 0:
        return concat_rows(parts)
    nrows = {p.nrows_int() for p in parts}
    if len(nrows) > 1:
        raise InvalidArgumentError(None, None, f"Input tensors at index 0 and 1 have different numbers of rows: "
                                   f"{sorted(nrows)}")
    rows = [[p[i] for p in parts] for i in range(like.nrows_int())]
    joined = [_concat(op, r, axis - 1) if any(isinstance(x, RaggedTensor) for x in r)
              else np.concatenate([np.asarray(x) for x in r], axis=axis - 1) for r in rows]
    return from_rows(joined, like.flat_values)


def _dense_as_ragged(value: Any, like: RaggedTensor) -> RaggedTensor:
    dense = np.asarray(value, dtype=like.flat_values.dtype)
    out = RaggedTensor.from_tensor(dense)
    for _ in range(like.ragged_rank - 1):
        out = out.with_values(RaggedTensor.from_tensor(np.asarray(out.values)))
    return out


def _stack(op: Callable[..., Any], values: Any, axis: int = 0, name: Any = None) -> Any:
    """`tf.stack` with ragged inputs: each one a row (axis 0), or row i of each input side by side (axis 1)."""
    like = next(v for v in values if isinstance(v, RaggedTensor))
    parts = [v if isinstance(v, RaggedTensor) else _dense_as_ragged(v, like) for v in values]
    axis = int(axis) + like.shape.rank + 1 if int(axis) < 0 else int(axis)
    if axis == 0:
        return RaggedTensor.from_row_lengths(concat_rows(parts), [p.nrows_int() for p in parts])
    rows = [[p[i] for p in parts] for i in range(like.nrows_int())]
    return from_rows([_stack(op, r, axis - 1) if any(isinstance(x, RaggedTensor) for x in r)
                      else from_rows([np.asarray(x) for x in r], like.flat_values) for r in rows], like.flat_values)


def _tile(op: Callable[..., Any], input: Any, multiples: Any, name: Any = None) -> Any:  # noqa: A002 (TF's name)
    """`tf.tile`: each row repeated along its own dimensions, then the rows `multiples[0]` times."""
    times = [int(m) for m in np.asarray(multiples).reshape(-1)]
    rows = [_tile(op, r, times[1:]) if isinstance(r, RaggedTensor) else np.tile(r, times[1:])
            for r in input._rows()]
    return from_rows(rows * times[0], input.flat_values)


def _gather(op: Callable[..., Any], params: Any, indices: Any, *args: Any, **kwargs: Any) -> Any:
    """`tf.gather`: rows of ragged `params`, or dense `params` at each of ragged `indices`."""
    if isinstance(indices, RaggedTensor):
        return indices.with_flat_values(np.asarray(_gather(op, params, indices.flat_values)
                                                   if isinstance(params, RaggedTensor) else
                                                   op(params, indices.flat_values, *args, **kwargs)))
    rows = params._rows()
    picked = np.asarray(indices)
    if picked.ndim == 0:
        return params[int(picked)]
    return from_rows([rows[int(i)] for i in picked.reshape(-1)], params.flat_values)


def _embedding_lookup(op: Callable[..., Any], params: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
    return ids.with_flat_values(np.asarray(op(params, ids.flat_values, *args, **kwargs)))


def _join(op: Callable[..., Any], inputs: Any, separator: str = "", name: Any = None) -> Any:
    """`tf.strings.join` of ragged tensors of one row partition: joined value by value."""
    like = next(v for v in inputs if isinstance(v, RaggedTensor))
    flats = [v.flat_values if isinstance(v, RaggedTensor) else v for v in inputs]
    for v in inputs:
        if isinstance(v, RaggedTensor):
            like._elementwise(v, lambda a, b: a)  # the same rows, or TF's error
    return like.with_flat_values(np.asarray(op(flats, separator=separator)))


def _where(op: Callable[..., Any], condition: Any, x: Any = None, y: Any = None, name: Any = None) -> Any:
    """`tf.where(condition, x, y)` value by value (a scalar or a ragged tensor of the same rows each)."""
    if x is None:
        raise NotImplementedError("tf.where(ragged_condition) without x and y is not provided for a RaggedTensor")
    like = next(v for v in (condition, x, y) if isinstance(v, RaggedTensor))
    flat = [v.flat_values if isinstance(v, RaggedTensor) else np.asarray(v) for v in (condition, x, y)]
    return like.with_flat_values(np.asarray(op(*flat)))


def _reverse(op: Callable[..., Any], tensor: Any, axis: Any, name: Any = None) -> Any:
    """`tf.reverse`: the order of the rows (axis 0), or of the values within each row (axis >= 1)."""
    out = tensor
    for a in np.asarray(axis).reshape(-1):
        a = int(a) + out.shape.rank if int(a) < 0 else int(a)
        rows = out._rows()
        out = from_rows(rows[::-1] if a == 0 else [_reverse(op, r, [a - 1]) if isinstance(r, RaggedTensor)
                                                   else np.flip(r, a - 1) for r in rows], out.flat_values)
    return out


def _shape(op: Callable[..., Any], input: Any, out_type: Any = "int32", name: Any = None) -> Any:  # noqa: A002
    """`tf.shape` of a ragged tensor: a `DynamicRaggedShape` (int32 unless `out_type`, as TF's)."""
    return DynamicRaggedShape.from_tensor(input, out_type)


def _reshape(op: Callable[..., Any], tensor: Any, shape: Any, name: Any = None) -> Any:
    if not isinstance(shape, DynamicRaggedShape):
        return op(tensor.flat_values if isinstance(tensor, RaggedTensor) else tensor, shape)
    dense = constant(tensor) if isinstance(tensor, list) else tensor
    flat = tensor.flat_values if isinstance(tensor, RaggedTensor) else np.asarray(dense)
    return with_shape(np.asarray(flat).reshape(-1), shape)


def _filled(value: Any) -> Callable[..., Any]:
    def make(op: Callable[..., Any], shape: Any, dtype: Any = "float32", name: Any = None, **kwargs: Any) -> Any:
        size = int(np.prod(shape._inner))
        return with_shape(np.full(size, value, as_dtype(dtype).as_numpy_dtype), shape)
    return make


def _fill(op: Callable[..., Any], dims: Any, value: Any, name: Any = None, **kwargs: Any) -> Any:
    fill = np.asarray(constant(value))
    return with_shape(np.full(int(np.prod(dims._inner)), fill, fill.dtype), dims)


def _size(op: Callable[..., Any], input: Any, name: Any = None, out_type: Any = None) -> Any:  # noqa: A002
    return as_tensors(np.asarray(input.flat_values.size, np.int32 if out_type is None else out_type))


def _add_n(op: Callable[..., Any], inputs: Any, name: Any = None) -> Any:
    return functools.reduce(lambda a, b: _binary(np.add, a, b), inputs)


def _map_fn(op: Callable[..., Any], fn: Callable[[Any], Any], elems: Any, dtype: Any = None, *args: Any,
            fn_output_signature: Any = None, **kwargs: Any) -> Any:
    """`tf.map_fn` over the rows of a ragged tensor: ragged results for a `RaggedTensorSpec` signature (or rows
    of any rank without one), a dense tensor of `dtype` for scalar results."""
    signature = fn_output_signature if fn_output_signature is not None else dtype
    rows = elems if isinstance(elems, RaggedTensor) else [as_tensors(row) for row in np.asarray(elems)]
    results = [fn(row) for row in rows]
    if isinstance(signature, RaggedTensorSpec) or (signature is None and any(np.ndim(r) for r in results)):
        if isinstance(elems, RaggedTensor):
            template = elems.flat_values
        else:
            template = np.zeros(0, as_dtype(getattr(signature, "dtype", None) or "int32").as_numpy_dtype)
        return from_rows([r if isinstance(r, RaggedTensor) else np.asarray(r) for r in results], template)
    out = np.stack([np.asarray(r) for r in results])
    return as_tensors(out.astype(as_dtype(signature).as_numpy_dtype) if signature is not None else out)


_OTHERS: dict[str, Callable[..., Any]] = dict(concat=_concat, stack=_stack, tile=_tile, gather=_gather,
                                              embedding_lookup=_embedding_lookup, join=_join, where=_where,
                                              size=_size, reverse=_reverse, shape=_shape, reshape=_reshape,
                                              zeros=_filled(0), ones=_filled(1), fill=_fill, add_n=_add_n,
                                              map_fn=_map_fn)


def _compatible(a: TensorShape, b: TensorShape) -> bool:
    if a.rank is None or b.rank is None:
        return True
    return a.rank == b.rank and all(x is None or y is None or x == y for x, y in zip(a.as_list(), b.as_list()))


class RaggedTensorSpec:
    """`tf.RaggedTensorSpec`: the shape (None for ragged dimensions), dtype, ragged rank of a ragged tensor."""

    def __init__(self, shape: Any = None, dtype: Any = "float32", ragged_rank: int | None = None,
                 row_splits_dtype: Any = "int64", flat_values_spec: Any = None):
        self.shape = TensorShape(shape)
        self.dtype = as_dtype(dtype)
        rank = self.shape.rank
        self.ragged_rank = (rank - 1 if rank is not None else 1) if ragged_rank is None else int(ragged_rank)
        self.row_splits_dtype = as_dtype(row_splits_dtype)

    @classmethod
    def from_value(cls, value: RaggedTensor) -> RaggedTensorSpec:
        return cls(value.shape, value.dtype, value.ragged_rank)

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        other = spec_or_value if isinstance(spec_or_value, RaggedTensorSpec) else (
            RaggedTensorSpec.from_value(spec_or_value) if isinstance(spec_or_value, RaggedTensor) else None)
        return (other is not None and self.dtype == other.dtype and self.ragged_rank == other.ragged_rank
                and _compatible(self.shape, other.shape))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RaggedTensorSpec) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return (f"RaggedTensorSpec(TensorShape({self.shape.as_list() if self.shape.rank is not None else None}), "
                f"{self.dtype!r}, {self.ragged_rank}, {self.row_splits_dtype!r})")


def ragged_stack(values: Any, axis: int = 0, name: Any = None) -> RaggedTensor:
    """`tf.ragged.stack`: like `tf.stack`, its inputs ragged or dense, the result always ragged."""
    if not any(isinstance(v, RaggedTensor) for v in values):
        return from_rows([np.asarray(constant(v) if isinstance(v, list) else v) for v in values], np.zeros(0))
    return _stack(np.stack, values, axis)


def boolean_mask(data: Any, mask: Any, name: Any = None) -> RaggedTensor:
    """`tf.ragged.boolean_mask`: the values where `mask` is true, rows kept (a 1-D mask picks rows)."""
    rows = data._rows() if isinstance(data, RaggedTensor) else list(np.asarray(data))
    masks = mask._rows() if isinstance(mask, RaggedTensor) else list(np.asarray(mask, bool))
    if len(rows) != len(masks):
        raise InvalidArgumentError(None, None, f"mask has {len(masks)} rows, data has {len(rows)}")
    template = data.flat_values if isinstance(data, RaggedTensor) else np.asarray(data)
    if np.ndim(masks[0] if masks else 0) == 0:
        return from_rows([r for r, m in zip(rows, masks) if m], template)
    return from_rows([boolean_mask(r, m) if isinstance(r, RaggedTensor) else np.asarray(r)[np.asarray(m, bool)]
                      for r, m in zip(rows, masks)], template)


def row_splits_to_segment_ids(splits: Any, name: Any = None, out_type: Any = None) -> np.ndarray:
    """`tf.ragged.row_splits_to_segment_ids`: the row of each value (int64)."""
    lengths = np.diff(np.asarray(splits, np.int64))
    return as_tensors(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths))


def segment_ids_to_row_splits(segment_ids: Any, num_segments: Any = None, out_type: Any = None,
                              name: Any = None) -> np.ndarray:
    """`tf.ragged.segment_ids_to_row_splits`: the row splits of sorted segment ids (int64)."""
    ids = np.asarray(segment_ids, np.int64).reshape(-1)
    rows = int(num_segments) if num_segments is not None else (int(ids.max()) + 1 if ids.size else 0)
    return as_tensors(np.concatenate([[0], np.cumsum(np.bincount(ids, minlength=rows))]).astype(np.int64))


def stack_dynamic_partitions(data: Any, partitions: Any, num_partitions: int, name: Any = None) -> RaggedTensor:
    """`tf.ragged.stack_dynamic_partitions`: row p holds the values whose partition is p, in order."""
    values, parts = np.asarray(constant(data) if isinstance(data, list) else data), np.asarray(partitions)
    return from_rows([values[parts == p] for p in range(int(num_partitions))], values)


RAGGED = dict(stack=ragged_stack, boolean_mask=boolean_mask, row_splits_to_segment_ids=row_splits_to_segment_ids,
              segment_ids_to_row_splits=segment_ids_to_row_splits, stack_dynamic_partitions=stack_dynamic_partitions)
