"""What a `tf.Variable` hands out about itself besides its value: `ref()`'s `Reference` and `handle`'s text.

TF's variables are unhashable, so `{v.ref(): ...}` keys a dict by the variable's identity; `print(v.handle)`
shows TF's resource handle, which jdist (no resource tensors) only imitates for showing.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class Reference:
    """What `variable.ref()` gives: hashable by the variable's identity, `deref()` gives the variable back."""

    def __init__(self, variable: Any):
        self._variable = variable

    def deref(self) -> Any:
        return self._variable

    def __hash__(self) -> int:
        return id(self._variable)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reference) and other._variable is self._variable

    def __repr__(self) -> str:
        return f"<Reference wrapping {self._variable!r}>"


# TF's DataType numbers, as a handle shows them ("DType enum: 1" for float32).
_DTYPE_ENUM = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "complex64": 8,
               "int64": 9, "bool": 10, "bfloat16": 14, "uint16": 17, "complex128": 18, "float16": 19, "uint32": 22,
               "uint64": 23}


class ResourceHandle:
    """What `print(variable.handle)` shows in TF 2.21 (observed): `tf.Tensor(<ResourceHandle(name="Variable/0",
    ...)>, shape=(), dtype=resource)`, with the variable's layout when it is a DTensor variable."""

    shape = ()
    dtype = "resource"

    def __init__(self, variable: Any):
        self._variable = variable

    def _text(self) -> str:
        v = self._variable
        dims = ",".join(str(d) for d in v.shape)
        name = v.name.removesuffix(":0")  # TF's handle names the variable without its output index
        return (f'<ResourceHandle(name="{name}/{getattr(v, "_jdist_created", 0)}", device="{v.device}", '
                f'container="Anonymous", type="tensorflow::Var", dtype and shapes : "[ DType enum: '
                f'{_DTYPE_ENUM.get(str(np.dtype(v.dtype)), 0)}, Shape: [{dims}] ]")>')

    def _layout(self) -> str:
        layout = getattr(self._variable, "_dtensor_layout", None)
        return "" if layout is None else f', layout="{layout.to_string()}"'

    def __str__(self) -> str:
        return f"tf.Tensor({self._text()}{self._layout()}, shape=(), dtype=resource)"

    def __repr__(self) -> str:
        return f"<tf.Tensor: shape=(), dtype=resource, value={self._text()}{self._layout()}>"
