"""AutoGraph's loops: `while <tensor>:`, `for i in tf.range(<tensor>)` and `for row in <tensor>` as `lax.while_loop`.

The loop variables are the names the body assigns and the code reads after it or in the next pass; the body
is traced once (its `print`s show once, as in TF's fizzbuzz in the tf.function guide). A loop variable must
keep its shape and dtype: TF's ValueError, observed in TF 2.21, "'x' has shape (1,) before the loop, but shape
(2,) after one iteration. Use tf.autograph.experimental.set_loop_options to set shape invariants." A condition
or an iterable known at trace time (a Python bool, `range(3)`, a list) loops in Python, as in TF. `break` and
`continue` arrive here as loop variables (the converted code's flags); a `return` inside a tensor loop is TF's
NotImplementedError. A loop variable that is a Python object the body replaces (a `tf.TensorArray`) is an
unmarked error: a `tf.function` then runs that signature's body as Python, as before AutoGraph.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jdist import thread_stdout
from jdist.interop import trace_state
from jdist.interop.autograph import conditionals, values as V, variable_updates

_RELAXED = threading.local()  # `shapes`: the loop body being traced set shape invariants that let shapes change

RETURN_IN_LOOP = ("a return statement cannot be placed inside this TensorFlow loop; this may happen if a return "
                  "statement depends on a static Python condition such as a hyperparameter")

CHANGED_TO_TENSOR = (
    "The condition of while loop started as non-Tensor, then changed to Tensor. This may happen either because "
    "variables changed type, or when a break or return statement inside the loop depends on a Tensor condition. "
    "In both cases, changing to a TF loop should remove the error.\n    See https://github.com/tensorflow/"
    "tensorflow/blob/master/tensorflow/python/autograph/g3doc/reference/limitations.md"
    "#consistency-of-control-flow-types for more info.")


class TracedRange:
    """`tf.range(start, limit, delta)` with a traced bound, iterated by a converted `for`."""

    def __init__(self, start: Any, limit: Any, delta: Any, dtype: Any):
        self.start, self.limit, self.delta, self.dtype = start, limit, delta, dtype


def range_call(func: Callable, args: tuple, kwargs: dict) -> Any:
    """`tf.range(...)` as a `for`'s iterable: a `TracedRange` while a program is traced (a graph loop, its body
    traced once, as TF's `for i in tf.range(3)` in a `tf.function`), else the call."""
    values = list(args) + list(kwargs.values())
    if func is range or not trace_state.under_jit() or any(
            not isinstance(V._unwrapped(a), (int, float, np.generic, jax.Array, np.ndarray)) for a in values
            if a is not None and not isinstance(a, (str, type)) and not hasattr(a, "as_numpy_dtype")):
        return func(*args, **kwargs)
    names = ("start", "limit", "delta")
    bound = dict(zip(names, args)) | {k: v for k, v in kwargs.items() if k in names}
    if "limit" not in bound:
        bound["start"], bound["limit"] = 0, bound["start"]
    start, limit, delta = (jnp.asarray(V._unwrapped(bound.get(k, d))) for k, d in zip(names, (0, None, 1)))
    dtype = kwargs.get("dtype") or jnp.result_type(start, limit, delta)
    return TracedRange(start, limit, delta, jnp.dtype(getattr(dtype, "as_numpy_dtype", dtype)))


def python_iter(iterable: Any) -> Any:
    """The iterable of a loop that holds a `return`: only plain Python iteration can return from inside."""
    if isinstance(iterable, TracedRange) or V.is_traced(iterable):
        raise V.marked(NotImplementedError, RETURN_IN_LOOP)
    return iterable


def python_test(value: Any) -> Any:
    if V.is_traced(value):
        raise V.marked(NotImplementedError, RETURN_IN_LOOP)
    return value


def while_stmt(test: Callable, body: Callable, state: tuple, names: tuple[str, ...]) -> tuple:
    """`while test(*state): state = body(*state)`."""
    started = False
    while True:
        cond = test(*state)
        if V.is_traced(cond):
            if started:  # TF's rule, observed in TF 2.21 (`while True:` with a `break` on a tensor)
                raise V.marked(NotImplementedError, CHANGED_TO_TENSOR)
            return _traced_loop(lambda s: jnp.asarray(V._unwrapped(test(*s))).astype(bool), body, state, names)
        if not cond:
            return state
        started = True
        state = tuple(body(*state))


def for_stmt(iterable: Any, extra_test: Callable | None, body: Callable, state: tuple,
             names: tuple[str, ...]) -> tuple:
    """`for item in iterable: state = body(item, *state)`, stopping when `extra_test(*state)` (no `break`) is
    false."""
    if isinstance(iterable, TracedRange):
        r = iterable
        first = r.start.astype(r.dtype)

        def in_range(i: Any) -> Any:
            return jnp.where(r.delta > 0, i < r.limit, i > r.limit)
        return _indexed(first, in_range, lambda i: i + r.delta.astype(r.dtype), lambda i: i,
                        extra_test, body, state, names)
    if V.is_traced(iterable):
        array = V._unwrapped(iterable)
        array = array if isinstance(array, jax.Array) else jnp.asarray(array)  # a host tensor: indexed traced
        if array.ndim == 0:
            raise V.marked(TypeError, "Cannot iterate over a scalar tensor.")
        n = array.shape[0]
        return _indexed(jnp.asarray(0, jnp.int32), lambda i: i < n, lambda i: i + 1, lambda i: array[i],
                        extra_test, body, state, names)
    for item in iterable:
        if extra_test is not None:
            go = extra_test(*state)
            if V.is_traced(go):  # a `break` on a tensor in an earlier pass: the rest run under it
                state = conditionals.if_stmt(go, lambda *s, item=item: tuple(body(item, *s)), lambda *s: s,
                                             state, names)
                continue
            if not go:
                break
        state = tuple(body(item, *state))
    return state


def _indexed(first: Any, in_range: Callable, step: Callable, item: Callable, extra_test: Callable | None,
             body: Callable, state: tuple, names: tuple) -> tuple:
    def test(s: tuple) -> Any:
        go = in_range(s[0])
        if extra_test is not None:
            go = jnp.logical_and(go, jnp.asarray(V._unwrapped(extra_test(*s[1:]))).astype(bool))
        return go

    def run(*s: Any) -> tuple:
        return (step(s[0]),) + tuple(body(item(s[0]), *s[1:]))
    out = _traced_loop(test, run, (first,) + tuple(state), ("loop index",) + tuple(names))
    return tuple(out[1:])


def _initial(body: Callable, state: tuple, names: tuple) -> tuple:
    """Undefined loop variables get the body's first values' shape and dtype (zeros), as TF allows a variable
    first set inside a tensor loop."""
    if not any(V.is_undefined(v) for v in state):
        return state
    scope = variable_updates.current_scope()
    try:
        with thread_stdout.captured(), variable_updates.noted(scope, {}):
            outs = jax.eval_shape(lambda: [x if hasattr(x, "dtype") or isinstance(x, (int, float, bool)) else None
                                           for x in body(*state)])
    except Exception:  # noqa: BLE001 - the body needs the variable first: the loop's check names it
        return state
    return tuple(jnp.zeros(o.shape, o.dtype) if V.is_undefined(v) and o is not None else v
                 for v, o in zip(state, outs))


def _traced_loop(test: Callable, body: Callable, state: tuple, names: tuple) -> tuple:
    scope = variable_updates.current_scope()
    variables: dict[int, Any] = {}
    state = _initial(body, state, names)
    for attempt in range(3):
        try:
            with thread_stdout.captured() if attempt else conditionals._nothing():
                return _loop_once(test, body, state, names, scope, variables)
        except conditionals._Retry:
            continue
    raise RuntimeError("the loop's variable updates did not settle")


def _loop_once(test: Callable, body: Callable, state: tuple, names: tuple, scope: Any, variables: dict) -> tuple:
    known = list(variables.values())
    rows = V.per_name(names, state)
    init = [x for _, leaves, _ in rows for x in leaves if not isinstance(x, V.Static)]
    init += [jnp.asarray(variable_updates.value_in(scope, v)) for v in known]

    def rebuild(flat: list) -> tuple:
        it = iter(flat)
        return tuple(V.unflatten(t, [x if isinstance(x, V.Static) else next(it) for x in leaves])[0]
                     for _, leaves, t in rows)

    def write(flat: list) -> None:
        variable_updates.write_back(scope, known, list(flat[len(flat) - len(known):]))

    def cond_fn(flat: list) -> Any:
        assigned: dict[int, Any] = {}
        with variable_updates.noted(scope, assigned):
            write(flat)
            return test(rebuild(flat))

    def body_fn(flat: list) -> list:
        assigned: dict[int, Any] = {}
        _RELAXED.shapes = False
        with variable_updates.noted(scope, assigned):
            write(flat)
            out = tuple(body(*rebuild(flat)))
            updates = [jnp.asarray(variable_updates.value_in(scope, v)) for v in known]
        if any(key not in variables for key in assigned):
            variables.update(assigned)
            raise conditionals._Retry
        new = V.per_name(names, out)
        result = []
        for (name, before, t0), (_, after, t1) in zip(rows, new):
            if t0 != t1 or [isinstance(x, V.Static) for x in before] != [isinstance(x, V.Static) for x in after]:
                raise V.marked(TypeError, f"{name!r} must have the same nested structure before the loop and after one "
                                f"iteration:\n\nFirst structure: {t0}\n\nSecond structure: {t1}")
            for a, b in zip(before, after):
                if isinstance(a, V.Static):
                    if a != b:
                        raise TypeError(f"{name!r} is a Python value the loop changes ({a.value!r} "
                                       f"to {b.value!r}); a tensor loop's variables must be tensors.")
                    continue
                if a.dtype != b.dtype:
                    raise V.marked(TypeError, f"{name!r} has dtype {V.dtype_name(a.dtype)} before the loop, but dtype "
                                    f"{V.dtype_name(b.dtype)} after one iteration")
                if a.shape != b.shape and getattr(_RELAXED, "shapes", False):
                    raise ValueError(f"{name!r} has shape {tuple(a.shape)} before the loop, but shape {tuple(b.shape)} "
                                     "after one iteration, which the loop's shape_invariants allow; a compiled loop "
                                     "keeps its shapes (a tf.function runs this body as Python).")
                if a.shape != b.shape:
                    raise V.marked(ValueError, f"{name!r} has shape {tuple(a.shape)} before the loop, but shape "
                                     f"{tuple(b.shape)} after one iteration. Use "
                                     "tf.autograph.experimental.set_loop_options to set shape invariants.")
                result.append(b)
        return result + updates

    flat = jax.lax.while_loop(cond_fn, body_fn, init)
    write(flat)
    return rebuild(flat)


def set_loop_options(parallel_iterations: int | None = None, swap_memory: bool | None = None,
                     maximum_iterations: int | None = None, shape_invariants: Any = None) -> None:
    """`tf.autograph.experimental.set_loop_options`, written first in a loop's body: accepted as TF accepts it.
    Its other options tune TF's graph loop and have no effect here. A compiled JAX loop keeps its shapes: where
    `shape_invariants` let one change (TF 2.21 then runs the loop, observed), a `tf.function` runs the body as
    Python (values right); a shape change without them is TF's ValueError."""
    if shape_invariants is None:
        return
    if not isinstance(shape_invariants, (list, tuple)):
        raise TypeError("set_loop_options(shape_invariants=...) takes a list of (tensor, shape) pairs, got "
                        f"{type(shape_invariants).__name__}.")
    for value, shape in shape_invariants:
        try:
            dims = tuple(shape)
        except (TypeError, ValueError):  # an unknown rank
            dims = None
        if dims is None or dims != tuple(np.shape(value)):
            _RELAXED.shapes = True  # TF lets this loop's shapes change: not one compiled loop
