"""Which results of a replica function read the row count of a padded short batch (`x.shape[0]`, `tf.size(x)`).

A short batch given to a function that communicates runs padded to equal shards (`padded_run`). Results computed
from the padding rows are found by data dependence (`padded_run.analyse`), but a row count read from a shape is
not data: it is a Python number the trace bakes into the program as a literal, so it escapes that analysis.
`all_reduce("sum", tf.shape(x)[0])` over replicas holding 3, 3, 3 and 1 real rows gave 12 (the padded shards'
rows) where TF 2.21 gives 10 (observed, 4 logical CPUs).

Tracing the function again with one more row per replica shows them: an equation whose literal operands differ
between the two traces read the row count, and so does every value computed from it. The comparison is
conservative: traces that differ in structure count every result as reading it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jdist.strategy.replica_taint import _is_literal, _subjaxprs


def _same_literal(a: Any, b: Any) -> bool:
    if _is_literal(a) != _is_literal(b):
        return False
    if not _is_literal(a):
        return True
    try:
        return bool(np.array_equal(np.asarray(a.val), np.asarray(b.val), equal_nan=True))  # jnp.var's nan
    except Exception:  # noqa: BLE001 (a literal numpy cannot compare: count it as differing)
        return False


def _same_form(ea: Any, eb: Any) -> bool:
    """Whether two equations at one place of the two traces are the same primitive on as many operands."""
    return ea.primitive is eb.primitive and len(ea.invars) == len(eb.invars)


def _makes_rows(ea: Any, eb: Any) -> bool:
    """Whether an equation on no batch rows (`iota`, `broadcast_in_dim` of a literal: `tf.ones_like(x)`, or of a
    value: `tf.fill(tf.shape(x), replica_id)`) makes an array as long as the batch: its shape parameter is the row
    count (the caller has ruled out operands computed from the batch's rows)."""
    if _subjaxprs(ea):
        return False
    for key, value in ea.params.items():
        other = eb.params.get(key)
        try:
            if not bool(np.all(value == other)):
                return True
        except Exception:  # noqa: BLE001 (parameters that do not compare: by their text)
            if repr(value) != repr(other):
                return True
    return False


def _equation_differs(ea: Any, eb: Any) -> bool:
    """Whether two equations of the same form differ in a literal operand or in their bodies."""
    subs_a, subs_b = _subjaxprs(ea), _subjaxprs(eb)
    return (not all(_same_literal(x, y) for x, y in zip(ea.invars, eb.invars)) or len(subs_a) != len(subs_b)
            or any(_literals_differ(sa, sb) for sa, sb in zip(subs_a, subs_b)))


def _literals_differ(a: Any, b: Any) -> bool:
    """Whether two traces of one body differ in a literal or in structure (bodies included)."""
    if len(a.eqns) != len(b.eqns) or len(a.outvars) != len(b.outvars):
        return True
    if any(not _same_form(ea, eb) or _equation_differs(ea, eb) for ea, eb in zip(a.eqns, b.eqns)):
        return True
    return not all(_same_literal(x, y) for x, y in zip(a.outvars, b.outvars))


def reads_row_count(padded: Any, grown: Any) -> tuple[bool, ...]:
    """Per output of `padded` (the replica function's jaxpr), whether it is computed from a row count:
    `grown` is the same function traced with one more row in every padded input."""
    if len(padded.eqns) != len(grown.eqns) or len(padded.outvars) != len(grown.outvars):
        return (True,) * len(padded.outvars)
    marked: set = set()
    # Rows made from constants (`tf.ones_like(x[:, 0])`) hold values in the padding rows too, and no input's data
    # marks them: TF 2.21 counts `reduce_sum(ones_like(x[:, 0]))` over replicas holding 2, 2, 2 and 0 real rows as
    # 2, 2, 2 and 0 (observed). Such a value reads the row count until it meets a batch input's rows, whose padding
    # data dependence follows from there (`padded_run`), as the gradient of a sum broadcasts ones over the batch.
    made: set = set()
    rows = {a for a, b in zip(padded.invars, grown.invars)
            if getattr(a.aval, "shape", ()) != getattr(b.aval, "shape", ())}  # the batch inputs
    for ea, eb in zip(padded.eqns, grown.eqns):
        if not _same_form(ea, eb):
            return (True,) * len(padded.outvars)
        operands = [v for v in ea.invars if not _is_literal(v)]
        if any(v in rows for v in operands):
            rows.update(ea.outvars)
        elif _makes_rows(ea, eb) or any(v in made for v in operands):
            made.update(ea.outvars)
        if _equation_differs(ea, eb) or any(v in marked for v in operands):
            marked.update(ea.outvars)
    return tuple((not _is_literal(a) and (a in marked or a in made)) or not _same_literal(a, b)
                 for a, b in zip(padded.outvars, grown.outvars))


def more_rows(shape: Sequence[int], kind: str, replicas: int) -> tuple[int, ...]:
    """An input's shape with one more row per replica: a batch split along dim 0 over the replicas grows by one
    row each; a stacked per-replica value `(replicas, rows, ...)` by one row in dim 1."""
    shape = tuple(shape)
    if kind == "stacked":
        return shape[:1] + (shape[1] + 1,) + shape[2:] if len(shape) > 1 else shape
    return (shape[0] + replicas,) + shape[1:] if shape else shape
