"""`jdist.data`: TensorFlow's `tf.data` (what `jdist.tf_compat.data` is), built on grain.

    ds = jdist.data.Dataset.from_tensor_slices((images, labels)).shuffle(10000).batch(64)

The implementation lives in `jdist.tfdata` (docs/input.md#tfdata); this module is its
TF-shaped face: `Dataset`, `TextLineDataset`, `Options`, the constants, and `experimental`.
"""
from __future__ import annotations

import types

from jdist.tfdata import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    AutoShardPolicy,
    Dataset,
    DistributeOptions,
    Options,
    TensorSpec,
)
from jdist.tfdata.text_line import TextLineDataset

experimental = types.SimpleNamespace(
    AUTOTUNE=AUTOTUNE,
    AutoShardPolicy=AutoShardPolicy,
    DistributeOptions=DistributeOptions,
    INFINITE_CARDINALITY=INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
    cardinality=lambda dataset: dataset.cardinality(),
)

__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "Options", "TensorSpec",
           "TextLineDataset", "experimental"]
