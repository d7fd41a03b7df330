"""The error jdist raises for bad input caught at its host boundary."""
from __future__ import annotations


class InputError(ValueError):
    """A batch, label, argument or numeric value jdist cannot train on. The message
    names the leaf or argument, what was expected, what was found and the fix."""


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (e.g. `batch_size=32.0`)."""


class NonFiniteInputError(InputError):
    """A NaN or infinity in a batch, found by `jdist.enable_check_numerics()`."""
