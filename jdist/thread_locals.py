"""One thread-local setting held for the length of a `with` block, then put back.

Several tracing switches (a `tf.data` function being recorded, a saved program being traced, one replica's part
of a Keras step) are per thread, since replicas and input pipelines trace in threads of their own, and they nest:
the block sets its value and the enclosing block's value comes back after it, also when it raises.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator


@contextlib.contextmanager
def setting(local: threading.local, name: str, value: Any, default: Any = None) -> Iterator[Any]:
    """`local.<name>` is `value` inside the block (which receives it) and what it was before afterwards
    (`default` where it was never set)."""
    outer = getattr(local, name, default)
    setattr(local, name, value)
    try:
        yield value
    finally:
        setattr(local, name, outer)
