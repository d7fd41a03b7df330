"""Keras optimizer updates applied elsewhere: `apply_gradients` hands its gradients on instead of updating.

TF's `ParameterServerStrategy` runs `optimizer.apply_gradients` on the parameter
servers: the worker computes the gradients, and each server updates the variables and
slots it holds from their current values. A worker here holds copies of those variables,
so applying the update to the copies and sending the result would apply it to values
other workers may have changed meanwhile. Inside `deferred(optimizers, sink)`,
each of these optimizers' `apply_gradients` calls `sink(optimizer, grads, variables)`
with the gradients (None gradients dropped; inside `strategy.run`: summed over the
replicas, as TF's `apply_gradients` sums them, and handed on once the compiled replica
function has run) and leaves its variables and the model's unchanged: a read of them
later in the same function sees the values from before the update. A function that runs several steps
(Keras's `fit` executions, `interop.keras_ps_fit`) calls `step_boundary()` between them: the updates so far
are applied and the variables loaded again, so each step starts from the servers' values, as TF's steps read them.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from jdist.interop import keras_run

Sink = Callable[[Any, list, list], None]
_SINKS: dict[int, Sink] = {}
_BOUNDARIES: list[Callable[[], None] | None] = []


@contextlib.contextmanager
def deferred(optimizers: Sequence[Any], sink: Sink, between: Callable[[], None] | None = None) -> Iterator[None]:
    """While open, `apply_gradients` of each of `optimizers` hands `(optimizer, grads, variables)` to `sink`;
    `step_boundary()` calls `between` (which hands on what the sink got and loads the variables again)."""
    patched = []
    _BOUNDARIES.append(between)
    try:
        for optimizer in optimizers:
            if id(optimizer) in _SINKS:
                raise RuntimeError(f"The optimizer {optimizer.name!r} already defers its updates.")
            _SINKS[id(optimizer)] = sink
            optimizer.apply_gradients = _recording(optimizer)
            patched.append(optimizer)
        yield
    finally:
        _BOUNDARIES.pop()
        for optimizer in patched:
            _SINKS.pop(id(optimizer), None)
            optimizer.__dict__.pop("apply_gradients", None)  # back to the class's method


def _recording(optimizer: Any) -> Callable:
    def apply_gradients(grads_and_vars: Any, **kwargs: Any) -> Any:
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if keras_run.building_models():  # run's eager call that only builds the models
            return optimizer.iterations
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        frame = keras_run.current_frame()
        if frame is None:  # called eagerly: the gradients are values already
            deliver(optimizer, variables, [np.asarray(g) for g in grads])
        else:  # traced inside strategy.run: run hands them on after the compiled function ran
            frame.deferred.append((lambda values: deliver(optimizer, variables, values), grads))
        return optimizer.iterations

    return apply_gradients


def deliver(optimizer: Any, variables: list, grads: list) -> None:
    """Hands one `apply_gradients` call's gradients to the optimizer's current sink."""
    sink = _SINKS.get(id(optimizer))
    if sink is None:
        raise RuntimeError(
            f"The optimizer {optimizer.name!r} applied gradients in a compiled step made while its updates were "
            "applied elsewhere (on the parameter servers), and no one receives them now. Run that step only "
            "where it was compiled (a function scheduled with the ClusterCoordinator).")
    sink(optimizer, list(grads), list(variables))


def defers(optimizer: Any) -> bool:
    """Whether `optimizer`'s updates are applied elsewhere now (inside `deferred`)."""
    return id(optimizer) in _SINKS


def step_boundary() -> None:
    """Between two steps of one function: the updates deferred so far are applied and the variables loaded again
    (a no-op where no one asked for it)."""
    between = _BOUNDARIES[-1] if _BOUNDARIES else None
    if between is not None:
        between()
