"""CRC-32C (Castagnoli), the checksum of TFRecord files, fast enough for image-sized records in pure numpy.

A record's bytes are cut into lanes of equal length, whose CRCs numpy computes side by side (one table lookup
per byte column), and the lanes' CRCs are joined with the linear map of "this many zero bytes" (CRC is linear
over GF(2)), kept as four byte tables per lane length. Short inputs take the plain byte loop.
"""
from __future__ import annotations

import functools

import numpy as np

_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK_DELTA = 0xA282EAD8
_SHORT = 4096  # bytes below which the plain loop is faster
_LANES = 2048


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_TABLE_LIST = [int(v) for v in _TABLE]


def _raw(crc: int, data: bytes | memoryview) -> int:
    """The CRC register after `data`, from `crc` (no final inversion)."""
    table = _TABLE_LIST
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _apply(tables: np.ndarray, values: np.ndarray) -> np.ndarray:
    return (tables[0][values & 0xFF] ^ tables[1][(values >> 8) & 0xFF] ^ tables[2][(values >> 16) & 0xFF]
            ^ tables[3][values >> 24])


@functools.cache
def _zeros_tables(length: int) -> np.ndarray:
    """`[4, 256]` tables: the register after `length` zero bytes (a power of two) is the xor of one entry per
    register byte."""
    values = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32)[:, None])).ravel()
    if length <= 8:
        for _ in range(length):
            values = _TABLE[values & 0xFF] ^ (values >> 8)
    else:
        half = _zeros_tables(length // 2)
        values = _apply(half, _apply(half, values))
    return values.reshape(4, 256)


@functools.cache
def _zeros_lists(length: int) -> tuple[list[int], ...]:
    return tuple(row.tolist() for row in _zeros_tables(length))


def _lanes(crc: int, data: np.ndarray, width: int) -> int:
    """The register after `data` (a multiple of `width` bytes long), lanes of `width` bytes computed at once."""
    columns = np.ascontiguousarray(data.reshape(-1, width).T)  # row k: byte k of every lane
    lanes = np.zeros(columns.shape[1], np.uint32)
    for column in columns:
        lanes = _TABLE[(lanes ^ column) & 0xFF] ^ (lanes >> 8)
    t0, t1, t2, t3 = _zeros_lists(width)
    for lane in lanes.tolist():
        crc = t0[crc & 0xFF] ^ t1[(crc >> 8) & 0xFF] ^ t2[(crc >> 16) & 0xFF] ^ t3[crc >> 24] ^ lane
    return crc


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of `data`, as TFRecord's checksums use it."""
    view = memoryview(data).cast("B")
    crc = 0xFFFFFFFF
    if len(view) >= _SHORT:
        width = 1 << max(6, (len(view) // _LANES).bit_length())  # lane length: a power of two, few tables
        body = len(view) - len(view) % width
        crc = _lanes(crc, np.frombuffer(view[:body], np.uint8), width)
        view = view[body:]
    return _raw(crc, view) ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """TFRecord's masked CRC: the CRC rotated right by 15 bits, plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
