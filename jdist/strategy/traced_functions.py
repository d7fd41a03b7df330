"""The replica functions of a `tf.function`, compiled once, as TF's tracing makes them once.

TF traces a `@tf.function` once per input signature: a `step_fn` defined inside it and passed to
`strategy.run` is created once, in that trace. Python makes a new function object on every call,
and `strategy.run` compiles per function object, so without help every step would compile again.
While a `jdist.function` runs (`jdist.interop.tf_function`), it holds its `Site`; `strategy.run`
asks `canonical(fn)` for the function it compiled first when the new one is the same code over the
same captured objects (recursively: nested functions compare by code and captures, methods by
instance, other captures by identity, Python scalars by value), and so reuses its compiled program.
A function over different captures (an array captured from the call) is compiled anew: the result
is never stale.
"""
from __future__ import annotations

import contextlib
import functools
import types
from typing import Any, Callable, Iterator

_ACTIVE: list["Site"] = []
_SCALARS = (int, float, bool, str, bytes, type(None))


class Site:
    """The replica functions seen under one `tf.function`: bounded, oldest dropped."""

    def __init__(self, limit: int = 32):
        self.functions: list[Callable] = []
        self.limit = limit

    def canonical(self, fn: Callable) -> Callable:
        for known in self.functions:
            if equivalent(known, fn):
                return known
        self.functions.append(fn)
        del self.functions[:-self.limit]
        return fn


@contextlib.contextmanager
def active(site: Site) -> Iterator[None]:
    """Makes `site` the one `canonical` consults while a `tf.function` call runs."""
    _ACTIVE.append(site)
    try:
        yield
    finally:
        _ACTIVE.pop()


def canonical(fn: Callable) -> Callable:
    """`fn`, or the equivalent function first seen in the running `tf.function`'s trace (module docstring)."""
    return _ACTIVE[-1].canonical(fn) if _ACTIVE else fn


def equivalent(a: Any, b: Any, depth: int = 0) -> bool:
    if a is b:
        return True
    if depth > 8 or type(a) is not type(b):
        return False
    if isinstance(a, _SCALARS):
        return a == b
    if isinstance(a, types.MethodType):  # the same method of the same instance
        return a.__self__ is b.__self__ and equivalent(a.__func__, b.__func__, depth + 1)
    if isinstance(a, functools.partial):
        return (equivalent(a.func, b.func, depth + 1) and equivalent(a.args, b.args, depth + 1)
                and equivalent(a.keywords, b.keywords, depth + 1))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(equivalent(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equivalent(a[k], b[k], depth + 1) for k in a)
    if not isinstance(a, types.FunctionType):
        return False
    if a.__code__ is not b.__code__ or a.__globals__ is not b.__globals__:
        return False
    return (equivalent(a.__defaults__, b.__defaults__, depth + 1)
            and equivalent(a.__kwdefaults__, b.__kwdefaults__, depth + 1)
            and equivalent(_cells(a), _cells(b), depth + 1))


def _cells(fn: Any) -> tuple:
    out = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:  # an empty cell
            out.append(_EMPTY)
    return tuple(out)


_EMPTY = object()


def in_function() -> bool:
    """Whether a `tf.function` call is running (its body is TF's graph mode, `tf.executing_eagerly()` False)."""
    return bool(_ACTIVE)
