"""`jdist.data`: TensorFlow's `tf.data` (what `jdist.tf_compat.data` is), built on grain.

    ds = jdist.data.Dataset.from_tensor_slices((images, labels)).shuffle(10000).batch(64)

The implementation lives in `jdist.tfdata` (docs/input.md#tfdata); this module is its
TF-shaped face: `Dataset`, `TextLineDataset`, `TFRecordDataset`, `Options`, the iterator and spec types, the
constants, and `experimental` (`jdist.tfdata.experimental`, `jdist.tfdata.csv`).
"""
from __future__ import annotations

import types
from typing import Any

from jdist.tfdata import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    AutoShardPolicy,
    Dataset,
    DistributeOptions,
    Options,
    TensorSpec,
    experimental as _experimental,
)
from jdist.tfdata.csv import CsvDataset, make_csv_dataset
from jdist.tfdata.iterator import Iterator, IteratorSpec, NumpyIterator
from jdist.tfdata.options import (
    AutotuneAlgorithm,
    AutotuneOptions,
    ExternalStatePolicy,
    OptimizationOptions,
    ThreadingOptions,
)
from jdist.tfdata.spec import DatasetSpec
from jdist.tfdata.text_line import TextLineDataset
from jdist.tfdata.tfrecord import FixedLengthRecordDataset, TFRecordDataset


class _Experimental(types.SimpleNamespace):
    """`tf.data.experimental`: a name it lacks is an AttributeError naming docs/tf_mapping.md."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"jdist does not provide `tf.data.experimental.{name}`; see docs/tf_mapping.md for "
                             "what jdist's tf.data has.")


experimental = _Experimental(
    AUTOTUNE=AUTOTUNE,
    AutoShardPolicy=AutoShardPolicy,
    AutotuneAlgorithm=AutotuneAlgorithm,
    AutotuneOptions=AutotuneOptions,
    CsvDataset=CsvDataset,
    DistributeOptions=DistributeOptions,
    ExternalStatePolicy=ExternalStatePolicy,
    INFINITE_CARDINALITY=INFINITE_CARDINALITY,
    OptimizationOptions=OptimizationOptions,
    ThreadingOptions=ThreadingOptions,
    UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
    make_csv_dataset=make_csv_dataset,
    **_experimental.NAMES,
)

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "DatasetSpec",
           "FixedLengthRecordDataset", "Iterator", "IteratorSpec", "NumpyIterator", "Options", "TFRecordDataset",
           "TensorSpec", "TextLineDataset", "ThreadingOptions", "experimental"]
