"""More of `tf.strings`: TF's keyed and legacy string hashes, transcoding, offsets and segment joins.

`to_hash_bucket` is TF's legacy `Hash64` (tensorflow/core/lib/hash/hash.cc: MurmurHash64A with seed
0xDECAFCAFFE), `to_hash_bucket_strong` is SipHash-2-4 keyed by the two int64s of `key`; both give TF's buckets
bit for bit (checked on strings of every length from 0 to 69, TF 2.21). The other ops follow TF 2.21's observed
results: `unicode_decode_with_offsets` gives int32 code points with int64 byte offsets, `unsorted_segment_join`
refuses ids outside [0, num_segments) (InvalidArgumentError) and leaves empty segments as b"".
"""
from __future__ import annotations

import codecs
from typing import Any

import numpy as np

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.ragged import RaggedTensor
from jdist.tf_compat.strings import text

_MASK = (1 << 64) - 1
_MURMUR = 0xC6A4A7935BD1E995
_SEED = 0xDECAFCAFFE
_SIP = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)
_UTF = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}
_CODECS = dict(_UTF, **{"ISO-8859-1": "latin-1", "US-ASCII": "ascii"})


def hash64(data: bytes, seed: int = _SEED) -> int:
    """TF's legacy `Hash64` (MurmurHash64A, TF's seed and tail order): an unsigned 64-bit int."""
    n = len(data)
    h = (seed ^ (n * _MURMUR)) & _MASK
    whole = n - n % 8
    for i in range(0, whole, 8):
        k = (int.from_bytes(data[i:i + 8], "little") * _MURMUR) & _MASK
        k = ((k ^ (k >> 47)) * _MURMUR) & _MASK
        h = ((h ^ k) * _MURMUR) & _MASK
    if n > whole:
        h = ((h ^ int.from_bytes(data[whole:], "little")) * _MURMUR) & _MASK
    h = ((h ^ (h >> 47)) * _MURMUR) & _MASK
    return h ^ (h >> 47)


def _rotl(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (64 - bits))) & _MASK


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """SipHash-2-4 of `data` under the 128-bit key (k0, k1): an unsigned 64-bit int."""
    v = [k0 ^ _SIP[0], k1 ^ _SIP[1], k0 ^ _SIP[2], k1 ^ _SIP[3]]

    def rounds(count: int) -> None:
        for _ in range(count):
            v[0] = (v[0] + v[1]) & _MASK
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _MASK
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _MASK
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _MASK
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    n = len(data)
    whole = n - n % 8
    blocks = [int.from_bytes(data[i:i + 8], "little") for i in range(0, whole, 8)]
    for m in blocks + [((n & 0xFF) << 56) | int.from_bytes(data[whole:], "little")]:
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _buckets(input: Any, num_buckets: int, hash_fn: Any) -> Any:  # noqa: A002 (TF's name)
    if int(num_buckets) < 1:
        raise InvalidArgumentError(None, None, f"Value for attr 'num_buckets' of {int(num_buckets)} must be at least "
                                               "minimum 1")
    if isinstance(input, RaggedTensor):
        return input.with_flat_values(_buckets(input.flat_values, num_buckets, hash_fn))
    array = text(input)
    flat = [hash_fn(s) % int(num_buckets) for s in array.reshape(-1)]
    return as_tensors(np.array(flat, np.int64).reshape(array.shape))


def to_hash_bucket(input: Any, num_buckets: int, name: Any = None) -> Any:  # noqa: A002 (TF's name)
    """Each string's legacy `Hash64` modulo `num_buckets` (int64), TF's buckets bit for bit."""
    return _buckets(input, num_buckets, hash64)


def to_hash_bucket_strong(input: Any, num_buckets: int, key: Any, name: Any = None) -> Any:  # noqa: A002
    """Each string's SipHash-2-4 under `key` (two ints) modulo `num_buckets` (int64), TF's buckets bit for bit."""
    keys = [int(k) for k in np.asarray(key).reshape(-1)]
    if len(keys) != 2:
        raise InvalidArgumentError(None, None, "Key must have 2 elements")
    k0, k1 = keys[0] & _MASK, keys[1] & _MASK
    return _buckets(input, num_buckets, lambda s: siphash24(k0, k1, s))


def _codec(encoding: str, allowed: dict[str, str] | None = None) -> str:
    """Python's codec for one of TF's encoding names (any Python knows for an input encoding, as TF takes
    ICU's); an output encoding must be TF's UTF-8, UTF-16-BE or UTF-32-BE (InvalidArgumentError)."""
    if allowed is not None:
        if encoding not in allowed:
            raise InvalidArgumentError(None, None, f"encoding must be one of {sorted(allowed)} (TF's); got "
                                                   f"{encoding!r}")
        return allowed[encoding]
    try:
        return codecs.lookup(_CODECS.get(encoding, encoding)).name
    except LookupError:
        raise InvalidArgumentError(None, None, f"Could not create converter for input encoding: {encoding}") from None


def _check_errors(errors: str) -> None:
    if errors not in ("replace", "ignore", "strict"):
        raise ValueError(f"errors must be 'replace', 'ignore' or 'strict' (TF's); got {errors!r}")


def unicode_transcode(input: Any, input_encoding: str, output_encoding: str, errors: str = "replace",  # noqa: A002
                      replacement_char: int = 65533, replace_control_characters: bool = False,
                      name: Any = None) -> Any:
    """Each string re-encoded; a bad input byte run becomes `replacement_char` ("replace"), vanishes ("ignore")
    or raises InvalidArgumentError ("strict"), as TF's; control characters (below U+0020) become
    `replacement_char` with `replace_control_characters`."""
    source, target = _codec(input_encoding), _codec(output_encoding, _UTF)
    _check_errors(errors)

    def transcode(s: bytes) -> bytes:
        points = _pieces(s, source, errors, replacement_char, replace_control_characters)
        return "".join(chr(p) for p, _, _ in points).encode(target)

    array = text(input)
    return as_tensors(np.array([transcode(s) for s in array.reshape(-1)], dtype=object).reshape(array.shape))


def _pieces(s: bytes, codec: str, errors: str, replacement_char: int, control: bool) -> list[tuple[int, int, int]]:
    """Each character of `s` as (code point, byte offset, byte length); a bad byte run (Python's and TF's
    maximal subpart) is one `replacement_char`, or nothing with errors="ignore"."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    while pos < len(s):
        try:
            chars, end, bad = s[pos:].decode(codec, "strict"), len(s), None
        except UnicodeDecodeError as error:
            chars, end, bad = s[pos:pos + error.start].decode(codec, "strict"), pos + error.start, pos + error.end
        for c in chars:
            size = len(c.encode(codec))
            point = int(replacement_char) if control and ord(c) < 32 else ord(c)
            out.append((point, pos, size))
            pos += size
        if bad is not None:
            if errors == "strict":
                raise InvalidArgumentError(None, None, "Invalid formatting on input string")
            if errors == "replace":
                out.append((int(replacement_char), end, bad - end))
            pos = bad
    return out


def _with_offsets(input: Any, input_encoding: str, errors: str, replacement_char: int, control: bool,  # noqa: A002
                  as_bytes: bool) -> Any:
    codec = _codec(input_encoding, _UTF)
    _check_errors(errors)

    def rows(s: bytes) -> tuple[list, list]:
        pieces = _pieces(s, codec, errors, replacement_char, control)
        values = [chr(p).encode(codec) if as_bytes else p for p, _, _ in pieces]
        return values, [o for _, o, _ in pieces]

    array = text(input)
    dtype = object if as_bytes else np.int32
    if array.ndim == 0:
        values, offsets = rows(bytes(array[()]))
        return as_tensors((np.array(values, dtype=dtype), np.array(offsets, np.int64)))
    if array.ndim != 1:
        raise ValueError(f"this op takes a scalar or a vector of strings (rank 0 or 1), got rank {array.ndim}")
    pairs = [rows(s) for s in array]
    lengths = [len(v) for v, _ in pairs]
    values = np.array([x for v, _ in pairs for x in v], dtype=dtype)
    offsets = np.array([x for _, o in pairs for x in o], np.int64)
    return RaggedTensor.from_row_lengths(values, lengths), RaggedTensor.from_row_lengths(offsets, lengths)


def unicode_decode_with_offsets(input: Any, input_encoding: str, errors: str = "replace",  # noqa: A002
                                replacement_char: int = 65533, replace_control_characters: bool = False,
                                name: Any = None) -> tuple[Any, Any]:
    """Each string's code points (int32) and the byte offset where each starts (int64); ragged for a vector."""
    return _with_offsets(input, input_encoding, errors, replacement_char, replace_control_characters, False)


def unicode_split_with_offsets(input: Any, input_encoding: str, errors: str = "replace",  # noqa: A002
                               replacement_char: int = 65533, name: Any = None) -> tuple[Any, Any]:
    """Each string's characters (as bytes) and the byte offset where each starts (int64); ragged for a vector."""
    return _with_offsets(input, input_encoding, errors, replacement_char, False, True)


def unsorted_segment_join(inputs: Any, segment_ids: Any, num_segments: Any, separator: Any = "",
                          name: Any = None) -> Any:
    """Joins the strings of each segment in input order with `separator`; a segment with none is b""."""
    array = text(inputs)
    ids = np.asarray(segment_ids).astype(np.int64)
    n = int(np.asarray(num_segments))
    if ids.ndim == 0:
        raise InvalidArgumentError(None, None, "Segment_id cannot have rank 0")
    if ids.ndim > array.ndim:
        raise InvalidArgumentError(None, None, f"Invalid segment_id rank {ids.ndim} for input with {array.ndim} "
                                               "dimension(s)")
    if array.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(None, None, f"segment_ids.shape = {list(ids.shape)} does not prefix "
                                               f"inputs.shape = {list(array.shape)}")
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise InvalidArgumentError(None, None, "segment_ids are not allowed to exceed num_segments or to have "
                                               "negative values.")
    sep = separator.encode() if isinstance(separator, str) else bytes(separator)
    rows = array.reshape((ids.size,) + array.shape[ids.ndim:])
    parts: list[list[Any]] = [[] for _ in range(n)]
    for i, seg in enumerate(ids.reshape(-1)):
        parts[int(seg)].append(np.asarray(rows[i], dtype=object))
    inner = array.shape[ids.ndim:]
    out = np.empty((n,) + inner, dtype=object)
    for seg, members in enumerate(parts):
        for index in np.ndindex(*inner):
            out[(seg,) + index] = sep.join(m[index] for m in members)
    return as_tensors(out)


NAMES = dict(to_hash_bucket=to_hash_bucket, to_hash_bucket_strong=to_hash_bucket_strong,
             unicode_transcode=unicode_transcode, unicode_decode_with_offsets=unicode_decode_with_offsets,
             unicode_split_with_offsets=unicode_split_with_offsets, unsorted_segment_join=unsorted_segment_join)
