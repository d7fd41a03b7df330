"""`tf.name_scope` and `tf.get_current_name_scope`: TF's eager name scopes, kept per thread.

JAX arrays carry no op names, so a scope changes nothing that is computed; it is kept for code that reads it
(`tf.get_current_name_scope()`, the name a `with` block gets, Keras-style layers that prefix names with it).
Its rules are TF 2.21's eager ones (observed): `with tf.name_scope("outer") as s` gives "outer/", nested
"outer/inner/"; a name ending in "/" ("x/") is absolute; "" goes back to the top scope; the same name twice
gives the same scope (TF's graphs, inside `tf.function`, make the second "fn_1/": jdist has no graph).
"""
from __future__ import annotations

import threading
from types import TracebackType

_STATE = threading.local()


def _current() -> str:
    return getattr(_STATE, "scope", "")


def get_current_name_scope() -> str:
    """`tf.get_current_name_scope()`: the current scope without its trailing "/" ("" at the top)."""
    scope = _current()
    return scope[:-1] if scope.endswith("/") else scope


class name_scope:  # noqa: N801 (TF's name)
    """`tf.name_scope(name)`: a context whose `as` value is the full scope, "outer/inner/"."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise ValueError("name for name_scope must be a string.")
        self._name = name
        self._previous: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self) -> str:
        previous = _current()
        if not self._name:
            scope = ""
        elif self._name.endswith("/"):
            scope = self._name
        else:
            scope = f"{previous}{self._name}/"
        self._previous.append(previous)
        _STATE.scope = scope
        return scope

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        _STATE.scope = self._previous.pop()
        return False  # TF's: errors pass through
