"""TF's indexing rule for a host tensor in a script's code (`t[i]`, `t[1:3]`, `t[mask]`).

A host tensor (`jdist.tfdata.structure.HostTensor`) is an `np.ndarray`, and numpy indexes more broadly than TF's
`EagerTensor` does. A TF script sees TF's rule (observed, TF 2.21):

* a key is ints (Python or numpy), slices of ints, `None`, `...` and scalar int32/int64 tensors; anything else
  (`t[1.5]`, `t[np.array([1, 2])]`, a 1-D tensor) is TypeError "Only integers, slices (`:`), ellipsis (`...`),
  tf.newaxis (`None`) and scalar tf.int32/tf.int64 tensors are valid indices, got 1.5";
* a list key is read as a tuple of indices: `t[[1, 2]]` is `t[1, 2]`;
* an int out of range is InvalidArgumentError "slice index 10 of dimension 0 out of bounds. [Op:StridedSlice]
  name: strided_slice/", a key with more indices than dims "Index out of range using input dim 1; input has
  only 1 dims [Op:StridedSlice] name: strided_slice/";
* a whole key that is a bool tensor is `tf.boolean_mask` (`t[t > 0]`); a Python bool is ValueError
  "mask cannot be scalar.".

Library code (numpy, JAX, Keras, jdist) keeps numpy's indexing; the calling frame says which. So does a script
under `tnp.experimental_enable_numpy_behavior()` (TF's tensors then index as numpy's arrays).
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.input.calling_code import library_code
from jdist.tfdata.tensor_numpy import NUMPY_BEHAVIOR

_OP = " [Op:StridedSlice] name: strided_slice/"


class IndexOutOfRange(InvalidArgumentError, IndexError):
    """TF's InvalidArgumentError for an index past a dimension; an IndexError too, so that iterating a host
    tensor (`list(t)`, `for row in t`, which index until IndexError) stops at its end."""


def _type_error(piece: Any) -> TypeError:
    return TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
                     f"tf.int32/tf.int64 tensors are valid indices, got {piece!r}")


def _integer(piece: Any) -> int | None:
    """`piece` as an int where TF takes it as one (an int, a numpy int, a scalar int32/int64 array); else None."""
    if isinstance(piece, numbers.Integral):
        return int(piece)
    dtype = getattr(piece, "dtype", None)
    if dtype is not None and np.dtype(dtype) in (np.int32, np.int64) and np.ndim(piece) == 0:
        return int(np.asarray(piece))
    return None


def _piece(piece: Any) -> Any:
    if piece is None or piece is Ellipsis:
        return piece
    if isinstance(piece, slice):
        parts = []
        for part in (piece.start, piece.stop, piece.step):
            number = None if part is None else _integer(part)
            if part is not None and number is None:
                raise _type_error(part)
            parts.append(number)
        return slice(*parts)
    number = _integer(piece)
    if number is None:
        raise _type_error(piece)
    return number


def tf_key(key: Any, shape: tuple[int, ...]) -> Any:
    """`key` as numpy indexes it to give TF's result for a tensor of `shape`, or TF's error for it."""
    if isinstance(key, (bool, np.bool_)):
        raise ValueError("mask cannot be scalar.")
    if isinstance(key, np.ndarray) and key.dtype == np.bool_:
        if key.ndim == 0:
            raise ValueError("mask cannot be scalar.")
        return key.view(np.ndarray)  # `tf.boolean_mask(t, key)`
    pieces = tuple(_piece(p) for p in (key if isinstance(key, (tuple, list)) else (key,)))
    consumed = sum(1 for p in pieces if p is not None and p is not Ellipsis)
    if consumed > len(shape):
        raise InvalidArgumentError(None, None, f"Index out of range using input dim {len(shape)}; input has only "
                                               f"{len(shape)} dims{_OP}")
    dim = 0
    for piece in pieces:
        if piece is Ellipsis:
            dim += len(shape) - consumed
        elif isinstance(piece, int):
            size = shape[dim]
            if not -size <= piece < size:
                shown = piece + size if piece < 0 else piece
                raise IndexOutOfRange(None, None, f"slice index {shown} of dimension {dim} out of bounds."
                                                  f"{_OP}")
            dim += 1
        elif piece is not None:
            dim += 1
    return pieces


def key_for(key: Any, array: np.ndarray, frame: Any) -> Any:
    """`key` as `HostTensor.__getitem__` passes it to numpy: TF's rule (`tf_key`) for a script's code, as it is
    for library code and under NumPy behavior."""
    if NUMPY_BEHAVIOR["on"] or library_code(frame):
        return key
    return tf_key(key, np.ndarray.shape.__get__(array))
