"""The device a host tensor was made on, as TF names it (`t.device`).

TF 2.21 (observed, the CPU split into 2 logical devices): a tensor made in `with tf.device('/CPU:1'):` (a
constant, an op's result) says '/job:localhost/replica:0/task:0/device:CPU:1' for the rest of its life; an op on it
outside the block runs on the default device ('.../device:CPU:0'), and `tf.constant(t)` / `tf.convert_to_tensor(t)`
are `t` itself. A device the machine lacks leaves the default device. `jdist.tf_compat.device` enters `scope` for
a device JAX has; `HostTensor` records `current()` when it is made.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

DEFAULT = "/job:localhost/replica:0/task:0/device:CPU:0"
_HOST = "/job:localhost/replica:0/task:0"
_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("jdist_host_device", default=None)


def current() -> str | None:
    """TF's full name of the device of the innermost `tf.device` block, None outside one."""
    return _CURRENT.get()


def full_name(part: str) -> str:
    """TF's full device name for a `TYPE:index` spec part (`'cpu:1'` is '/job:localhost/.../device:CPU:1')."""
    kind, _, index = part.partition(":")
    return f"{_HOST}/device:{kind.upper()}:{index if index not in ('', '*') else 0}"


@contextlib.contextmanager
def scope(part: str) -> Iterator[None]:
    """Host tensors made in the block record the device `part` names (`TYPE:index`)."""
    token = _CURRENT.set(full_name(part))
    try:
        yield
    finally:
        _CURRENT.reset(token)
