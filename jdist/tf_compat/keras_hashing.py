"""`tf.keras.layers.Hashing` on the host: values to hash bins, with Keras 3's rules on TF 2.21.

Keras 3's layer is TensorFlow ops (it raises "requires TensorFlow" without it); a `tf.data` map runs on the
host here, so this one hashes numpy text as TF does: numbers become strings first (floats truncated to ints),
then FarmHash (`to_hash_bucket_fast`) or, with a `salt`, keyed SipHash (`to_hash_bucket_strong`, an int salt
used twice), bit for bit. Observed in TF 2.21: with `mask_value` bin 0 is the mask's and the others hash into
`num_bins - 1` bins shifted by one; "int" gives int64 (the layer's dtype if given), "one_hot" a row per value,
"multi_hot" and "count" one row per sample (a vector is one sample), float32.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from jdist.tf_compat.strings import as_string, text, to_hash_bucket_fast
from jdist.tf_compat.strings_more import to_hash_bucket_strong
from jdist.tfdata.structure import HostTensor

_MODES = ("int", "one_hot", "multi_hot", "count")


def hash_bins(values: Any, num_bins: int, mask_value: Any = None, salt: list[int] | None = None) -> np.ndarray:
    """Keras's Hashing of `values` into int64 bins (see the module docstring)."""
    array = np.asarray(values)
    bins, mask = num_bins, None
    if mask_value is not None and bins > 1:
        bins -= 1
        masked = mask_value.encode() if isinstance(mask_value, str) else mask_value
        mask = np.vectorize(lambda v: (v.encode() if isinstance(v, str) else v) == masked, otypes=[bool])(array) \
            if array.size else np.zeros(array.shape, bool)
    if array.dtype.kind == "f":  # Keras casts floats to int64 first (truncating)
        array = array.astype(np.int64)
    strings = text(array) if array.dtype.kind in "SUO" else np.asarray(as_string(array), dtype=object)
    hashed = np.asarray(to_hash_bucket_fast(strings, bins) if salt is None
                        else to_hash_bucket_strong(strings, bins, salt), np.int64)
    return hashed if mask is None else np.where(mask, 0, hashed + 1)


@functools.cache
def hashing_class() -> type:
    import keras

    @keras.saving.register_keras_serializable(package="jdist")
    class Hashing(keras.layers.Layer):
        """`tf.keras.layers.Hashing` on the host (see the module docstring)."""

        def __init__(self, num_bins: int, mask_value: Any = None, salt: Any = None, output_mode: str = "int",
                     sparse: bool = False, **kwargs: Any):
            if output_mode not in _MODES:
                raise ValueError(f"Invalid value for argument `output_mode`. Expected one of {_MODES}. Received: "
                                 f"output_mode={output_mode}")
            if num_bins is None or num_bins <= 0:
                raise ValueError("The `num_bins` for `Hashing` cannot be `None` or non-positive values. Received: "
                                 f"num_bins={num_bins}.")
            if sparse:
                raise ValueError("Hashing: sparse output is not provided by jdist; take the dense output")
            if salt is not None and not isinstance(salt, int) and not (
                    isinstance(salt, (tuple, list)) and len(salt) == 2 and all(isinstance(s, int) for s in salt)):
                raise ValueError("The `salt` argument for `Hashing` can only be a tuple of size 2 integers, or a "
                                 f"single integer. Received: salt={salt}.")
            kwargs.setdefault("dtype", "int64" if output_mode == "int" else "float32")
            super().__init__(**kwargs)
            self.num_bins, self.mask_value, self.output_mode = int(num_bins), mask_value, output_mode
            self.salt = None if salt is None else [salt, salt] if isinstance(salt, int) else list(salt)

        def call(self, inputs: Any) -> np.ndarray:
            bins = hash_bins(inputs, self.num_bins, self.mask_value, self.salt)
            dtype = np.dtype(keras.backend.standardize_dtype(self.dtype))
            if self.output_mode == "int":
                return bins.astype(dtype)
            if self.output_mode == "one_hot":
                rows = bins if bins.ndim and bins.shape[-1] != 1 else bins[..., 0] if bins.ndim else bins
                return np.eye(self.num_bins, dtype=dtype)[rows]
            counts = np.zeros((*bins.shape[:-1], self.num_bins), dtype) if bins.ndim else np.zeros(self.num_bins,
                                                                                                   dtype)
            for index in np.ndindex(*bins.shape):
                counts[index[:-1] + (bins[index],)] += 1
            return counts if self.output_mode == "count" else np.minimum(counts, 1)

        def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            return HostTensor.of(self.call(inputs))  # a tensor, as TF's (`.numpy()`)

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(num_bins=self.num_bins, salt=self.salt, mask_value=self.mask_value,
                          output_mode=self.output_mode, sparse=False)
            return config

    return Hashing
