"""`tf.data.experimental`'s readers of Example files and its table builders, on jdist's datasets.

TF 2.21's behaviour (observed): `parse_example_dataset(features)` parses a dataset of string vectors (batches
of serialized Examples) and refuses scalars with TypeError (here also features that parse to sparse or ragged
tensors: a jdist dataset element holds dense tensors only); `make_batched_features_dataset` reads the files a
pattern matches in sorted order (shuffled when `shuffle=True`), batches, parses, and pops `label_key` into
`(features, label)`; `TFRecordWriter(path).write(dataset)` writes a dataset of string scalars as one TFRecord
file; `table_from_dataset` builds a `StaticHashTable` of a dataset of (key, value) pairs (a
`StaticVocabularyTable` with `num_oov_buckets`), `index_table_from_dataset` one of keys to their positions.
"""
from __future__ import annotations

import glob
import random
from typing import Any, Callable

import numpy as np

from jdist.tf_compat.example_parsing import RaggedFeature, SparseFeature, VarLenFeature, parse_example
from jdist.tf_compat.lookup_tables import KeyValueTensorInitializer, StaticHashTable, StaticVocabularyTable
from jdist.tfdata import combinators
from jdist.tfdata.dataset import Dataset
from jdist.tfdata.tfrecord import TFRecordDataset, TFRecordOptions, TFRecordWriter as _RecordFile


def _spec_text(spec: Any) -> str:
    dtype = "string" if np.dtype(spec.dtype).kind in "SUO" else np.dtype(spec.dtype).name
    return f"TensorSpec(shape={tuple(spec.shape)}, dtype=tf.{dtype}, name=None)"


def parse_example_dataset(features: dict[str, Any], num_parallel_calls: int = 1,
                          deterministic: bool | None = None) -> Callable[[Dataset], Dataset]:
    """`dataset.apply(parse_example_dataset(features))`: each vector of serialized Examples parsed into a dict
    of batched tensors (`tf.io.parse_example`)."""
    if not features:
        raise ValueError("Argument `features` cannot be None.")
    sparse = sorted(k for k, v in features.items() if isinstance(v, (VarLenFeature, SparseFeature, RaggedFeature)))
    if sparse:
        raise TypeError(f"parse_example_dataset: features {sparse} parse to SparseTensor/RaggedTensor, which a jdist "
                        "dataset element cannot hold; parse in a map and make them dense there: "
                        "ds.map(lambda r: tf.sparse.to_dense(tf.io.parse_example(r, features)[key])), or use "
                        "FixedLenFeature / FixedLenSequenceFeature(allow_missing=True)")

    def apply(dataset: Dataset) -> Dataset:
        spec = dataset.element_spec
        if not hasattr(spec, "shape") or len(spec.shape) != 1 or np.dtype(spec.dtype).kind not in "SUO":
            raise TypeError("Input dataset should be a dataset of vectors of strings. Instead it is "
                            f"`{_spec_text(spec) if hasattr(spec, 'shape') else spec}`.")
        return dataset.map(lambda records: parse_example(records, features))

    return apply


def _files(file_pattern: Any) -> list[str]:
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
    paths = sorted({p for pattern in patterns
                    for p in glob.glob(pattern.decode() if isinstance(pattern, bytes) else str(pattern))})
    if not paths:
        raise ValueError(f"No files matched pattern: {file_pattern}")  # TF's InvalidArgumentError text
    return paths


def make_batched_features_dataset(file_pattern: Any, batch_size: int, features: dict[str, Any],
                                  reader: Callable[..., Dataset] | None = None, label_key: str | None = None,
                                  reader_args: list[Any] | None = None, num_epochs: int | None = None,
                                  shuffle: bool = True, shuffle_buffer_size: int = 10000,
                                  shuffle_seed: int | None = None, prefetch_buffer_size: int | None = None,
                                  reader_num_threads: int | None = None, parser_num_threads: int | None = None,
                                  sloppy_ordering: bool = False, drop_final_batch: bool = False) -> Dataset:
    """Batches of parsed Examples from the files `file_pattern` matches (a dict, or `(features, label)`)."""
    paths = _files(file_pattern)
    if shuffle:
        random.Random(shuffle_seed).shuffle(paths)
    read = reader or TFRecordDataset
    extra = list(reader_args or [])
    cycle = int(reader_num_threads or 1)
    dataset = combinators.interleave(Dataset.from_tensor_slices(np.array(paths, dtype=object)),
                                     lambda path: read(path, *extra), cycle_length=cycle, block_length=1)
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size, drop_remainder=drop_final_batch)
    dataset = parse_example_dataset(features)(dataset)
    if label_key is not None:
        if label_key not in features:
            raise ValueError(f"The `label_key` provided ({label_key}) must be one of the `features` keys.")
        dataset = dataset.map(lambda parsed: ({k: v for k, v in parsed.items() if k != label_key},
                                              parsed[label_key]))
    return dataset.prefetch(prefetch_buffer_size or -1)


class TFRecordWriter:
    """`tf.data.experimental.TFRecordWriter(filename, compression_type=None)`: `write(dataset)` writes a
    dataset of string scalars as one TFRecord file."""

    def __init__(self, filename: Any, compression_type: str | None = None) -> None:
        self._filename = filename
        self._options = TFRecordOptions(compression_type)

    def write(self, dataset: Dataset) -> None:
        """Every element of `dataset` as one record, in order (the file is replaced)."""
        spec = dataset.element_spec
        if not hasattr(spec, "shape") or tuple(spec.shape) != () or np.dtype(spec.dtype).kind not in "SUO":
            shape = tuple(spec.shape) if hasattr(spec, "shape") else spec
            kind = "string" if hasattr(spec, "dtype") and np.dtype(spec.dtype).kind in "SUO" else (
                np.dtype(spec.dtype).name if hasattr(spec, "dtype") else "?")
            raise TypeError("Invalid `dataset`. Expected a`dataset` that produces scalar `tf.string` elements, but "
                            f"got a dataset which produces elements with shapes {shape} and types "
                            f"<dtype: '{kind}'>.")
        with _RecordFile(self._filename, self._options) as writer:
            for record in dataset:
                writer.write(bytes(np.asarray(record, dtype=object)[()]))


def _pairs(dataset: Dataset) -> tuple[list[Any], list[Any]]:
    keys, values = [], []
    for element in dataset:
        if not isinstance(element, tuple) or len(element) != 2:
            raise TypeError("table_from_dataset takes a dataset of (key, value) pairs")
        keys.append(np.asarray(element[0])[()])
        values.append(np.asarray(element[1])[()])
    return keys, values


def _key_array(keys: list[Any]) -> np.ndarray:
    return np.array(keys, dtype=object) if all(isinstance(k, (bytes, str)) for k in keys) else np.array(keys)


def table_from_dataset(dataset: Dataset | None = None, num_oov_buckets: int = 0, vocab_size: int | None = None,
                       default_value: Any = None, hasher_spec: Any = None, key_dtype: Any = "string",
                       name: str | None = None) -> StaticHashTable | StaticVocabularyTable:
    """A lookup table of a dataset of (key, value) pairs: a `StaticHashTable` (unknown keys `default_value`,
    -1 when None), or with `num_oov_buckets` a `StaticVocabularyTable` (int64 values)."""
    if dataset is None:
        raise ValueError("dataset must be specified.")
    keys, values = _pairs(dataset.take(vocab_size) if vocab_size is not None else dataset)
    initializer = KeyValueTensorInitializer(_key_array(keys), np.array(values))
    if num_oov_buckets:
        return StaticVocabularyTable(initializer, num_oov_buckets)
    return StaticHashTable(initializer, -1 if default_value is None else default_value)


def index_table_from_dataset(dataset: Dataset | None = None, num_oov_buckets: int = 0, vocab_size: int | None = None,
                             default_value: Any = -1, hasher_spec: Any = None, key_dtype: Any = "string",
                             name: str | None = None) -> StaticHashTable | StaticVocabularyTable:
    """A table of a dataset of keys to their positions (int64): unknown keys `default_value`, or with
    `num_oov_buckets` one of the buckets after the keys."""
    if dataset is None:
        raise ValueError("dataset must be specified.")
    return table_from_dataset(dataset.enumerate().map(lambda i, key: (key, i)), num_oov_buckets, vocab_size,
                              default_value, hasher_spec, key_dtype, name)


DATA_EXPERIMENTAL = dict(parse_example_dataset=parse_example_dataset,
                         make_batched_features_dataset=make_batched_features_dataset, TFRecordWriter=TFRecordWriter,
                         table_from_dataset=table_from_dataset, index_table_from_dataset=index_table_from_dataset)
