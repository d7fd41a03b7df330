"""Nested Python lists as `tf.ragged.constant` reads them: their depth, and TF's errors for uneven ones."""
from __future__ import annotations

from typing import Any


def check_nesting(pylist: Any, depth: int) -> None:
    """TF's errors for scalars at different depths, and for text mixed with numbers (observed, TF 2.21)."""
    kinds, level = set(), [pylist]
    for d in range(depth):
        if any(not isinstance(v, (list, tuple)) for v in level):
            raise ValueError("all scalar values must have the same nesting depth")
        level = [x for v in level for x in v]
        if d == depth - 1:
            kinds = {isinstance(x, (str, bytes)) for x in level}
    if len(kinds) > 1:
        raise ValueError("Can't convert Python sequence with mixed types to Tensor.")


def depth_of(value: Any) -> int:
    """How deep `value`'s lists nest (0 for a scalar)."""
    if isinstance(value, (list, tuple)):
        return 1 + max([depth_of(v) for v in value], default=0)
    return 0
