"""Proof that a forward pass is row-local: row i of every output depends only on row i of the batch.

A global-view step differentiates the loss of the whole batch; a per-replica step differentiates each
replica's rows and sums the gradients. The two are the same function exactly when the forward computes each
example's loss from that example alone (and the parameters), without using the batch's size or the rows'
positions. Batch normalization, in-batch negatives, a loss normalised by `x.shape[0]` or dropout drawn for
the global batch are not; dense, convolution, pooling, activations and cross-entropy are.

`is_row_local(fn, args, batch_args, local_rows)` decides it from jaxprs, never from values:
- an abstract interpretation of `fn`'s jaxpr at the global batch tracks, for every intermediate, the
  dimension its rows follow (`Row(d)`), or that it does not depend on the batch (`Free`, with the dimensions
  it is constant along), or that rows mixed (None). Only primitives whose effect on rows is known pass a row
  dimension through; any other primitive touching the batch, a random draw or position (`iota`) meeting the
  rows, a collective or a callback makes the answer False;
- `fn` traced again at `local_rows` rows must be the same program with the same literals: a batch size used
  as a value (`x / x.shape[0]`) would differ.
False means "not proven"; the caller keeps the global view.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import jax
import jax.extend.core as jcore
import numpy as np


@dataclasses.dataclass(frozen=True)
class Row:
    """Row i of this value (along dimension `dim`) depends only on row i of the batch."""

    dim: int


@dataclasses.dataclass(frozen=True)
class Free:
    """Does not depend on the batch; constant along `uniform` (and along every size-1 dimension)."""

    uniform: frozenset = frozenset()


State = "Row | Free | None"

ELEMENTWISE = frozenset("""
abs acos acosh add and asin asinh atan atan2 atanh bitcast_convert_type cbrt ceil clamp clz complex conj
convert_element_type copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma
igammac imag integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or
population_count pow real reduce_precision rem round rsqrt select_n shift_left shift_right_arithmetic
shift_right_logical sign sin sinh sqrt square stop_gradient sub tan tanh xor
""".split())
REDUCTIONS = frozenset("reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin"
                       .split())
CUMULATIVE = frozenset("cumsum cumprod cummax cummin cumlogsumexp".split())
CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
         "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
         "checkpoint": "jaxpr", "remat": "jaxpr"}


def _shape(atom: Any) -> tuple:
    return tuple(getattr(atom.aval, "shape", ()))


def _uniform(state: Free, shape: tuple) -> frozenset:
    return state.uniform | {i for i, n in enumerate(shape) if n == 1}


def _elementwise(states: list, shapes: list[tuple], out_shape: tuple) -> Any:
    rows = {s.dim for s in states if isinstance(s, Row)}
    if any(s is None for s in states) or len(rows) > 1:
        return None
    if not rows:
        common = frozenset(range(len(out_shape)))
        for s, shape in zip(states, shapes):
            common &= _uniform(s, shape) if shape else frozenset(range(len(out_shape)))
        return Free(common)
    (dim,) = rows
    for s, shape in zip(states, shapes):
        if isinstance(s, Row) and shape[dim] != out_shape[dim]:
            return None  # a size-1 row dimension broadcast over the batch
        if isinstance(s, Free) and shape and dim not in _uniform(s, shape):
            return None  # rows meet values that vary by position (iota, a random draw, a batch-sized constant)
    return Row(dim)


def _shift(dim: int, removed: Sequence[int]) -> int:
    return dim - sum(1 for r in removed if r < dim)


def _dot(eqn: Any, lhs: Any, rhs: Any) -> Any:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lrank, rrank = len(_shape(eqn.invars[0])), len(_shape(eqn.invars[1]))
    lfree = [d for d in range(lrank) if d not in lc and d not in lb]
    rfree = [d for d in range(rrank) if d not in rc and d not in rb]

    def position(state, contracting, batch, free, other, other_batch, other_shape, offset):
        if state.dim in contracting:
            return None  # a sum over rows
        if state.dim in batch:
            j = list(batch).index(state.dim)
            partner = other_batch[j]
            if isinstance(other, Free) and partner not in _uniform(other, other_shape):
                return None
            if isinstance(other, Row) and other.dim != partner:
                return None
            return j
        return offset + free.index(state.dim)

    if lhs is None or rhs is None:
        return None
    if isinstance(lhs, Free) and isinstance(rhs, Free):
        return Free()
    out = set()
    if isinstance(lhs, Row):
        out.add(position(lhs, lc, lb, lfree, rhs, rb, _shape(eqn.invars[1]), len(lb)))
    if isinstance(rhs, Row):
        out.add(position(rhs, rc, rb, rfree, lhs, lb, _shape(eqn.invars[0]), len(lb) + len(lfree)))
    if None in out or len(out) != 1:
        return None
    return Row(out.pop())


def _gather(eqn: Any, operand: Any, indices: Any) -> Any:
    dn = eqn.params["dimension_numbers"]
    shape, ishape = _shape(eqn.invars[0]), _shape(eqn.invars[1])
    out_rank = len(_shape(eqn.outvars[0]))
    batch_out = [d for d in range(out_rank) if d not in dn.offset_dims]  # indices' dims but the last, in order
    kept = [d for d in range(len(shape)) if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
    if operand is None or indices is None:
        return None
    if isinstance(indices, Row) and indices.dim == len(ishape) - 1:
        return None  # rows would pick positions from each other
    result = None
    if isinstance(indices, Row):
        result = batch_out[indices.dim]
        if indices.dim in dn.start_indices_batching_dims:
            partner = dn.operand_batching_dims[list(dn.start_indices_batching_dims).index(indices.dim)]
            if isinstance(operand, Free) and partner not in _uniform(operand, shape):
                return None
            if isinstance(operand, Row) and operand.dim != partner:
                return None
    if isinstance(operand, Row):
        d = operand.dim
        if d in dn.operand_batching_dims:
            partner = dn.start_indices_batching_dims[list(dn.operand_batching_dims).index(d)]
            if not (isinstance(indices, Row) and indices.dim == partner) and not (
                    isinstance(indices, Free) and partner in _uniform(indices, ishape)):
                return None
            mine = batch_out[partner]
        elif d in kept and d not in dn.start_index_map and eqn.params["slice_sizes"][d] == shape[d]:
            mine = dn.offset_dims[kept.index(d)]
        else:
            return None
        if result is not None and result != mine:
            return None
        result = mine
    return Free() if result is None else Row(result)


def _one(eqn: Any, states: list) -> list:
    """The states of `eqn`'s outputs."""
    name, params = eqn.primitive.name, eqn.params
    shapes = [_shape(v) for v in eqn.invars]
    outs = [_shape(v) for v in eqn.outvars]
    first = states[0] if states else Free()
    if name in CALLS and CALLS[name] in params:
        inner = params[CALLS[name]]
        return _interpret(inner.jaxpr if hasattr(inner, "jaxpr") else inner, states)
    if eqn.effects or name in ("sharding_constraint", "random_bits", "random_seed", "random_wrap",
                               "threefry2x32", "rng_bit_generator", "rng_uniform"):
        return [None] * len(outs)
    if name == "iota":
        return [Free(frozenset(range(len(outs[0]))) - {params["dimension"]})]
    if name in ELEMENTWISE or name == "select_n":
        return [_elementwise(states, shapes, outs[0])]
    if name == "optimization_barrier":
        return list(states)
    if name == "broadcast_in_dim":
        dims = params["broadcast_dimensions"]
        if isinstance(first, Row):
            return [Row(dims[first.dim]) if shapes[0][first.dim] == outs[0][dims[first.dim]] else None]
        if isinstance(first, Free):
            uniform = {d for d in range(len(outs[0])) if d not in dims}
            uniform |= {dims[j] for j in _uniform(first, shapes[0])}
            return [Free(frozenset(uniform))]
        return [None]
    if name == "transpose":
        perm = list(params["permutation"])
        if isinstance(first, Row):
            return [Row(perm.index(first.dim))]
        return [Free(frozenset(perm.index(d) for d in _uniform(first, shapes[0]))) if isinstance(first, Free) else None]
    if name == "reshape":
        if isinstance(first, Row) and params.get("dimensions") is None and (
                shapes[0][:first.dim + 1] == tuple(params["new_sizes"])[:first.dim + 1]):
            return [Row(first.dim)]
        return [Free() if isinstance(first, Free) else None]
    if all(isinstance(s, Free) for s in states):
        return [Free() for _ in outs]  # batch-independent; nothing known about its shape's uniformity
    if name == "dot_general":
        return [_dot(eqn, states[0], states[1])]
    if name == "gather":
        return [_gather(eqn, states[0], states[1])]
    if name in ("concatenate", "sort", "top_k"):
        return _aligned(params, states, shapes, len(outs))
    if not isinstance(first, Row):
        return [None] * len(outs)
    return _row_op(eqn, first, states, shapes)


def _aligned(params: dict, states: list, shapes: list[tuple], count: int) -> list:
    """Several operands with the same rows, combined along another dimension (concatenate, sort, top_k)."""
    rows = {s.dim for s in states if isinstance(s, Row)}
    if any(s is None for s in states) or len(rows) != 1:
        return [None] * count
    (d,) = rows
    along = params.get("dimension", len(shapes[0]) - 1)
    if along == d or any(isinstance(s, Free) and d not in _uniform(s, sh) for s, sh in zip(states, shapes)):
        return [None] * count
    return [Row(d)] * count


def _row_op(eqn: Any, first: Row, states: list, shapes: list[tuple]) -> list:
    """The outputs of a one-operand primitive on rows along `first.dim` (extra operands batch-free)."""
    name, params, d = eqn.primitive.name, eqn.params, first.dim
    count = len(eqn.outvars)
    if any(not isinstance(s, Free) for s in states[1:]):
        return [None] * count
    if name in REDUCTIONS:
        return [None if d in params["axes"] else Row(_shift(d, params["axes"]))]
    if name == "squeeze":
        return [None if d in params["dimensions"] else Row(_shift(d, params["dimensions"]))]
    if name in CUMULATIVE or name == "split":
        return [None if params["axis"] == d else Row(d)] * count
    if name == "rev":
        return [None if d in params["dimensions"] else Row(d)]
    if name == "slice":
        full = params["start_indices"][d] == 0 and params["limit_indices"][d] == shapes[0][d] and (
            not params.get("strides") or params["strides"][d] == 1)
        return [Row(d) if full else None]
    if name == "pad":
        return [Row(d) if tuple(params["padding_config"][d]) == (0, 0, 0) else None]
    if name == "dynamic_slice":
        return [Row(d) if params["slice_sizes"][d] == shapes[0][d] else None]
    if name in ("reduce_window_max", "reduce_window_min", "reduce_window_sum"):
        plain = (params["window_dimensions"][d] == 1 and params["window_strides"][d] == 1
                 and tuple(params["padding"][d]) == (0, 0) and params["base_dilation"][d] == 1
                 and params["window_dilation"][d] == 1)
        return [Row(d) if plain else None]
    if name == "conv_general_dilated":
        lhs_spec, _, out_spec = params["dimension_numbers"]
        ok = d == lhs_spec[0] and params["feature_group_count"] == 1 and params["batch_group_count"] == 1
        return [Row(out_spec[0]) if ok else None]
    return [None] * count


def _interpret(jaxpr: Any, in_states: list) -> list:
    env: dict = dict(zip(jaxpr.invars, in_states))
    for var in jaxpr.constvars:
        env[var] = Free()

    def read(atom):
        return Free() if isinstance(atom, jcore.Literal) else env.get(atom)

    for eqn in jaxpr.eqns:
        for var, state in zip(eqn.outvars, _one(eqn, [read(v) for v in eqn.invars])):
            env[var] = state
    return [read(v) for v in jaxpr.outvars]


def _program(jaxpr: Any) -> list:
    """Primitive names, literal values and constants in order, through called jaxprs: what must match
    between the traces at two batch sizes."""
    out: list = []

    def visit(value):
        if isinstance(value, jcore.ClosedJaxpr):
            out.extend(np.asarray(c).tolist() for c in value.consts)
            out.extend(_program(value.jaxpr))
        elif isinstance(value, jcore.Jaxpr):
            out.extend(_program(value))
        elif isinstance(value, (tuple, list)):
            for item in value:
                visit(item)

    for eqn in jaxpr.eqns:
        out.append(eqn.primitive.name)
        out.extend(np.asarray(v.val).tolist() for v in eqn.invars if isinstance(v, jcore.Literal))
        for value in eqn.params.values():
            visit(value)
    return out


def _abstract(tree: Any, rows: int | None = None) -> Any:
    def leaf(x):
        shape = tuple(np.shape(x))
        if rows is not None:
            shape = (rows,) + shape[1:]
        return jax.ShapeDtypeStruct(shape, jax.dtypes.result_type(x))

    return jax.tree.map(leaf, tree)


def is_row_local(fn: Callable, args: Sequence[Any], batch_args: Sequence[int], local_rows: int) -> bool:
    """Whether every output of `fn(*args)` is row-local along its first dimension in the leading dimension
    of the arguments at positions `batch_args` (see the module docstring)."""
    args = list(args)
    batch_leaves = [x for i in batch_args for x in jax.tree.leaves(args[i])]
    if not batch_leaves or any(np.ndim(x) == 0 for x in batch_leaves):
        return False
    rows = np.shape(batch_leaves[0])[0]
    if any(np.shape(x)[0] != rows for x in batch_leaves):
        return False
    global_args = [_abstract(a) for a in args]
    local_args = [_abstract(a, local_rows) if i in batch_args else _abstract(a) for i, a in enumerate(args)]
    try:
        closed = jax.make_jaxpr(fn)(*global_args)
        local = jax.make_jaxpr(fn)(*local_args)
    except Exception:  # a forward that cannot run on a replica's rows (a shape check, a fixed batch size)
        return False
    if _program(closed.jaxpr) != _program(local.jaxpr) or len(closed.consts) != len(local.consts) or any(
            np.shape(a) != np.shape(b) or not np.array_equal(np.asarray(a), np.asarray(b))
            for a, b in zip(closed.consts, local.consts)):
        return False
    states = [Row(0) if i in batch_args else Free() for i, a in enumerate(args) for _ in jax.tree.leaves(a)]
    outs = _interpret(closed.jaxpr, states)
    shapes = [_shape(v) for v in closed.jaxpr.outvars]
    return all(isinstance(s, Row) and s.dim == 0 or isinstance(s, Free) and shape and shape[0] == rows
               and 0 in _uniform(s, shape) for s, shape in zip(outs, shapes))
