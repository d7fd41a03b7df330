"""Which results of a replica function have one row per example of a split batch.

A short batch reaches each replica padded, with a mask of its real rows. A result
of `run` keeps that mask (so `experimental_local_results`, `gather` and
`reduce(axis=0)` drop the padding rows, as TF's unpadded replicas would) only when
it is *row-aligned* with the batch: its dim 0 is the batch's dim 0 and row i of
the result depends only on row i of the batch (and on values that do not depend
on the batch at all). Then the real rows of the result are exactly what the
replica computes on its real rows alone.

The proof is a forward pass over the traced jaxpr, in the style of
`jdist.strategy.replica_taint`. Each value is FREE (computed without any split input),
ALIGNED with a set of split inputs, or OTHER. Rules that keep ALIGNED: elementwise
primitives; `broadcast_in_dim`, `reshape`, `transpose`, `slice`, `pad`,
`squeeze`, `concatenate`, `rev`, cumulative ops and `sort` that keep dim 0 in
place; reductions and `argmax`/`argmin` over other axes; `dot_general` whose
aligned operands bring dim 0 in as output dim 0 (a free or batch dimension, never
contracted); `conv_general_dilated` over the batch dimension; `gather` of a FREE
table at ALIGNED indices (embedding lookups); call-like primitives (`jit`,
`custom_jvp_call`, `remat`) by their bodies. Any other primitive, control flow
and collectives (`psum` mixes replicas' rows) make a value that depends on the
batch OTHER: not proven, so no mask. What `run` does with such results on a short
batch (run each replica alone, or raise): `jdist.strategy.padded_run`.
"""
from __future__ import annotations

from typing import Any, Sequence

from jdist.strategy.replica_taint import _is_literal, _single_subjaxpr

FREE = None
OTHER = "other"

_ELEMENTWISE = {
    "abs", "acos", "acosh", "add", "and", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "clamp",
    "convert_element_type", "copy", "copy_p", "cos", "cosh", "digamma", "div", "eq", "erf", "erf_inv", "erfc",
    "exp", "exp2", "expm1", "floor", "ge", "gt", "igamma", "imag", "integer_pow", "is_finite", "le", "lgamma",
    "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "nextafter", "not", "or", "pow", "real",
    "reduce_precision", "rem", "round", "rsqrt", "select_n", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "sign", "sin", "sinh", "sqrt", "square", "sub", "tan", "tanh", "xor", "stop_gradient",
    "optimization_barrier",
}
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor",
               "argmax", "argmin"}
_CUMULATIVE = {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"}


def aligned_outputs(jaxpr: Any, input_states: Sequence[Any]) -> list:
    """For each output of `jaxpr`: FREE, OTHER, or the frozenset of split inputs it is row-aligned with.

    `input_states[i]`: FREE for broadcast inputs, `frozenset({i})` for a split input
    whose dim 0 is the batch's rows, OTHER for anything else.
    """
    state: dict = {}
    for var, value in zip(jaxpr.invars, input_states):
        state[var] = value
    for eqn in jaxpr.eqns:
        ins = [FREE if _is_literal(v) else state.get(v, FREE) for v in eqn.invars]
        if all(s is FREE for s in ins):
            outs = [FREE] * len(eqn.outvars)
        elif any(s is OTHER for s in ins):
            outs = [OTHER] * len(eqn.outvars)
        else:
            inner = _single_subjaxpr(eqn)
            if inner is not None:
                outs = aligned_outputs(inner, ins)
            else:
                outs = [_rule(eqn, ins)] * len(eqn.outvars)
        for var, value in zip(eqn.outvars, outs):
            if value is not FREE and not _rows_kept(eqn, var, ins, value):
                value = OTHER
            state[var] = value
    return [FREE if _is_literal(v) else state.get(v, FREE) for v in jaxpr.outvars]


def _rows_kept(eqn: Any, out: Any, ins: list, value: Any) -> bool:
    """An ALIGNED output must keep the aligned inputs' row count in dim 0."""
    if value is OTHER:
        return True
    shape = getattr(out.aval, "shape", ())
    rows = {v.aval.shape[0] for v, s in zip(eqn.invars, ins) if isinstance(s, frozenset) and v.aval.shape}
    return len(shape) >= 1 and len(rows) == 1 and shape[0] in rows


def _union(states: list) -> Any:
    aligned = [s for s in states if isinstance(s, frozenset)]
    return frozenset().union(*aligned) if aligned else FREE


def _rule(eqn: Any, ins: list) -> Any:
    """The state of a primitive's outputs when some input is ALIGNED and none is OTHER."""
    name, params = eqn.primitive.name, eqn.params
    aligned = _union(ins)
    if name in _ELEMENTWISE:
        return aligned
    if name == "broadcast_in_dim":
        dims = params["broadcast_dimensions"]
        return aligned if dims and dims[0] == 0 else OTHER
    if name == "reshape":
        return aligned if params.get("dimensions") is None else OTHER
    if name == "transpose":
        return aligned if params["permutation"][0] == 0 else OTHER
    if name in _REDUCTIONS:
        return aligned if 0 not in params["axes"] else OTHER
    if name in _CUMULATIVE:
        return aligned if params["axis"] != 0 else OTHER
    if name == "sort":
        return aligned if params["dimension"] != 0 else OTHER
    if name == "rev":
        return aligned if 0 not in params["dimensions"] else OTHER
    if name == "squeeze":
        return aligned if 0 not in params["dimensions"] else OTHER
    if name == "concatenate":
        return aligned if params["dimension"] != 0 else OTHER
    if name == "slice":
        rows = eqn.invars[0].aval.shape[0]
        strides = params.get("strides")
        keeps = params["start_indices"][0] == 0 and params["limit_indices"][0] == rows
        return aligned if keeps and (strides is None or strides[0] == 1) else OTHER
    if name == "pad":
        if isinstance(ins[1], frozenset):  # the padding value itself must not depend on the batch
            return OTHER
        return aligned if tuple(params["padding_config"][0]) == (0, 0, 0) else OTHER
    if name == "dot_general":
        return _dot_general(params, ins, aligned)
    if name == "conv_general_dilated":
        return _conv(params, ins, aligned)
    if name == "gather":
        return _gather(eqn, params, ins, aligned)
    return OTHER


def _dot_general(params: Any, ins: list, aligned: Any) -> Any:
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lhs, rhs = ins[0], ins[1]
    if lb:  # output dim 0 is batch dim 0: lhs dim lb[0] with rhs dim rb[0]
        ok_l = lhs is FREE or (lb[0] == 0 and 0 not in lc)
        ok_r = rhs is FREE or (rb[0] == 0 and 0 not in rc)
        return aligned if ok_l and ok_r else OTHER
    # No batch dims: output dim 0 is lhs's first free dim (rhs's when lhs has none).
    if isinstance(lhs, frozenset):
        return aligned if 0 not in lc and rhs is FREE else OTHER
    return OTHER  # rhs ALIGNED and lhs FREE: rhs rows land after lhs's free dims (or lhs has none: rare)


def _conv(params: Any, ins: list, aligned: Any) -> Any:
    lhs, rhs = ins[0], ins[1]
    dn = params["dimension_numbers"]
    if rhs is not FREE or params.get("batch_group_count", 1) != 1:
        return OTHER
    lhs_spec, _, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    return aligned if isinstance(lhs, frozenset) and lhs_spec[0] == 0 and out_spec[0] == 0 else OTHER


def _gather(eqn: Any, params: Any, ins: list, aligned: Any) -> Any:
    operand, indices = ins[0], ins[1]
    dn = params["dimension_numbers"]
    if operand is not FREE or not isinstance(indices, frozenset):
        return OTHER
    if getattr(dn, "operand_batching_dims", ()) or 0 in dn.offset_dims:
        return OTHER
    index_rank = len(eqn.invars[1].aval.shape)
    # Output dims that are not offset dims are the indices' dims other than the last
    # (the index vector), in order: indices dim 0 becomes output dim 0.
    return aligned if index_rank >= 2 else OTHER
