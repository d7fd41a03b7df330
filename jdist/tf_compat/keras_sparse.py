"""`tf.SparseTensor` into Keras models: TF's Keras takes a `tf.SparseTensor` for `tf.keras.Input(sparse=True)`.

TF's guide "Working with sparse tensors" calls `model(sparse)` and `model.predict(sparse)` on a model built on
`tf.keras.Input(shape=(4,), sparse=True)` (observed, TF 2.21 with Keras 3.15: a dense `(6, 4)` float32 result,
zero rows where the sparse input has no entries). Keras's JAX backend has its own sparse type,
`jax.experimental.sparse.BCOO`, and takes it in both places; jdist's `SparseTensor` is a COO tensor of the same
layout, so where Keras converts a model input (`convert_to_tensor`) or picks a data adapter for `fit` /
`evaluate` / `predict`, a `SparseTensor` becomes a `BCOO` of the same indices, values and shape (no copy of
the dense tensor). An input not declared sparse is then made dense by Keras, as Keras does for a BCOO.
"""
from __future__ import annotations

import functools
from typing import Any

import jax.numpy as jnp

from jdist.tf_compat.sparse import SparseTensor


def to_bcoo(value: Any) -> Any:
    """`value` as Keras's JAX sparse type when it is a `SparseTensor`, else as it is."""
    if not isinstance(value, SparseTensor):
        return value
    from jax.experimental import sparse as jax_sparse

    indices = jnp.asarray(value.indices, jnp.int32)  # BCOO's index type; shapes fit in int32 for Keras inputs
    return jax_sparse.BCOO((jnp.asarray(value.values), indices), shape=tuple(value.shape.as_list()))


def _converted(structure: Any) -> Any:
    from keras import tree

    return tree.map_structure(to_bcoo, structure) if structure is not None else None


def install() -> None:
    """Keras's input conversion and data-adapter choice take a `SparseTensor` as a `BCOO`; once."""
    from keras.src.backend.jax import core
    from keras.src.trainers import data_adapters

    convert = core.convert_to_tensor
    if getattr(convert, "_jdist_sparse", False):
        return

    @functools.wraps(convert)
    def convert_to_tensor(x: Any, *args: Any, **kwargs: Any) -> Any:
        return convert(to_bcoo(x), *args, **kwargs)

    convert_to_tensor._jdist_sparse = True  # pyright: ignore[reportAttributeAccessIssue]
    core.convert_to_tensor = convert_to_tensor

    get_adapter = data_adapters.get_data_adapter

    @functools.wraps(get_adapter)
    def get_data_adapter(x: Any, y: Any = None, sample_weight: Any = None, *args: Any, **kwargs: Any) -> Any:
        return get_adapter(_converted(x), _converted(y), _converted(sample_weight), *args, **kwargs)

    data_adapters.get_data_adapter = get_data_adapter
