"""tf.io's byte codecs on the host: `encode_base64` / `decode_base64`, `decode_compressed`, and
`serialize_tensor` / `parse_tensor` (a tensor as a `TensorProto`).

As TF 2.21 (observed): base64 is the web-safe alphabet ("-" and "_"), unpadded unless `pad=True`; decoding
takes the last group padded or not ("YQ" and "YQ==" are b"a") and refuses a length of 1 modulo 4 and any
other character ("YQ=" included). `serialize_tensor` writes TF's bytes exactly: the dtype enum, the shape,
numbers as little-endian `tensor_content`, strings as `string_val`. Each op maps over a tensor of strings.
"""
from __future__ import annotations

import base64
import binascii
import re
import struct
import zlib
from typing import Any, Callable

import jax
import numpy as np

from jdist.callbacks.event_file import length_delimited, proto_fields, varint
from jdist.tf_compat.dtype_table import as_dtype
from jdist.tf_compat.error_types import DataLossError, InvalidArgumentError
from jdist.tf_compat.strings import text

_WEB_SAFE = re.compile(rb"[A-Za-z0-9_-]*")
# TF's DataType enum (types.proto) for the dtypes jdist has.
_ENUM = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7, "complex64": 8,
         "int64": 9, "bool": 10, "bfloat16": 14, "uint16": 17, "complex128": 18, "float16": 19, "uint32": 22,
         "uint64": 23}
_NAME = {v: k for k, v in _ENUM.items()}
_TF_NAME = {"float32": "float", "float64": "double", "float16": "half"}


def _host(op: str, value: Any) -> np.ndarray:
    if isinstance(value, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.io.{op} runs on the host (in a tf.data map): compiled code has no strings")
    return text(value)


def _each(op: str, value: Any, fn: Callable[[bytes], bytes]) -> np.ndarray:
    array = _host(op, value)
    out = np.empty(array.shape, object)
    for index, item in np.ndenumerate(array):
        out[index] = fn(item)
    return out


def encode_base64(input: Any, pad: bool = False, name: str | None = None) -> np.ndarray:  # noqa: A002 (TF's name)
    """Each string in web-safe base64 ("-" and "_"), with "=" padding only if `pad`."""
    def one(data: bytes) -> bytes:
        text = base64.urlsafe_b64encode(data)
        return text if pad else text.rstrip(b"=")
    return _each("encode_base64", input, one)


def _decode_base64(text: bytes) -> bytes:
    head_size = (len(text) - 1) // 4 * 4 if text else 0
    head, tail = text[:head_size], text[head_size:]
    if len(tail) == 4 and tail.endswith(b"=="):
        tail = tail[:2]
    elif len(tail) == 4 and tail.endswith(b"="):
        tail = tail[:3]
    if len(tail) == 1:
        raise InvalidArgumentError(None, None, "Base64 string length cannot be 1 modulo 4.")
    if not _WEB_SAFE.fullmatch(head + tail):
        raise InvalidArgumentError(None, None, "Invalid character found in base64.")
    return base64.urlsafe_b64decode(head + tail + b"=" * (-len(tail) % 4))


def decode_base64(input: Any, name: str | None = None) -> np.ndarray:  # noqa: A002 (TF's name)
    """Each web-safe base64 string decoded (padding optional)."""
    return _each("decode_base64", input, _decode_base64)


def decode_compressed(bytes: Any, compression_type: str = "", name: str | None = None) -> np.ndarray:  # noqa: A002
    """Each string decompressed: `compression_type` "" (as it is), "ZLIB" or "GZIP"."""
    if compression_type not in ("", "ZLIB", "GZIP"):
        raise InvalidArgumentError(None, None, "Only ZLIB, GZIP or NONE are supported compressions")
    if not compression_type:
        return _each("decode_compressed", bytes, lambda data: data)
    bits = 31 if compression_type == "GZIP" else 15

    def one(data: Any) -> Any:
        try:
            return zlib.decompress(data, bits)
        except zlib.error as err:
            raise DataLossError(None, None, f"inflate() failed: {err}") from None
    return _each("decode_compressed", bytes, one)


# ------------------------------------------------------------------ TensorProto
def _shape_proto(shape: tuple[int, ...]) -> bytes:
    """A `TensorShapeProto`: one `dim` per dimension, its `size` left out when 0 (as protobuf writes it)."""
    return b"".join(length_delimited(2, varint(8) + varint(d) if d else b"") for d in shape)


def _tensor_proto(array: np.ndarray) -> bytes:
    dtype = "string" if array.dtype.kind in "OSU" else as_dtype(array.dtype).name
    out = varint(8) + varint(_ENUM[dtype]) + length_delimited(2, _shape_proto(array.shape))
    if dtype == "string":
        return out + b"".join(length_delimited(8, s) for s in text(array).reshape(-1))
    content = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
    return out + (length_delimited(4, content) if content else b"")


def serialize_tensor(tensor: Any, name: str | None = None) -> np.ndarray:
    """The tensor as a serialized `TensorProto` (a string scalar), TF's bytes exactly."""
    if isinstance(tensor, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError("tf.io.serialize_tensor runs on the host: compiled code has no strings")
    value = tensor.numpy() if hasattr(tensor, "numpy") else tensor
    array = np.asarray(value)
    if array.dtype.kind == "U":
        array = text(array)
    return np.array(_tensor_proto(array), dtype=object)


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """(field number, value) pairs: ints for varints, bytes for the rest."""
    return [(number, value) for number, _, value in proto_fields(data)]


def _parse_one(data: bytes, out_type: Any) -> np.ndarray:
    dtype_enum, shape, content, texts = 0, [], None, []
    for number, value in _fields(data):
        if number == 1:
            dtype_enum = value
        elif number == 2:
            shape = [dict(_fields(dim)).get(1, 0) for n, dim in _fields(value) if n == 2]
        elif number == 4:
            content = value
        elif number == 8:
            texts.append(bytes(value))
    name = _NAME.get(dtype_enum)
    want = as_dtype(out_type)
    if name != want.name:
        got = _TF_NAME.get(name or "", name or str(dtype_enum))
        raise InvalidArgumentError(None, None, f"Type mismatch between parsed tensor ({got}) and dtype "
                                               f"({_TF_NAME.get(want.name, want.name)})")
    if name == "string":
        array = np.empty(len(texts), object)
        array[:] = texts
        return array.reshape(shape)
    flat = np.frombuffer(content or b"", want.dtype.newbyteorder("<")).astype(want.dtype)
    return flat.reshape(shape)


def parse_tensor(serialized: Any, out_type: Any, name: str | None = None) -> np.ndarray:
    """The tensor a serialized `TensorProto` holds (`out_type` must be its dtype)."""
    data = _host("parse_tensor", serialized)
    if data.ndim != 0:
        raise InvalidArgumentError(None, None, f"Expected `serialized` to be a scalar, got shape: {list(data.shape)}")
    record: bytes = data.item()
    try:
        return _parse_one(record, out_type)
    except (ValueError, struct.error, binascii.Error) as err:
        if isinstance(err, InvalidArgumentError):
            raise
        raise InvalidArgumentError(None, None, "Could not parse `serialized` as TensorProto, base64: "
                                               f"{base64.b64encode(record).decode()}") from None


NAMES = dict(encode_base64=encode_base64, decode_base64=decode_base64, decode_compressed=decode_compressed,
             serialize_tensor=serialize_tensor, parse_tensor=parse_tensor)
