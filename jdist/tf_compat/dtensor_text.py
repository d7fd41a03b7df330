"""How TF prints a DTensor (observed, TF 2.21): its values in TF's C++ summary, per device when split.

`print(t)` is `tf.Tensor(<values>, layout="<layout>", shape=(4, 2), dtype=float32)` and `repr(t)` is
`<tf.Tensor: shape=(4, 2), dtype=float32, value=<values>, layout="<layout>">`. A replicated tensor's values
are printed once; a split one's as `{"CPU:0": <piece>, "CPU:1": <piece>, ...}` over the mesh's local devices.
Values are TF's C++ summary, not numpy's: an axis longer than 6 shows its first and last 3 entries around
"...", floats take the fewest digits that read back (`1`, `0.5`, `0.0368092842`), booleans print as 1 / 0.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_ENDS = 3  # entries shown at each end of an axis longer than 2 * _ENDS


def summarize(value: np.ndarray) -> str:
    """TF's C++ text of a tensor's values."""
    return _nested(np.asarray(value), 0)


def _nested(value: np.ndarray, depth: int) -> str:
    if value.ndim == 0:
        return _scalar(value[()], value.dtype)
    length = value.shape[0]
    shown = list(range(length)) if length <= 2 * _ENDS else [*range(_ENDS), -1, *range(length - _ENDS, length)]
    items = ["..." if i < 0 else _nested(value[i], depth + 1) for i in shown]
    return "[" + ("\n" * (value.ndim - 1) + " " * (depth + 1) if value.ndim > 1 else " ").join(items) + "]"


def _scalar(x: Any, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return "1" if x else "0"
    if dtype.kind == "f":
        return _float(float(x), np.float64 if dtype.itemsize == 8 else np.float32)
    if dtype.kind in "OSU":
        return (x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x))
    return str(x)


def _float(x: float, kind: type) -> str:
    """The shortest of C's %.{digits}g and %.{max digits}g that reads back as the same value (TF's rule)."""
    digits, most = (15, 17) if kind is np.float64 else (6, 9)
    text = f"{x:.{digits}g}"
    return text if np.isnan(x) or kind(float(text)) == kind(x) else f"{x:.{most}g}"


def _values(array: Any, layout: Any, local_devices: list, device_name: Any) -> str:
    if layout.is_fully_replicated():
        return summarize(np.asarray(array.addressable_shards[0].data))
    pieces = {shard.device: shard.data for shard in array.addressable_shards}
    return "{" + ", ".join(f'"{device_name(d)}": {summarize(np.asarray(pieces[d]))}' for d in local_devices) + "}"


def tensor_str(array: Any, layout: Any, local_devices: list, device_name: Any) -> str:
    values = _values(array, layout, local_devices, device_name)
    return (f'tf.Tensor({values}, layout="{layout.to_string()}", shape={tuple(array.shape)}, '
            f"dtype={np.dtype(array.dtype).name})")


def tensor_repr(array: Any, layout: Any, local_devices: list, device_name: Any) -> str:
    values = _values(array, layout, local_devices, device_name)
    return (f"<tf.Tensor: shape={tuple(array.shape)}, dtype={np.dtype(array.dtype).name}, value={values}, "
            f'layout="{layout.to_string()}">')
