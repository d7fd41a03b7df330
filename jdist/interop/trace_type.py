"""`tf.types.experimental.TraceType`: how an argument object tells `tf.function` when a trace can be reused.

An argument with a `__tf_tracing_type__(context)` method is keyed by the `TraceType` it returns (compared with
its `__eq__` / `__hash__`) instead of by the object's identity, so two objects of one kind share a trace, and
the trace keeps the first object (TF passes the trace type's `placeholder_value()`, which TF's function guide
makes that object). Observed in TF 2.21: two `Apple()`/`Mango()` pairs without it trace twice; with a trace
type keyed by class, once, and the second call returns the first objects' sum; `TraceType()` itself is
TypeError "Can't instantiate abstract class TraceType ...".
"""
from __future__ import annotations

import abc
from typing import Any


class TraceType(abc.ABC):
    """TF's base class of trace types: subclasses define these five methods."""

    @abc.abstractmethod
    def is_subtype_of(self, other: Any) -> bool: ...

    @abc.abstractmethod
    def most_specific_common_supertype(self, others: Any) -> Any: ...

    @abc.abstractmethod
    def placeholder_value(self, placeholder_context: Any = None) -> Any: ...

    @abc.abstractmethod
    def __eq__(self, other: Any) -> bool: ...

    @abc.abstractmethod
    def __hash__(self) -> int: ...


def trace_key(value: Any) -> Any:
    """The key a `tf.function` signature keeps for `value`: its trace type where it defines one, else None."""
    method = getattr(type(value), "__tf_tracing_type__", None)
    return None if method is None else ("trace_type", value.__tf_tracing_type__(None))
