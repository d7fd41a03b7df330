"""`OneDeviceStrategy`: everything on one device, through the same code path."""
from __future__ import annotations

from typing import Callable

from jdist.strategy.base import Strategy
from jdist.strategy.cross_replica import ValueContext
from jdist.strategy.devices import DeviceLike
from jdist.typing import PyTree


class OneDeviceStrategy(Strategy):
    """A strategy with a single replica on `device` ("cpu:0", "gpu:0" or a `jax.Device`)."""

    def __init__(self, device: DeviceLike):
        super().__init__(devices=[device])

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ValueContext], PyTree]) -> PyTree:
        """Returns the plain value, as TF's OneDeviceStrategy does."""
        return self.place(value_fn(ValueContext(0, 1)))

    def __repr__(self) -> str:
        return f"OneDeviceStrategy(device={str(self.worker_devices[0])!r})"
