"""AutoGraph's `if`: a Python `if` on a traced tensor as `lax.cond`, with TF's checks of the branches' variables.

Both branches are traced (their `print`s show once each, the main branch first, as in TF); every variable the
statement assigns and the code after it reads is an output. TF's errors, observed in TF 2.21: a variable set in
one branch only and read after: ValueError "'y' must also be initialized in the else branch"; different dtypes:
TypeError "'y' has dtype int32 in the main branch, but dtype float32 in the else branch"; different structures:
TypeError "'y' must have the same nested structure in the main and else branches: ..."; a `return` in one branch
only: ValueError "the else branch must also have a return statement.". A condition known at trace time runs
one branch as plain Python. What TF allows but one compiled program cannot hold (branches giving different
shapes, or different Python values such as strings) is an unmarked error: a `tf.function` then runs that
signature's body as Python (values right, as before AutoGraph), `strategy.run` reports it.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from jdist import thread_stdout
from jdist.interop.autograph import values as V, variable_updates

RETVAL = "ag__retval"
_BRANCHES = ("main", "else")


class _Retry(Exception):
    """A branch assigned variables the other did not: trace both again carrying all of them."""


def _label(name: str) -> str:
    return "the return value" if name == RETVAL else f"{name!r}"


def _check(name: str, first: tuple, second: tuple) -> None:
    """TF's errors for one variable's values out of the main (`first`) and else (`second`) branch."""
    (leaves_a, tree_a), (leaves_b, tree_b) = first, second
    undefined_a = any(isinstance(x, V.Static) and V.is_undefined(x.value) for x in leaves_a)
    undefined_b = any(isinstance(x, V.Static) and V.is_undefined(x.value) for x in leaves_b)
    if undefined_a != undefined_b:
        missing = _BRANCHES[0] if undefined_a else _BRANCHES[1]
        if name == RETVAL:
            raise V.marked(ValueError, f"the {missing} branch must also have a return statement.")
        raise V.marked(ValueError, f"{name!r} must also be initialized in the {missing} branch")
    if tree_a != tree_b or [isinstance(x, V.Static) for x in leaves_a] != [isinstance(x, V.Static) for x in leaves_b]:
        raise V.marked(TypeError, f"{_label(name)} must have the same nested structure in the main and else "
                       "branches:\n\n"
                       f"First structure: {tree_a}\n\nSecond structure: {tree_b}")
    for a, b in zip(leaves_a, leaves_b):
        if isinstance(a, V.Static):
            if a != b:
                raise TypeError(f"{_label(name)} is a Python value that differs between the main and "
                               "else branches "
                               f"({a.value!r} and {b.value!r}); a tensor condition needs the same value in both, or "
                                "tensors (tf.constant) TF can choose between.")
        elif a.dtype != b.dtype:
            raise V.marked(TypeError, f"{_label(name)} has dtype {V.dtype_name(a.dtype)} in the main branch, but dtype "
                            f"{V.dtype_name(b.dtype)} in the else branch")
        elif a.shape != b.shape:
            raise ValueError(f"{_label(name)} has shape {tuple(a.shape)} in the main branch, but shape "
                             f"{tuple(b.shape)} in the else branch; TF allows that (an unknown shape), jdist compiles "
                             "each tensor with one shape. Fix: give both branches the same shape (pad, or tf.where).")


def if_stmt(cond: Any, body: Callable, orelse: Callable, state: tuple, names: tuple[str, ...]) -> tuple:
    """`if cond:` with `body(*state)` / `orelse(*state)` returning the new values of `names`."""
    if not V.is_traced(cond):
        return body(*state) if cond else orelse(*state)
    pred = jnp.asarray(V._unwrapped(cond))
    if pred.shape != ():
        raise V.marked(ValueError, "condition of if statement expected to be `tf.bool` scalar, got "
                       f"Tensor(shape={tuple(pred.shape)}, dtype={V.dtype_name(pred.dtype)}); to check for None, "
                       "use `is not None`")
    scope = variable_updates.current_scope()
    variables: dict[int, Any] = {}
    for attempt in range(3):
        try:
            with thread_stdout.captured() if attempt else _nothing():
                return _traced_if(pred.astype(bool), (body, orelse), state, names, scope, variables)
        except _Retry:
            continue
    raise RuntimeError("the branches' variable updates did not settle")  # unreachable: the set only grows


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _traced_if(pred: Any, branches: tuple, state: tuple, names: tuple, scope: Any, variables: dict) -> tuple:
    known = list(variables.values())
    results: list[Any] = [None, None]

    def traced(index: int) -> Callable:
        def run(_: Any) -> list:
            assigned: dict[int, Any] = {}
            with variable_updates.noted(scope, assigned):
                out = branches[index](*state)
                updates = [variable_updates.value_in(scope, v) for v in known]
            if any(key not in variables for key in assigned):
                variables.update(assigned)
                raise _Retry
            rows = V.per_name(names, tuple(out))
            results[index] = rows
            if results[1 - index] is not None:
                main, other = (rows, results[1]) if index == 0 else (results[0], rows)
                for (name, a, ta), (_, b, tb) in zip(main, other):
                    _check(name, (a, ta), (b, tb))
            return [x for _, leaves, _ in rows for x in leaves if not isinstance(x, V.Static)] + [
                jnp.asarray(u) for u in updates]
        return run

    # `lax.cond` traces its branches in the order of `lax.switch`'s list: the main branch first, as TF does
    flat = jax.lax.switch(jnp.logical_not(pred).astype(jnp.int32), [traced(0), traced(1)], None)
    rows = results[0]
    assert rows is not None
    it = iter(flat)
    out = []
    for _, leaves, treedef in rows:
        out.append(V.unflatten(treedef, [x if isinstance(x, V.Static) else next(it) for x in leaves])[0])
    variable_updates.write_back(scope, known, list(it))
    return tuple(out)


def if_exp(cond: Any, body: Callable, orelse: Callable) -> Any:
    """`a if cond else b`."""
    return if_stmt(cond, lambda: (body(),), lambda: (orelse(),), (), ("the expression",))[0]


def not_(value: Any) -> Any:
    return jnp.logical_not(V._unwrapped(value)) if V.is_traced(value) else not value


def and_(*parts: Callable) -> Any:
    """`a and b`: later parts evaluated only while the value is not a known False, as Python does."""
    value = parts[0]()
    for part in parts[1:]:
        if V.is_traced(value):
            value = jnp.logical_and(V._unwrapped(value), V._unwrapped(part()))
        elif not value:
            return value
        else:
            value = part()
    return value


def or_(*parts: Callable) -> Any:
    """`a or b` (see `and_`)."""
    value = parts[0]()
    for part in parts[1:]:
        if V.is_traced(value):
            value = jnp.logical_or(V._unwrapped(value), V._unwrapped(part()))
        elif value:
            return value
        else:
            value = part()
    return value
