"""`MirroredStrategy`: synchronous data parallelism over the local devices."""
from __future__ import annotations

from typing import Sequence

from jdist.strategy.base import Strategy
from jdist.strategy.devices import DeviceLike


class MirroredStrategy(Strategy):
    """One replica per device on a 1-D `data` mesh axis; parameters replicated.

    `devices=None` takes all local accelerators, else all local CPU devices (TF's
    rule). `cross_device_ops` is accepted for TF compatibility and ignored: XLA
    chooses the all-reduce (NCCL on GPU, ICI on TPU, in-process/gloo on CPU).
    `shard_optimizer_state=True` stores each large optimizer-state leaf split over
    the replicas (ZeRO-1: 1/N of its memory per device, no all-gather of it per step).
    """

    def __init__(self, devices: Sequence[DeviceLike] | None = None, cross_device_ops: object = None, *,
                 shard_optimizer_state: bool = False):
        super().__init__(devices=devices, shard_optimizer_state=shard_optimizer_state)
        self._cross_device_ops = cross_device_ops

    def __repr__(self) -> str:
        return f"MirroredStrategy(devices={[str(d) for d in self.worker_devices]})"
