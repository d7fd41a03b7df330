"""A `map` function run per element as TF runs it: the graph traced once, when the dataset is made.

TF 2.21 (observed): `range(5).map(f)`, with `f` appending to a list or incrementing a counter, does so once,
at `map`, and never while the dataset is iterated; a Python or numpy random number drawn in `f` is the same
for every element and every pass (it was drawn at the trace). jdist traces the function by JAX when the
dataset is made (`shape_inference.trace`, 64-bit on, so int64 and float64 compute as TF's); where that trace
is a pure computation of the element, each element runs it compiled (one compilation per dataset, the element
shapes being static), and the function's Python code runs no more. Where it is not — host-only parts
(`tf.py_function`, `tf.numpy_function`, text), a `tf.random` op (TF draws per element: the Python path draws
from `seeding`'s per-pass generators), a random key or a captured array (a variable TF reads when it runs),
an unknown dimension, an output whose dtype differs from the call on placeholders — the Python function
runs per element, as before. `filter`'s predicate, `reduce`'s and `scan`'s functions are run the same way. A
small trace of exact arithmetic is evaluated on numpy instead of the compiled call (`host_eval`: the same
results, without a compiled call's per-element dispatch).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.extend
import numpy as np

from jdist.tfdata import host_eval, jaxpr_eval, structure
from jdist.tfdata.jaxpr_eval import evaluate, pure
from jdist.tfdata.shape_inference import Trace, scan_parts


def compile_map(trace: Trace | None, input_spec: Any, output: Any) -> Callable[[Any], Any] | None:
    """The function of `trace` as run per element (an element of `input_spec` in, `output`'s structure out),
    or None where the Python function must run instead (see the module docstring). `output`: the function's
    output on placeholder values, normalized (its dtypes and shapes are TF's)."""
    if trace is None or not jaxpr_eval.runnable(trace, input_spec, output):
        return None
    specs = structure.leaves(input_spec)
    closed = trace.closed
    wanted = [np.asarray(leaf) for leaf in structure.leaves(output)]
    avals = [v.aval for v in closed.jaxpr.outvars]
    if len(avals) != len(wanted) or any(np.dtype(a.dtype) != w.dtype or tuple(a.shape) != w.shape
                                        for a, w in zip(avals, wanted)):
        return None
    if any(isinstance(c, jax.Array) for c in closed.consts) or not pure(closed.jaxpr):
        return None
    run = jax.jit(lambda *values: evaluate(closed.jaxpr, closed.consts, values))
    dtypes = [np.dtype(s.dtype) for s in specs]
    cpu = jax.devices("cpu")[0]
    on_numpy = host_eval.evaluator(closed, [int(np.prod(s.shape)) for s in specs])  # tiny traces: no dispatch

    def apply(element: Any) -> Any:
        values = [np.asarray(v, dtype=d) for v, d in zip(structure.leaves(element), dtypes)]
        if on_numpy is not None:
            out = on_numpy(values)
        else:
            with jax.enable_x64(True), jax.default_device(cpu):  # on the host, as TF's tf.data
                out = run(*values)
        it = iter(out)
        return structure.map_leaves(lambda _: np.array(next(it)), output)  # writable host arrays, as TF's numpy()

    return apply


def compile_predicate(predicate: Callable[..., Any], input_spec: Any, trace: Trace | None = None
                      ) -> Callable[[Any], bool] | None:
    """`filter`'s predicate as run per element: compiled (`compile_map`) where its trace is a pure computation
    of a boolean scalar, else None (the Python predicate then runs per element). TF 2.21 (observed): a counter
    in a `filter` predicate counts 1 at `filter`, and no more while the dataset is iterated. `trace`: the
    predicate's trace where it was made (`user_functions.single_trace`), else it is traced here."""
    from jdist.tfdata import user_functions

    if trace is None:
        trace = user_functions.trace_abstract(predicate, input_spec)
    run = compile_map(trace, input_spec, np.zeros((), np.bool_))
    return None if run is None else (lambda element: bool(run(element)))


def compile_fold(fn: Callable[[Any, Any], Any], state: Any, input_spec: Any, trace: Trace | None = None
                 ) -> Callable[[Any, Any], Any] | None:
    """`reduce`'s `fn(state, element)` as run per element: compiled where its trace is a pure computation whose
    new state has the initial state's dtypes and shapes, else None. TF 2.21 (observed): a counter in a `reduce`
    function counts 1 (its trace), whatever the number of elements. `trace`: as `compile_predicate`'s."""
    from jdist.tfdata import user_functions

    if input_spec is None:
        return None
    state_spec = structure.spec_of(state)
    both = (state_spec, input_spec)
    if trace is None:
        trace = user_functions.trace_abstract(fn, both)
    run = compile_map(trace, both, structure.placeholder(state_spec))
    return None if run is None else (lambda current, element: run((current, element)))


def compile_scan(trace: Trace | None, state: Any, input_spec: Any) -> Callable[[Any, Any], Any] | None:
    """`scan`'s `scan_func(state, element) -> (new_state, output)` as run per element: compiled where its trace
    (`user_functions.fold_trace`) is a pure computation whose new state has the state's dtypes and shapes, else
    None (the Python function then runs per element). TF 2.21 (observed): a counter in a scan function counts 1
    after two passes, and a Python `random.random()` in it is drawn once, at the trace."""
    parts = scan_parts(trace, state, input_spec)
    if parts is None:
        return None
    output, state_spec = parts
    run = compile_map(trace, (state_spec, input_spec), output)
    return None if run is None else (lambda current, element: run((current, element)))
