"""`FSDPStrategy`: fully sharded data parallelism (ZeRO-3) on the data axis."""
from __future__ import annotations

from typing import Sequence

from jdist.layout import Layout, LayoutLike, as_layout, fsdp
from jdist.strategy.base import Strategy
from jdist.strategy.devices import DeviceLike


class FSDPStrategy(Strategy):
    """Data parallel, with parameters and optimizer state split over the replicas
    instead of copied: each array of at least `min_size_bytes` is split along its
    largest dimension that the replica count divides (`jdist.layout.fsdp`).
    The compiler gathers each parameter where it is used and reduce-scatters its
    gradient, so per-device memory for parameters + optimizer state drops by
    about the number of replicas.

    `rules` (optional `(regex, spec)` pairs) override the automatic choice for
    the parameters they match.
    """

    def __init__(self, devices: Sequence[DeviceLike] | None = None, *, min_size_bytes: int = 1 << 20,
                 rules: LayoutLike | None = None):
        base = as_layout(rules) or Layout()
        layout = Layout([(r.pattern, r.value) for r in base.rules], default=fsdp("data", min_size_bytes))
        super().__init__(devices=devices, layout=layout)

    def __repr__(self) -> str:
        return f"FSDPStrategy(replicas={self.num_replicas_in_sync})"
