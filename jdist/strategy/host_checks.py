"""Failed checks of compiled programs raised as the check's own error at the call, never inside the program.

Why. `tf.debugging.assert_*`, `check_numerics` and `tf.Assert` on traced values run on the host through an
`io_callback` when the program runs. A callback that raises stops the program on the device it runs for: with
several devices the others then wait at their next collective (a gradient all-reduce) and XLA:CPU aborts the
whole process after 40 s ("Termination timeout for all reduce"). Even on one device the error reaches the caller
as `jax.errors.JaxRuntimeError("INTERNAL: CpuCallback error ...")`, possibly at a later unrelated wait. TF 2.21
raises `tf.errors.InvalidArgumentError` with the check's message from the call itself and applies none of that
step's updates (observed for `tf.function`, `strategy.run`, `Dataset.map` and Keras `fit`/`evaluate`/`predict`).

How. A check placed while tracing counts itself (`note_placed`). The program that holds it runs inside a
boundary (`checked` for a program traced before it is wrapped, `lazily_checked` for one traced at its first
call, as `jax.jit` is): while a boundary is armed a failing check records its error (`failed`) and returns
normally, so every device runs the program to its end; the boundary then waits for the program's outputs and
effects and raises the first recorded failure (each replica records its own; they are dropped together). The
caller's state updates come after the program returns, so they are skipped, as TF's are. A check that fails
while no boundary is armed (a program jdist did not compile, e.g. a plain `jax.jit`) raises in its callback,
as JAX reports it. Programs without checks are not wrapped (or, traced lazily, not waited for): nothing changes
for them.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import Any, Callable, Iterator

import jax
from jax.core import Tracer

_lock = threading.Lock()
_placed = [0]
_armed = [0]  # boundaries running now, in any thread
_pending: list[BaseException] = []  # failures recorded while armed, oldest first


def note_placed() -> None:
    """Counts one check placed in the program being traced."""
    with _lock:
        _placed[0] += 1


def placed() -> int:
    """How many checks have been placed in traced programs so far (compare before and after a trace)."""
    return _placed[0]


def failed(error: BaseException) -> None:
    """Called by a check's host callback with its failure: recorded for the running boundary to raise after the
    program (the callback then returns normally); raised here when no boundary is armed."""
    with _lock:
        if _armed[0]:
            _pending.append(error)
            return
    raise error


@contextlib.contextmanager
def _arming() -> Iterator[None]:
    with _lock:
        _armed[0] += 1
    try:
        yield
    finally:
        with _lock:
            _armed[0] -= 1


def _take() -> BaseException | None:
    """The first recorded failure, or None; forgets them all (the replicas of one program record one each)."""
    with _lock:
        found = _pending[0] if _pending else None
        _pending.clear()
    return found


def _traced(out: Any) -> bool:
    return any(isinstance(leaf, Tracer) for leaf in jax.tree.leaves(out))


def _wait(out: Any) -> None:
    jax.block_until_ready(out)
    jax.effects_barrier()  # an unused check's callback is an effect that no output waits for


def _run(program: Callable, args: tuple, kwargs: dict, waits: Callable[[], bool]) -> Any:
    """`program(*args, **kwargs)` armed; waited for and its first recorded failure raised when `waits()` (asked
    after the call, which may have traced it)."""
    with _arming():
        out = program(*args, **kwargs)
        if not waits() or _traced(out):  # traced into an outer program: that program's boundary raises
            return out
        try:
            _wait(out)
        except BaseException:
            _take()
            raise
    failure = _take()
    if failure is not None:
        raise failure.with_traceback(None) from None
    return out


def checked(program: Callable, since: int) -> Callable:
    """`program` run as a boundary (waited for, its check failures raised as themselves) if checks were placed
    after `since` (`placed()` before its trace); else `program` itself."""
    if placed() == since:
        return program

    @functools.wraps(program)
    def run_checked(*args: Any, **kwargs: Any) -> Any:
        return _run(program, args, kwargs, lambda: True)

    return run_checked


# functions whose traces placed checks -> the ids of the instances they were bound to (None: not a method)
_checking: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _function_key(program: Callable) -> tuple[Any, int | None]:
    """The function a `jax.jit` traces and, for a bound method, its instance's id (no reference kept)."""
    fn = getattr(program, "__wrapped__", program)
    owner = getattr(fn, "__self__", None)
    return getattr(fn, "__func__", fn), (None if owner is None else id(owner))


def _known(key: tuple[Any, int | None]) -> bool:
    try:
        return key[1] in _checking.get(key[0], ())
    except TypeError:  # not weakly referable: not remembered
        return False


def _remember(key: tuple[Any, int | None]) -> None:
    with _lock, contextlib.suppress(TypeError):
        owners = _checking.setdefault(key[0], [])
        if key[1] not in owners:
            owners.append(key[1])
            del owners[:-256]


class LazilyChecked:
    """A program traced at its first calls (a `jax.jit`) run as a boundary: waited for, and its check failures
    raised after it, from the first call whose trace placed a check on; not waited for while none did.
    Attributes other than the call are the program's (`lower`, ...)."""

    def __init__(self, program: Callable):
        self.program = program
        self.key = _function_key(program)
        # None until a call has run (and so traced) it; True at once when an equal function traced a check
        # (JAX may serve this program's trace from its cache then: no check is placed again)
        self.has_checks: bool | None = True if _known(self.key) else None

    @property
    def may_check(self) -> bool:
        """Whether the next call may hold a check (before the first call it is not known yet)."""
        return self.has_checks is not False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = placed()

        def waits() -> bool:
            if placed() != before:
                self.has_checks = True
                _remember(self.key)
            elif self.has_checks is None:
                self.has_checks = False
            return bool(self.has_checks)

        return _run(self.program, args, kwargs, waits)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.program, name)


def lazily_checked(program: Callable) -> LazilyChecked:
    """`program` (traced at its first calls) as a `LazilyChecked` boundary; returned as is when already one."""
    return program if isinstance(program, LazilyChecked) else LazilyChecked(program)
