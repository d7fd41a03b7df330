"""`tf.IndexedSlices`: rows `values` at `indices` of a tensor of shape `dense_shape`, the rest zeros.

TF's tape gives one as the gradient of an embedding gather; jdist's tape gives dense gradients, so an
IndexedSlices here is what a script builds itself. `tf.convert_to_tensor(slices)` (numpy's `np.asarray`, JAX's
`jnp.asarray`) gives the dense tensor, rows at repeated indices summed (TF 2.21, observed); without
`dense_shape` that is TF's ValueError.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.input.tensor_spec import TensorShape
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.ops import convert_to_tensor, is_jax


class IndexedSlices:
    """`tf.IndexedSlices(values, indices, dense_shape=None)`."""

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None):
        self._values, self._indices = convert_to_tensor(values), convert_to_tensor(indices)
        self._dense_shape = None if dense_shape is None else convert_to_tensor(dense_shape)

    @property
    def values(self) -> Any:
        return self._values

    @property
    def indices(self) -> Any:
        return self._indices

    @property
    def dense_shape(self) -> Any:
        return self._dense_shape

    @property
    def dtype(self) -> DType:
        return as_dtype(self._values.dtype)

    @property
    def shape(self) -> TensorShape:
        """`dense_shape` as a TensorShape; without it, rows unknown and the values' other dimensions."""
        if self._dense_shape is None:
            return TensorShape([None, *np.shape(self._values)[1:]])
        return TensorShape(np.asarray(self._dense_shape).tolist())

    def _shape_for_dense(self) -> tuple[int, ...]:
        if self._dense_shape is None:
            raise ValueError(f"Tensor conversion requested for IndexedSlices for argument `value` without "
                             f"dense_shape: {self!r}")
        return tuple(int(d) for d in np.asarray(self._dense_shape))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = np.asarray(self._values)
        dense = np.zeros(self._shape_for_dense(), values.dtype)
        np.add.at(dense, np.asarray(self._indices), values)
        return dense if dtype is None else dense.astype(dtype)

    @property
    def __jax_array__(self) -> Any:  # only for JAX contents: numpy ones stay on the host (`__array__`)
        if not is_jax(self._values, self._indices):
            raise AttributeError("__jax_array__")
        return self._to_jax

    def _to_jax(self) -> jax.Array:
        values = jnp.asarray(self._values)
        return jnp.zeros(self._shape_for_dense(), values.dtype).at[jnp.asarray(self._indices)].add(values)

    def __neg__(self) -> "IndexedSlices":
        return IndexedSlices(-self._values, self._indices, self._dense_shape)

    def __repr__(self) -> str:
        shape = "" if self._dense_shape is None else f", dense_shape={self._dense_shape!r}"
        return f"IndexedSlices(indices={self._indices!r}, values={self._values!r}{shape})"
