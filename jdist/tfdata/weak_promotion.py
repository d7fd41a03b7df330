"""TF's dtype promotion under `tnp.experimental_enable_numpy_behavior(dtype_conversion_mode="all" | "safe")`.

In these modes TF 2.21 promotes the two operands of a binary op along its own lattice (observed, TF 2.21, every
pair of the dtypes below, `x + y`; site/en/guide/tf_numpy_type_promotion.ipynb), not numpy's: `int32 + float32`
is float32, `int8 + uint32` int64, `int64 + float16` float16. A Python number, and a tensor made from one
without a dtype (`tf.constant(5)`, `tnp.array(1.)`), is *weak*: int32, float32 or complex128 that yields to the
other operand (`weak float32 + float16` is float16) and prints `weak=True`. "safe" refuses the pairs that could
lose precision with TF's TypeError. The tables are TF's observed results, row and column in `_KEYS` order; a
`*` marks a weak result, `X` a pair "safe" refuses.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import ml_dtypes
import numpy as np

from jdist.tfdata import operands, tensor_numpy
from jdist.tfdata.structure import HostTensor

_NAMES = {"b": np.bool_, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "i8": np.int8,
          "i16": np.int16, "i32": np.int32, "i64": np.int64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
          "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}
_KEYS = ["b", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128",
         "i32*", "f32*", "c128*"]

_ALL = """
    b    u8   u16   u32   u64    i8   i16   i32   i64   f16  bf16   f32   f64   c64  c128  i32*  f32* c128*
   u8    u8   u16   u32   u64   i16   i16   i32   i64   f16  bf16   f32   f64   c64  c128    u8  f64* c128*
  u16   u16   u16   u32   u64   i32   i32   i32   i64   f16  bf16   f32   f64   c64  c128   u16  f64* c128*
  u32   u32   u32   u32   u64   i64   i64   i64   i64   f16  bf16   f32   f64   c64  c128   u32  f64* c128*
  u64   u64   u64   u64   u64  f64*  f64*  f64*  f64*   f16  bf16   f32   f64   c64  c128   u64  f64* c128*
   i8   i16   i32   i64  f64*    i8   i16   i32   i64   f16  bf16   f32   f64   c64  c128    i8  f64* c128*
  i16   i16   i32   i64  f64*   i16   i16   i32   i64   f16  bf16   f32   f64   c64  c128   i16  f64* c128*
  i32   i32   i32   i64  f64*   i32   i32   i32   i64   f16  bf16   f32   f64   c64  c128   i32  f64* c128*
  i64   i64   i64   i64  f64*   i64   i64   i64   i64   f16  bf16   f32   f64   c64  c128   i64  f64* c128*
  f16   f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f32   f64   c64  c128   f16   f16   c64
 bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32  bf16   f32   f64   c64  c128  bf16  bf16   c64
  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128   f32   f32   c64
  f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128   f64   f64  c128
  c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128   c64   c64   c64
 c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
 i32*    u8   u16   u32   u64    i8   i16   i32   i64   f16  bf16   f32   f64   c64  c128  i32*  f32* c128*
 f32*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*   f16  bf16   f32   f64   c64  c128  f32*  f32* c128*
c128* c128* c128* c128* c128* c128* c128* c128* c128*   c64   c64   c64  c128   c64  c128 c128* c128* c128*
"""
_SAFE = """
    b    u8   u16   u32   u64    i8   i16   i32   i64   f16  bf16   f32   f64   c64  c128  i32*  f32* c128*
   u8    u8   u16   u32   u64     X   i16   i32   i64   f16  bf16   f32   f64   c64  c128    u8     X c128*
  u16   u16   u16   u32   u64     X     X   i32   i64     X     X   f32   f64   c64  c128   u16     X c128*
  u32   u32   u32   u32   u64     X     X     X   i64     X     X     X   f64     X  c128   u32     X c128*
  u64   u64   u64   u64   u64     X     X     X     X     X     X     X     X     X     X   u64     X     X
   i8     X     X     X     X    i8   i16   i32   i64   f16  bf16   f32   f64   c64  c128    i8     X c128*
  i16   i16     X     X     X   i16   i16   i32   i64     X     X   f32   f64   c64  c128   i16     X c128*
  i32   i32   i32     X     X   i32   i32   i32   i64     X     X     X   f64     X  c128   i32     X c128*
  i64   i64   i64   i64     X   i64   i64   i64   i64     X     X     X     X     X     X   i64     X     X
  f16   f16     X     X     X   f16     X     X     X   f16     X   f32   f64   c64  c128   f16   f16     X
 bf16  bf16     X     X     X  bf16     X     X     X     X  bf16   f32   f64   c64  c128  bf16  bf16     X
  f32   f32   f32     X     X   f32   f32     X     X   f32   f32   f32   f64   c64  c128   f32   f32     X
  f64   f64   f64   f64     X   f64   f64   f64     X   f64   f64   f64   f64     X  c128   f64   f64  c128
  c64   c64   c64     X     X   c64   c64     X     X   c64   c64   c64     X   c64  c128   c64   c64   c64
 c128  c128  c128  c128     X  c128  c128  c128     X  c128  c128  c128  c128  c128  c128  c128  c128  c128
 i32*    u8   u16   u32   u64    i8   i16   i32   i64   f16  bf16   f32   f64   c64  c128  i32*  f32* c128*
 f32*     X     X     X     X     X     X     X     X   f16  bf16   f32   f64   c64  c128  f32*  f32* c128*
c128* c128* c128* c128*     X c128* c128* c128*     X     X     X     X  c128   c64  c128 c128* c128* c128*
"""

def _table(text: str) -> dict[tuple[str, str], str]:
    rows = [line.split() for line in text.strip().splitlines()]
    return {(a, b): cell for a, row in zip(_KEYS, rows) for b, cell in zip(_KEYS, row)}


_TABLES = {"all": _table(_ALL), "safe": _table(_SAFE)}
_ABBREVIATIONS = {np.dtype(v): k for k, v in _NAMES.items()}
MODES = ("all", "safe")


@operands.register_host_tensor
class WeakHostTensor(HostTensor):
    """A weak tensor (TF's `EagerWeakTensor`): TF's repr ends in `weak=True`."""

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + ", weak=True>"


def _key(value: Any) -> str:
    """The lattice key of an operand: a Python number or a weak tensor is weak, anything else strong."""
    if type(value) is bool:
        return "b"
    if isinstance(value, (int, float, complex)) and not isinstance(value, np.generic):
        return {int: "i32*", float: "f32*", complex: "c128*"}[type(value)]
    if isinstance(value, (list, tuple)):
        return _key(np.asarray(value).dtype.type(0).item()) if len(value) else "f32*"
    dtype = np.dtype(getattr(value, "dtype", None) or np.asarray(value).dtype)
    key = _ABBREVIATIONS.get(dtype)
    if key is None:
        raise TypeError(f"No dtype promotion for {dtype.name} in numpy behavior's dtype_conversion_mode")
    return key + "*" if isinstance(value, WeakHostTensor) and key + "*" in _KEYS else key


def _shown(key: str) -> str:
    return f"(<dtype: '{np.dtype(_NAMES[key.rstrip('*')]).name}'>, weak={key.endswith('*')})"


def result_type(x: Any, y: Any, mode: str) -> tuple[Any, bool]:
    """The dtype and weakness TF's `mode` gives `x op y`, or TF's TypeError for a pair "safe" refuses."""
    a, b = _key(x), _key(y)
    cell = _TABLES[mode][(a, b)]
    if cell == "X":
        raise TypeError(f"In promotion mode PromoMode.SAFE, implicit dtype promotion between {_shown(a)} and "
                        f"{_shown(b)} is disallowed. You need to explicitly specify the dtype in your op, or relax "
                        "your dtype promotion rules (such as from SAFE mode to ALL mode).")
    return np.dtype(_NAMES[cell.rstrip("*")]), cell.endswith("*")


def promoted(x: Any, y: Any, mode: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """`x` and `y` as arrays of TF's promoted dtype, and whether the result is weak."""
    dtype, weak = result_type(x, y, mode)
    return (np.asarray(np.asarray(x), dtype=dtype).view(np.ndarray),
            np.asarray(np.asarray(y), dtype=dtype).view(np.ndarray), weak)


def operator(ufunc: Any, x: Any, y: Any, mode: str) -> Any:
    """A tensor operator in `mode`: TF's promoted dtype, a weak tensor where both operands are weak-like."""
    a, b, weak = promoted(x, y, mode)
    with np.errstate(all="ignore"):
        out = np.asarray(ufunc(a, b))
    if out.dtype != a.dtype and out.dtype.kind != "b" and ufunc is not np.true_divide:
        out = out.astype(a.dtype)
    return out.view(WeakHostTensor if weak else HostTensor)


def casts_to(value: Any, dtype: Any, mode: str) -> bool:
    """Whether `tf.constant(tensor, dtype)` casts in `mode`: where the lattice promotes the tensor to `dtype`
    (observed, TF 2.21 "all": int16 to float32 casts, float32 to int32 is TF's "Expected tensor" TypeError;
    "safe" raises its refusal for a pair it refuses)."""
    if mode not in MODES or np.dtype(dtype) not in _ABBREVIATIONS:
        return False
    try:
        return result_type(value, np.zeros((), dtype), mode)[0] == np.dtype(dtype)
    except TypeError:
        if mode == "safe" and np.dtype(getattr(value, "dtype", np.dtype("O"))) in _ABBREVIATIONS:
            raise
        return False


def assignable(dtype: Any, value: Any, op: str, mode: str) -> bool:
    """Whether a variable of `dtype` takes a tensor `value` of another dtype in `mode` (observed, TF 2.21 "all":
    `int32 variable.assign_add(int16 tensor)` casts; a float32 tensor is TypeError "Variable dtype is immutable.
    ..."; "safe" raises its refusal for a pair it refuses). False outside "all"/"safe"."""
    if mode not in MODES or np.dtype(dtype) not in _ABBREVIATIONS:
        return False
    if result_type(np.zeros((), dtype), value, mode)[0] == np.dtype(dtype):
        return True
    shown, want = str(np.asarray(value)), f"<dtype: '{np.dtype(dtype).name}'>"
    raise TypeError(f"Variable dtype is immutable. Calling {op} of Variable (with dtype {want}) on {shown} requires "
                    f"converting {shown} to {want}. This is disabled in the current promotion semantics. Please "
                    f"convert {shown} manually before calling {op}.")


def weak(array: Any) -> Any:
    """A tensor made from Python values without a dtype as TF's weak tensor (int32, float32, complex128; bool
    stays strong: observed, TF 2.21 `tf.constant(True)` prints no `weak=True`)."""
    kind = np.dtype(array.dtype).kind if isinstance(array, np.ndarray) else ""
    return np.asarray(array).view(WeakHostTensor) if kind in "ifc" and kind else array


def python_value(value: Any) -> bool:
    """A Python number or a (nested) list of them: what TF makes a weak tensor of."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(python_value(v) for v in value)
    return isinstance(value, (int, float, complex)) and not isinstance(value, (bool, np.generic))


def keeps_weak(op: Callable[..., Any]) -> Callable[..., Any]:
    """A unary `tf.math` op whose result is weak for a weak input in mode "all"/"safe" (observed, TF 2.21:
    `tf.math.abs([100.0, 4.0])`, `tf.math.sqrt(4.)`, `tf.math.square(3)` print `weak=True`; a float32 tensor's
    `tf.math.abs` does not)."""
    @functools.wraps(op)
    def weak_op(x: Any, *args: Any, **kwargs: Any) -> Any:
        out = op(x, *args, **kwargs)
        if (tensor_numpy.NUMPY_BEHAVIOR.get("mode") in MODES and (python_value(x) or isinstance(x, WeakHostTensor))
                and isinstance(out, (np.ndarray, np.generic)) and not operands.is_device_array(out)):
            return weak(np.asarray(out))
        return out
    return weak_op
