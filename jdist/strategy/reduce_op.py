"""`ReduceOp`: how values from several replicas combine into one."""
from __future__ import annotations

import enum
from typing import Any


class ReduceOp(enum.Enum):
    """TF's `tf.distribute.ReduceOp`: only SUM and MEAN exist, as in TensorFlow."""

    SUM = "SUM"
    MEAN = "MEAN"

    @classmethod
    def from_value(cls, op: "ReduceOp | str") -> "ReduceOp":
        """Accepts a `ReduceOp` or the strings "sum"/"mean" in any case."""
        if isinstance(op, cls):
            return op
        if isinstance(op, str):
            try:
                return cls[op.upper()]
            except KeyError:
                pass
        raise ValueError(
            f"Unknown reduce op {op!r}: use jdist.ReduceOp.SUM, jdist.ReduceOp.MEAN, "
            "or the strings 'sum'/'mean'."
        )

    @classmethod
    def from_variable_aggregation(cls, aggregation: Any) -> "ReduceOp":
        """TF's: SUM and MEAN map to themselves; NONE and ONLY_FIRST_REPLICA have no reduce op (TF 2.21's
        ValueError, observed)."""
        name = getattr(aggregation, "name", str(aggregation).upper())
        if name in cls.__members__:
            return cls[name]
        raise ValueError(f"Could not convert from `tf.VariableAggregation` {aggregation} to`tf.distribute.ReduceOp` "
                         "type")
