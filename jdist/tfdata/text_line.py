"""`tf.data.TextLineDataset`: the lines of text files, read lazily on each pass, one string per line.

As TF 2.21 (observed): the files in the order given, or `num_parallel_reads` of them interleaved one line at a
time; each line without its "\\n" (and a "\\r" before it); empty lines and a last line without "\\n" kept;
`compression_type` "GZIP" or "ZLIB"; cardinality unknown. A file that does not exist is an error when the
dataset is made (TF's comes at the first read), naming it.
"""
from __future__ import annotations

import gzip
import io
import itertools
import os
import zlib
from typing import Any, BinaryIO, Iterator

import numpy as np

from jdist.tfdata import structure
from jdist.tfdata._iterators import Generated
from jdist.tfdata.dataset import Dataset
from jdist.tfdata.options import UNKNOWN

_COMPRESSIONS = (None, "", "GZIP", "ZLIB")


def _paths(filenames: Any) -> list[str]:
    paths = [p.decode() if isinstance(p, bytes) else str(p)
             for p in np.asarray(filenames, dtype=object).reshape(-1)]
    if not paths:
        raise ValueError("TextLineDataset: `filenames` names no file")
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"TextLineDataset: {missing[0]} does not exist (of {len(paths)} files given)")
    return paths


def _open(path: str, compression: str | None) -> BinaryIO:
    if compression == "GZIP":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if compression == "ZLIB":
        with open(path, "rb") as f:
            return io.BytesIO(zlib.decompress(f.read()))
    return open(path, "rb")


def _lines(path: str, compression: str | None) -> Iterator[bytes]:
    with _open(path, compression) as f:
        for raw in f:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            yield line[:-1] if line.endswith(b"\r") else line


def _interleaved(paths: list[str], compression: str | None, cycle: int) -> Iterator[bytes]:
    """TF's parallel reads: `cycle` files open at once, one line from each in turn; a finished file's place
    goes to the next file."""
    pending = iter(paths)
    slots = [_lines(p, compression) for p in itertools.islice(pending, cycle)]
    while slots:
        i = 0
        while i < len(slots):
            line = next(slots[i], None)
            if line is None:
                successor = next(pending, None)
                if successor is None:
                    slots.pop(i)
                else:
                    slots[i] = _lines(successor, compression)
                continue
            yield line
            i += 1


def TextLineDataset(filenames: Any, compression_type: str | None = None, buffer_size: int | None = None,  # noqa: N802
                    num_parallel_reads: int | None = None, name: str | None = None) -> Dataset:
    """`tf.data.TextLineDataset(filenames, compression_type, buffer_size, num_parallel_reads)`."""
    if compression_type not in _COMPRESSIONS:
        raise ValueError(f"TextLineDataset: compression_type must be None, '', 'GZIP' or 'ZLIB'; got "
                         f"{compression_type!r}")
    compression = compression_type or None
    paths = _paths(filenames)
    cycle = int(num_parallel_reads or 1)

    def read() -> Iterator[Any]:
        lines = (line for p in paths for line in _lines(p, compression)) if cycle <= 1 else \
            _interleaved(paths, compression, cycle)
        return lines

    return Dataset(lambda key: Generated(read), UNKNOWN, lambda: structure.spec_of(structure.normalize(b"")),
                   kind="TextLineDatasetV2")
