"""What a scheduled function can ask about the worker process running it."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy

_CURRENT: dict[str, Any] = {}


def set_current_worker(index: int, strategy: Strategy) -> None:
    """Called once by a worker process when it starts."""
    _CURRENT["index"] = index
    _CURRENT["strategy"] = strategy


def in_worker() -> bool:
    return "index" in _CURRENT


def get_current_worker_index() -> int:
    """The index of the worker running the current scheduled function.

    TF's `tf.distribute.coordinator.experimental_get_current_worker_index()`.
    """
    if not in_worker():
        raise RuntimeError(
            "get_current_worker_index() can only be called inside a function run by "
            "ClusterCoordinator.schedule (on a worker)."
        )
    return _CURRENT["index"]


def current_worker_strategy() -> Any:
    """The strategy a worker runs scheduled functions under (its local devices)."""
    if not in_worker():
        raise RuntimeError(
            "A ParameterServerStrategy was copied to another process outside a worker. "
            "The strategy object lives on the coordinator; pass it only to functions run by "
            "ClusterCoordinator.schedule."
        )
    return _CURRENT["strategy"]


@dataclasses.dataclass(frozen=True)
class WorkerResource:
    """A reference to an object built on every worker (a dataset, an iterator); resolved where it runs."""

    resource_id: str
