"""TFRecord files: `tf.io.TFRecordWriter`, `tf.io.TFRecordOptions`, `tf.data.TFRecordDataset` and
`tf.data.FixedLengthRecordDataset`, byte for byte as TensorFlow writes and reads them.

A record is its length (uint64, little endian), the masked CRC-32C of those 8 bytes, the data, and the masked
CRC-32C of the data. A compressed file is the whole record stream through zlib ("ZLIB") or gzip ("GZIP"),
written as TF 2.21 writes it (observed: the same bytes; `flush()` is a zlib partial flush, memLevel 9).
Reading checks both CRCs as TF does (observed): a bad one is DataLossError "corrupted record at <offset>",
a record cut short "truncated record at <offset>", while a file ending inside a record's 12-byte header ends
the file quietly.
"""
from __future__ import annotations

import gzip
import io
import itertools
import os
import struct
import zlib
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

from jdist.errors import DataLossError, FailedPreconditionError, InvalidArgumentError, NotFoundError
from jdist.tfdata import structure
from jdist.tfdata._iterators import Generated
from jdist.tfdata.crc32c import masked_crc32c
from jdist.tfdata.dataset import Dataset
from jdist.tfdata.options import UNKNOWN

_HEADER = 12  # uint64 length + its masked CRC
_CHUNK = 1 << 16


class TFRecordOptions:
    """`tf.io.TFRecordOptions`: the compression ("", "ZLIB" or "GZIP") and zlib's settings for a writer."""

    compression_type_map = {1: "ZLIB", 2: "GZIP", 0: ""}  # TF's TFRecordCompressionType values

    def __init__(self, compression_type: str | None = None, flush_mode: int | None = None,
                 input_buffer_size: int | None = None, output_buffer_size: int | None = None,
                 window_bits: int | None = None, compression_level: int | None = None,
                 compression_strategy: int | None = None, mem_level: int | None = None):
        self.compression_type = _checked(compression_type)
        self.flush_mode, self.input_buffer_size, self.output_buffer_size = (flush_mode, input_buffer_size,
                                                                            output_buffer_size)
        self.window_bits, self.compression_level = window_bits, compression_level
        self.compression_strategy, self.mem_level = compression_strategy, mem_level

    @classmethod
    def get_compression_type_string(cls, options: Any) -> str:
        """"", "ZLIB" or "GZIP" for options given as a TFRecordOptions, a string or None."""
        if isinstance(options, TFRecordOptions):
            return options.compression_type
        return _checked(options)


def _checked(compression_type: Any) -> str:
    if compression_type is None:
        return ""
    if isinstance(compression_type, int) and compression_type in TFRecordOptions.compression_type_map:
        return TFRecordOptions.compression_type_map[compression_type]
    if compression_type not in ("", "ZLIB", "GZIP"):
        raise ValueError(f'Not a valid compression_type: "{compression_type}"')
    return compression_type


def frame(data: bytes) -> bytes:
    """One record as it lies in the file: length, masked CRC of the length, data, masked CRC of the data."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def _path(path: Any) -> str:
    if isinstance(path, np.ndarray):
        path = path.reshape(()).item()
    return os.fsdecode(path)


class TFRecordWriter:
    """`tf.io.TFRecordWriter(path, options=None)`: writes records to a new file; a context manager."""

    def __init__(self, path: Any, options: TFRecordOptions | str | None = None):
        if not isinstance(options, TFRecordOptions):
            options = TFRecordOptions(options)
        self._path = _path(path)
        try:
            self._file: BinaryIO | None = open(self._path, "wb")  # noqa: SIM115
        except FileNotFoundError:
            raise NotFoundError(None, None, f"{self._path}; No such file or directory") from None
        kind = options.compression_type
        level = -1 if options.compression_level is None else int(options.compression_level)
        bits = 15 if options.window_bits is None else int(options.window_bits)
        self._zlib = None if not kind else zlib.compressobj(
            level, zlib.DEFLATED, bits + 16 if kind == "GZIP" else bits,
            9 if options.mem_level is None else int(options.mem_level),
            0 if options.compression_strategy is None else int(options.compression_strategy))

    def _open_file(self) -> BinaryIO:
        if self._file is None:
            raise FailedPreconditionError(None, None, "Writer is closed.")
        return self._file

    def write(self, record: Any) -> None:
        """Writes one record: bytes (text as UTF-8)."""
        if isinstance(record, np.ndarray) and record.shape == () and isinstance(record.item(), bytes):
            record = record.item()
        if isinstance(record, str):
            record = record.encode()
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(f"TFRecordWriter.write: a record is bytes (or str), got {type(record).__name__}")
        f, data = self._open_file(), frame(bytes(record))
        f.write(self._zlib.compress(data) if self._zlib is not None else data)

    def flush(self) -> None:
        """Writes what is buffered to the file."""
        f = self._open_file()
        if self._zlib is not None:
            f.write(self._zlib.flush(zlib.Z_PARTIAL_FLUSH))
        f.flush()

    def close(self) -> None:
        """Finishes the file; closing twice is allowed."""
        if self._file is None:
            return
        if self._zlib is not None:
            self._file.write(self._zlib.flush())
        self._file.close()
        self._file = None

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_file", None) is not None:
            self.close()


class _Inflated(io.RawIOBase):
    """A zlib stream's decompressed bytes, read in chunks."""

    def __init__(self, raw: BinaryIO):
        self._raw, self._zlib, self._pending = raw, zlib.decompressobj(), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending and not self._zlib.eof:
            chunk = self._raw.read(_CHUNK)
            self._pending = self._zlib.decompress(chunk) if chunk else self._zlib.flush()
            if not chunk:
                break
        n = min(len(buffer), len(self._pending))
        buffer[:n], self._pending = self._pending[:n], self._pending[n:]
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _open(path: str, compression: str) -> BinaryIO:
    raw = open(path, "rb")  # noqa: SIM115
    if compression == "GZIP":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if compression == "ZLIB":
        return io.BufferedReader(_Inflated(raw), _CHUNK)  # type: ignore[return-value]
    return raw


def _read(f: BinaryIO, n: int) -> bytes:
    try:
        return f.read(n)
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise DataLossError(None, None, f"inflate() failed: {err}") from None


def records(path: str, compression: str = "") -> Iterator[bytes]:
    """The records of one TFRecord file, their CRCs checked."""
    with _open(path, compression) as f:
        offset = 0
        while True:
            header = _read(f, _HEADER)
            if len(header) < _HEADER:
                return  # TF ends the file quietly inside a header (observed)
            length_bytes, (crc,) = header[:8], struct.unpack("<I", header[8:])
            if crc != masked_crc32c(length_bytes):
                hint = " (Is this even a TFRecord file?)" if offset == 0 else ""
                raise DataLossError(None, None, f"corrupted record at {offset}{hint}")
            (length,) = struct.unpack("<Q", length_bytes)
            body = _read(f, length + 4)
            if len(body) < length + 4:
                raise DataLossError(None, None, f"truncated record at {offset}' failed with Read less bytes than "
                                                "requested")
            data, (crc,) = body[:length], struct.unpack("<I", body[length:])
            if crc != masked_crc32c(data):
                raise DataLossError(None, None, f"corrupted record at {offset + _HEADER}")
            yield data
            offset += _HEADER + length + 4


def _fixed_records(path: str, compression: str, record_bytes: int, header_bytes: int,
                   footer_bytes: int) -> Iterator[bytes]:
    with _open(path, compression) as f:
        content = _read(f, -1)
    body = content[header_bytes:len(content) - footer_bytes] if len(content) >= header_bytes + footer_bytes \
        else b""
    if len(body) % record_bytes:
        error = DataLossError if compression else InvalidArgumentError
        raise error(None, None, f"Excluding the header ({header_bytes} bytes) and footer ({footer_bytes} bytes), "
                                f'input file "{path}" has body length {len(body)} bytes, which is not an exact '
                                f"multiple of the record length ({record_bytes} bytes).")
    for start in range(0, len(body), record_bytes):
        yield body[start:start + record_bytes]


def _interleaved(sources: list[Callable[[], Iterator[bytes]]], cycle: int) -> Iterator[bytes]:
    """TF's parallel reads: `cycle` files open at once, one record from each in turn; a finished file's place
    goes to the next file."""
    pending = iter(sources)
    slots = [make() for make in itertools.islice(pending, cycle)]
    while slots:
        i = 0
        while i < len(slots):
            record = next(slots[i], None)
            if record is None:
                successor = next(pending, None)
                if successor is None:
                    slots.pop(i)
                else:
                    slots[i] = successor()
                continue
            yield record
            i += 1


def _paths(kind: str, filenames: Any) -> list[str]:
    if isinstance(filenames, Dataset):  # a dataset of file names, as TF takes
        filenames = [np.asarray(f).item() for f in filenames]
    paths = [_path(p) for p in np.asarray(filenames, dtype=object).reshape(-1)]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise NotFoundError(None, None, f"{kind}: {missing[0]}; No such file or directory")
    return paths


def _dataset(kind: str, sources: list[Callable[[], Iterator[bytes]]], num_parallel_reads: int | None) -> Dataset:
    cycle = int(num_parallel_reads or 1)

    def read() -> Iterator[bytes]:
        return (r for make in sources for r in make()) if cycle <= 1 else _interleaved(sources, cycle)

    return Dataset(lambda key: Generated(read), UNKNOWN, lambda: structure.spec_of(structure.normalize(b"")),
                   kind=kind)


def _compression(kind: str, compression_type: Any) -> str:
    if compression_type not in (None, "", "ZLIB", "GZIP"):
        raise ValueError(f"{kind}: compression_type must be None, '', 'ZLIB' or 'GZIP'; got {compression_type!r}")
    return compression_type or ""


def TFRecordDataset(filenames: Any, compression_type: str | None = None, buffer_size: int | None = None,  # noqa: N802
                    num_parallel_reads: int | None = None, name: str | None = None) -> Dataset:
    """`tf.data.TFRecordDataset(filenames, compression_type, buffer_size, num_parallel_reads)`: each record
    of the files, a string scalar, in order (or `num_parallel_reads` files interleaved a record at a time)."""
    compression = _compression("TFRecordDataset", compression_type)
    sources = [lambda p=p: records(p, compression) for p in _paths("TFRecordDataset", filenames)]
    return _dataset("TFRecordDatasetV2", sources, num_parallel_reads)  # TF 2.21's class name (observed)


def FixedLengthRecordDataset(filenames: Any, record_bytes: int, header_bytes: int | None = None,  # noqa: N802
                             footer_bytes: int | None = None, buffer_size: int | None = None,
                             compression_type: str | None = None, num_parallel_reads: int | None = None,
                             name: str | None = None) -> Dataset:
    """`tf.data.FixedLengthRecordDataset`: each file's body (between `header_bytes` and `footer_bytes`) in
    records of `record_bytes` bytes, string scalars."""
    compression = _compression("FixedLengthRecordDataset", compression_type)
    size, head, foot = int(record_bytes), int(header_bytes or 0), int(footer_bytes or 0)
    if size <= 0:
        raise InvalidArgumentError(None, None, "`record_bytes` must be > 0")
    sources = [lambda p=p: _fixed_records(p, compression, size, head, foot)
               for p in _paths("FixedLengthRecordDataset", filenames)]
    return _dataset("FixedLengthRecordDataset", sources, num_parallel_reads)
