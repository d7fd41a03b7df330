"""State that the replicas of one `run` keep apart, or share, when they run as threads (`uneven_rows`).

A short batch whose replicas hold different numbers of real rows runs one thread per replica, as TF's eager
MirroredStrategy runs them. Code that the replica function runs keeps per-call state in module globals: a stack
of the calls in progress (each replica's own: `ThreadStack`) and methods patched onto objects for the duration
of the call (every replica's alike, installed once by the first replica that enters and removed by the last that
leaves: `shared`). With one thread both behave as a plain list and a plain context manager.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, ContextManager, Generic, Hashable, Iterator, TypeVar

T = TypeVar("T")


class ThreadStack(Generic[T]):
    """A stack (`append`, `pop`, `stack[-1]`, `len`, truth) of which each thread sees its own."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _items(self) -> list[T]:
        items = getattr(self._local, "items", None)
        if items is None:
            items = self._local.items = []
        return items

    def append(self, item: T) -> None:
        self._items().append(item)

    def pop(self) -> T:
        return self._items().pop()

    def __getitem__(self, index: int) -> T:
        return self._items()[index]

    def __len__(self) -> int:
        return len(self._items())

    def __bool__(self) -> bool:
        return bool(self._items())


_LOCK = threading.Lock()
_ENTERED: dict[Hashable, list] = {}  # key -> [threads inside, the context manager entered for them]


@contextlib.contextmanager
def shared(key: Hashable, make: Callable[[], ContextManager[Any]]) -> Iterator[None]:
    """`make()` entered once for every thread inside a `shared(key, ...)` at the same time: by the first to
    enter, left by the last to leave (a thread that enters while another is inside finds it in place).
    Nested entries in one thread with the same key count alike."""
    with _LOCK:
        entry = _ENTERED.get(key)
        if entry is None:
            manager = make()
            manager.__enter__()  # under the lock: the others wait until it is in place
            entry = _ENTERED[key] = [0, manager]
        entry[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            entry[0] -= 1
            if entry[0] == 0:
                del _ENTERED[key]
                entry[1].__exit__(None, None, None)
