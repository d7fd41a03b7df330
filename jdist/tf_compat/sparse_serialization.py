"""`tf.io.serialize_sparse`, `serialize_many_sparse` and `deserialize_many_sparse`: a SparseTensor as three
serialized `TensorProto`s (indices, values, dense_shape), TF's bytes exactly, on the host.

TF 2.21's rules (observed): the protos hold their data as `tensor_content` (strings too: the varint lengths,
then the bytes); `serialize_many_sparse` gives one row of three per entry of the first dimension (rank 2 at
least), an empty row with empty tensors; `deserialize_many_sparse` stacks rows in their order, its dense shape
the largest of each dimension, and a single row of three (a vector) is that one SparseTensor as it is.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.callbacks.event_file import length_delimited, read_varint, varint
from jdist.tf_compat.dtype_table import as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.io_codecs import _ENUM, _NAME, _TF_NAME, _fields, _shape_proto
from jdist.tf_compat.sparse import SparseTensor
from jdist.tf_compat.strings import text


def _proto(array: np.ndarray) -> bytes:
    strings = array.dtype.kind in "OSU"
    dtype = "string" if strings else as_dtype(array.dtype).name
    if strings:
        items = list(text(array).reshape(-1))
        content = b"".join(varint(len(s)) for s in items) + b"".join(items)
    else:
        content = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
    head = varint(8) + varint(_ENUM[dtype]) + length_delimited(2, _shape_proto(array.shape))
    return head + (length_delimited(4, content) if content else b"")


def _parse(record: bytes) -> tuple[str, np.ndarray]:
    """A TensorProto's dtype name and value."""
    dtype, shape, content, texts = "", [], b"", []
    for number, value in _fields(record):
        if number == 1:
            dtype = _NAME.get(value, str(value))
        elif number == 2:
            shape = [dict(_fields(dim)).get(1, 0) for n, dim in _fields(value) if n == 2]
        elif number == 4:
            content = bytes(value)
        elif number == 8:
            texts.append(bytes(value))
    count = int(np.prod(shape)) if shape else 1
    if dtype == "string":
        if content:
            lengths, pos = [], 0
            for _ in range(count):
                size, pos = read_varint(content, pos)
                lengths.append(size)
            for size in lengths:
                texts.append(content[pos:pos + size])
                pos += size
        out = np.empty(len(texts), object)
        out[:] = texts
        return dtype, out.reshape(shape)
    np_dtype = as_dtype(dtype).dtype
    return dtype, np.frombuffer(content, np_dtype.newbyteorder("<")).astype(np_dtype).reshape(shape)


def _parts(sp_input: SparseTensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"Input must be a SparseTensor, got {type(sp_input).__name__}")
    return (np.asarray(sp_input.indices, np.int64), np.asarray(sp_input.values),
            np.asarray(sp_input.dense_shape, np.int64))


def _out_type(out_type: Any) -> None:
    if as_dtype(out_type).name != "string":
        raise TypeError(f"out_type {out_type!r}: jdist serializes SparseTensors to tf.string only (no variants)")


def serialize_sparse(sp_input: SparseTensor, out_type: Any = "string", name: Any = None) -> Any:
    """The SparseTensor as a string vector of three serialized TensorProtos."""
    _out_type(out_type)
    return as_tensors(np.array([_proto(part) for part in _parts(sp_input)], dtype=object))


def serialize_many_sparse(sp_input: SparseTensor, out_type: Any = "string", name: Any = None) -> Any:
    """Each entry of the first dimension as its own serialized SparseTensor: an `[n, 3]` string matrix."""
    _out_type(out_type)
    indices, values, shape = _parts(sp_input)
    if len(shape) < 2:
        raise InvalidArgumentError(None, None, "Rank of input SparseTensor should be > 1, but saw rank: "
                                               f"{len(shape)}")
    rows = []
    for row in range(int(shape[0])):
        keep = indices[:, 0] == row
        rows.append([_proto(np.ascontiguousarray(indices[keep, 1:])), _proto(values[keep]), _proto(shape[1:])])
    return as_tensors(np.array(rows, dtype=object).reshape(len(rows), 3))


def deserialize_many_sparse(serialized_sparse: Any, dtype: Any, rank: int | None = None, name: Any = None
                            ) -> SparseTensor:
    """The SparseTensor of an `[n, 3]` matrix of serialized SparseTensors, stacked along a new first dimension."""
    records = np.asarray(serialized_sparse, dtype=object)
    want = as_dtype(dtype).name
    if records.shape[-1:] != (3,) or records.ndim > 2:
        raise InvalidArgumentError(None, None, "Serialized sparse should be a matrix of shape [n, 3], got shape "
                                               f"{list(records.shape)}")
    rows = records.reshape(-1, 3)
    parsed = []
    for i, (idx, vals, shp) in enumerate(rows):
        value_dtype, values = _parse(bytes(vals))
        if value_dtype != want:
            raise InvalidArgumentError(None, None, f"Requested SparseTensor of type {_TF_NAME.get(want, want)} but "
                                                   f"SparseTensor[{i}].values.dtype() == "
                                                   f"{_TF_NAME.get(value_dtype, value_dtype)}")
        parsed.append((_parse(bytes(idx))[1].astype(np.int64), values, _parse(bytes(shp))[1].astype(np.int64)))
    if records.ndim == 1:
        indices, values, shape = parsed[0]
        out_rank = len(shape)
    else:
        out_rank = 1 + max(len(s) for _, _, s in parsed) if parsed else 1
        indices = np.concatenate([np.column_stack([np.full(len(ix), i, np.int64), ix.reshape(len(ix), out_rank - 1)])
                                  for i, (ix, _, _) in enumerate(parsed)]) if parsed else np.zeros((0, 1), np.int64)
        indices = indices.reshape(-1, out_rank)
        values = np.concatenate([v for _, v, _ in parsed]) if parsed else np.zeros(0, as_dtype(want).dtype)
        shape = np.concatenate([[len(parsed)], np.max([s for _, _, s in parsed], axis=0)]) if parsed else [0]
    if rank is not None and int(rank) != out_rank:
        raise ValueError(f"Tensor's shape {tuple(indices.shape)} is not compatible with supplied shape "
                         f"(None, {int(rank)}).")
    return SparseTensor(indices, values, shape)


IO = dict(serialize_sparse=serialize_sparse, serialize_many_sparse=serialize_many_sparse,
          deserialize_many_sparse=deserialize_many_sparse)
