"""TF's array ops: `tf.pad`, `tf.sort`, `tf.unique`, `tf.roll`, `tf.linspace`, `tf.strided_slice`, ...

On numpy or JAX as `ops`. TF's rules, observed in TF 2.21: `argsort`, `unique`'s indices and `searchsorted` are
int32; `pad`'s REFLECT omits the edge and SYMMETRIC repeats it, and each needs paddings smaller than (REFLECT)
or at most (SYMMETRIC) the dimension; `unique` keeps first-occurrence order; `linspace` of ints is float64;
`meshgrid` indexes 'xy' by default; `sequence_mask` without `maxlen` is as long as the longest length.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.typing import DTypeLike

from jdist.errors import InvalidArgumentError
from jdist.tf_compat.conversion import checked_tensor
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.ops import _index_dtype, convert_to_tensor, is_jax, xp
from jdist.tf_compat.segment_ops import descending_order
from jdist.typing import ShapeLike, Tensor, TensorLike


def _ints(value: TensorLike) -> list[int]:
    """A host list of ints from an int, list or 1-D array argument (a static shape, axis or paddings)."""
    if is_jax(value):
        try:
            value = np.asarray(value)
        except Exception as error:
            raise ValueError("this argument sets the output's shape and must be known when tracing: pass Python "
                             "ints or a numpy array, not a value computed inside the compiled function") from error
    return [int(v) for v in np.asarray(value).reshape(-1)]


_PAD_MODES = {"CONSTANT": "constant", "REFLECT": "reflect", "SYMMETRIC": "symmetric"}


def pad(tensor: TensorLike, paddings: TensorLike, mode: str = "CONSTANT", constant_values: TensorLike = 0,
        name: str | None = None) -> Tensor:
    """`tf.pad`: `paddings[d] = [before, after]` for each dimension d; mode CONSTANT, REFLECT or SYMMETRIC."""
    x = convert_to_tensor(tensor)
    upper = str(mode).upper()
    if upper not in _PAD_MODES:
        raise ValueError(f'Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or "SYMMETRIC". '
                         f"Received `mode` = {mode}")
    widths = np.asarray(_ints(paddings)).reshape(-1, 2)
    if widths.shape[0] != x.ndim:
        raise ValueError(f"tf.pad: `paddings` needs one [before, after] pair per dimension of the input "
                         f"({x.ndim}); got {widths.tolist()}")
    if upper != "CONSTANT":
        limit = np.asarray(x.shape) - (1 if upper == "REFLECT" else 0)
        if np.any(widths.max(axis=1) > limit):
            bound = "less than" if upper == "REFLECT" else "at most"
            raise ValueError(f"tf.pad: in {upper} mode each padding must be {bound} its dimension's size "
                             f"{list(x.shape)}; got {widths.tolist()}")
        return xp(x).pad(x, [tuple(w) for w in widths.tolist()], mode=_PAD_MODES[upper])
    fill = convert_to_tensor(constant_values)
    if x.dtype.kind in "iub" and np.dtype(fill.dtype).kind == "f":
        raise TypeError(f"tf.pad: constant_values {constant_values!r} does not fit the input's dtype {x.dtype} "
                        "(TF: 'Cannot convert ... to EagerTensor'); cast one of them")
    return xp(x, fill).pad(x, [tuple(w) for w in widths.tolist()], mode="constant",
                           constant_values=fill.astype(x.dtype))


def _direction(direction: str) -> bool:
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError("Argument `direction` should be one of ASCENDING, DESCENDING. "
                         f"Received: direction={direction}")
    return direction == "DESCENDING"


def sort(values: TensorLike, axis: int = -1, direction: str = "ASCENDING", name: str | None = None) -> Tensor:
    x = convert_to_tensor(values)
    module = xp(x)
    if _direction(direction):
        return module.take_along_axis(x, descending_order(x, axis), axis=axis)
    return module.sort(x, axis=axis)


def argsort(values: TensorLike, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: str | None = None) -> Tensor:
    """int32 indices that sort `values`; always stable (equal values keep their order, one order TF allows)."""
    x = convert_to_tensor(values)
    module = xp(x)
    if _direction(direction):
        order = descending_order(x, axis)
    else:
        order = module.argsort(x, axis=axis, stable=True)
    return order.astype(np.int32)


Unique = collections.namedtuple("Unique", ["y", "idx"])  # TF's result type (`.y`, `.idx`)


def unique(x: TensorLike, out_idx: DTypeLike = "int32", name: str | None = None) -> Unique:
    """`(y, idx)`: the distinct values of a 1-D `x` in first-occurrence order, and `x == y[idx]`. On the host
    only: its length depends on the values."""
    if is_jax(x):
        raise ValueError("tf.unique has a data-dependent length, which compiled code (strategy.run, jax.jit) cannot "
                         "produce; call it on the host, or use jnp.unique(x, size=n, fill_value=...) (sorted order)")
    values = convert_to_tensor(x)
    if values.ndim != 1:
        raise ValueError(f"tf.unique takes a 1-D tensor; got shape {values.shape}")
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # sorted-unique position -> first-occurrence rank
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return Unique(np.asarray(values[np.sort(first)]), rank[inverse.reshape(-1)].astype(numpy_dtype(out_idx)))


def reverse(tensor: TensorLike, axis: Sequence[int], name: str | None = None) -> Tensor:
    x = convert_to_tensor(tensor)
    return xp(x).flip(x, tuple(_ints(axis)))


def roll(input: TensorLike, shift: int | Sequence[int], axis: int | Sequence[int],  # noqa: A002
         name: str | None = None) -> Tensor:
    """Shift entries along each axis, wrapping round (shifts on the same axis add up)."""
    x = convert_to_tensor(input)
    shifts, axes = _ints(shift), _ints(axis)
    if len(shifts) != len(axes):
        raise ValueError(f"tf.roll: `shift` and `axis` must have the same length; got {shifts} and {axes}")
    return xp(x).roll(x, tuple(shifts), tuple(axes))


def repeat(input: TensorLike, repeats: int | Sequence[int], axis: int | None = None,  # noqa: A002
           name: str | None = None) -> Tensor:
    """Repeat each element (along `axis`; over the flattened input when None, as TF's)."""
    x = convert_to_tensor(input)
    counts = _ints(repeats)
    return xp(x).repeat(x, counts[0] if len(counts) == 1 else np.asarray(counts), axis=axis)


def broadcast_to(input: TensorLike, shape: ShapeLike, name: str | None = None) -> Tensor:  # noqa: A002
    x = convert_to_tensor(input)
    return xp(x).broadcast_to(x, tuple(_ints(shape)))


def linspace(start: TensorLike, stop: TensorLike, num: int, name: str | None = None, axis: int = 0) -> Tensor:
    """`num` evenly spaced values from `start` to `stop` inclusive, as TF converts them (TF 2.21, observed):
    `stop` takes `start`'s dtype (`tf.linspace(0.0, 250, 251)` is float32, not numpy's float64; a tensor of
    another dtype is TF's ValueError, a Python float for an integer `start` its TypeError); an integer `start`
    gives float64; `num` must be an integer."""
    first = convert_to_tensor(start)
    last = _converted_like(stop, first.dtype, "stop")
    if isinstance(num, float) or np.dtype(getattr(num, "dtype", np.int32)).kind not in "iu":
        raise TypeError(f"Argument `tensor` (name: num) must be of type integer. Received `tensor` = {num} of "
                        f"dtype: <dtype: '{np.dtype(getattr(num, 'dtype', np.float32)).name}'>")
    target = np.dtype(np.float64) if np.dtype(first.dtype).kind in "iub" else np.dtype(first.dtype)
    if is_jax(first, last):
        target = jax.dtypes.canonicalize_dtype(target)
    return xp(first, last).linspace(first, last, int(num), axis=axis).astype(target)


def _converted_like(value: TensorLike, dtype: DTypeLike, arg: str) -> Tensor:
    """TF's `convert_to_tensor(value, dtype=dtype)` for an op's second input: a tensor keeps its dtype or is TF's
    ValueError, a numpy value is cast, a Python value converted (TF's TypeError where it cannot hold it)."""
    if checked_tensor(value, np.dtype(dtype), f"{arg}: "):
        return convert_to_tensor(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value).astype(dtype)
    return convert_to_tensor(value, dtype=dtype)


def meshgrid(*args: TensorLike, indexing: str = "xy", name: str | None = None) -> list[Tensor]:
    if indexing not in ("xy", "ij"):
        raise ValueError(f"tf.meshgrid: `indexing` must be 'xy' or 'ij', got {indexing!r}")
    arrays = [convert_to_tensor(a) for a in args]
    return list(xp(*arrays).meshgrid(*arrays, indexing=indexing))


def sequence_mask(lengths: TensorLike, maxlen: int | None = None, dtype: DTypeLike = "bool",
                  name: str | None = None) -> Tensor:
    """`mask[..., j] = j < lengths[...]`, `maxlen` long (the longest length when None: a host value)."""
    lengths = convert_to_tensor(lengths)
    module = xp(lengths)
    if maxlen is None:
        maxlen = _ints(module.max(lengths) if lengths.size else 0)[0]
    mask = module.arange(_ints(maxlen)[0]) < module.expand_dims(lengths, -1)
    return mask.astype(numpy_dtype(dtype))


def slice(input_: TensorLike, begin: ShapeLike, size: ShapeLike, name: str | None = None) -> Tensor:  # noqa: A001
    """`size[d]` entries from `begin[d]` on each dimension d (-1: to the end)."""
    x = convert_to_tensor(input_)
    starts, sizes = _ints(begin), _ints(size)
    if len(starts) != x.ndim or len(sizes) != x.ndim:
        raise ValueError(f"tf.slice: `begin` and `size` need one entry per dimension ({x.ndim}); got {starts}, {sizes}")
    index = []
    for d, (start, length, dim) in enumerate(zip(starts, sizes, x.shape)):
        stop = dim if length == -1 else start + length
        if start < 0 or start > dim:  # TF 2.21's InvalidArgumentError (observed)
            raise InvalidArgumentError(None, None, f"Expected begin[{d}] in [0, {dim}], but got {start} [Op:Slice]")
        if stop > dim or length < -1:
            raise InvalidArgumentError(None, None, f"Expected size[{d}] in [0, {dim - start}], but got {length} "
                                                   "[Op:Slice]")
        index.append(np.s_[start:stop])
    return x[tuple(index)]


def strided_slice(input_: TensorLike, begin: ShapeLike, end: ShapeLike, strides: ShapeLike | None = None,
                  begin_mask: int = 0, end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0, var: object = None, name: str | None = None) -> Tensor:
    """`x[begin[0]:end[0]:strides[0], ...]` (Python's slicing rules: negative indices count from the end, out of
    range bounds clip); bit d of `begin_mask` / `end_mask` leaves that bound open, of `shrink_axis_mask` takes the
    one entry at `begin[d]`; of `ellipsis_mask` stands for the dimensions no other entry names (`...`), of
    `new_axis_mask` inserts a dimension of size 1 (`None`; observed, TF 2.21: `strided_slice(x[2, 3], [0, 0], [1,
    2], new_axis_mask=1)` has shape (1, 2, 3))."""
    x = convert_to_tensor(input_)
    starts, stops = _ints(begin), _ints(end)
    steps = [1] * len(starts) if strides is None else _ints(strides)
    named = sum(1 for d in range(len(starts)) if not (ellipsis_mask | new_axis_mask) >> d & 1)
    if not len(starts) == len(stops) == len(steps) or named > x.ndim:
        raise ValueError(f"tf.strided_slice: begin {starts}, end {stops} and strides {steps} must have the same "
                         f"length, at most the rank {x.ndim}")
    index: list[Any] = []
    for d, (start, stop, step) in enumerate(zip(starts, stops, steps)):
        if ellipsis_mask >> d & 1:
            index.append(Ellipsis)
            continue
        if new_axis_mask >> d & 1:
            index.append(None)
            continue
        if step == 0:
            raise ValueError("tf.strided_slice: strides must be non-zero")
        if shrink_axis_mask >> d & 1:
            index.append(start)
            continue
        index.append(np.s_[None if begin_mask >> d & 1 else start:None if end_mask >> d & 1 else stop:step])
    return x[tuple(index)]


def searchsorted(sorted_sequence: TensorLike, values: TensorLike, side: str = "left",
                 out_type: DTypeLike = "int32", name: str | None = None) -> Tensor:
    """Where each of `values` would go in `sorted_sequence` (both searched along their last axis, row by row)."""
    if side not in ("left", "right"):
        raise ValueError(f"tf.searchsorted: `side` must be 'left' or 'right', got {side!r}")
    table, queries = convert_to_tensor(sorted_sequence), convert_to_tensor(values)
    if table.shape[:-1] != queries.shape[:-1]:
        raise ValueError(f"tf.searchsorted: the leading dimensions of `sorted_sequence` {table.shape} and "
                         f"`values` {queries.shape} must match")
    module = xp(table, queries)
    below = table[..., None, :] < queries[..., :, None] if side == "left" else \
        table[..., None, :] <= queries[..., :, None]
    return module.sum(below, axis=-1).astype(_index_dtype(queries, out_type))


ARRAY_OPS = dict(
    pad=pad, sort=sort, argsort=argsort, unique=unique, reverse=reverse, roll=roll, repeat=repeat,
    broadcast_to=broadcast_to, linspace=linspace, meshgrid=meshgrid, sequence_mask=sequence_mask, slice=slice,
    strided_slice=strided_slice, searchsorted=searchsorted,
)
