"""A compiled function's dicts come back in the order the Python body built them, as TF's do.

JAX's trees sort a dict's keys, so `{'loss': l, 'accuracy': a}` returned from a compiled step would come back
as `{'accuracy': a, 'loss': l}`; TF's `tf.function` returns it as built (observed, TF 2.21: a Progbar fed
`metrics.items()` shows loss first). The trace records each dict's key order; the result is rebuilt in it.
"""
from __future__ import annotations

from typing import Any


def key_orders(value: Any) -> Any:
    """The key order of every dict in `value` (None where it holds no dict)."""
    if isinstance(value, dict):
        return ("dict", list(value), {k: key_orders(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        inner = [key_orders(v) for v in value]
        return ("seq", inner) if any(o is not None for o in inner) else None
    return None


def reordered(value: Any, orders: Any) -> Any:
    """`value` with its dicts in the recorded key order."""
    if orders is None:
        return value
    if orders[0] == "dict" and isinstance(value, dict) and set(value) == set(orders[1]):
        return type(value)((k, reordered(value[k], orders[2][k])) for k in orders[1])
    if orders[0] == "seq" and isinstance(value, (list, tuple)) and len(value) == len(orders[1]):
        items = [reordered(v, o) for v, o in zip(value, orders[1])]
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value
