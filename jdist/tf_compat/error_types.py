"""`tf.errors`: TF's exception classes and error codes, each class also the Python exception it means.

`tf.io.gfile` raises these with TF 2.21's messages (observed); each subclasses Python's own as well
(`NotFoundError` is a `FileNotFoundError`), so `except tf.errors.NotFoundError` and `except OSError` both
catch it. `OutOfRangeError` is `StopIteration`: jdist's iterators end as Python's do. Every other class is a
`tf.errors.OpError` built as TF's, `Error(node_def, op, message)`, with `.message` and `.error_code` (TF 2.21's
integer codes, observed: OK is 0 ... UNAUTHENTICATED 16).
"""
from __future__ import annotations

from jdist.errors import (  # TF's classes live with jdist's other errors: lower layers raise them too
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    UnavailableError,
    UnimplementedError,
)
from jdist.interop.graph_errors import OperatorNotAllowedInGraphError  # one type for tf.function too

OutOfRangeError = StopIteration

CODES = dict(OK=0, CANCELLED=1, UNKNOWN=2, INVALID_ARGUMENT=3, DEADLINE_EXCEEDED=4, NOT_FOUND=5, ALREADY_EXISTS=6,
             PERMISSION_DENIED=7, RESOURCE_EXHAUSTED=8, FAILED_PRECONDITION=9, ABORTED=10, OUT_OF_RANGE=11,
             UNIMPLEMENTED=12, INTERNAL=13, UNAVAILABLE=14, DATA_LOSS=15, UNAUTHENTICATED=16)


class UnknownError(OpError):
    """An error TF has no better class for."""

    code = 2


class DeadlineExceededError(OpError, TimeoutError):
    """A deadline passed before the operation completed (also Python's TimeoutError)."""

    code = 4


class PermissionDeniedError(OpError, PermissionError):
    """The caller may not run the operation (also Python's PermissionError)."""

    code = 7


class ResourceExhaustedError(OpError):
    """Memory or another resource ran out."""

    code = 8


class AbortedError(OpError):
    """The operation was aborted, as by a concurrent action."""

    code = 10


class InternalError(OpError):
    """The runtime broke one of its own invariants."""

    code = 13


class UnauthenticatedError(OpError):
    """The request has no valid credentials."""

    code = 16




ERRORS = dict(OpError=OpError, NotFoundError=NotFoundError, AlreadyExistsError=AlreadyExistsError,
              FailedPreconditionError=FailedPreconditionError, InvalidArgumentError=InvalidArgumentError,
              UnimplementedError=UnimplementedError, OutOfRangeError=OutOfRangeError, DataLossError=DataLossError,
              CancelledError=CancelledError, UnknownError=UnknownError, DeadlineExceededError=DeadlineExceededError,
              PermissionDeniedError=PermissionDeniedError, ResourceExhaustedError=ResourceExhaustedError,
              AbortedError=AbortedError, InternalError=InternalError, UnavailableError=UnavailableError,
              UnauthenticatedError=UnauthenticatedError, OperatorNotAllowedInGraphError=OperatorNotAllowedInGraphError,
              **CODES)
