"""`tf.keras.layers.HashedCrossing` on the host: feature crosses hashed into bins as TF 2.21 hashes them.

TF's feature-column migration guide replaces `crossed_column` with this layer. Keras 3's layer is TensorFlow ops
(`tf.sparse.cross_hashed`; it raises "requires TensorFlow" without it), and a `tf.data` map runs on the host
here, so this one crosses numpy values: each string's FarmHash Fingerprint64 (an integer is its own 64-bit
value), folded left to right into TF's `FingerprintCat64` from the key 0xDECAFCAFFE, modulo `num_bins`. Observed
in TF 2.21 with Keras 3.15: (1, "a"), (2, "b"), (3, "c") into 5 bins give [0, 4, 3]; inputs of shape `()`,
`(batch,)` or `(batch, 1)` keep that shape; "int" gives int64 (the layer's dtype if given), "one_hot" float32
rows; float inputs, a single tensor and wider inputs are refused with Keras's messages.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from jdist.tf_compat.farmhash import fingerprint64
from jdist.tfdata.structure import HostTensor

_M = (1 << 64) - 1
_KMUL = 0xC6A4A7935BD1E995
_HASH_KEY = 0xDECAFCAFFE  # tf.sparse.cross_hashed's default key


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _fingerprint_cat64(fp1: int, fp2: int) -> int:
    result = fp1 ^ _KMUL
    result ^= (_shift_mix((fp2 * _KMUL) & _M) * _KMUL) & _M
    result = (result * _KMUL) & _M
    result = (_shift_mix(result) * _KMUL) & _M
    return _shift_mix(result)


def _feature(value: Any) -> int:
    if isinstance(value, (bytes, str)):
        return fingerprint64(value.encode() if isinstance(value, str) else value)
    return int(value) & _M


def cross_bins(columns: list[np.ndarray], num_bins: int) -> np.ndarray:
    """The hashed cross of equally long 1-D `columns` (ints or text), one int64 bin per row."""
    out = np.empty(len(columns[0]), np.int64)
    for row in range(len(out)):
        hashed = _HASH_KEY
        for column in columns:
            hashed = _fingerprint_cat64(hashed, _feature(column[row]))
        out[row] = hashed % num_bins
    return out


def _column(value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind == "U":
        array = np.char.encode(array, "utf-8")
    return array


@functools.cache
def hashed_crossing_class() -> type:
    import keras

    @keras.saving.register_keras_serializable(package="jdist")
    class HashedCrossing(keras.layers.Layer):
        """`tf.keras.layers.HashedCrossing` on the host (see the module docstring)."""

        def __init__(self, num_bins: int, output_mode: str = "int", sparse: bool = False, name: str | None = None,
                     dtype: Any = None, **kwargs: Any):
            if output_mode not in ("int", "one_hot"):
                raise ValueError("Invalid value for argument `output_mode`. Expected one of ('int', 'one_hot'). "
                                 f"Received: output_mode={output_mode}")
            if sparse:
                raise ValueError("HashedCrossing: sparse output is not provided by jdist; take the dense output")
            dtype = dtype if dtype is not None else "int64" if output_mode == "int" else "float32"
            super().__init__(name=name, dtype=dtype, **kwargs)
            self.num_bins, self.output_mode, self.sparse = int(num_bins), output_mode, False

        def call(self, inputs: Any) -> np.ndarray:
            if not isinstance(inputs, (list, tuple)):
                raise ValueError("`HashedCrossing` should be called on a list or tuple of inputs. Received: "
                                 f"inputs={inputs}")
            arrays = [_column(np.asarray(x)) for x in inputs]
            if any(a.dtype.kind not in "iuSO" for a in arrays):
                raise ValueError("All `HashedCrossing` inputs should have an integer or string dtype. Received: "
                                 f"inputs={list(inputs)}")
            if any(a.ndim > 2 or (a.ndim == 2 and a.shape[1] != 1) for a in arrays):
                raise ValueError("All `HashedCrossing` inputs should have shape `()`, `(batch_size)` or "
                                 f"`(batch_size, 1)`. Received: inputs={list(inputs)}")
            shape = arrays[0].shape
            bins = cross_bins([a.reshape(-1) for a in arrays], self.num_bins).reshape(shape)
            dtype = np.dtype(keras.backend.standardize_dtype(self.dtype))
            if self.output_mode == "int":
                return bins.astype(dtype)
            rows = bins[..., 0] if bins.ndim == 2 else bins
            return np.eye(self.num_bins, dtype=dtype)[rows]

        def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            return HostTensor.of(self.call(inputs))  # a tensor, as TF's (`.numpy()`)

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(num_bins=self.num_bins, output_mode=self.output_mode, sparse=False)
            return config

    return HashedCrossing
