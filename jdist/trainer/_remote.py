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
from typing import Any, Callable, Iterable, Protocol, Sequence

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from jdist.callbacks import LazyLogs
from jdist.strategy import context
from jdist.trainer import _batching as batching
from jdist.trainer._hooks import batch_hooks, begin_hook
from jdist.trainer._input import TRAIN
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
            steps = StepBuilder(model, loss_fn, metrics, strategy.mesh, strategy.data_axis,
                                strategy.num_replicas_in_sync, policy=policy, seed=seed,
                                accumulation_steps=accumulation_steps)

            def program(state, batch, update_shardings):
                return steps.train_step(state, steps.fresh_metric_states(), batch, update_shardings)

            by_replica = NamedSharding(strategy.mesh, P(strategy.data_axis))
            self._compiled[strategy] = (steps, strategy.compile_step(program, state, donate=False,
                                                                     out_sharding=by_replica))
        return self._compiled[strategy]

    def __call__(self, state: Any, batches: list[batching.HostBatch]) -> list[dict]:
        """Runs one step per batch; returns each step's per-replica metric states (numpy)."""
        steps, step = self._step_for(state)
        results = []
        for batch in batches:
            multiple = steps.n * steps.accumulation_steps  # this worker's replicas x micro-batches
            batch = batching.pad_rows(batch, batching.round_up(len(batch.mask), multiple))
            state, states = step(state, batch.arrays())
            results.append(jax.device_get(states))
        return results


class RemoteEpoch:
    """Schedules an epoch's steps and collects their metric states as they finish."""

    def __init__(self, coordinator: Coordinator, fn: RemoteTrainSteps, steps: StepBuilder, max_pending: int):
        self._coordinator = coordinator
        self._fn = fn
        self._steps = steps
        self._max_pending = max_pending
        self._pending: collections.deque = collections.deque()
        self._finished: list[dict] = []

    def schedule(self, state: Any, block: list[batching.HostBatch]) -> None:
        """Queues one function training `state` (a `RemoteTrainState`) on `block`, after waiting for
        the oldest if too many are pending."""
        while len(self._pending) >= self._max_pending:
            self._finished.extend(self._pending.popleft().fetch())
        self._pending.append(self._coordinator.schedule(self._fn, args=(state, block)))

    def join(self) -> None:
        """Waits for every scheduled step (raises a failed step's error)."""
        self._coordinator.join()
        while self._pending:
            self._finished.extend(self._pending.popleft().fetch())

    def logs(self, names: Sequence[str]) -> dict[str, float]:
        """The metrics over the steps finished so far (waits for none)."""
        while self._pending and self._pending[0].ready():
            self._finished.extend(self._pending.popleft().fetch())
        if not self._finished:
            return {name: float("nan") for name in names}
        combined = jax.tree.map(lambda *parts: np.concatenate(parts), *self._finished)
        values = self._steps.read_metrics(combined)
        return {name: float(values[name]) for name in names}


def schedule_remote_epoch(trainer: Any, blocks: Iterable, callbacks: Any, hook: str, first_index: int) -> RemoteEpoch:
    """A `Trainer`'s pass where steps run on workers: each block of `steps_per_execution` steps is
    scheduled on a worker without waiting for it; batch hooks as in `jdist.trainer._hooks`."""
    # The coordinator knows how many workers run the steps (not every strategy has `num_workers`).
    coordinator: Coordinator = trainer.strategy.cluster_coordinator()
    if trainer._remote_steps is None:
        trainer._remote_steps = RemoteTrainSteps(trainer._model, trainer._loss_fn, trainer._metrics,
                                                 policy=trainer.policy, seed=trainer.seed,
                                                 accumulation_steps=trainer.accumulation_steps)
    epoch = RemoteEpoch(coordinator, trainer._remote_steps, trainer._steps,
                        max_pending=trainer._max_in_flight * coordinator.num_workers)
    logging_to, begin_to, k = batch_hooks(callbacks, hook, trainer._input.steps_per_call(TRAIN))
    index = first_index - 1
    for block in blocks:
        if begin_to is not None:
            begin_to.call(begin_hook(hook), index + 1, {})
        trainer._ensure_state(block.first)
        epoch.schedule(trainer._state, block.batches)
        trainer.step += len(block.batches)
        if logging_to is not None:
            logging_to.call(hook, index + k, LazyLogs(lambda: epoch.logs(trainer.metrics_names)))
        index += len(block.batches)
    epoch.join()
    if index < 0:
        raise ValueError("The input yielded no batches.")
    return epoch
