"""`tf.io.parse_single_example` and `tf.io.parse_example`: serialized `tf.train.Example`s to tensors (and
`parse_sequence_example` / `parse_single_sequence_example` for `tf.train.SequenceExample`s).

The feature configurations are TF's (`FixedLenFeature`, `VarLenFeature`, `FixedLenSequenceFeature`,
`RaggedFeature` without partitions, `SparseFeature`), namedtuples as in TF. Parsing runs on the host, where
`tf.data` maps run (`ds.map(lambda r: tf.io.parse_single_example(r, spec))`): compiled code has no strings.
As TF 2.21 (observed): the result dict holds the sparse features, then the dense ones, then the ragged ones,
each group by sorted key; dense features stack on a batch axis, a VarLenFeature is a SparseTensor whose
indices are `[example, position]`; a FixedLenSequenceFeature pads with its `default_value` (else zeros or
b""); only float32, int64 and string features exist; TF's InvalidArgumentError texts for a missing feature,
a dtype mismatch, a wrong count of values and bytes that are no Example. A SequenceExample's feature lists
take FixedLenSequenceFeature (`[steps, *shape]`, padded across a batch, with the step counts as lengths),
VarLenFeature (a SparseTensor `[steps, longest]`) and RaggedFeature.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import numpy as np
from google.protobuf.message import DecodeError

from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.example_proto import Example, SequenceExample
from jdist.tf_compat.ragged import RaggedTensor
from jdist.tf_compat.sparse import SparseTensor
from jdist.tf_compat.strings import text

_INT32 = as_dtype("int32")
_KINDS = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}
_TF_NAMES = {"float32": "float", "int64": "int64", "string": "string", "float_list": "float",
             "int64_list": "int64", "bytes_list": "string"}


class FixedLenFeature(NamedTuple):
    """`tf.io.FixedLenFeature(shape, dtype, default_value=None)`: exactly prod(shape) values."""
    shape: Any
    dtype: Any
    default_value: Any = None


class VarLenFeature(NamedTuple):
    """`tf.io.VarLenFeature(dtype)`: any number of values, as a SparseTensor."""
    dtype: Any


class FixedLenSequenceFeature(NamedTuple):
    """`tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing=False, default_value=None)`: values in
    rows of `shape`, a leading axis of any length (padded across a batch)."""
    shape: Any
    dtype: Any
    allow_missing: bool = False
    default_value: Any = None


class RaggedFeature(NamedTuple):
    """`tf.io.RaggedFeature(dtype)`: any number of values, a RaggedTensor across a batch."""
    dtype: Any
    value_key: Any = None
    partitions: Any = ()
    row_splits_dtype: Any = _INT32
    validate: bool = False


class SparseFeature(NamedTuple):
    """`tf.io.SparseFeature(index_key, value_key, dtype, size, already_sorted=False)`: a SparseTensor of
    dense shape `[size]` from an index feature and a value feature."""
    index_key: Any
    value_key: Any
    dtype: Any
    size: Any
    already_sorted: bool = False


def _reprs(cls: type, fields: tuple[str, ...]) -> None:
    def rep(self: Any) -> str:
        parts = [f"{f}={_field_text(getattr(self, f))}" for f in fields]
        return f"{cls.__name__}({', '.join(parts)})"
    cls.__repr__ = rep  # type: ignore[method-assign]


def _field_text(value: Any) -> str:
    return repr(as_dtype(value)) if isinstance(value, (DType, type, np.dtype)) else repr(value)


for _cls in (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature, RaggedFeature, SparseFeature):
    _reprs(_cls, _cls._fields)


def _dtype(key: str, config: Any) -> DType:
    dtype = as_dtype(config.dtype)
    if dtype.name not in _KINDS:
        raise InvalidArgumentError(None, None, f"Feature {key!r}: dtype {dtype.name} is not one an Example holds: "
                                               "tf.float32, tf.int64 or tf.string")
    return dtype


def _empty(dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    return np.full(shape, b"", dtype=object) if dtype.name == "string" else np.zeros(shape, dtype.dtype)


def _array(values: Any, dtype: DType) -> np.ndarray:
    if dtype.name == "string":
        out = np.empty(len(values), object)
        out[:] = [v.encode() if isinstance(v, str) else bytes(v) for v in values]
        return out
    return np.asarray(values, dtype.dtype).reshape(-1)


def _values(features: Any, key: str, dtype: DType) -> np.ndarray | None:
    """The values of feature `key` in a feature map, checked against `dtype`; None when the map lacks it or
    it holds no list (TF reads both as missing: observed)."""
    if key not in features:
        return None
    return _feature_values(features[key], key, dtype)


def _feature_values(feature: Any, key: str, dtype: DType) -> np.ndarray | None:
    kind = feature.WhichOneof("kind")
    if kind is None:
        return None
    if kind != _KINDS[dtype.name]:
        raise InvalidArgumentError(None, None, f"Key: {key}.  Data types don't match. Data type: "
                                               f"{_TF_NAMES[kind]} but expected type: {_TF_NAMES[dtype.name]}")
    return _array(getattr(feature, kind).value, dtype)


def _shape(config: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in (config.shape if isinstance(config.shape, (list, tuple)) else
                                  np.asarray(config.shape).reshape(-1)))


def _default(key: str, config: Any, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    value = np.asarray(config.default_value, dtype=object if dtype.name == "string" else dtype.dtype)
    if value.size != math.prod(shape):
        raise InvalidArgumentError(None, None, f"Input to reshape is a tensor with {value.size} values, but the "
                                               f"requested shape has {math.prod(shape)} (default_value of {key!r})")
    return _array(value.reshape(-1), dtype).reshape(shape)


def _dense(examples: list[Any], key: str, config: FixedLenFeature) -> np.ndarray:
    dtype, shape = _dtype(key, config), _shape(config)
    default = None if config.default_value is None else _default(key, config, dtype, shape)
    rows = []
    for example in examples:
        values = _values(example, key, dtype)
        if values is None:
            if default is None:
                raise InvalidArgumentError(None, None, f"Feature: {key} (data type: {_TF_NAMES[dtype.name]}) is "
                                                       "required but could not be found.")
            rows.append(default)
            continue
        if values.size != math.prod(shape):
            raise InvalidArgumentError(None, None, f"Key: {key}.  Can't parse serialized Example: Number of "
                                                   f"{_TF_NAMES[dtype.name]} values != expected.  Values size: "
                                                   f"{values.size} but output shape: {list(shape)}")
        rows.append(values.reshape(shape))
    return np.stack(rows) if rows else _empty(dtype, (0, *shape))


def _sequence(examples: list[Any], key: str, config: FixedLenSequenceFeature) -> np.ndarray:
    if not config.allow_missing:
        raise ValueError("Unsupported: FixedLenSequenceFeature requires allow_missing to be True.")
    dtype, shape = _dtype(key, config), _shape(config)
    step = math.prod(shape)
    rows = []
    for example in examples:
        values = _values(example, key, dtype)
        values = _empty(dtype, (0,)) if values is None else values
        if step == 0 or values.size % step:
            raise InvalidArgumentError(None, None, f"Key: {key}.  Can't parse serialized Example: Number of "
                                                   f"{_TF_NAMES[dtype.name]} values is not a multiple of the "
                                                   f"row size.  Values size: {values.size} but row shape: "
                                                   f"{list(shape)}")
        rows.append(values.reshape(-1, *shape))
    longest = max((len(r) for r in rows), default=0)
    pad = _empty(dtype, shape) if config.default_value is None else _default(key, config, dtype, ())
    out = np.empty((len(rows), longest, *shape), dtype=object if dtype.name == "string" else dtype.dtype)
    out[...] = pad
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def _sparse(examples: list[Any], key: str, config: VarLenFeature) -> SparseTensor:
    dtype = _dtype(key, config)
    rows = [_values(example, key, dtype) for example in examples]
    rows = [_empty(dtype, (0,)) if r is None else r for r in rows]
    return _batched_sparse(rows, dtype, max((len(r) for r in rows), default=0))


def _batched_sparse(rows: list[np.ndarray], dtype: DType, width: int,
                    positions: list[np.ndarray] | None = None) -> SparseTensor:
    lengths = [len(r) for r in rows]
    batch = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    inner = np.concatenate(positions) if positions else np.concatenate(
        [np.arange(n, dtype=np.int64) for n in lengths]) if rows else np.zeros(0, np.int64)
    values = np.concatenate(rows) if rows else _empty(dtype, (0,))
    indices = np.stack([batch, inner.astype(np.int64)], axis=1) if rows else np.zeros((0, 2), np.int64)
    return SparseTensor(indices, values.astype(object) if dtype.name == "string" else values, [len(rows), width])


def _sparse_feature(examples: list[Any], key: str, config: SparseFeature) -> SparseTensor:
    if not isinstance(config.index_key, str):
        raise ValueError(f"SparseFeature {key!r}: only one index_key (a 1-D sparse tensor) is supported")
    dtype = _dtype(key, config)
    rows, positions = [], []
    for example in examples:
        index = _values(example, config.index_key, as_dtype("int64"))
        values = _values(example, config.value_key, dtype)
        index = np.zeros(0, np.int64) if index is None else index
        values = _empty(dtype, (0,)) if values is None else values
        if len(index) != len(values):
            raise InvalidArgumentError(None, None, f"SparseFeature {key!r}: {len(index)} indices but "
                                                   f"{len(values)} values")
        order = np.argsort(index, kind="stable") if not config.already_sorted else np.arange(len(index))
        rows.append(values[order])
        positions.append(index[order])
    return _batched_sparse(rows, dtype, int(config.size), positions)


def _ragged(examples: list[Any], key: str, config: RaggedFeature) -> RaggedTensor:
    if config.partitions:
        raise NotImplementedError(f"RaggedFeature {key!r}: partitions are not supported by jdist; read the "
                                  "flat values (partitions=()) and build the RaggedTensor with tf.RaggedTensor's "
                                  "from_row_lengths / from_row_splits")
    dtype = _dtype(key, config)
    rows = [_values(example, config.value_key or key, dtype) for example in examples]
    rows = [_empty(dtype, (0,)) if r is None else r for r in rows]
    flat = np.concatenate(rows) if rows else _empty(dtype, (0,))
    return RaggedTensor.from_row_lengths(flat, [len(r) for r in rows])


_SPARSE, _DENSE, _RAGGED = (VarLenFeature, SparseFeature), (FixedLenFeature, FixedLenSequenceFeature), \
    (RaggedFeature,)


def _parse(examples: list[Any], features: dict[str, Any]) -> dict[str, Any]:
    """`features` read from each example's feature map (`Example.features.feature`)."""
    if not features:
        raise ValueError("Invalid argument: features cannot be empty.")
    unknown = [k for k, c in features.items() if not isinstance(c, (*_SPARSE, *_DENSE, *_RAGGED))]
    if unknown:
        raise TypeError(f"Unsupported feature type {type(features[unknown[0]]).__name__} for {unknown[0]!r}: use "
                        "tf.io.FixedLenFeature, VarLenFeature, FixedLenSequenceFeature, RaggedFeature or "
                        "SparseFeature")
    out: dict[str, Any] = {}
    for group in (_SPARSE, _DENSE, _RAGGED):  # TF's order of the outputs
        for key in sorted(k for k, c in features.items() if isinstance(c, group)):
            config = features[key]
            if isinstance(config, FixedLenFeature):
                out[key] = _dense(examples, key, config)
            elif isinstance(config, FixedLenSequenceFeature):
                out[key] = _sequence(examples, key, config)
            elif isinstance(config, VarLenFeature):
                out[key] = _sparse(examples, key, config)
            elif isinstance(config, SparseFeature):
                out[key] = _sparse_feature(examples, key, config)
            else:
                out[key] = _ragged(examples, key, config)
    return out


def _serialized(op: str, serialized: Any) -> np.ndarray:
    if isinstance(serialized, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.io.{op} runs on the host (in a tf.data map): compiled code has no strings")
    return text(serialized)


def _decode(records: np.ndarray, message: Any = Example) -> list[Any]:
    examples = []
    for record in records.reshape(-1):
        try:
            examples.append(message.FromString(record))
        except DecodeError:
            text = record.decode("utf-8", "backslashreplace")
            raise InvalidArgumentError(None, None, f"Could not parse example input, value: '{text}'") from None
    return examples


def _single(out: dict[str, Any]) -> dict[str, Any]:
    """One example's tensors from a batch of one: the batch axis dropped."""
    for key, value in out.items():
        if isinstance(value, SparseTensor):
            out[key] = SparseTensor(np.asarray(value.indices)[:, 1:], value.values, value.dense_shape[1:])
        elif isinstance(value, RaggedTensor):
            out[key] = value.values
        else:
            out[key] = value[0, ...]
    return out


def parse_example(serialized: Any, features: dict[str, Any], example_names: Any = None,
                  name: str | None = None) -> dict[str, Any]:
    """`tf.io.parse_example`: a vector of serialized Examples to a dict of batched tensors (a scalar gives
    one example's, as `parse_single_example`)."""
    records = _serialized("parse_example", serialized)
    if records.ndim > 1:
        raise InvalidArgumentError(None, None, "Expected serialized to be a scalar or vector, got shape: "
                                               f"[{','.join(str(d) for d in records.shape)}]")
    if records.ndim == 0:
        return parse_single_example(records, features, example_names, name)
    return _parse([e.features.feature for e in _decode(records)], dict(features))


def parse_single_example(serialized: Any, features: dict[str, Any], example_names: Any = None,
                         name: str | None = None) -> dict[str, Any]:
    """`tf.io.parse_single_example`: one serialized Example (a string scalar) to a dict of tensors."""
    record = _serialized("parse_single_example", serialized)
    if record.ndim != 0:
        raise ValueError("Input serialized must be a scalar")
    return _single(_parse([e.features.feature for e in _decode(record.reshape(1))], dict(features)))


# ------------------------------------------------------------------ SequenceExample
def _steps(lists: list[Any], key: str, dtype: DType) -> list[list[np.ndarray] | None]:
    """Each example's values of feature list `key`, one array per step; None where the list is missing."""
    rows: list[list[np.ndarray] | None] = []
    for feature_lists in lists:
        if key not in feature_lists:
            rows.append(None)
            continue
        values = [_feature_values(f, key, dtype) for f in feature_lists[key].feature]
        rows.append([_empty(dtype, (0,)) if v is None else v for v in values])
    return rows


def _sequence_dense(lists: list[Any], key: str, config: FixedLenSequenceFeature) -> tuple[np.ndarray, np.ndarray]:
    dtype, shape = _dtype(key, config), _shape(config)
    per_example = []
    for steps in _steps(lists, key, dtype):
        if steps is None and not config.allow_missing:
            raise InvalidArgumentError(None, None, f"Name: <unknown>, Feature list '{key}' is required but could "
                                                   "not be found.  Did you mean to include it in "
                                                   "feature_list_dense_missing_assumed_empty or "
                                                   "feature_list_dense_defaults?")
        for t, step in enumerate(steps or []):
            if step.size != math.prod(shape):
                raise InvalidArgumentError(None, None, f"Name: <unknown>, Key: {key}, Index: {t}.  Number of "
                                                       f"values != expected.  values size: {step.size} but output "
                                                       f"shape: {list(shape)}")
        per_example.append([step.reshape(shape) for step in steps or []])
    lengths = np.array([len(steps) for steps in per_example], np.int64)
    pad = _empty(dtype, shape) if config.default_value is None else _default(key, config, dtype, ())
    out = np.empty((len(per_example), int(lengths.max(initial=0)), *shape), dtype=_empty(dtype, ()).dtype)
    out[...] = pad
    for i, steps in enumerate(per_example):
        if steps:
            out[i, :len(steps)] = np.stack(steps)
    return out, lengths


def _sequence_sparse(lists: list[Any], key: str, config: VarLenFeature) -> SparseTensor:
    dtype = _dtype(key, config)
    indices, values, steps_most, width = [], [], 0, 0
    for b, steps in enumerate(_steps(lists, key, dtype)):
        steps_most = max(steps_most, len(steps or []))
        for t, step in enumerate(steps or []):
            width = max(width, len(step))
            indices += [(b, t, p) for p in range(len(step))]
            values.append(step)
    flat = np.concatenate(values) if values else _empty(dtype, (0,))
    return SparseTensor(np.array(indices, np.int64).reshape(-1, 3), flat, [len(lists), steps_most, width])


def _sequence_ragged(lists: list[Any], key: str, config: RaggedFeature) -> RaggedTensor:
    if config.partitions:
        raise NotImplementedError(f"RaggedFeature {key!r}: partitions are not supported by jdist")
    dtype = _dtype(key, config)
    per_example = [steps or [] for steps in _steps(lists, config.value_key or key, dtype)]
    flat = [step for steps in per_example for step in steps]
    inner = RaggedTensor.from_row_lengths(np.concatenate(flat) if flat else _empty(dtype, (0,)),
                                          [len(step) for step in flat])
    return RaggedTensor.from_row_lengths(inner, [len(steps) for steps in per_example])


def _parse_sequences(serialized: Any, op: str, context_features: dict[str, Any] | None,
                     sequence_features: dict[str, Any] | None) -> tuple[dict, dict, dict, np.ndarray]:
    if not context_features and not sequence_features:
        raise ValueError("Both context_features and sequence_features are None, but at least one should have "
                         "values.")
    for key, config in (sequence_features or {}).items():
        if not isinstance(config, (VarLenFeature, FixedLenSequenceFeature, RaggedFeature)):
            raise ValueError(f"Unsupported {type(config).__name__} {config!r} for key '{key}'")
    records = _serialized(op, serialized)
    sequences = _decode(records, SequenceExample)
    context = _parse([s.context.feature for s in sequences], dict(context_features)) if context_features else {}
    lists = [s.feature_lists.feature_list for s in sequences]
    features, lengths = {}, {}
    for group in ((VarLenFeature,), (FixedLenSequenceFeature,), (RaggedFeature,)):  # TF's order
        for key in sorted(k for k, c in (sequence_features or {}).items() if isinstance(c, group)):
            config = sequence_features[key]  # pyright: ignore[reportOptionalSubscript]
            if isinstance(config, FixedLenSequenceFeature):
                features[key], lengths[key] = _sequence_dense(lists, key, config)
            elif isinstance(config, VarLenFeature):
                features[key] = _sequence_sparse(lists, key, config)
            else:
                features[key] = _sequence_ragged(lists, key, config)
    return context, features, lengths, records


def parse_sequence_example(serialized: Any, context_features: dict[str, Any] | None = None,
                           sequence_features: dict[str, Any] | None = None, example_names: Any = None,
                           name: str | None = None) -> tuple[dict, dict, dict]:
    """`tf.io.parse_sequence_example`: a vector of serialized SequenceExamples to (context, feature lists,
    lengths): lists padded to the longest, `lengths` the step counts of the FixedLenSequenceFeatures."""
    context, features, lengths, records = _parse_sequences(serialized, "parse_sequence_example", context_features,
                                                           sequence_features)
    if records.ndim != 1:
        raise InvalidArgumentError(None, None, f"Expected serialized to be a vector, got shape: {list(records.shape)}")
    return context, features, lengths


def parse_single_sequence_example(serialized: Any, context_features: dict[str, Any] | None = None,
                                  sequence_features: dict[str, Any] | None = None, example_name: Any = None,
                                  name: str | None = None) -> tuple[dict, dict]:
    """`tf.io.parse_single_sequence_example`: one serialized SequenceExample to (context, feature lists)."""
    if _serialized("parse_single_sequence_example", serialized).ndim != 0:
        raise ValueError("Input serialized must be a scalar")
    context, features, _, _ = _parse_sequences(serialized, "parse_single_sequence_example", context_features,
                                               sequence_features)
    return _single(context), _single(features)


PARSING = dict(FixedLenFeature=FixedLenFeature, VarLenFeature=VarLenFeature,
               FixedLenSequenceFeature=FixedLenSequenceFeature, RaggedFeature=RaggedFeature,
               SparseFeature=SparseFeature, parse_example=parse_example, parse_single_example=parse_single_example,
               parse_sequence_example=parse_sequence_example,
               parse_single_sequence_example=parse_single_sequence_example)
