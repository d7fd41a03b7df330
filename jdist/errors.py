"""The errors jdist raises: bad input caught at its host boundary (`InputError`), and TF's op errors
(`tf.errors`), each also the Python exception it means (`NotFoundError` is a `FileNotFoundError`), so
`except tf.errors.NotFoundError` and `except OSError` both catch it."""
from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """A batch, label, argument or numeric value jdist cannot train on. The message
    names the leaf or argument, what was expected, what was found and the fix."""


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (e.g. `batch_size=32.0`)."""


class NonFiniteInputError(InputError):
    """A NaN or infinity in a batch, found by `jdist.enable_check_numerics()`."""


class OpError(Exception):
    """TF's base class: `message` holds the text, `op` and `node_def` are None (there is no graph op);
    `error_code` is TF's code (`tf.errors.NOT_FOUND` is 5), each subclass's by default."""

    code: int | None = None  # TF's error code of the class (tf.errors.OK ... UNAUTHENTICATED)

    def __init__(self, node_def: Any = None, op: Any = None, message: str = "", *args: Any):
        if isinstance(node_def, str) and op is None and not message:  # one argument, Python's way (Keras re-raises
            node_def, message = None, node_def                         # a layer's error with its class and a text)
        super().__init__(message)
        self.node_def, self.op, self.message = node_def, op, message
        self.error_code = type(self).code if type(self).code is not None else (args[0] if args else None)

    def __str__(self) -> str:
        return self.message


class NotFoundError(OpError, FileNotFoundError):
    """A file or directory that does not exist."""

    code = 5


class AlreadyExistsError(OpError, FileExistsError):
    """A destination that exists where the call does not overwrite."""

    code = 6


class FailedPreconditionError(OpError):
    """An operation on the wrong kind of entry (removing a directory with `remove`)."""

    code = 9


class InvalidArgumentError(OpError, ValueError):
    """A bad argument, such as an unknown file mode."""

    code = 3


class UnimplementedError(OpError, NotImplementedError):
    """What is not implemented, such as a file system scheme."""

    code = 12


class CancelledError(OpError, RuntimeError):
    """An operation or step was cancelled (a parameter-server function dropped after an earlier one failed)."""

    code = 1


class UnavailableError(OpError, RuntimeError):
    """A task or service cannot be reached at present (a parameter-server cluster's worker or server)."""

    code = 14


class DataLossError(OpError):
    """Data that cannot be kept whole, such as an element larger than the shape `padded_batch` pads it to."""

    code = 15


# TF's names for dtypes in its op errors (DT_FLOAT is "float"; text is "string").
_TF_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "object": "string", "bytes": "string",
                  "str": "string"}


def tf_type_name(dtype_name: str) -> str:
    """TF's name of a dtype in an op error, from numpy's name (`float32` is `float`, `float64` `double`)."""
    return _TF_TYPE_NAMES.get(dtype_name, dtype_name)


def dtype_mismatch(op: str, index: int, expected: str, got: str) -> InvalidArgumentError:
    """TF's error for an op input of another dtype than the op takes (numpy dtype names in; TF 2.21's text,
    observed: "cannot compute AddV2 as input #1(zero-based) was expected to be a int32 tensor but is a float
    tensor [Op:AddV2] name: ")."""
    return InvalidArgumentError(None, None, f"cannot compute {op} as input #{index}(zero-based) was expected to be a "
                                            f"{tf_type_name(expected)} tensor but is a {tf_type_name(got)} tensor "
                                            f"[Op:{op}] name: ")
