"""TF's error for a `tf.data` function that raises while it is traced, when the dataset is made.

TF 2.21 (observed): `range(3).map(f)` with `f` raising ValueError("boom") raises, at `map`, a ValueError whose
text is "in user code:\\n\\n    File \\"<file>\\", line <n>, in f  *\\n        raise ValueError(\\"boom\\")\\n\\n
ValueError: boom\\n"; so do TypeError, AttributeError, RuntimeError, NotImplementedError, AssertionError and
KeyError; another type (ZeroDivisionError, IndexError, LookupError, OSError) becomes autograph's StagingError
with that text.
"""
from __future__ import annotations

import linecache
import traceback

from jdist.input import calling_code

_KEPT = (AssertionError, AttributeError, NotImplementedError, RuntimeError, StopIteration, TypeError,
         UnboundLocalError, ValueError, KeyError)


class StagingError(Exception):
    """TF's `StagingError` (tensorflow.python.autograph.impl.api): a function's error while it was traced."""


class _StagedKeyError(KeyError):
    """A KeyError whose text is shown as it is (a KeyError's own shows its repr), as TF's."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def staged(error: BaseException) -> BaseException:
    """`error`, raised by a user function while traced, as TF raises it then (see the module docstring)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _library(f.filename)]
    where = ""
    if frames:
        last = frames[-1]
        line = (linecache.getline(last.filename, last.lineno or 0) or "").strip()
        name = "None" if last.name == "<lambda>" else last.name
        where = f'    File "{last.filename}", line {last.lineno}, in {name}  *\n        {line}\n\n'
    text = f"in user code:\n\n{where}    {type(error).__name__}: {error}\n"
    kind = _StagedKeyError if isinstance(error, KeyError) else type(error) if isinstance(error, _KEPT) else StagingError
    try:
        out = kind(text)
    except TypeError:  # an exception class that takes other arguments
        out = StagingError(text)
    return out


def _library(filename: str) -> bool:
    """Whether a file is a library's (`calling_code.LIBRARIES`) or Python's own, not the user's."""
    parts = filename.replace("\\", "/").split("/")
    return filename.startswith("<frozen") or any(p in calling_code.LIBRARIES or p == "contextlib.py" for p in parts)
