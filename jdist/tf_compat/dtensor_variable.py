"""The type a `dtensor.DVariable` has: TF's `DVariable`, its text and its `.numpy()` rule.

A DVariable is made as any `tf.Variable` (jdist.tf_compat.variables) and then given this class, a subclass of
the variable's own, as a mirroring scope's variables are given `MirroredVariable`. TF 2.21 (observed, in
tests/test_tf_parity_guide_core_distribution.py):
- `type(v).__name__` is 'DVariable'; `isinstance(v, tf.Variable)` holds.
- `repr(v)` and `str(v)` are `<tf.Variable 'Variable:0' shape=(10,) dtype=float32, value=[0 0 0 ... 0 0 0],
  layout="sharding_specs:unsharded, mesh:|...">`: the values in TF's C++ summary (per device when split, as a
  DTensor prints: dtensor_text.py), then the layout; a plain variable's `numpy=array(...)` never appears.
- `.numpy()` of a split DVariable is UnimplementedError "Trying to copy a non-single-device and non-replicated
  DTensor is not supported."; a replicated one reads its value.
"""
from __future__ import annotations

import functools
from typing import Any

from jdist.errors import UnimplementedError
from jdist.strategy.devices import tf_device_name
from jdist.tf_compat import dtensor_text
from jdist.tf_compat.dtensor_mesh import layout_of


def _local_name(device: Any) -> str:
    return tf_device_name(device).rsplit("device:", 1)[-1]


def _text(self: Any) -> str:
    array = self.value
    layout = layout_of(array.sharding, array.ndim)
    values = dtensor_text._values(array, layout, layout.mesh.local_jax_devices(), _local_name)
    name = self.name[:-2] if self.name.endswith(":0") else self.name
    return (f"<tf.Variable '{name}:0' shape={tuple(self.shape)} dtype={self.dtype}, value={values}, "
            f'layout="{layout.to_string()}">')


def _numpy_of(base: type) -> Any:
    def numpy(self: Any) -> Any:
        if not self._dtensor_layout.is_fully_replicated():
            raise UnimplementedError(None, None, "Trying to copy a non-single-device and non-replicated DTensor is "
                                     "not supported. (dtensor.unpack(v.read_value()) gives its pieces; a "
                                     "replicated layout gives one value.)")
        return base.numpy(self)

    return numpy


@functools.cache
def dvariable_class(base: type) -> type:
    """TF's `DVariable` type over `base`, the class of the variable made."""
    return type("DVariable", (base,), {"__module__": __name__, "__repr__": _text, "__str__": _text,
                                       "numpy": _numpy_of(base)})


def make_dvariable(variable: Any) -> Any:
    """`variable` (laid out already, `_dtensor_layout` set) given TF's DVariable type."""
    variable.__class__ = dvariable_class(type(variable))
    return variable

