"""`tf.errors`: TF's exception classes that jdist raises, each also the Python exception it means.

`tf.io.gfile` raises these with TF 2.21's messages (observed); each subclasses Python's own as well
(`NotFoundError` is a `FileNotFoundError`), so `except tf.errors.NotFoundError` and `except OSError` both
catch it. `OutOfRangeError` is `StopIteration`: jdist's iterators end as Python's do.
"""
from __future__ import annotations

from typing import Any


class OpError(Exception):
    """TF's base class: `message` holds the text, `op` and `node_def` are None (there is no graph op)."""

    def __init__(self, node_def: Any = None, op: Any = None, message: str = "", *args: Any):
        if isinstance(node_def, str) and op is None and not message:  # one argument, Python's way (Keras re-raises
            node_def, message = None, node_def                         # a layer's error with its class and a text)
        super().__init__(message)
        self.node_def, self.op, self.message = node_def, op, message

    def __str__(self) -> str:
        return self.message


class NotFoundError(OpError, FileNotFoundError):
    """A file or directory that does not exist."""


class AlreadyExistsError(OpError, FileExistsError):
    """A destination that exists where the call does not overwrite."""


class FailedPreconditionError(OpError):
    """An operation on the wrong kind of entry (removing a directory with `remove`)."""


class InvalidArgumentError(OpError, ValueError):
    """A bad argument, such as an unknown file mode."""


class UnimplementedError(OpError, NotImplementedError):
    """What is not implemented, such as a file system scheme."""


OutOfRangeError = StopIteration

ERRORS = dict(OpError=OpError, NotFoundError=NotFoundError, AlreadyExistsError=AlreadyExistsError,
              FailedPreconditionError=FailedPreconditionError, InvalidArgumentError=InvalidArgumentError,
              UnimplementedError=UnimplementedError, OutOfRangeError=OutOfRangeError)
