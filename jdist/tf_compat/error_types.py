"""`tf.errors`: TF's exception classes that jdist raises, each also the Python exception it means.

`tf.io.gfile` raises these with TF 2.21's messages (observed); each subclasses Python's own as well
(`NotFoundError` is a `FileNotFoundError`), so `except tf.errors.NotFoundError` and `except OSError` both
catch it. `OutOfRangeError` is `StopIteration`: jdist's iterators end as Python's do.
"""
from __future__ import annotations

from jdist.errors import (  # TF's classes live with jdist's other errors: lower layers raise them too
    AlreadyExistsError,
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    UnimplementedError,
)

OutOfRangeError = StopIteration

ERRORS = dict(OpError=OpError, NotFoundError=NotFoundError, AlreadyExistsError=AlreadyExistsError,
              FailedPreconditionError=FailedPreconditionError, InvalidArgumentError=InvalidArgumentError,
              UnimplementedError=UnimplementedError, OutOfRangeError=OutOfRangeError, DataLossError=DataLossError)
