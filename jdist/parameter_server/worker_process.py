"""The code a worker's Ray actor process runs: scheduled functions on its own devices.

A plain class, turned into a Ray actor by `processes.start_actor`, so this module
imports without Ray; JAX is configured for the worker's devices before its first use.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from jdist.cluster import worker_context
from jdist.cluster.worker_context import WorkerResource
from jdist.parameter_server.processes import prepare_process


class WorkerProcess:
    """A worker: runs scheduled functions on its own devices and keeps its per-worker resources."""

    def __init__(self, index: int, devices_per_worker: int | None, sys_path: Sequence[str]):
        prepare_process(sys_path, num_cpu_devices=devices_per_worker or 1)
        from jdist.parameter_server.strategy import WorkerStrategy

        self._index = index
        self._resources: dict[str, Any] = {}
        self._functions: dict[str, Callable] = {}
        self._keras_variables: dict[str, tuple] = {}
        self._strategy = WorkerStrategy(devices_per_worker)
        worker_context.set_current_worker(index, self._strategy)

    def pid(self) -> int:
        return os.getpid()

    def create_resource(self, resource_id: str, fn: Callable, args: tuple) -> None:
        """Builds a per-worker resource (a dataset, an iterator over it) from `fn(*args)`."""
        self._resources[resource_id] = fn(*self._resolve(args))

    def run(self, token: str, fn: Callable | None, args: tuple, kwargs: dict, keras_plan: Any = None) -> Any:
        """Runs one scheduled function under this worker's strategy; results come back as numpy.

        `fn` is sent with its first call only; later calls name it by `token`, so
        the same function object (and its compiled steps) is reused. With a `keras_plan`, the
        Keras objects it uses are loaded from the parameter servers first and their changes pushed after.
        """
        import jax

        if fn is not None:
            self._functions[token] = fn
        fn = self._functions[token]
        with self._strategy.scope():
            if keras_plan is None:
                out = fn(*self._resolve(args), **self._resolve(kwargs))
            else:
                out = self._run_with_keras_plan(token, fn, args, kwargs, keras_plan)
        return jax.tree.map(lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, out)

    def _run_with_keras_plan(self, token: str, fn: Callable, args: tuple, kwargs: dict, keras_plan: Any) -> Any:
        """Loads the Keras variables `fn` uses, runs it with its optimizers' updates deferred, pushes the other
        variables' changes, then has the servers apply the updates (`keras_state`)."""
        from jdist.interop.keras_deferred import deferred
        from jdist.parameter_server.keras_state import optimizers_of, worker_objects

        if token not in self._keras_variables:
            variables = worker_objects(fn, self._strategy, keras_plan.sharing)
            optimizers = optimizers_of(fn)
            self._keras_variables[token] = (variables, optimizers, keras_plan.deferred_optimizers(variables,
                                                                                                 optimizers))
        variables, optimizers, specs = self._keras_variables[token]
        pulled = keras_plan.load(variables)
        updates: list = []

        def send() -> None:
            keras_plan.push(variables, pulled)
            keras_plan.apply(updates, variables, pulled)
            updates.clear()

        def between_steps() -> None:  # a function of several steps (fit's executions): each loads anew
            send()
            pulled[:] = keras_plan.load(variables)

        with deferred([o for o in optimizers if id(o) in specs],
                      lambda optimizer, grads, targets: updates.append((specs[id(optimizer)], grads, targets)),
                      between_steps):
            out = fn(*self._resolve(args), **self._resolve(kwargs))
        send()
        return out

    def _resolve(self, tree: Any) -> Any:
        import jax

        return jax.tree.map(lambda x: self._resources[x.resource_id] if isinstance(x, WorkerResource) else x,
                            tree, is_leaf=lambda x: isinstance(x, WorkerResource))
