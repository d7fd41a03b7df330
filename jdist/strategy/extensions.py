"""Where the layers above the strategy runtime extend it, so that the runtime imports none of them.

TF's `Strategy` API reaches into higher layers: `scope()` also installs Keras's distribution,
`run(fn)` runs a function that uses Keras objects as TF variables differently, and
`experimental_distribute_dataset`, `summary` and `memory_report` are the input pipeline's and the
diagnostics' work. Those layers register their part here when they are imported (`jdist/__init__.py`
imports every one of them, and Python runs it before any `jdist.*` module), and the strategy calls
what is registered.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Mapping, Protocol, Sequence

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


class RunExtension(Protocol):
    """Takes over `strategy.run(fn, ...)` for the functions it claims."""

    def claim(self, fn: Callable) -> Any:
        """What of `fn` this extension handles (e.g. the Keras objects it uses), or a false value."""
        ...

    def run(self, strategy: Strategy, fn: Callable, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
            claim: Any) -> Any:
        """`strategy.run(fn, args, kwargs)` for a claimed `fn`."""
        ...

    def guard(self) -> ContextManager[Any]:
        """Held around a compiled `run` whose function no extension claimed."""
        ...


_SCOPES: list[Callable[["Strategy"], ContextManager[Any]]] = []
_RUNS: list[RunExtension] = []
_METHODS: dict[str, Callable[..., Any]] = {}
# The module that registers each method: named in the error when it was not imported.
PROVIDERS = {
    "autograph": "jdist.interop.autograph",
    "distribute_dataset": "jdist.input.dataset",
    "distribute_datasets_from_function": "jdist.input.dataset",
    "layout_summary": "jdist.diagnostics.summary",
    "memory_report": "jdist.diagnostics.memory",
}


def register_scope(hook: Callable[["Strategy"], ContextManager[Any]]) -> None:
    """`hook(strategy)` is entered inside every `strategy.scope()`, after the mesh is set."""
    if hook not in _SCOPES:
        _SCOPES.append(hook)


def register_run(extension: RunExtension) -> None:
    if all(type(e) is not type(extension) for e in _RUNS):
        _RUNS.append(extension)


def register_method(name: str, fn: Callable[..., Any]) -> None:
    if name not in PROVIDERS:
        raise ValueError(f"Unknown strategy extension {name!r}; known: {sorted(PROVIDERS)}.")
    _METHODS[name] = fn


@contextlib.contextmanager
def scope(strategy: Strategy) -> Iterator[None]:
    """Every registered scope hook for `strategy`, entered in registration order."""
    with contextlib.ExitStack() as stack:
        for hook in _SCOPES:
            stack.enter_context(hook(strategy))
        yield


def claimed_run(fn: Callable) -> tuple[RunExtension, Any] | None:
    """The extension that takes over `run(fn)` and its claim, or None: `run` compiles `fn` itself."""
    for extension in _RUNS:
        claim = extension.claim(fn)
        if claim:
            return extension, claim
    return None


@contextlib.contextmanager
def run_guard() -> Iterator[None]:
    """Every run extension's guard, around a compiled `run` that none of them claimed."""
    with contextlib.ExitStack() as stack:
        for extension in _RUNS:
            stack.enter_context(extension.guard())
        yield


def registered(name: str) -> Callable[..., Any] | None:
    """The registered implementation of `name`, or None where its provider was not imported."""
    return _METHODS.get(name)


def method(name: str) -> Callable[..., Any]:
    """The registered implementation of the strategy method `name`."""
    try:
        return _METHODS[name]
    except KeyError:
        raise RuntimeError(f"{name} is provided by {PROVIDERS[name]}, which was not imported. Fix: import jdist "
                           f"(or {PROVIDERS[name]}) before calling it.") from None
