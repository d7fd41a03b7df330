"""Holding back one thread's `print` output while it traces a `tf.function`, not other threads'.

A trace's prints are shown once it is kept and dropped when it is redone (`jdist.interop.graph_trace`).
`contextlib.redirect_stdout` would also take the output of every other thread printing meanwhile (the
parameter-server coordinator runs scheduled functions in threads): here `sys.stdout` becomes, while any
thread captures, a proxy that sends the capturing threads' writes to their buffers and the others' on.
"""
from __future__ import annotations

import contextlib
import io
import sys
import threading
from typing import Any, Iterator

_LOCK = threading.Lock()
_BUFFERS: dict[int, io.StringIO] = {}


class _Proxy:
    def __init__(self, target: Any):
        self.target = target

    def write(self, text: str) -> int:
        buffer = _BUFFERS.get(threading.get_ident())
        return (buffer if buffer is not None else self.target).write(text)

    def flush(self) -> None:
        if threading.get_ident() not in _BUFFERS:
            self.target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """This thread's prints go to the buffer yielded, while the block runs."""
    me = threading.get_ident()
    buffer = io.StringIO()
    with _LOCK:
        outer = _BUFFERS.get(me)
        _BUFFERS[me] = buffer
        if not isinstance(sys.stdout, _Proxy):
            sys.stdout = _Proxy(sys.stdout)
    try:
        yield buffer
    finally:
        with _LOCK:
            if outer is None:
                del _BUFFERS[me]
            else:
                _BUFFERS[me] = outer
            if not _BUFFERS and isinstance(sys.stdout, _Proxy):
                sys.stdout = sys.stdout.target


@contextlib.contextmanager
def shown() -> Iterator[None]:
    """This thread's prints go out while the block runs, even inside `captured`: what TF runs on every call
    (`tf.print`, a `tf.py_function`) is never held back with a body's trace-time `print`."""
    me = threading.get_ident()
    with _LOCK:
        outer = _BUFFERS.pop(me, None)
    try:
        yield
    finally:
        if outer is not None:
            with _LOCK:
                _BUFFERS[me] = outer
                if not isinstance(sys.stdout, _Proxy):  # another thread's capture ended meanwhile
                    sys.stdout = _Proxy(sys.stdout)
