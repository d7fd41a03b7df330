"""While a `tf.function` is traced into one compiled program: the running trace, and how ops report to it.

`jdist.interop.graph_trace` runs a `tf.function`'s Python body once per input signature under JAX's tracer, as
TF traces it into a graph. Some ops would run on the host at trace time and freeze their result into the
program, where TF runs them on every call: drawing from `tf.random`'s host generator, reading a `tf.data`
iterator, calling `strategy.run`. They call `refuse`, which stops the trace (`NotTraceable`); the function then
runs its Python body on every call for that signature instead, which is correct, only not compiled. A
`tf.Variable` made during a trace is reported through `variable_created`.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator


class NotTraceable(Exception):
    """An op that cannot be part of a compiled `tf.function` ran during its trace (see the module docstring)."""


class Trace:
    """One trace of a `tf.function`'s body: the variables it made, and whether it may make them.

    TF lets a function make variables only in its first trace (observed, TF 2.21: a later one raises
    ValueError "tf.function only supports singleton tf.Variables created on the first call ...")."""

    def __init__(self, may_create: bool):
        self.may_create = may_create
        self.created: list[Any] = []
        self.after: list[Callable[[], None]] = []  # what runs once the trace ends (`after_trace`)


class _Traces(threading.local):
    def __init__(self):
        self.active: list[Trace] = []


_TRACES = _Traces()  # per thread: the parameter-server coordinator runs scheduled functions in threads
SINGLETON = ("tf.function only supports singleton tf.Variables created on the first call. Make sure the "
             "tf.Variable is only created once or created outside tf.function. See "
             "https://www.tensorflow.org/guide/function#creating_tfvariables for more information.")


@contextlib.contextmanager
def tracing(trace: Trace) -> Iterator[Trace]:
    _TRACES.active.append(trace)
    try:
        yield trace
    finally:
        _TRACES.active.pop()


def active() -> bool:
    return bool(_TRACES.active)


def refuse(what: str) -> None:
    """Stops a running trace: `what` cannot be compiled into it (see the module docstring)."""
    if _TRACES.active:
        raise NotTraceable(what)


def after_trace(action: Callable[[], None]) -> None:
    """`action()` now, or, during a trace, once it ends, outside JAX's tracer: giving a variable made in the trace
    a value from outside the program (a checkpoint's, when a layer built in the trace restores on build)."""
    if _TRACES.active:
        _TRACES.active[-1].after.append(action)
    else:
        action()


def variable_created(make: Callable[[], Any], initial_value: Any) -> Any:
    """`make()`, a new variable, during a trace: allowed in a function's first trace, from a value known
    at trace time (one computed from the function's inputs cannot start a variable that outlives the call)."""
    trace = _TRACES.active[-1]
    if not trace.may_create:
        raise ValueError(SINGLETON)
    if _is_traced(initial_value):
        raise NotTraceable("a tf.Variable whose initial value is computed from the function's inputs")
    with outside_trace():
        variable = make()
    trace.created.append(variable)
    return variable


def _is_traced(value: Any) -> bool:
    import jax
    from jax.core import Tracer

    return any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(value))


@contextlib.contextmanager
def outside_trace() -> Iterator[None]:
    """Making a variable during a trace: outside the trace's Keras `StatelessScope` (Keras refuses to make one in
    it) and with JAX computing eagerly (its initial value must be an array, not a value of the program). The
    trace is then redone with the new variable as an input."""
    import jax
    from keras.src.backend.common import global_state

    scope = global_state.get_global_attribute("stateless_scope")
    global_state.set_global_attribute("stateless_scope", None)
    try:
        with jax.ensure_compile_time_eval():
            yield
    finally:
        global_state.set_global_attribute("stateless_scope", scope)
