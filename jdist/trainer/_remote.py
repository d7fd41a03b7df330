"""The Trainer under `ParameterServerStrategy`: every step scheduled on a worker.

As Keras's `fit` under TF's parameter-server strategy: the coordinator schedules
the steps through the `ClusterCoordinator` and does not wait for them; a worker
pulls the parameters, computes its batch's gradients on its own devices and
pushes them, and each server applies them on arrival (asynchronous training).
The padded host batches travel with the scheduled function (k of them per
function with `steps_per_execution=k`).

Metrics stay exact: each step also returns its batch's per-replica metric
states, computed from fresh states on the worker, and the coordinator keeps them
and combines them all when the metrics are read. Every real example counts once,
whichever worker ran it (TF instead updates shared metric variables from all
workers).
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Protocol, Sequence

import jax
import numpy as np

from jdist.strategy import context
from jdist.strategy.batch import Batch
from jdist.trainer import _batching as batching
from jdist.trainer._steps import StepBuilder


class Coordinator(Protocol):
    """What a remote epoch needs of `strategy.cluster_coordinator()` (TF's `ClusterCoordinator`)."""

    @property
    def num_workers(self) -> int:
        """The workers that run scheduled functions."""
        ...

    def schedule(self, fn: Callable, args: Any = None, kwargs: Any = None) -> Any:
        ...

    def join(self) -> None:
        ...


class RemoteTrainSteps:
    """The function a worker runs for a block of steps (picklable; compiles on the worker)."""

    def __init__(self, model: Any, loss_fn: Callable, metrics: Sequence[Any], *, policy: Any, seed: int,
                 accumulation_steps: int = 1):
        self._config = (model, loss_fn, list(metrics), policy, seed, accumulation_steps)
        self._compiled: dict[Any, tuple[StepBuilder, Callable]] = {}

    def __getstate__(self) -> dict:
        return {"_config": self._config, "_compiled": {}}  # compiled steps stay in their process

    def _step_for(self, state: Any) -> tuple[StepBuilder, Callable]:
        strategy = context.get_strategy()  # the worker's own strategy (its local devices)
        if strategy not in self._compiled:
            model, loss_fn, metrics, policy, seed, accumulation_steps = self._config
            steps = StepBuilder(model, loss_fn, metrics, strategy.data_sharding(),
                                strategy.num_replicas_in_sync, policy=policy, seed=seed,
                                accumulation_steps=accumulation_steps)

            def program(state, batch, update_shardings):
                return steps.train_step(state, steps.fresh_metric_states(), batch, update_shardings)

            self._compiled[strategy] = (steps, strategy.compile_step(program, state, donate=False,
                                                                     out_sharding=strategy.data_sharding()))
        return self._compiled[strategy]

    def __call__(self, state: Any, batches: list[Batch]) -> list[dict]:
        """Runs one step per batch; returns each step's per-replica metric states (numpy)."""
        steps, step = self._step_for(state)
        results = []
        for batch in batches:
            multiple = steps.n * steps.accumulation_steps  # this worker's replicas x micro-batches
            batch = batching.pad_rows(batch, batching.round_up(len(batch.mask), multiple))
            state, states = step(state, batch)
            results.append(jax.device_get(states))
        return results


class RemoteEpoch:
    """The runner (`jdist.trainer._runners.Runner`) of a training pass whose steps run on workers:
    each block of `steps_per_execution` steps is scheduled on a worker without waiting for it, and
    the metric states of the steps are collected as they finish."""

    def __init__(self, coordinator: Coordinator, fn: RemoteTrainSteps, steps: StepBuilder, names: Sequence[str],
                 max_pending: int):
        self._coordinator = coordinator
        self._fn = fn
        self._steps = steps
        self._names = list(names)
        self._max_pending = max_pending
        self._pending: collections.deque = collections.deque()
        self._finished: list[dict] = []

    def run(self, state: Any, block: Any) -> tuple[Any, Callable[[], dict]]:
        """Queues one function training `state` (a `RemoteTrainState`, updated on the servers) on the
        block's batches, after waiting for the oldest if too many are pending."""
        while len(self._pending) >= self._max_pending:
            self._finished.extend(self._pending.popleft().fetch())
        self._pending.append(self._coordinator.schedule(self._fn, args=(state, block.batches)))
        return state, self.logs

    def finish(self) -> None:
        """Waits for every scheduled step (raises a failed step's error)."""
        self._coordinator.join()
        while self._pending:
            self._finished.extend(self._pending.popleft().fetch())

    def logs(self) -> dict[str, float]:
        """The metrics over the steps finished so far (waits for none)."""
        while self._pending and self._pending[0].ready():
            self._finished.extend(self._pending.popleft().fetch())
        if not self._finished:
            return {name: float("nan") for name in self._names}
        combined = jax.tree.map(lambda *parts: np.concatenate(parts), *self._finished)
        values = self._steps.read_metrics(combined)
        return {name: float(values[name]) for name in self._names}
