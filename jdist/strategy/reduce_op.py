"""`ReduceOp`: how values from several replicas combine into one."""
from __future__ import annotations

import enum


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
