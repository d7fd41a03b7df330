"""What a `tf.Variable`'s eager `assign`, `assign_add`, `assign_sub` and `scatter_*` return: TF's `_UnreadVariable`.

TF 2.21 (observed) returns a variable that shares the assigned variable's state, shown by its own name:
`<tf.Variable 'UnreadVariable' shape=(3,) dtype=float32, numpy=array([4., 5., 6.], dtype=float32)>`; it reads
the current value (`.numpy()`) and takes further assignments (`v.assign(x).assign_add(y)` updates `v`). A
MirroredVariable's returns show the replicas' values, `Mirrored:{\\n  0: <tf.Tensor: ...>,\\n  1: ...\\n}`.

Here it is an object of a subclass of the variable's own class that shares the variable's attribute
dictionary, so it is a Keras variable wherever one is accepted, and every read or write goes to the variable.
Inside a traced function (`tf.function`, `strategy.run`) the assignment returns the new value itself, as TF's
traced assignments give a tensor.
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np


@functools.cache
def _unread_class(base: type) -> type:
    def __repr__(self: Any) -> str:  # noqa: N807 (a dunder set on the class)
        distribution = getattr(self, "_jdist_replication", None)
        if distribution is not None and not distribution.on_read:
            parts = [f"  {i}: {value!r}" for i, value in enumerate(distribution.copies(self))]
            return "Mirrored:{\n" + ",\n".join(parts) + "\n}"
        return self._show("UnreadVariable", np.asarray(self.numpy()), suffix="")

    return type("_UnreadVariable", (base,), {"__repr__": __repr__, "__str__": __repr__, "__module__": __name__})


def returned(variable: Any, out: Any) -> Any:
    """What an assignment to `variable` that gave `out` returns (see the module docstring)."""
    if isinstance(out, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        return out
    unread = object.__new__(_unread_class(type(variable)))
    unread.__dict__ = variable.__dict__  # the same dictionary: one state, two objects
    return unread
