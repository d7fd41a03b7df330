"""TensorBoard event files, written and read without TensorFlow or protobuf.

An event file is a sequence of TFRecords (length, masked CRC-32C of the length,
payload, masked CRC-32C of the payload); each payload is an `Event` protobuf. A
scalar needs only five protobuf fields, so they are encoded here by hand:
`Event{wall_time=1 (double), step=2 (int64), file_version=3 (string), summary=5}`,
`Summary{value=1 (repeated)}`, `Summary.Value{tag=1 (string), simple_value=2 (float)}`.
TensorBoard reads `simple_value` scalars into its Scalars dashboard. `tf.summary` (jdist.tf_compat.summary)
writes TF 2's form: `Summary.Value{tag=1, tensor=8 (TensorProto), metadata=9 (plugin name)}`.
"""
from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from typing import Iterator, Mapping, Sequence

import numpy as np


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecord uses."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ----------------------------------------------------------------- protobuf
def varint(value: int) -> bytes:
    """A protobuf varint."""
    value &= (1 << 64) - 1  # int64 negatives as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return varint((number << 3) | wire_type) + payload


def length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2, varint(len(payload)) + payload)


# TensorProto's dtype enum for the dtypes tf.summary writes.
_DT = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.int64): 9,
       np.dtype(np.bool_): 10}
_DT_STRING = 7
_DTYPE_OF = {v: k for k, v in _DT.items()}


def encode_tensor_value(tag: str, value: np.ndarray, plugin_name: str, description: str = "",
                        plugin_content: bytes = b"") -> bytes:
    """One serialized `Summary.Value` holding a tensor (numbers as tensor_content, strings as string_val);
    `plugin_content` is the plugin's own metadata (TF's Keras writes b"1" for its model graph)."""
    value = np.asarray(value)
    shape = b"".join(length_delimited(2, _field(1, 0, varint(d))) for d in value.shape)
    if value.dtype.kind in "USO":
        content = b"".join(length_delimited(8, (v.encode() if isinstance(v, str) else bytes(v)))
                           for v in value.reshape(-1).tolist())
        tensor = _field(1, 0, varint(_DT_STRING)) + length_delimited(2, shape) + content
    else:
        if value.dtype not in _DT:
            raise TypeError(f"event files hold float32, float64, int32, int64 or bool tensors, not {value.dtype}.")
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
        tensor = _field(1, 0, varint(_DT[value.dtype])) + length_delimited(2, shape) + length_delimited(4, data)
    plugin = length_delimited(1, plugin_name.encode())
    if plugin_content:
        plugin += length_delimited(2, plugin_content)
    metadata = length_delimited(1, plugin)
    if description:
        metadata += length_delimited(3, description.encode())
    return length_delimited(1, tag.encode()) + length_delimited(8, tensor) + length_delimited(9, metadata)


def histogram_buckets(data: np.ndarray, buckets: int = 30) -> np.ndarray:
    """TensorBoard's v2 histogram: a float64 [buckets, 3] array of (left edge, right edge, count)."""
    values = np.asarray(data, dtype=np.float64).reshape(-1)
    if values.size == 0:
        return np.zeros((buckets, 3))
    low, high = values.min(), values.max()
    if low == high:
        counts = np.zeros(buckets)
        counts[-1] = values.size
        return np.stack([np.full(buckets, low), np.full(buckets, high), counts], axis=1)
    width = (high - low) / buckets
    index = np.minimum(np.floor((values - low) / width).astype(np.int64), buckets - 1)
    counts = np.bincount(index, minlength=buckets).astype(np.float64)
    edges = np.concatenate([np.linspace(low, high, buckets + 1)[:-1], [high]])
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


def encode_event(wall_time: float, step: int = 0, *, scalars: Mapping[str, float] | None = None,
                 file_version: str | None = None, values: Sequence[bytes] = ()) -> bytes:
    """One serialized `Event` holding a file version, scalar summaries or encoded `Summary.Value`s."""
    out = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, varint(int(step)))
    if file_version is not None:
        out += length_delimited(3, file_version.encode())
    if scalars:
        simple = b"".join(
            length_delimited(1, length_delimited(1, tag.encode()) + _field(2, 5, struct.pack("<f", float(v))))
            for tag, v in scalars.items()
        )
        out += length_delimited(5, simple)
    elif values:
        out += length_delimited(5, b"".join(length_delimited(1, v) for v in values))
    return out


def scalar_value(tag: str, value: float) -> bytes:
    """A scalar as TF 2's `tf.summary.scalar` (and Keras's TensorBoard callback) writes it: a float32 0-d tensor
    under the "scalars" plugin (observed in TF 2.21, Keras 3.15), not TF 1's `simple_value`."""
    return encode_tensor_value(tag, np.asarray(value, dtype=np.float32), "scalars")


_FILE_NUMBERS = itertools.count()


def next_file_suffix(suffix: str | None = None) -> str:
    """`.<n><suffix or .v2>`: TF 2.21 numbers the event files a process opens (`tf.summary` writers and Keras's
    TensorBoard callback alike) from 0 and ends their names with `.v2` (observed:
    `events.out.tfevents.<time>.<host>.<pid>.0.v2`, then `.1.v2` for the next writer)."""
    return f".{next(_FILE_NUMBERS)}{suffix or '.v2'}"


def frame_record(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc32c(header)) + payload + struct.pack("<I", masked_crc32c(payload))


class EventFileWriter:
    """Appends scalar events to `<log_dir>/events.out.tfevents.<time>.<host>.<pid>`."""

    def __init__(self, log_dir: str | os.PathLike, filename_suffix: str = ""):
        os.makedirs(log_dir, exist_ok=True)
        now = time.time()
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}{filename_suffix}"
        self.path = os.path.join(os.fspath(log_dir), name)
        self._file = open(self.path, "ab")
        self._file.write(frame_record(encode_event(now, 0, file_version="brain.Event:2")))
        self._file.flush()

    def add_scalars(self, step: int, scalars: Mapping[str, float], wall_time: float | None = None) -> None:
        self._file.write(frame_record(encode_event(time.time() if wall_time is None else wall_time, step,
                                                   scalars=scalars)))

    def add_values(self, step: int, values: Sequence[bytes], wall_time: float | None = None) -> None:
        """One event of `encode_tensor_value` results."""
        self._file.write(frame_record(encode_event(time.time() if wall_time is None else wall_time, step,
                                                   values=values)))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


# ------------------------------------------------------------------ reading
def iter_records(path: str | os.PathLike) -> Iterator[bytes]:
    """The payloads of a TFRecord file, checking both checksums of every record."""
    with open(path, "rb") as f:
        while True:
            header = f.read(8)
            if not header:
                return
            if len(header) < 8:
                raise ValueError(f"{path}: truncated record header.")
            (length,) = struct.unpack("<Q", header)
            (length_crc,) = struct.unpack("<I", f.read(4))
            if length_crc != masked_crc32c(header):
                raise ValueError(f"{path}: corrupt record length checksum.")
            payload = f.read(length)
            (payload_crc,) = struct.unpack("<I", f.read(4))
            if len(payload) != length or payload_crc != masked_crc32c(payload):
                raise ValueError(f"{path}: corrupt or truncated record.")
            yield payload


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The protobuf varint at `pos`, and the position after it (ValueError if the bytes end inside it)."""
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def proto_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """`(field number, wire type, value)` of a protobuf message: an int for a varint, the raw bytes otherwise
    (ValueError for a field cut short)."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = read_varint(buf, pos)
        elif wire_type == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire_type == 2:
            length, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
            if pos > len(buf):
                raise ValueError("truncated field")
        elif wire_type == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        yield number, wire_type, value


def _events(path: str | os.PathLike) -> Iterator[tuple[int, list[bytes]]]:
    """`(step, summaries)` of each event in an event file: its signed step and its Summary messages."""
    for payload in iter_records(path):
        step = 0
        summaries: list[bytes] = []
        for number, _, value in proto_fields(payload):
            if number == 2:
                assert isinstance(value, int), "Event.step is a varint"
                step = value if value < 1 << 63 else value - (1 << 64)
            elif number == 5:
                assert isinstance(value, bytes), "Event.summary is a message"
                summaries.append(value)
        yield step, summaries


def read_scalars(path: str | os.PathLike) -> list[tuple[int, str, float]]:
    """`(step, tag, value)` for every scalar in an event file (`simple_value` or TF 2's "scalars" tensor), in
    file order."""
    out = []
    for step, summaries in _events(path):
        for summary in summaries:
            for number, _, value in proto_fields(summary):
                if number != 1:
                    continue
                assert isinstance(value, bytes), "Summary.value is a message"
                tag, scalar, tensor, plugin = None, None, None, b""
                for vnum, _, v in proto_fields(value):
                    if vnum == 1:
                        assert isinstance(v, bytes), "Summary.Value.tag is a string"
                        tag = v.decode()
                    elif vnum == 2:
                        assert isinstance(v, bytes), "Summary.Value.simple_value is a fixed32 float"
                        (scalar,) = struct.unpack("<f", v)
                    elif vnum == 8 and isinstance(v, bytes):
                        tensor = v
                    elif vnum == 9 and isinstance(v, bytes):
                        plugin = v
                if scalar is None and tensor is not None and _plugin_name(plugin) == "scalars":
                    scalar = float(_tensor(tensor).reshape(()))  # TF 2's form (scalar_value)
                if tag is not None and scalar is not None:
                    out.append((step, tag, scalar))
    return out


def _plugin_name(metadata: bytes) -> str:
    """`SummaryMetadata.plugin_data.plugin_name` ("" where there is none)."""
    for mnum, _, data in proto_fields(metadata):
        if mnum == 1:
            assert isinstance(data, bytes), "SummaryMetadata.plugin_data is a message"
            return next((p.decode() for n, _, p in proto_fields(data) if n == 1 and isinstance(p, bytes)), "")
    return ""


def _tensor(buf: bytes) -> np.ndarray:
    dtype, shape, content, strings = 0, [], b"", []
    for number, _, value in proto_fields(buf):
        if number == 1:
            assert isinstance(value, int), "TensorProto.dtype is a varint"
            dtype = value
        elif number == 2:
            assert isinstance(value, bytes), "TensorProto.tensor_shape is a message"
            for _, _, dim in proto_fields(value):
                assert isinstance(dim, bytes), "TensorShapeProto.dim is a message"
                shape.append(next((s for n, _, s in proto_fields(dim) if n == 1), 0))
        elif number == 4:
            assert isinstance(value, bytes), "TensorProto.tensor_content is bytes"
            content = value
        elif number == 8:
            assert isinstance(value, bytes), "TensorProto.string_val is bytes"
            strings.append(value)
    if dtype == _DT_STRING:
        return np.array(strings, dtype=object).reshape(shape)
    return np.frombuffer(content, dtype=_DTYPE_OF[dtype].newbyteorder("<")).reshape(shape).astype(_DTYPE_OF[dtype])


def read_tensors(path: str | os.PathLike) -> list[tuple[int, str, str, np.ndarray]]:
    """`(step, tag, plugin name, value)` for every tensor summary in an event file written by this module."""
    out = []
    for step, summaries in _events(path):
        for summary in summaries:
            for _, _, value in proto_fields(summary):
                assert isinstance(value, bytes), "Summary.value is a message"
                tag, plugin, tensor = None, "", None
                for vnum, _, v in proto_fields(value):
                    assert isinstance(v, bytes), "Summary.Value's tag, tensor and metadata are messages"
                    if vnum == 1:
                        tag = v.decode()
                    elif vnum == 8:
                        tensor = _tensor(v)
                    elif vnum == 9:
                        plugin = _plugin_name(v)
                if tag is not None and tensor is not None:
                    out.append((step, tag, plugin, tensor))
    return out
