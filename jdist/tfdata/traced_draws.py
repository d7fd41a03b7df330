"""`tf.random` ops in a `tf.data` function traced once, drawing per element as TF 2.21's do.

TF 2.21 (observed): `range(3).map(lambda x: x + tf.random.uniform([]))`, with a counter in the function,
counts 1 after two passes, and each element gets its own number (a seeded op gives the same numbers in every
pass; unseeded, without a global seed, new ones each pass). jdist draws a `tf.data` function's random numbers
on the host, from the pass's generators (`seeding.PassRandom`). While the function is traced once
(`user_functions.single_trace`), each draw of a static shape is a callback in the trace instead of a number
(`drawing`): when the trace runs for an element (`compile_drawing`), the callback draws from the generator of
that element's pass, the numbers those the Python function would have drawn. A draw that needs a traced value
(a shape or a bound from the element) makes the trace fail: the function then runs per element, as before.
"""
from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any, Callable

import jax
import jax.experimental
import numpy as np

from jdist.tfdata import jaxpr_eval, seeding, shape_inference, structure
from jdist.tfdata.shape_inference import Trace
from jdist.thread_locals import setting

_ACTIVE: list[seeding.PassRandom] = []  # the pass whose element runs now (its callbacks draw from it)
_RUN_LOCK = threading.Lock()  # one element's call at a time: the callbacks may run on XLA's threads
_MARK = "jdist_traced_draw"


def _size(size: Any) -> tuple:
    return tuple(int(d) for d in np.asarray(() if size is None else size).reshape(-1).tolist())


def _bound(value: Any) -> Any:
    return np.asarray(value)  # a traced bound raises here: the trace fails, the function runs per element


class _Drawing:
    """A generator whose draws are callbacks (numpy's `uniform`, `integers` and `normal`, as `tf.random` calls
    them), made when the trace runs from the generator of `seed` of the current pass."""

    def __init__(self, seed: int | None):
        self._seed = seed

    def _draw(self, method: str, args: tuple, size: Any, dtype: Any) -> Any:
        shape, seed = _size(size), self._seed

        def draw() -> np.ndarray:
            generator = _ACTIVE[-1].generator(seed)
            return np.asarray(getattr(generator, method)(*args, size=shape), dtype)
        draw.__name__ = _MARK
        return jax.experimental.io_callback(draw, jax.ShapeDtypeStruct(shape, dtype), ordered=True)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None) -> Any:
        return self._draw("uniform", (_bound(low), _bound(high)), size, np.float64)

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        return self._draw("normal", (_bound(loc), _bound(scale)), size, np.float64)

    def integers(self, low: Any, high: Any = None, size: Any = None) -> Any:
        low, high = _bound(low), None if high is None else _bound(high)
        dtype = np.result_type(low, high if high is not None else low, np.int64)
        return self._draw("integers", (low, high), size, dtype)


def drawing() -> AbstractContextManager[Any]:
    """While the block runs (a trace), this thread's `tf.random` ops in a `tf.data` function draw by callback."""
    return setting(seeding._LOCAL, "traced", _Drawing)


def _draws(jaxpr: Any) -> bool:
    """Whether `jaxpr` holds a draw's callback (and no other primitive `compiled` would not run)."""
    found = False
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "io_callback":
            callback = getattr(eqn.params.get("callback"), "callback_func", None)
            if getattr(callback, "__name__", "") != _MARK:
                raise ValueError("a callback other than a draw")
            found = True
        elif eqn.primitive.name in jaxpr_eval.UNCOMPILED:
            raise ValueError("a primitive run per element")
        for inner in jaxpr_eval.sub_jaxprs(eqn.params):
            found = _draws(inner) or found
    return found


def compile_drawing(trace: Trace | None, input_spec: Any, output: Any
                    ) -> Callable[[Any, seeding.PassRandom], Any] | None:
    """The function of `trace` as run per element, its draws made from the pass given with the element (`run(
    element, table)`); None where the trace holds no draw (`compiled.compile_map` then) or cannot run so."""
    if trace is None or not jaxpr_eval.runnable(trace, input_spec, output):
        return None
    specs = structure.leaves(input_spec)
    closed = trace.closed
    try:
        if not _draws(closed.jaxpr):
            return None
    except ValueError:
        return None
    wanted = [np.asarray(leaf) for leaf in structure.leaves(output)]
    avals = [v.aval for v in closed.jaxpr.outvars]
    if len(avals) != len(wanted) or any(np.dtype(a.dtype) != w.dtype or tuple(a.shape) != w.shape
                                        for a, w in zip(avals, wanted)) or \
            any(isinstance(c, jax.Array) for c in closed.consts):
        return None
    run = jax.jit(lambda *values: jaxpr_eval.evaluate(closed.jaxpr, closed.consts, values))
    dtypes = [np.dtype(s.dtype) for s in specs]
    cpu = jax.devices("cpu")[0]

    def apply(element: Any, table: seeding.PassRandom) -> Any:
        values = [np.asarray(v, dtype=d) for v, d in zip(structure.leaves(element), dtypes)]
        with _RUN_LOCK, jax.enable_x64(True), jax.default_device(cpu):
            _ACTIVE.append(table)
            try:
                out = [np.array(v) for v in run(*values)]
                jax.effects_barrier()  # every draw made while `table` is active, an unused one too
            finally:
                _ACTIVE.pop()
        it = iter(out)
        return structure.map_leaves(lambda _: next(it), output)
    return apply


def compile_predicate(trace: Trace | None, input_spec: Any) -> Callable[[Any], bool] | None:
    """`filter`'s predicate run from its trace (`compile_drawing`), drawing from the pass of the calling thread's
    `seeding.drawing` block; None where its trace holds no draw or cannot run so."""
    run = compile_drawing(trace, input_spec, np.zeros((), np.bool_))
    if run is None:
        return None
    return lambda element: bool(run(element, getattr(seeding._LOCAL, "table", None) or seeding.PassRandom()))


def compile_scan(trace: Trace | None, state: Any, input_spec: Any
                 ) -> Callable[[Any, Any, seeding.PassRandom], Any] | None:
    """`scan`'s function run from its one trace where that holds `tf.random` draws: `run(state, element, table)`
    gives `(new_state, output)`, the draws from `table` (the pass's). TF 2.21 (observed): a counter in a scan
    function reads 1 after two passes, with `uniform([], seed=3)` in it; its draws differ per element, repeat in
    every pass when seeded (or after `tf.random.set_seed`), and are new each pass otherwise. None where the
    trace holds no draw, or its new state has not the state's dtypes and shapes (`compiled.compile_scan`)."""
    parts = shape_inference.scan_parts(trace, state, input_spec)
    if parts is None:
        return None
    output, state_spec = parts
    run = compile_drawing(trace, (state_spec, input_spec), output)
    return None if run is None else (lambda current, element, table: run((current, element), table))


def compile_fold(trace: Trace | None, state: Any, input_spec: Any
                 ) -> Callable[[Any, Any, seeding.PassRandom], Any] | None:
    """`reduce`'s function run from its one trace where that holds `tf.random` draws: `run(state, element, table)`
    the new state. TF 2.21 (observed): a counter in it reads 1 per `reduce` call; `uniform([], seed=3)` in it
    gives the same result in every `reduce` (each a pass), unseeded new numbers each time."""
    if trace is None or input_spec is None:
        return None
    state_spec = structure.spec_of(state)
    run = compile_drawing(trace, (state_spec, input_spec), structure.placeholder(state_spec))
    return None if run is None else (lambda current, element, table: run((current, element), table))
