"""TF's error when two ragged operands' rows do not line up: its `assert_equal` text on their row splits.

TF 2.21 checks each ragged dimension (and a uniform one, as splits of equal steps) with `tf.debugging.
assert_equal`, so its message shows the first differing split positions and values (observed).
"""
from __future__ import annotations

import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError


def uniform_splits(nrows: int, width: int) -> np.ndarray:
    """The row splits of `nrows` rows of `width` values each."""
    return np.arange(nrows + 1, dtype=np.int64) * width


def partition_error(x: np.ndarray, y: np.ndarray, detail: str) -> InvalidArgumentError:
    """TF's InvalidArgumentError for row splits `x` and `y` that differ (`detail` when their lengths differ)."""
    text = "Condition x == y did not hold."
    if len(x) == len(y):
        where = np.argwhere(np.asarray(x) != np.asarray(y))[:3]
        text += (f"\nIndices of first {len(where)} different values:\n{where}\nCorresponding x values:\n"
                 f"{x[where[:, 0]]}\nCorresponding y values:\n{y[where[:, 0]]}\nFirst 3 elements of x:\n{x[:3]}\n"
                 f"First 3 elements of y:\n{y[:3]}")
    else:
        text += "\n" + detail
    return InvalidArgumentError(None, None, text)
