"""`ModelParallelStrategy`: tensor parallelism over a `model` mesh axis, mixed with
data parallelism over whatever devices are left."""
from __future__ import annotations

from typing import Sequence

from jdist.layout import LayoutLike
from jdist.strategy.base import Strategy
from jdist.strategy.devices import DeviceLike


class ModelParallelStrategy(Strategy):
    """Parameters split over a `model` axis of size `model` by `layout`; the
    remaining devices form the `data` axis (replicas).

        jdist.ModelParallelStrategy(MEGATRON_RULES, model=8)   # 8 devices: pure model parallel
        jdist.ModelParallelStrategy(MEGATRON_RULES, model=4)   # 8 devices: data=2 x model=4

    The same as `jdist.Strategy(mesh_shape={"data": -1, "model": model}, layout=layout)`.
    """

    def __init__(self, layout: LayoutLike, *, model: int, devices: Sequence[DeviceLike] | None = None,
                 model_axis: str = "model"):
        if isinstance(model, bool) or not isinstance(model, int) or model < 1:
            raise ValueError(f"model must be a positive number of devices, got {model!r}.")
        super().__init__(mesh_shape={"data": -1, model_axis: model}, layout=layout, devices=devices)

    def __repr__(self) -> str:
        shape = ", ".join(f"{k}={v}" for k, v in self.mesh.shape.items())
        return f"ModelParallelStrategy(mesh=({shape}))"
