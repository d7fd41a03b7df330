"""`tf.strings` (and `tf.io.decode_raw`): TF's text ops, on the host, element by element.

TF's strings are bytes; so are these ops' results (an object array of bytes, TF's `.numpy()`), whatever text
array they are given (numpy's str or bytes arrays, Python strings). They run where text lives in a jdist
program: `tf.data` map functions and host code; compiled code has no strings. An op that splits each of several
strings returns a `tf.RaggedTensor`, as TF's does. Units, separators, defaults and errors are TF 2.21's
(observed): `length` counts bytes unless `unit="UTF8_CHAR"`, `split` without `sep` splits on runs of
whitespace, `to_number` gives float32, `as_string` writes floats with 6 decimals and bools as `true`.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.farmhash import fingerprint64
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.ragged import RaggedTensor
from jdist.tf_compat.tensor_summary import format_string


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes):  # np.bytes_ too
        return bytes(value)
    raise TypeError(f"tf.strings expects strings, got {type(value).__name__} {value!r:.40}: convert numbers with "
                    "tf.strings.as_string")


def text(value: Any) -> np.ndarray:
    """`value` as an object array of bytes (TF's string tensor)."""
    if isinstance(value, RaggedTensor):
        raise TypeError("this tf.strings op takes a tensor of strings; for a RaggedTensor use "
                        "tf.ragged.map_flat_values(op, rt)")
    array = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if array.dtype.kind not in "SUO":
        raise TypeError(f"tf.strings expects strings, got a tensor of {array.dtype}")
    return np.vectorize(_as_bytes, otypes=[object])(array) if array.size else array.astype(object)


def _each(value: Any, fn: Callable[[bytes], Any], otype: Any = object) -> Any:
    array = text(value)
    out = np.vectorize(fn, otypes=[otype])(array) if array.size else np.zeros(array.shape, otype)
    return as_tensors(out)


def _per_string(value: Any, parts: Callable[[bytes], list], dtype: Any = object) -> Any:
    """An op giving each string a list: a 1-D tensor for a scalar, a RaggedTensor for a vector (TF's rule)."""
    array = text(value)
    if array.ndim == 0:
        return as_tensors(np.array(parts(_as_bytes(array[()])), dtype=dtype))
    if array.ndim != 1:
        raise ValueError(f"this op takes a scalar or a vector of strings (rank 0 or 1), got rank {array.ndim}")
    rows = [parts(s) for s in array]
    flat = np.array([p for row in rows for p in row], dtype=dtype)
    return RaggedTensor.from_row_lengths(flat, [len(row) for row in rows])


def split(input: Any, sep: Any = None, maxsplit: int = -1, name: Any = None) -> Any:  # noqa: A002 (TF's name)
    """Without `sep`: on runs of whitespace, empty parts dropped; with it, on each `sep` (empty parts kept)."""
    separator = None if sep is None or _as_bytes(sep) == b"" else _as_bytes(sep)
    return _per_string(input, lambda s: s.split(separator, maxsplit))


def bytes_split(input: Any, name: Any = None) -> Any:  # noqa: A002
    return _per_string(input, lambda s: [bytes([b]) for b in s])


def unicode_split(input: Any, input_encoding: str, errors: str = "replace", replacement_char: int = 65533,
                  name: Any = None) -> Any:  # noqa: A002
    codec = _codec(input_encoding)
    return _per_string(input, lambda s: [c.encode(codec) for c in s.decode(codec, errors)])


def unicode_decode(input: Any, input_encoding: str, errors: str = "replace", replacement_char: int = 65533,
                   replace_control_characters: bool = False, name: Any = None) -> Any:  # noqa: A002
    codec = _codec(input_encoding)
    return _per_string(input, lambda s: [ord(c) for c in s.decode(codec, errors)], np.int32)


def unicode_encode(input: Any, output_encoding: str, errors: str = "replace", replacement_char: int = 65533,
                   name: Any = None) -> Any:  # noqa: A002
    """Code points to strings: the last dimension (a row of a RaggedTensor) becomes one string."""
    codec = _codec(output_encoding)

    def encode(points: Any) -> bytes:
        return "".join(chr(int(p)) for p in np.asarray(points).reshape(-1)).encode(codec, errors)

    if isinstance(input, RaggedTensor):
        return as_tensors(np.array([encode(row) for row in input], dtype=object))
    points = np.asarray(input)
    if points.ndim <= 1:
        return as_tensors(np.array(encode(points), dtype=object))
    rows = points.reshape(-1, points.shape[-1])
    return as_tensors(np.array([encode(r) for r in rows], dtype=object).reshape(points.shape[:-1]))


def _codec(encoding: str) -> str:
    names = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}
    if encoding not in names:
        raise ValueError(f"encoding must be one of {sorted(names)} (TF's); got {encoding!r}")
    return names[encoding]


def _unit(unit: str) -> str:
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"unit must be 'BYTE' or 'UTF8_CHAR' (TF's); got {unit!r}")
    return unit


def length(input: Any, unit: str = "BYTE", name: Any = None) -> Any:  # noqa: A002
    if _unit(unit) == "BYTE":
        return _each(input, len, np.int32)
    return _each(input, lambda s: len(s.decode("utf-8")), np.int32)


def substr(input: Any, pos: int, len: int, unit: str = "BYTE", name: Any = None) -> Any:  # noqa: A002
    start, size = int(pos), int(len)
    if _unit(unit) == "BYTE":
        return _each(input, lambda s: s[start:start + size] if start >= 0 else s[start:][:size])
    return _each(input, lambda s: s.decode("utf-8")[start:][:size].encode())


def lower(input: Any, encoding: str = "", name: Any = None) -> Any:  # noqa: A002
    return _each(input, lambda s: s.decode("utf-8").lower().encode() if encoding else s.lower())


def upper(input: Any, encoding: str = "", name: Any = None) -> Any:  # noqa: A002
    return _each(input, lambda s: s.decode("utf-8").upper().encode() if encoding else s.upper())


def strip(input: Any, name: Any = None) -> Any:  # noqa: A002
    return _each(input, lambda s: s.strip())


def regex_replace(input: Any, pattern: Any, rewrite: Any, replace_global: bool = True,  # noqa: A002
                  name: Any = None) -> Any:
    compiled, replacement = re.compile(_as_bytes(pattern)), _as_bytes(rewrite)  # RE2's `\1` is Python's too
    return _each(input, lambda s: compiled.sub(replacement, s, count=0 if replace_global else 1))


def regex_full_match(input: Any, pattern: Any, name: Any = None) -> Any:  # noqa: A002
    compiled = re.compile(_as_bytes(pattern))
    return _each(input, lambda s: compiled.fullmatch(s) is not None, np.bool_)


def join(inputs: Any, separator: Any = "", name: Any = None) -> Any:
    """Element-wise concatenation of the tensors in `inputs` (scalars broadcast), with `separator` between."""
    arrays = np.broadcast_arrays(*[text(x) for x in inputs])
    glue = _as_bytes(separator)
    out = np.empty(arrays[0].shape, dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = glue.join(_as_bytes(a[index]) for a in arrays)
    return as_tensors(out)


def reduce_join(inputs: Any, axis: Any = None, keepdims: bool = False, separator: Any = "",
                name: Any = None) -> Any:
    array, glue = text(inputs), _as_bytes(separator)
    axes = tuple(range(array.ndim)) if axis is None else tuple(np.atleast_1d(axis) % max(array.ndim, 1))
    moved = np.moveaxis(array, axes, tuple(range(array.ndim - len(axes), array.ndim)))
    kept = moved.shape[:array.ndim - len(axes)]
    flat = moved.reshape(kept + (-1,))
    out = np.empty(kept, dtype=object)
    for index in np.ndindex(kept):
        out[index] = glue.join(flat[index])
    if keepdims:
        out = np.expand_dims(out, axes)
    return as_tensors(out)


def to_number(string_tensor: Any, out_type: Any = "float32", name: Any = None) -> Any:
    target = numpy_dtype(out_type)

    def number(s: bytes) -> Any:
        try:
            return target.type(int(s) if target.kind in "iu" else float(s))
        except ValueError:
            raise InvalidArgumentError(None, None, f"StringToNumberOp could not correctly convert string: "
                                       f"{s.decode('utf-8', 'replace')}") from None

    return _each(string_tensor, number, target)


def as_string(input: Any, precision: int = -1, scientific: bool = False, shortest: bool = False,  # noqa: A002
              width: int = -1, fill: str = "", name: Any = None) -> Any:
    array = np.asarray(input)
    if array.dtype.kind == "b":
        fmt: Callable[[Any], str] = lambda v: "true" if v else "false"  # noqa: E731
    elif array.dtype.kind in "iu":
        fmt = lambda v: str(int(v))  # noqa: E731
    else:
        style = "g" if shortest else ("e" if scientific else "f")
        digits = "" if shortest and precision < 0 else f".{6 if precision < 0 else precision}"
        fmt = lambda v: format(float(v), digits + style)  # noqa: E731
    pad = (fill or " ")[0]
    out = np.vectorize(lambda v: fmt(v).rjust(width, pad).encode(), otypes=[object])(array)
    return as_tensors(out)


def ngrams(data: Any, ngram_width: Any, separator: Any = " ", pad_values: Any = None, padding_width: Any = None,
           preserve_short_sequences: bool = False, name: Any = None) -> Any:
    """`tf.strings.ngrams` of a vector of tokens (no padding)."""
    if pad_values is not None:
        raise NotImplementedError("tf.strings.ngrams with pad_values is not provided: pad the tokens first")
    tokens, glue = list(text(data).reshape(-1)), _as_bytes(separator)
    widths = np.atleast_1d(ngram_width).tolist()
    grams = [glue.join(tokens[i:i + w]) for w in widths for i in range(len(tokens) - w + 1)]
    return as_tensors(np.array(grams, dtype=object))


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True, fixed_length: Any = None,
               name: Any = None) -> Any:
    """`tf.io.decode_raw` of one string: its bytes read as `out_type` values."""
    array = text(input_bytes)
    dtype = numpy_dtype(out_type).newbyteorder("<" if little_endian else ">")
    rows = [np.frombuffer(s, dtype=dtype) for s in array.reshape(-1)]
    out = rows[0] if array.ndim == 0 else np.stack(rows).reshape(array.shape + (-1,))
    return as_tensors(out.astype(numpy_dtype(out_type)))


def string_format(template: str, inputs: Any, placeholder: str = "{}", summarize: int = 3,
                  name: Any = None) -> Any:
    """`tf.strings.format`: `template` with each `placeholder` replaced by the next input written as `tf.print`
    writes it (`jdist.tf_compat.tensor_summary`); a scalar string tensor."""
    if isinstance(template, bytes):
        template = template.decode()
    out = format_string(str(template), inputs, placeholder, summarize)
    return as_tensors(np.asarray(out.encode(), dtype=object))


def to_hash_bucket_fast(input: Any, num_buckets: int, name: Any = None) -> Any:  # noqa: A002 (TF's name)
    """Each string's FarmHash `Fingerprint64` modulo `num_buckets` (int64), TF's buckets bit for bit
    (`jdist.tf_compat.farmhash`); a RaggedTensor keeps its rows."""
    if int(num_buckets) < 1:
        raise InvalidArgumentError(None, None, f"Value for attr 'num_buckets' of {int(num_buckets)} must be at least "
                                               "minimum 1")
    if isinstance(input, RaggedTensor):
        return input.with_flat_values(to_hash_bucket_fast(input.flat_values, num_buckets))
    return _each(input, lambda b: np.int64(fingerprint64(b) % int(num_buckets)), np.int64)


NAMES = dict(format=string_format, split=split, to_hash_bucket_fast=to_hash_bucket_fast,
             bytes_split=bytes_split, unicode_split=unicode_split, unicode_decode=unicode_decode,
             unicode_encode=unicode_encode, length=length, substr=substr, lower=lower, upper=upper, strip=strip,
             regex_replace=regex_replace, regex_full_match=regex_full_match, join=join, reduce_join=reduce_join,
             to_number=to_number, as_string=as_string, ngrams=ngrams)
