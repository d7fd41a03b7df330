"""One replica's copy of a `MirroredVariable`: what `strategy.experimental_local_results(v)` and `v.values` hold.

TF 2.21 hands out per-device `ResourceVariable`s there (observed, MirroredStrategy over 2 and 4 logical CPUs): each
has the replica's device ('/job:localhost/replica:0/task:0/device:CPU:1'), the name 'Variable/replica_1:0', reads
(`numpy()`, `read_value()`, operators) and assignments that change that copy alone: after `lv[1].assign(x)` the
copies differ, `v.numpy()` still reads replica 0's copy, and each replica reads its own copy in the next `run` until
an assignment to `v` makes them one value again. jdist keeps a variable's copies as one replicated array; an
assignment to one copy records the replicas' copies as diverged (`Distribution.drifted`), as a NONE-aggregation
variable's copies after `run` are, and an assignment to replica 0's copy also sets the value `v` reads.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jdist.tfdata.structure import HostTensor


class ReplicaVariable:
    """Replica `index`'s copy of the distributed `variable` (TF's per-device `ResourceVariable`)."""

    def __init__(self, variable: Any, index: int):
        self._variable = variable
        self._index = index

    # --- what the copy is ---
    def _array(self) -> Any:
        return self._variable._jdist_replication.copies(self._variable)[self._index]

    @property
    def name(self) -> str:
        base = self._variable.name.removesuffix(":0")
        return f"{base}:0" if self._index == 0 else f"{base}/replica_{self._index}:0"

    @property
    def device(self) -> str:
        devices = self._variable._jdist_replication.strategy.extended.worker_devices
        return devices[self._index]

    def devices(self) -> set:
        """jdist's: the JAX devices holding this copy (`jax.Array.devices`)."""
        return self._array().devices()

    @property
    def dtype(self) -> Any:
        return self._variable.dtype

    @property
    def shape(self) -> Any:
        return self._variable.shape

    @property
    def trainable(self) -> bool:
        return self._variable.trainable

    # --- reads ---
    def numpy(self) -> Any:
        value = np.asarray(self._array()).astype(self._variable.dtype, copy=False)
        return value[()] if value.ndim == 0 else value

    def read_value(self) -> Any:
        return HostTensor.of(np.asarray(self.numpy()))

    value = read_value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = np.asarray(self.numpy())
        return value if dtype is None else value.astype(dtype)

    def __float__(self) -> float:
        return float(self.numpy())

    def __int__(self) -> int:
        return int(self.numpy())

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def __repr__(self) -> str:
        return f"<tf.Variable {self.name!r} shape={tuple(self.shape)} dtype={np.dtype(self.dtype).name}, " \
               f"numpy={self.numpy()!r}>"

    # --- assignments to this copy alone ---
    def assign(self, value: Any, use_locking: bool = False, name: Any = None, read_value: bool = True) -> Any:
        new = np.asarray(value, dtype=np.dtype(self._variable.dtype))
        if new.shape != tuple(self.shape):
            raise ValueError(f"Cannot assign value to variable ' {self.name}': Shape mismatch.The variable shape "
                             f"{tuple(self.shape)}, and the assigned value shape {new.shape} are incompatible. "
                             "Give a value of the variable's shape.")  # TF 2.21's text (observed), and the fix
        self._variable._jdist_replication.set_copy(self._variable, self._index, new)
        return self

    def assign_add(self, delta: Any, use_locking: bool = False, name: Any = None, read_value: bool = True) -> Any:
        return self.assign(self.numpy() + np.asarray(delta, dtype=np.dtype(self._variable.dtype)))

    def assign_sub(self, delta: Any, use_locking: bool = False, name: Any = None, read_value: bool = True) -> Any:
        return self.assign(self.numpy() - np.asarray(delta, dtype=np.dtype(self._variable.dtype)))


def _operator(name: str) -> Callable[..., Any]:
    def apply(self: ReplicaVariable, *others: Any) -> Any:
        return getattr(self.read_value(), name)(*others)

    apply.__name__ = name
    return apply


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__floordiv__", "__pow__", "__neg__", "__abs__", "__matmul__", "__rmatmul__", "__getitem__",
              "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(ReplicaVariable, _name, _operator(_name))

ReplicaVariable.__name__ = ReplicaVariable.__qualname__ = "ResourceVariable"  # TF's type name (observed)
