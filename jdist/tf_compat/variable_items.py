"""A script's eager `v[index]` on a `tf.Variable`: a host tensor, as TF's is an `EagerTensor`.

TF 2.21 (observed, eager, a variable on one CPU): `v[None]`, `v[0]`, `v[1:]`, `v[...]`, `v[:, tf.newaxis]`,
`v[tf.constant(1)]` and `v[-1]` are each an `EagerTensor` on '/job:localhost/replica:0/task:0/device:CPU:0'
(dtype a `tf.DType`, `.numpy()`), and a slice remembers its variable: `v[1].assign(5.)` writes that element
(`sliced_assign`). Keras's indexing gives a JAX array, so a script's read of one on a single CPU device becomes
a `HostTensor` (as the variable's eager arithmetic does, `variables._checked`) that keeps the link to its
variable for `assign`. Library code, traced code and a value laid out over several devices (a mirrored
variable's, a DTensor's) or on an accelerator keep Keras's JAX array.
"""
from __future__ import annotations

from typing import Any, cast

import jax
import jax.core
import numpy as np

from jdist.tf_compat import sliced_assign
from jdist.tfdata.structure import HostTensor


class VariableItem(HostTensor):
    """A host tensor read from a variable by indexing: its `assign(value)` writes those elements back (TF's
    `v[1:3].assign(...)`). A tensor computed from it (`v[0] + 1`, `v[None][0]`) has no `assign`, as TF's."""

    _jdist_from: Any = None  # (variable, index) of the very tensor indexing returned; None for derived ones

    def __array_finalize__(self, obj: Any) -> None:
        self._jdist_from = None

    @property
    def assign(self) -> Any:
        if self._jdist_from is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'assign'")
        variable, index = self._jdist_from

        def assign(value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
            """Writes `value` into the indexed elements of the variable (TF's `v[i].assign(value)`)."""
            return variable.assign(variable.value.at[index].set(value), read_value=read_value)

        return assign


VariableItem.__name__ = VariableItem.__qualname__ = HostTensor.__name__  # shown as any host tensor


def _on_one_cpu(array: jax.Array) -> bool:
    devices = array.sharding.device_set
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"


def item_of(variable: Any, index: Any, out: Any, script: bool) -> Any:
    """`out` (Keras's `variable[index]`) as a script's eager read gives it: a `VariableItem` host tensor in the
    variable's own dtype where `out` is a concrete array on one CPU device; else noted as a slice
    (`sliced_assign.slice_of`) and returned as it is."""
    if not (script and isinstance(out, jax.Array) and not isinstance(out, jax.core.Tracer) and _on_one_cpu(out)):
        return sliced_assign.slice_of(variable, index, out)
    value, own = np.asarray(out), np.dtype(variable.dtype)  # Keras's name for library code: "float64"
    if value.dtype.kind == own.kind and value.dtype.itemsize < own.itemsize:
        value = value.astype(own)  # a 64-bit variable's element (JAX's is 32 bits) keeps its dtype
    # its own buffer: the variable's later assignments leave what was read as it was
    tensor = cast(VariableItem, np.array(value).view(VariableItem))
    tensor._jdist_from = (variable, index)
    return tensor
