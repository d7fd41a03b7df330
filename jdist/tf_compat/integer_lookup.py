"""`tf.keras.layers.IntegerLookup` on the host: integers to indices (or back), with Keras 3's rules on TF 2.21.

Keras 3's layer is TensorFlow ops (it raises "requires TensorFlow" without it); a `tf.data` map runs on the
host here, so this one works on numpy, as jdist's `StringLookup` and `TextVectorization` do. Observed in TF
2.21 (tests/test_tf_compat_integer_lookup.py):
- the vocabulary is the mask token (if any), `num_oov_indices` copies of the OOV token (-1), then the tokens:
  adapted ones most frequent first, ties in descending order; a given vocabulary may start with the special
  tokens and may not repeat a token;
- an out-of-vocabulary value takes OOV index `value % num_oov_indices` (after the mask's 0);
- "one_hot", "multi_hot", "count" and "tf_idf" leave the mask token out of their columns; a tf-idf OOV
  weight is the mean of the given ones; the results are int64 (tf-idf float32).
"""
from __future__ import annotations

import collections
import functools
from typing import Any

import numpy as np

from jdist.errors import InvalidArgumentError
from jdist.tfdata.structure import HostTensor

_MODES = ("int", "one_hot", "multi_hot", "count", "tf_idf")


def _integers(data: Any) -> np.ndarray:
    array = np.asarray(data)
    if array.dtype.kind not in "iu":
        raise TypeError(f"Cannot convert {np.asarray(data).tolist()!r} to EagerTensor of dtype int64 "
                        "(IntegerLookup takes integers; cast them first)")
    return array.astype(np.int64)


@functools.cache
def integer_lookup_class() -> type:
    import keras

    @keras.saving.register_keras_serializable(package="jdist")
    class IntegerLookup(keras.layers.Layer):
        """`tf.keras.layers.IntegerLookup` on the host (see the module docstring)."""

        def __init__(self, max_tokens: int | None = None, num_oov_indices: int = 1, mask_token: int | None = None,
                     oov_token: int = -1, output_mode: str = "int", sparse: bool = False,
                     pad_to_max_tokens: bool = False, vocabulary: Any = None, vocabulary_dtype: str = "int64",
                     idf_weights: Any = None, invert: bool = False, **kwargs: Any):
            kwargs.setdefault("dtype", vocabulary_dtype)  # the layer's dtype is its tokens', as Keras's
            super().__init__(**kwargs)
            if output_mode not in _MODES:
                raise ValueError(f"IntegerLookup: output_mode {output_mode!r} is not one of {list(_MODES)}")
            if sparse:
                raise ValueError("IntegerLookup: sparse output is not provided by jdist; take the dense output")
            self.max_tokens, self.num_oov_indices, self.mask_token = max_tokens, int(num_oov_indices), mask_token
            self.oov_token, self.output_mode, self.pad_to_max_tokens = int(oov_token), output_mode, pad_to_max_tokens
            self.invert, self.vocabulary_dtype = invert, vocabulary_dtype
            self._tokens: list[int] = []
            self._idf: np.ndarray | None = None
            if vocabulary is not None:
                self.set_vocabulary(vocabulary, idf_weights)

        def _special(self) -> list[int]:
            head = [] if self.mask_token is None else [int(self.mask_token)]
            return head + [self.oov_token] * self.num_oov_indices

        def set_vocabulary(self, vocabulary: Any, idf_weights: Any = None) -> None:
            tokens = [int(t) for t in np.asarray(vocabulary).reshape(-1)]
            special = self._special()
            if tokens[:len(special)] == special:
                tokens = tokens[len(special):]
            repeated = sorted({t for t in tokens if tokens.count(t) > 1})
            if repeated:
                raise ValueError("The passed vocabulary has at least one repeated term. Please uniquify your "
                                 f"dataset. The repeated terms are: {repeated}")
            self._tokens = tokens
            self._idf = None if idf_weights is None else np.asarray(idf_weights, np.float64).reshape(-1)[-len(tokens):]

        def adapt(self, data: Any, steps: int | None = None) -> None:
            """The vocabulary of `data` (integers, or a dataset of them): most frequent first, ties descending."""
            batches = [data] if isinstance(data, (list, tuple, np.ndarray)) else data
            counts: collections.Counter[int] = collections.Counter()
            for step, batch in enumerate(batches):
                if steps is not None and step >= steps:
                    break
                counts.update(int(v) for v in _integers(batch).reshape(-1))
            for special in self._special():
                counts.pop(special, None)
            ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            limit = None if self.max_tokens is None else self.max_tokens - len(self._special())
            self._tokens = [t for t, _ in ranked[:limit]]

        def get_vocabulary(self, include_special_tokens: bool = True) -> list[int]:
            return (self._special() if include_special_tokens else []) + list(self._tokens)

        def vocabulary_size(self) -> int:
            return len(self.get_vocabulary())

        def call(self, inputs: Any) -> np.ndarray:
            values = _integers(inputs)
            if self.invert:
                return np.asarray(self.get_vocabulary(), np.int64)[values]
            masked = self.mask_token is not None
            first = len(self._special())
            index = {t: i + first for i, t in enumerate(self._tokens)}
            flat = values.reshape(-1)
            ids = np.empty(flat.shape, np.int64)
            for i, v in enumerate(flat.tolist()):
                if masked and v == self.mask_token:
                    ids[i] = 0
                elif v in index:
                    ids[i] = index[v]
                elif self.num_oov_indices == 0:
                    raise InvalidArgumentError(None, None, "When `num_oov_indices=0` all inputs should be in "
                                               f"vocabulary, found OOV values {v}")
                else:
                    ids[i] = masked + v % self.num_oov_indices
            ids = ids.reshape(values.shape)
            return ids if self.output_mode == "int" else self._encode(ids, masked)

        def _encode(self, ids: np.ndarray, masked: bool) -> np.ndarray:
            """The column encodings: the mask token has no column (its rows are zeros)."""
            depth = self.max_tokens if self.pad_to_max_tokens and self.max_tokens else self.vocabulary_size() - masked
            shifted = ids - masked
            hot = np.zeros((*ids.shape, depth), np.int64)
            np.put_along_axis(hot, np.maximum(shifted, 0)[..., None], (shifted >= 0)[..., None].astype(np.int64), -1)
            if self.output_mode == "one_hot":
                return hot
            counts = hot.sum(axis=-2) if ids.ndim else hot
            if self.output_mode == "count":
                return counts
            if self.output_mode == "multi_hot":
                return np.minimum(counts, 1)
            if self._idf is None:
                raise ValueError("IntegerLookup: output_mode 'tf_idf' needs idf_weights with the vocabulary")
            weights = np.zeros(depth, np.float64)
            oov = self.num_oov_indices
            weights[oov:oov + len(self._idf)] = self._idf
            weights[:oov] = self._idf.mean() if len(self._idf) else 0.0
            return counts.astype(np.float32) * weights.astype(np.float32)

        def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            return HostTensor.of(self.call(inputs))  # a tensor, as TF's (`.numpy()`)

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(max_tokens=self.max_tokens, num_oov_indices=self.num_oov_indices,
                          mask_token=self.mask_token, oov_token=self.oov_token, output_mode=self.output_mode,
                          sparse=False, pad_to_max_tokens=self.pad_to_max_tokens, vocabulary=self.get_vocabulary(),
                          vocabulary_dtype=self.vocabulary_dtype, invert=self.invert,
                          idf_weights=None if self._idf is None else self._idf.tolist())
            return config

    return IntegerLookup
