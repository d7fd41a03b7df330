"""`tf.keras.layers.TextVectorization` on the host: text to token ids, counts or tf-idf, in numpy.

Keras 3's layer is TensorFlow ops (it raises "requires TensorFlow" without it). A `tf.data` map runs on the
host here, so this one works on numpy strings, as jdist's `StringLookup` does. Its rules are Keras 3's on
TF 2.21, observed (tests/test_tf_compat_text_vectorization.py):
- standardizing lowers ASCII letters only ("ÉTÉ" is "ÉtÉ") and strips ASCII punctuation ("day-off" is
  "dayoff"); splitting is on whitespace runs; `ngrams=n` adds the 2..n-grams after the tokens, joined by " ";
- the vocabulary is the most frequent tokens first, ties in descending order;
- "int" output is ids with 0 for padding ('') and 1 for out-of-vocabulary ('[UNK]'), padded to the longest
  text or cut to `output_sequence_length`; "multi_hot", "count" and "tf_idf" have '[UNK]' at 0 and one column
  per token (`max_tokens` columns with `pad_to_max_tokens`);
- a token's idf is log(1 + documents / (1 + documents holding it)); '[UNK]''s is the mean of the others'.
"""
from __future__ import annotations

import collections
import functools
import math
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from jdist.tfdata.structure import HostTensor
from jdist.tfdata.tensor_text import token_text

_PUNCTUATION = re.compile(r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']')
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
_MODES = ("int", "multi_hot", "count", "tf_idf")


def _standardize(text: str, how: str | Callable | None) -> str:
    if how is None:
        return text
    if callable(how):
        out = how(np.asarray([text.encode()], dtype=object))
        return token_text(np.asarray(out, dtype=object).ravel()[0])
    if how not in ("lower_and_strip_punctuation", "lower", "strip_punctuation"):
        raise ValueError(f"TextVectorization: standardize {how!r} is not one of None, 'lower_and_strip_punctuation', "
                         "'lower', 'strip_punctuation' or a callable")
    if how.startswith("lower"):
        text = text.translate(_ASCII_LOWER)
    if how.endswith("punctuation"):
        text = _PUNCTUATION.sub("", text)
    return text


def _split(text: str, how: str | Callable | None) -> list[str]:
    if how is None:
        return [text]
    if callable(how):
        return [token_text(t) for t in np.asarray(how(np.asarray([text.encode()], dtype=object)), dtype=object).ravel()]
    if how == "whitespace":
        return [t for t in _WHITESPACE.split(text) if t]
    if how == "character":
        return list(text)
    raise ValueError(f"TextVectorization: split {how!r} is not one of None, 'whitespace', 'character' or a callable")


def _with_ngrams(tokens: list[str], ngrams: int | tuple | None) -> list[str]:
    if ngrams is None:
        return tokens
    sizes = range(1, ngrams + 1) if isinstance(ngrams, int) else ngrams
    return [" ".join(tokens[i:i + n]) for n in sizes for i in range(len(tokens) - n + 1)]


def _texts(data: Any) -> tuple[np.ndarray, tuple]:
    """The strings of `data` and the batch shape they give (a (N, 1) column is N texts, as in Keras)."""
    array = np.asarray(data, dtype=object)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim > 1 or any(not isinstance(t, (str, bytes)) for t in array.ravel()):
        raise TypeError("TextVectorization takes a batch of strings (str or bytes, a list or 1-D array, or an (N, 1) "
                        f"column); got shape {np.shape(data)}. Inside compiled code (strategy.run, tf.function) "
                        "strings cannot exist: vectorize in the tf.data map")
    return array, array.shape


def _batches(data: Any) -> Iterable[Any]:
    if isinstance(data, (str, bytes, list, tuple, np.ndarray)):
        return [data]
    return iter(data)  # a tf.data.Dataset (of string batches) or any iterable of batches


@functools.cache
def text_vectorization_class() -> type:
    import keras

    @keras.saving.register_keras_serializable(package="jdist")
    class TextVectorization(keras.layers.Layer):
        """`tf.keras.layers.TextVectorization` on the host (see the module docstring)."""

        def __init__(self, max_tokens: int | None = None, standardize: Any = "lower_and_strip_punctuation",
                     split: Any = "whitespace", ngrams: int | tuple | None = None, output_mode: str = "int",
                     output_sequence_length: int | None = None, pad_to_max_tokens: bool = False,
                     vocabulary: Any = None, idf_weights: Any = None, sparse: bool = False, ragged: bool = False,
                     encoding: str = "utf-8", **kwargs: Any):
            kwargs.pop("vocabulary_size", None)
            super().__init__(**kwargs)
            if output_mode not in _MODES:
                raise ValueError(f"TextVectorization: output_mode {output_mode!r} is not one of {list(_MODES)}")
            if sparse or ragged:
                raise ValueError("TextVectorization: sparse and ragged outputs are not provided by jdist; take the "
                                 "dense output (padded with 0 in 'int' mode)")
            if output_sequence_length is not None and output_mode != "int":
                raise ValueError("`output_sequence_length` must not be set if `output_mode` is not 'int'. "
                                 f"Received output_sequence_length={output_sequence_length}.")
            self.max_tokens, self.standardize, self.split, self.ngrams = max_tokens, standardize, split, ngrams
            self.output_mode, self.output_sequence_length = output_mode, output_sequence_length
            self.pad_to_max_tokens, self.encoding = pad_to_max_tokens, encoding
            self._tokens: list[str] = []
            self._idf: np.ndarray | None = None
            if vocabulary is not None:
                self.set_vocabulary(vocabulary, idf_weights)

        # --- the vocabulary ---
        def _special(self) -> list[str]:
            return ["", "[UNK]"] if self.output_mode == "int" else ["[UNK]"]

        def _tokenize(self, text: Any) -> list[str]:
            return _with_ngrams(_split(_standardize(token_text(text), self.standardize), self.split), self.ngrams)

        def adapt(self, data: Any, batch_size: int | None = None, steps: int | None = None) -> None:
            """The vocabulary (and idf weights) of `data`: strings, or a dataset of string batches."""
            counts: collections.Counter[str] = collections.Counter()
            documents: collections.Counter[str] = collections.Counter()
            total = 0
            for step, batch in enumerate(_batches(data)):
                if steps is not None and step >= steps:
                    break
                for text in _texts(batch)[0].ravel():
                    tokens = self._tokenize(text)
                    counts.update(tokens)
                    documents.update(set(tokens))
                    total += 1
            ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            limit = None if self.max_tokens is None else self.max_tokens - len(self._special())
            self._tokens = [np.str_(t) for t, _ in ranked[:limit]]  # numpy strings, as Keras's
            self._idf = np.asarray([math.log(1 + total / (1 + documents[t])) for t in self._tokens], np.float64)

        def set_vocabulary(self, vocabulary: Any, idf_weights: Any = None) -> None:
            """The tokens (a list or array, or the path of a file of one token per line, as Keras's)."""
            if isinstance(vocabulary, (str, os.PathLike)):
                if not os.path.isfile(vocabulary):
                    raise ValueError(f"TextVectorization: vocabulary {str(vocabulary)!r} is a string but no such file "
                                     "exists; give a list of tokens or the path of a file of one token per line")
                with open(vocabulary, encoding="utf-8") as file:
                    vocabulary = [line.rstrip("\n") for line in file]
            tokens = [token_text(t) for t in np.asarray(vocabulary, dtype=object).ravel()]
            self._tokens = [np.str_(t) for t in tokens if t not in self._special()]
            if self.output_mode == "tf_idf" and idf_weights is None:
                raise ValueError("TextVectorization: output_mode 'tf_idf' needs idf_weights with a vocabulary")
            weights = None if idf_weights is None else np.asarray(idf_weights, np.float64).ravel()
            self._idf = None if weights is None else weights[len(weights) - len(self._tokens):]

        def get_vocabulary(self, include_special_tokens: bool = True) -> list[str]:
            return (self._special() if include_special_tokens else []) + list(self._tokens)

        def vocabulary_size(self) -> int:
            return len(self.get_vocabulary())

        # --- vectorizing ---
        def call(self, inputs: Any) -> np.ndarray:
            texts, batch_shape = _texts(inputs)
            offset = len(self._special())
            index = {t: i + offset for i, t in enumerate(self._tokens)}
            oov = offset - 1
            ids = [[index.get(t, oov) for t in self._tokenize(text)] for text in texts.ravel()]
            if self.output_mode == "int":
                width = self.output_sequence_length or max((len(row) for row in ids), default=0)
                out = np.zeros((len(ids), width), np.int64)
                for r, row in enumerate(ids):
                    out[r, :min(len(row), width)] = row[:width]
                return out.reshape((*batch_shape, width))
            depth = self.max_tokens if self.pad_to_max_tokens and self.max_tokens else self.vocabulary_size()
            counts = np.zeros((len(ids), depth), np.int64)
            for r, row in enumerate(ids):
                np.add.at(counts[r], row, 1)
            counts = counts.reshape((*batch_shape, depth))
            if self.output_mode == "count":
                return counts
            if self.output_mode == "multi_hot":
                return np.minimum(counts, 1)
            return counts.astype(np.float32) * self._idf_row(depth).astype(np.float32)  # float32, as TF

        def _idf_row(self, depth: int) -> np.ndarray:
            if self._idf is None:
                raise ValueError("TextVectorization: output_mode 'tf_idf' needs adapt() or idf_weights first")
            row = np.zeros(depth, np.float64)
            row[1:1 + len(self._idf)] = self._idf
            row[0] = self._idf.mean() if len(self._idf) else 0.0
            return row

        def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            from jdist.tf_compat import keras_strings

            dtype = "float32" if self.output_mode == "tf_idf" else "int64"
            symbolic = keras_strings.host_output(self, inputs, self._output_shape, dtype)
            if symbolic is not None:  # on a tf.keras.Input(dtype=tf.string): recorded for a host model
                return symbolic
            return HostTensor.of(self.call(inputs))  # a tensor, as TF's (`.numpy()`)

        def _output_shape(self, shape: tuple) -> tuple:
            batch = shape[:1]
            if self.output_mode == "int":
                return (*batch, self.output_sequence_length)
            return (*batch, self.max_tokens if self.pad_to_max_tokens else self.vocabulary_size())

        def compute_output_shape(self, input_shape: tuple) -> tuple:
            return self._output_shape(tuple(input_shape))

        def get_config(self) -> dict:
            config = super().get_config()
            config.update(max_tokens=self.max_tokens, standardize=self.standardize, split=self.split,
                          ngrams=self.ngrams, output_mode=self.output_mode,
                          output_sequence_length=self.output_sequence_length,
                          pad_to_max_tokens=self.pad_to_max_tokens, encoding=self.encoding, sparse=False, ragged=False,
                          vocabulary=self.get_vocabulary(), vocabulary_size=self.vocabulary_size(),
                          idf_weights=None if self._idf is None else self._idf.tolist())
            return config

    return TextVectorization
