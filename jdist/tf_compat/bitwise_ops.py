"""`tf.bitwise`: and, or, xor, invert and shifts of integers, on numpy or JAX (see `ops`).

TF's rules, observed in TF 2.21: integers only (float or bool input is an error), both operands of one dtype (a
Python value takes the tensor's); `right_shift` of a signed integer is arithmetic (-8 >> 1 is -4); a shift
outside [0, bits) is clamped into it (1 << 40 in int32 is -2147483648, -1 >> 40 is -1, 16 >> -1 is 16).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, xp
from jdist.typing import Tensor, TensorLike

_INTEGERS = "int8, int16, int32, int64, uint8, uint16, uint32, uint64"


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "dtype") and not isinstance(value, (int, float, bool))


def _integers(op: str, *values: TensorLike) -> list[Any]:
    """The operands as tensors of one integer dtype (a Python value converted to the tensor's dtype)."""
    like: Any = next((v for v in values if _is_tensor(v)), None)
    hint = None if like is None else np.dtype(like.dtype)
    tensors = [convert_to_tensor(v) if _is_tensor(v) or hint is None else convert_to_tensor(v, hint)
               for v in values]
    for tensor in tensors:
        if np.dtype(tensor.dtype).kind not in "iu":
            raise InvalidArgumentError(message=f"Value for attr 'T' of {np.dtype(tensor.dtype).name} is not in the "
                                               f"list of allowed values: {_INTEGERS} [Op:{op}]")
    if len(tensors) == 2 and np.dtype(tensors[0].dtype) != np.dtype(tensors[1].dtype):
        raise InvalidArgumentError(message=f"cannot compute {op} as input #1(zero-based) was expected to be a "
                                           f"{np.dtype(tensors[0].dtype).name} tensor but is a "
                                           f"{np.dtype(tensors[1].dtype).name} tensor [Op:{op}]")
    return tensors


def bitwise_and(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    x, y = _integers("BitwiseAnd", x, y)
    return xp(x, y).bitwise_and(x, y)


def bitwise_or(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    x, y = _integers("BitwiseOr", x, y)
    return xp(x, y).bitwise_or(x, y)


def bitwise_xor(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    x, y = _integers("BitwiseXor", x, y)
    return xp(x, y).bitwise_xor(x, y)


def invert(x: TensorLike, name: str | None = None) -> Tensor:
    """Every bit flipped (~x): 255 - x for uint8, -x - 1 for signed integers."""
    (x,) = _integers("Invert", x)
    return xp(x).invert(x)


def _shift(op: str, x: TensorLike, y: TensorLike) -> tuple[Any, Any, Any]:
    a, b = _integers(op, x, y)
    module = xp(a, b)
    bits = np.dtype(a.dtype).itemsize * 8
    return a, module.clip(b, 0, bits - 1).astype(a.dtype), module


def left_shift(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x << y`, the shift clamped to [0, bits - 1]; bits shifted out are lost."""
    x, y, module = _shift("LeftShift", x, y)
    return module.left_shift(x, y)


def right_shift(x: TensorLike, y: TensorLike, name: str | None = None) -> Tensor:
    """`x >> y`, arithmetic for signed integers (the sign bit fills in); the shift clamped to [0, bits - 1]."""
    x, y, module = _shift("RightShift", x, y)
    return module.right_shift(x, y)


BITWISE = dict(bitwise_and=bitwise_and, bitwise_or=bitwise_or, bitwise_xor=bitwise_xor, invert=invert,
               left_shift=left_shift, right_shift=right_shift)
