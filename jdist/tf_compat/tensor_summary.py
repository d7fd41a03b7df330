"""How `tf.print` and `tf.strings.format` write a tensor (TF's tensor summary; observed, TF 2.21).

Elements are separated by one space, rows by a newline and the indent of their depth, blocks of higher rank by
one more newline per extra dimension (`[[[0 1]\\n  [2 3]]\\n\\n [[4 5]\\n  [6 7]]]`), with no padding to a common
width (`[1 10 -100]`, where numpy pads). Along each dimension longer than twice `summarize` only the first and
last `summarize` entries show, around `...` (`summarize=-1` shows all). Floats take the shortest of 6 (float32) or
15 (float64) significant digits that reads back to the same value, else 9 or 17 (`0.333333343`, `1e-07`, `2`);
bools are 1 and 0; strings are in double quotes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["format_string", "summarize_tensor"]


def summarize_tensor(value: Any, summarize: int = 3) -> str:
    """`value` (an array or tensor) as TF writes it (see the module docstring)."""
    return _block(np.asarray(value), summarize, 1)


def _block(array: np.ndarray, summarize: int, depth: int) -> str:
    if array.ndim == 0:
        return _scalar(array[()], array.dtype)
    n = array.shape[0]
    shown: list[int | None] = list(range(n))
    if 0 <= summarize and n > 2 * summarize:
        shown = list(range(summarize)) + [None] + list(range(n - summarize, n))
    inner = (lambda i: _scalar(array[i], array.dtype)) if array.ndim == 1 else (
        lambda i: _block(array[i], summarize, depth + 1))
    parts = ["..." if i is None else inner(i) for i in shown]
    separator = " " if array.ndim == 1 else "\n" * (array.ndim - 1) + " " * depth
    return "[" + separator.join(parts) + "]"


def _scalar(value: Any, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return "1" if value else "0"
    if dtype.kind in "iu":
        return str(int(value))
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return _float(float(value), dtype.itemsize >= 8)
    if isinstance(value, bytes):
        return '"' + value.decode("utf-8", errors="backslashreplace") + '"'
    if isinstance(value, str):
        return '"' + value + '"'
    return str(value)


def _float(value: float, double: bool) -> str:
    """The shortest of TF's two precisions that reads back to the same float (float32 or float64)."""
    short, full = (15, 17) if double else (6, 9)
    text = f"{value:.{short}g}"
    same = float(text) == value if double else np.float32(text) == np.float32(value)
    return text if same or value != value else f"{value:.{full}g}"


def format_string(template: str, inputs: Any, placeholder: str = "{}", summarize: int = 3) -> str:
    """`tf.strings.format`'s text: each `placeholder` in `template` replaced by the next input's summary."""
    values = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if template.count(placeholder) != len(values):
        raise ValueError(f"The template expects {template.count(placeholder)} tensors, but the inputs only has "
                         f"{len(values)}. Please ensure the number of placeholders in template matches inputs "
                         "length.")
    pieces = template.split(placeholder)
    out = [pieces[0]]
    for value, piece in zip(values, pieces[1:]):
        out += [summarize_tensor(value, summarize), piece]
    return "".join(out)
