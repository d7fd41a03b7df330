"""`tf.float32`, `tf.dtypes`, `tf.as_dtype`: TF's dtype objects, usable wherever numpy or JAX take a dtype.

A `DType` compares equal to its numpy dtype (`tf.float32 == np.float32`, as in TF) and has a
`.dtype` attribute holding it, so `np.zeros(2, dtype=tf.float32)` and `jnp.zeros(2, tf.float32)`
work (TF 2.21 refuses the former: "Cannot interpret 'tf.float32' as a data type").
"""
from __future__ import annotations

import builtins
from typing import overload

import ml_dtypes
import numpy as np
from jax.typing import DTypeLike

from jdist.input import calling_code as _calling_code


class DType:
    """TF's `tf.DType`: `name`, `as_numpy_dtype`, `is_floating`, `is_integer`, `is_bool`, `size`, `min`, `max`."""

    def __init__(self, name: str, numpy_dtype: DTypeLike):
        self.name = name
        self.dtype: np.dtype = np.dtype(numpy_dtype)  # what numpy and JAX read when given this object as a dtype

    @property
    def as_numpy_dtype(self) -> type:
        return self.dtype.type

    @property
    def is_floating(self) -> builtins.bool:
        return self.dtype.kind == "f" or self.dtype == ml_dtypes.bfloat16

    @property
    def is_integer(self) -> builtins.bool:
        return self.dtype.kind in "iu"

    @property
    def is_unsigned(self) -> builtins.bool:
        return self.dtype.kind == "u"

    @property
    def is_bool(self) -> builtins.bool:
        return self.dtype.kind == "b"

    @property
    def is_complex(self) -> builtins.bool:
        return self.dtype.kind == "c"

    @property
    def size(self) -> int:
        return self.dtype.itemsize

    @property
    def min(self) -> int | np.generic:
        return ml_dtypes.finfo(self.dtype).min if self.is_floating else np.iinfo(self.dtype).min

    @property
    def max(self) -> int | np.generic:
        return ml_dtypes.finfo(self.dtype).max if self.is_floating else np.iinfo(self.dtype).max

    @property
    def base_dtype(self) -> "DType":
        return self

    def __eq__(self, other: object) -> builtins.bool:
        try:
            return self.dtype == _lookup(other).dtype
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.dtype)

    def __getattr__(self, name: str) -> object:
        """numpy's dtype attributes (`kind`, `itemsize`, `char`) for code written against numpy's `t.dtype`."""
        if name.startswith("__") or name == "dtype":
            raise AttributeError(name)
        return getattr(self.dtype, name)

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: '{self.name}'>"


_NUMPY = {
    "float16": np.float16, "float32": np.float32, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "bool": np.bool_, "complex64": np.complex64, "complex128": np.complex128,
}
_BY_NAME: dict[str, DType] = {name: DType(name, t) for name, t in _NUMPY.items()}
_BY_NUMPY: dict[np.dtype, DType] = {d.dtype: d for d in _BY_NAME.values()}

float16 = half = _BY_NAME["float16"]
float32 = _BY_NAME["float32"]
float64 = double = _BY_NAME["float64"]
bfloat16 = _BY_NAME["bfloat16"]
int8, int16, int32, int64 = (_BY_NAME[n] for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_BY_NAME[n] for n in ("uint8", "uint16", "uint32", "uint64"))
bool = _BY_NAME["bool"]  # noqa: A001 (TF's name)
complex64, complex128 = _BY_NAME["complex64"], _BY_NAME["complex128"]
# tf.string: host-only (numpy object arrays of bytes or str), for tf.data maps and `tf.keras.Input(dtype=tf.string)`
# preprocessing models (`keras_strings`); JAX has no string type, so compiled code never sees it.
string = DType("string", np.object_)


def as_dtype(type_value: DTypeLike) -> DType:
    """`tf.as_dtype`: a `DType` from a `DType`, a name ("float32"), a numpy dtype or type, or a JAX dtype."""
    return _lookup(type_value)


def _lookup(type_value: object) -> DType:
    """`as_dtype` of any value: TypeError for what is not a dtype (None too, as in TF: numpy reads it as float64)."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, str) and type_value in _BY_NAME:
        return _BY_NAME[type_value]
    if type_value is string or type_value is str or type_value is bytes or (
            isinstance(type_value, str) and type_value == "string"):
        return string
    try:  # numpy judges the rest (TypeError for what names no dtype), other objects through their `.dtype`
        if isinstance(type_value, (str, type, np.dtype)):
            key = np.dtype(type_value)
        else:
            held = getattr(type_value, "dtype", None)  # None too: numpy would read None as float64
            key = None if held is None else np.dtype(held)
    except TypeError:
        key = None
    if key is not None and key.kind in "OSU":  # a string tensor's `.dtype` (numpy's object or bytes): tf.string
        return string
    if key is None or key not in _BY_NUMPY:
        raise TypeError(f"Cannot convert {type_value!r} to a tf dtype: jdist.tf_compat has "
                        f"{sorted(_BY_NAME)} and tf.string (host only; quantized types are not provided)")
    return _BY_NUMPY[key]


@overload
def numpy_dtype(dtype: None) -> None: ...
@overload
def numpy_dtype(dtype: DTypeLike) -> np.dtype: ...
def numpy_dtype(dtype: DTypeLike | None) -> np.dtype | None:
    """The numpy dtype for a dtype argument of a `tf.` op (None stays None)."""
    return None if dtype is None else as_dtype(dtype).dtype


ALL = dict(_BY_NAME, half=half, double=double, string=string)

# A host tensor's `t.dtype` and a TensorSpec's `dtype` in a script's code are TF's `DType` (jdist.input.calling_code).
_calling_code.set_script_dtype(as_dtype)
