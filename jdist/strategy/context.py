"""Which strategy is current, and whether code runs per replica or across replicas.

TF keeps a thread-local stack; a `contextvars.ContextVar` gives the same isolation
for threads and also for async code.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy
    from jdist.strategy.replica_context import ReplicaContext


@dataclass(frozen=True)
class _Frame:
    strategy: "Strategy"
    replica_context: "ReplicaContext | None"  # None means cross-replica context


_STACK: contextvars.ContextVar[tuple[_Frame, ...]] = contextvars.ContextVar("jdist_stack", default=())
_GLOBAL_SCOPE: list[Any] = []  # experimental_set_strategy's open scope, if any


def _top() -> _Frame | None:
    stack = _STACK.get()
    return stack[-1] if stack else None


def get_strategy() -> "Strategy":
    """The current strategy: the innermost open scope, else the default strategy."""
    top = _top()
    if top is not None:
        return top.strategy
    from jdist.strategy.default import default_strategy

    return default_strategy()


def has_strategy() -> bool:
    """True inside any non-default strategy's scope."""
    from jdist.strategy.default import DefaultStrategy

    return not isinstance(get_strategy(), DefaultStrategy)


def in_cross_replica_context() -> bool:
    """True in a scope outside `run`, and inside a `merge_call` function."""
    top = _top()
    return top is not None and top.replica_context is None


def get_replica_context() -> "ReplicaContext | None":
    """The replica context inside `run`; None in cross-replica context; a default one outside scopes."""
    top = _top()
    if top is None:
        from jdist.strategy.default import default_strategy

        return default_strategy().default_replica_context()
    return top.replica_context


def in_replica_context() -> bool:
    top = _top()
    return top is not None and top.replica_context is not None


@contextlib.contextmanager
def push(strategy: "Strategy", replica_context: "ReplicaContext | None") -> Iterator[None]:
    """Enters a context frame; used by `scope()`, `run()` and `merge_call()`."""
    token = _STACK.set(_STACK.get() + (_Frame(strategy, replica_context),))
    try:
        yield
    finally:
        _STACK.reset(token)


def enter_scope(strategy: "Strategy") -> contextvars.Token:
    """Pushes `strategy` as cross-replica context, enforcing TF's no-mixing rule."""
    top = _top()
    if top is not None and top.strategy is not strategy:
        raise RuntimeError(
            f"Mixing different jdist strategies: {strategy!r} is not {top.strategy!r}. "
            "Exit the first strategy's scope before entering another's."
        )
    if top is not None and top.replica_context is not None:
        raise RuntimeError(
            "strategy.scope() cannot be entered inside strategy.run(); "
            "create models and optimizers before calling run()."
        )
    from jdist.strategy import step_owner

    step_owner.remember(strategy)  # steps called after the scope closes still find it
    return _STACK.set(_STACK.get() + (_Frame(strategy, None),))


def exit_scope(token: contextvars.Token) -> None:
    _STACK.reset(token)


def experimental_set_strategy(strategy: "Strategy | None") -> None:
    """Enter `strategy.scope()` globally (for notebooks); `None` exits it. As TF's."""
    stack = _STACK.get()
    if len(stack) > len(_GLOBAL_SCOPE):
        raise RuntimeError("Must not be called inside a jdist.Strategy scope.")
    while _GLOBAL_SCOPE:
        _GLOBAL_SCOPE.pop().__exit__(None, None, None)
    if strategy is not None:
        cm = strategy.scope()
        cm.__enter__()
        _GLOBAL_SCOPE.append(cm)
