"""Which results of a replica function are the same on every replica.

`strategy.run` traces the replica function once; a forward pass over its jaxpr
marks values that can differ between replicas ("per-replica"): the split inputs,
`axis_index`, and anything computed from them, until a collective that leaves
every replica with the same result (`psum`, `all_gather`, ...) cleans them.
Untainted results come back as one replicated array, still one value per replica
to `experimental_local_results`, `reduce` and `gather` (see `jdist.strategy.values`); the
analysis is conservative, so a value is never wrongly called mirrored.
"""
from __future__ import annotations

from typing import Any, Sequence

# Collectives whose result is identical on every participating replica.
_UNIFYING = {"psum", "psum2", "pmax", "pmin", "pmean", "all_gather", "psum_invariant", "all_gather_invariant"}
# Primitives that make a value depend on which replica computes it.
_SOURCES = {"axis_index"}


def per_replica_outputs(jaxpr: Any, tainted_inputs: Sequence[bool]) -> list[bool]:
    """For each output of `jaxpr`, whether it may differ between replicas."""
    tainted: set = set()
    for var, flag in zip(jaxpr.invars, tainted_inputs):
        if flag:
            tainted.add(var)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        in_flags = [_is_tainted(v, tainted) for v in eqn.invars]
        if name in _UNIFYING:
            out_flags = [False] * len(eqn.outvars)
        elif name in _SOURCES:
            out_flags = [True] * len(eqn.outvars)
        else:
            inner = _single_subjaxpr(eqn)
            if inner is not None:
                out_flags = per_replica_outputs(inner, in_flags)
            else:
                out_flags = [any(in_flags) or _has_source(eqn)] * len(eqn.outvars)
        for var, flag in zip(eqn.outvars, out_flags):
            if flag:
                tainted.add(var)
    return [_is_tainted(v, tainted) for v in jaxpr.outvars]


def _is_tainted(var: Any, tainted: set) -> bool:
    return not _is_literal(var) and var in tainted


def _is_literal(var: Any) -> bool:
    return type(var).__name__ == "Literal"


def _subjaxprs(eqn: Any) -> list:
    found = []
    for value in eqn.params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            jaxpr = getattr(item, "jaxpr", item)
            if hasattr(jaxpr, "eqns") and hasattr(jaxpr, "invars"):
                found.append(jaxpr)
    return found


def _single_subjaxpr(eqn: Any) -> Any:
    """The body of call-like primitives (jit, custom_jvp, remat) whose inputs map one to one."""
    subs = _subjaxprs(eqn)
    if len(subs) == 1 and len(subs[0].invars) == len(eqn.invars) and len(subs[0].outvars) == len(eqn.outvars):
        if eqn.primitive.name not in ("while", "scan", "cond"):
            return subs[0]
    return None


def _has_source(eqn: Any) -> bool:
    """Whether a control-flow body contains a replica-dependent primitive."""
    for jaxpr in _subjaxprs(eqn):
        for inner in jaxpr.eqns:
            if inner.primitive.name in _SOURCES or _has_source(inner):
                return True
    return False
