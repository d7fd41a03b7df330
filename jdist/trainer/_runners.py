"""What runs a pass's blocks: the one loop of `Trainer` hands each block to a runner.

A runner takes the state and one block (`jdist.trainer._input.Block`) and returns the state
after it, with a reader of the logs at that point (read only if a callback asks). Which runner
a pass gets is the strategy's choice: compiled executions on this process's mesh
(`CompiledRunner` for train and eval, `PredictRunner`), or steps scheduled on parameter-server
workers (`jdist.trainer._remote.RemoteEpoch`). None of them knows the Trainer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import jax
import numpy as np

from jdist.diagnostics import memory
from jdist.strategy import dispatch
from jdist.trainer._hooks import real_outputs

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy
    from jdist.trainer._input import Block

LogsReader = Callable[[], dict]


class Runner(Protocol):
    """Runs blocks of one pass."""

    def run(self, state: Any, block: Block) -> tuple[Any, LogsReader]:
        """Dispatches `block`'s steps from `state`; returns the state after them and a reader of
        the logs at this point (the steps may still run)."""
        ...

    def finish(self) -> None:
        """The pass is over: wait for what must be waited for (the logs are read next)."""
        ...

    def logs(self) -> dict:
        """The pass's logs (metrics, or `{"outputs": ...}` for predict)."""
        ...


class CompiledRunner:
    """Train or eval executions compiled for this process's mesh, metric states carried along.

    `execute(state, metric_states, *args)` returns `(state, metric_states)` when training, the
    metric states when evaluating; `read(metric_states) -> logs`.
    Evaluation runs on the strategy's compute view of the state, made once per pass."""

    def __init__(self, execute: Callable, states: dict, read: Callable[[Any], dict], strategy: Strategy, *,
                 train: bool, max_in_flight: int):
        self._execute = execute
        self._states = states
        self._read = read
        self._strategy = strategy
        self._train = train
        self._view: Any = None
        self._limiter = dispatch.InFlightLimiter(max_in_flight)

    def run(self, state: Any, block: Block) -> tuple[Any, LogsReader]:
        if not self._train and self._view is None:
            self._view = self._strategy.compute_view(state)
        states = self._states
        for args, _ in block.executions:
            try:
                if self._train:
                    state, states = self._execute(state, states, *args)
                else:
                    states = self._execute(self._view, states, *args)
            except RuntimeError as error:
                if memory.is_out_of_memory(error):  # name the large buffers and the remedies
                    raise memory.out_of_memory_error(error, state, args[0], self._strategy) from error
                raise
            self._limiter.push(dispatch.dispatched(states))
        self._states = states
        return state, lambda: self._read(states)

    def finish(self) -> None:
        # No drain: the logs are read next, whose program queues behind the last execution and
        # whose fetch waits for all of them: one wait per pass instead of two.
        pass

    def logs(self) -> dict:
        return self._read(self._states)


class PredictRunner:
    """Predict executions: outputs kept on the devices until the pass ends, padding rows removed then."""

    def __init__(self, execute: Callable, strategy: Strategy, *, stacked: bool, max_in_flight: int):
        self._execute = execute
        self._strategy = strategy
        self._stacked = stacked
        self._view: Any = None
        self._pending: list = []
        self._limiter = dispatch.InFlightLimiter(max_in_flight)

    def run(self, state: Any, block: Block) -> tuple[Any, LogsReader]:
        if self._view is None:
            self._view = self._strategy.compute_view(state)
        ((args, _),) = block.executions  # predict runs a block in one call
        out = self._execute(self._view, *args)
        item = (out, [b.mask for b in block.batches], self._stacked)
        self._pending.append(item)
        self._limiter.push(dispatch.dispatched(out))
        # Keras's logs: {"outputs": this execution's outputs}
        return state, lambda: {"outputs": _concatenate(real_outputs(*item))}

    def finish(self) -> None:
        self._limiter.drain()

    def logs(self) -> dict:
        outputs: list = []
        for item in self._pending:
            outputs.extend(real_outputs(*item))
        return {"outputs": _concatenate(outputs)}


def _concatenate(parts: Sequence[Any]) -> Any:
    return jax.tree.map(lambda *a: np.concatenate(a), *parts)
