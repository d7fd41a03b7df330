"""A small, elementwise `map` trace run on numpy instead of through a compiled JAX call.

A compiled call costs some tens of microseconds per element (dispatch, argument conversion), which for a trivial
function over scalars (`map(lambda x: x + 1)`) is more than running the function in Python. A trace made only of
exact arithmetic (add, multiply, comparisons, selects, casts that numpy and TF compute alike) on small arrays is
therefore evaluated here, one numpy call per operation, each result cast to the traced dtype. Transcendental
functions, integer division and float-to-int casts are left to the compiled call (their results could differ
in the last bit or at the edges). The results are the same as the compiled call's: float division is the
correctly rounded IEEE one, as TF's and numpy's (the compiled call keeps it so with an optimization barrier).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.extend
import numpy as np

_MAX_SIZE = 256  # elements per input or output, above which the compiled call is used

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
    "ne": np.not_equal, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_UNARY: dict[str, Callable[[Any], Any]] = {"neg": np.negative, "not": np.invert, "abs": np.abs,
                                           "copy": np.asarray, "copy_p": np.asarray}


def _cast_ok(source: np.dtype, target: np.dtype) -> bool:
    """Casts numpy and XLA compute alike: not float to int (NaN and overflow differ)."""
    return not (source.kind in "fc" and target.kind in "iub")


def _supported(jaxpr: Any) -> bool:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ("pjit", "jit") and "jaxpr" in eqn.params:
            if not _supported(eqn.params["jaxpr"].jaxpr):
                return False
            continue
        if name == "div":
            if np.dtype(eqn.outvars[0].aval.dtype).kind not in "fc":
                return False
            continue
        if name == "convert_element_type":
            if not _cast_ok(np.dtype(eqn.invars[0].aval.dtype), np.dtype(eqn.params["new_dtype"])):
                return False
            continue
        if name == "integer_pow" and eqn.params.get("y") == 2:
            continue
        if name not in _BINARY and name not in _UNARY and name != "select_n":
            return False
        if any(len(v.aval.shape) != len(eqn.outvars[0].aval.shape) for v in eqn.invars
               if hasattr(v.aval, "shape") and v.aval.shape):  # implicit broadcasting of ranks: left to XLA
            return False
    return True


def evaluator(closed: Any, sizes: list[int]) -> Callable[[list], list] | None:
    """A numpy evaluation of `closed` (a `ClosedJaxpr`), or None where it holds an operation not computed here,
    a constant, or an input or output (of `sizes` and the outputs' shapes) larger than `_MAX_SIZE` elements."""
    jaxpr = closed.jaxpr
    if closed.consts or any(s > _MAX_SIZE for s in sizes) or \
            any(int(np.prod(v.aval.shape)) > _MAX_SIZE for v in jaxpr.outvars) or not _supported(jaxpr):
        return None

    def run(values: list) -> list:
        with np.errstate(all="ignore"):  # XLA's wrap-around, inf and nan, without warnings
            return [np.asarray(v, dtype=var.aval.dtype) for v, var in
                    zip(_evaluate(jaxpr, values), jaxpr.outvars)]
    return run


def _evaluate(jaxpr: Any, values: list) -> list:
    env: dict = dict(zip(jaxpr.invars, values))

    def read(var: Any) -> Any:
        if isinstance(var, jax.extend.core.Literal):
            return np.asarray(var.val, dtype=var.aval.dtype)  # pyright: ignore[reportAttributeAccessIssue]
        return env[var]

    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        dtype = eqn.outvars[0].aval.dtype
        if name in ("pjit", "jit"):
            outs = _evaluate(eqn.params["jaxpr"].jaxpr, args)
            env.update(zip(eqn.outvars, outs))
            continue
        if name in _BINARY:
            out = _BINARY[name](args[0], args[1])
        elif name == "div":
            out = np.divide(args[0], args[1])
        elif name in _UNARY:
            out = _UNARY[name](args[0])
        elif name == "integer_pow":
            out = np.multiply(args[0], args[0])
        elif name == "select_n":  # case i where the selector is i (a boolean selector: case 1 where true)
            which, cases = args[0], args[1:]
            out = cases[0] if len(cases) == 1 else np.where(which, cases[1], cases[0]) if len(cases) == 2 else \
                np.choose(which, cases)
        else:  # convert_element_type
            out = args[0]
        env[eqn.outvars[0]] = np.asarray(out, dtype=dtype)
    return [read(v) for v in jaxpr.outvars]
