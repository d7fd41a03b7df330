"""How a TF tensor prints: `str` is `tf.Tensor(<values>, shape=(2,), dtype=int32)`, `repr` is
`<tf.Tensor: shape=(2,), dtype=int32, numpy=array([1, 2], dtype=int32)>`.

Observed in TF 2.21 (tests/test_tf_compat_printing.py holds each case): numpy's own text of the values (its
summarising of large arrays included), a newline before values that take several lines, scalars as numpy
prints them (`3.5`, `True`, `b'ab'`), strings as bytes with dtype `string` (an object array in `numpy=`), and
the shape as a tuple.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def dtype_name(dtype: Any) -> str:
    """TF's dtype name: numpy's, with every text kind (bytes, str, object) as `string`."""
    dtype = np.dtype(dtype)
    return "string" if dtype.kind in "SUO" else dtype.name


def shape_text(shape: tuple[int, ...]) -> str:
    return str(tuple(int(d) for d in shape))


def as_tf_numpy(value: Any) -> np.ndarray:
    """The array TF's `.numpy()` gives: text as an object array of bytes."""
    array = np.asarray(value)
    if array.dtype.kind in "SU":
        array = np.vectorize(lambda s: s.encode() if isinstance(s, str) else bytes(s), otypes=[object])(array)
    elif array.dtype.kind == "O" and array.size and any(isinstance(s, str) for s in array.flat):
        # an object array of Python text (`np.array(['x'], dtype=object)`): TF 2.21 holds bytes (observed)
        array = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])(array)
    return array


def as_bytes(value: Any) -> Any:
    """Python or numpy text as TF holds it (UTF-8 bytes); anything else as it is."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (np.ndarray, list, tuple)) and np.asarray(value).dtype.kind in "SU":
        return as_tf_numpy(value)
    return value


def token_text(token: Any) -> str:
    """A string token as text: UTF-8 bytes (what host string tensors hold) decoded, anything else by str()."""
    return token.decode("utf-8") if isinstance(token, bytes) else str(token)


def value_text(value: Any, is_repr: bool) -> str:
    array = as_tf_numpy(value)
    if array.ndim == 0:
        scalar = array[()]
        # TF's `numpy=` of a number is the Python number's repr (observed, TF 2.21: float32 0.1 shows
        # `numpy=0.10000000149011612`); `print` shows numpy's text (`0.1`)
        if isinstance(scalar, (bytes, str)):
            text = repr(scalar)
        else:
            text = repr(scalar.item()) if is_repr and hasattr(scalar, "item") else str(scalar)
    else:
        text = repr(array) if is_repr else str(array)
    return "\n" + text if "\n" in text else text


def tensor_str(value: Any) -> str:
    """What `print(tensor)` shows in TF."""
    array = np.asarray(value)
    return f"tf.Tensor({value_text(array, False)}, shape={shape_text(array.shape)}, dtype={dtype_name(array.dtype)})"


def tensor_repr(value: Any) -> str:
    """What a tensor shows inside a printed list, or at a prompt, in TF."""
    array = np.asarray(value)
    return (f"<tf.Tensor: shape={shape_text(array.shape)}, dtype={dtype_name(array.dtype)}, "
            f"numpy={value_text(array, True)}>")
