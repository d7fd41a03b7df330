"""`tf.lookup`: TF's hash tables (string or integer keys to values), for vocabularies in input pipelines.

TF scripts map tokens to ids with a table in a `tf.data` map (`ds.map(lambda w: table.lookup(w))`); there the
keys are host tensors and a lookup is numpy. Integer keys also look up inside compiled code (a static table is
its sorted keys and `searchsorted`); text has no compiled form, so a string table looks up on the host only.

TF 2.21's rules (observed): key dtypes must match exactly (`TypeError: Dtype of argument `keys` must be
<dtype: 'string'>, received: <dtype: 'int32'>`); Python ints are int32, floats float32; the default value takes
the value dtype; `StaticVocabularyTable` gives an unknown key the id `table size + Fingerprint64(key) %
num_oov_buckets`, an integer key hashed as its decimal text (`tf.strings.as_string`); its ids are int64.
`export` gives the entries in insertion order here (TF's follow its hash order).
"""
from __future__ import annotations

import enum
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.dtype_table import DType, as_dtype, int64, string
from jdist.tf_compat.error_types import FailedPreconditionError, InvalidArgumentError, NotFoundError
from jdist.tf_compat.farmhash import fingerprint64
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.ops import convert_to_tensor, is_jax


class TextFileIndex(enum.IntEnum):
    """`tf.lookup.TextFileIndex`: a whole line (-2) or its line number (-1) as key or value."""

    WHOLE_LINE = -2
    LINE_NUMBER = -1


def _tensor(value: Any, dtype: Any = None) -> Any:
    if dtype is None or as_dtype(dtype) == string:  # text as TF's: bytes
        return convert_to_tensor(value)
    return convert_to_tensor(value, dtype=as_dtype(dtype))


def _dtype_of(array: Any) -> DType:
    dtype = np.dtype(array.dtype)
    return string if dtype.kind in "SUO" else as_dtype(dtype)


def _entry(value: Any) -> Any:
    """A hashable key for a table entry (bytes for text, int for integers)."""
    if isinstance(value, str):
        return value.encode()
    return bytes(value) if isinstance(value, bytes) else value.item() if hasattr(value, "item") else value


def _default(value: Any, dtype: DType) -> np.ndarray:
    """`value` in the table's value dtype, with TF's error for text into numbers and the reverse."""
    array = np.asarray(value)
    inexact = array.dtype.kind == "f" and np.issubdtype(dtype.dtype, np.integer) and np.any(array != np.trunc(array))
    if (dtype == string) != (array.dtype.kind in "SUO") or inexact:
        raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {dtype.name}")
    if dtype == string:
        return np.array([_entry(v) for v in array.reshape(-1).tolist()], dtype=object).reshape(array.shape)
    return np.asarray(array, dtype=dtype.dtype)


class KeyValueTensorInitializer:
    """`tf.lookup.KeyValueTensorInitializer(keys, values, key_dtype=None, value_dtype=None)`: a table's entries."""

    def __init__(self, keys: Any, values: Any, key_dtype: Any = None, value_dtype: Any = None, name: str | None = None):
        self._keys = np.asarray(_tensor(keys, key_dtype)).reshape(-1)
        self._values = np.asarray(_tensor(values, value_dtype))
        self.key_dtype, self.value_dtype = _dtype_of(self._keys), _dtype_of(self._values)

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The keys and values, checked to match in length."""
        if len(self._keys) != len(self._values.reshape(-1)):
            raise InvalidArgumentError(None, None, f"Expected shape {list(self._keys.shape)} for value, got "
                                                   f"{list(self._values.shape)}")
        return self._keys, self._values.reshape(-1)


class TextFileInitializer:
    """`tf.lookup.TextFileInitializer`: entries from a text file, one line each; key and value are a column
    (split at `delimiter`), the whole line (`TextFileIndex.WHOLE_LINE`) or the line number (`LINE_NUMBER`)."""

    def __init__(self, filename: Any, key_dtype: Any, key_index: int, value_dtype: Any, value_index: int,
                 vocab_size: int | None = None, delimiter: str = "\t", name: str | None = None,
                 value_index_offset: int = 0):
        self.key_dtype, self.value_dtype = as_dtype(key_dtype), as_dtype(value_dtype)
        for what, index, dtype in (("key", key_index, self.key_dtype), ("value", value_index, self.value_dtype)):
            if index == TextFileIndex.LINE_NUMBER and dtype != int64:
                raise ValueError(f"`{what}_dtype` must be int64 if `{what}_index` is -1, received: {dtype}")
            if index < TextFileIndex.WHOLE_LINE:
                raise ValueError(f"`{what}_index` must be >= -2, received: {index}")
        self._filename = os.fspath(filename.decode() if isinstance(filename, bytes) else filename)
        self._key_index, self._value_index = int(key_index), int(value_index)
        self._vocab_size, self._delimiter, self._offset = vocab_size, delimiter, value_index_offset

    def _column(self, line: str, number: int, index: int, dtype: DType, offset: int = 0) -> Any:
        if index == TextFileIndex.LINE_NUMBER:
            return number + offset
        if index == TextFileIndex.WHOLE_LINE:
            text = line
        else:
            columns = line.split(self._delimiter)
            if index >= len(columns):
                raise InvalidArgumentError(None, None, f"Invalid number of columns in {self._filename} line {number} "
                                                       f"({line}) : expected at least {index + 1} got {len(columns)}")
            text = columns[index]
        if dtype == string:
            return text.encode()
        try:
            return dtype.dtype.type(text)
        except ValueError:
            raise InvalidArgumentError(None, None, f"Field {text} in line {number} is not a valid {dtype.name}."
                                       ) from None

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The file's keys and values (the first `vocab_size` lines, if given)."""
        try:
            with open(self._filename, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            raise NotFoundError(None, None, f"{self._filename}; No such file or directory") from None
        if self._vocab_size is not None:
            if len(lines) < self._vocab_size:
                raise InvalidArgumentError(None, None, f"Invalid vocab_size in {self._filename}: expected "
                                                       f"{self._vocab_size} got {len(lines)}")
            lines = lines[:self._vocab_size]
        keys = [self._column(line, i, self._key_index, self.key_dtype) for i, line in enumerate(lines)]
        values = [self._column(line, i, self._value_index, self.value_dtype, self._offset)
                  for i, line in enumerate(lines)]
        return (np.array(keys, dtype=self.key_dtype.dtype).reshape(-1),
                np.array(values, dtype=self.value_dtype.dtype).reshape(-1))


class _Table:
    """What every table has: key and value dtypes, `lookup`, `[]`, `size`, `export`, `name`."""

    key_dtype: DType
    value_dtype: DType
    _default_value: np.ndarray
    name: str | None = None

    def __init__(self) -> None:
        self._index: dict[Any, int] = {}
        self._keys: list[Any] = []
        self._values: list[Any] = []

    @property
    def default_value(self) -> Any:
        return as_tensors(self._default_value)

    def _check_keys(self, keys: Any) -> Any:
        """`keys` as a host array (TF's dtype check) or a JAX value (integer keys inside compiled code)."""
        if is_jax(keys):
            if self.key_dtype == string or not jnp.issubdtype(jnp.asarray(keys).dtype, jnp.integer):
                raise TypeError(f"Dtype of argument `keys` must be {self.key_dtype}, received: a JAX value of "
                                f"{jnp.asarray(keys).dtype}; a table of strings looks up on the host (a tf.data "
                                "map, host code), not inside compiled code: compiled code has no strings.")
            return jnp.asarray(keys)
        array = np.asarray(convert_to_tensor(keys))
        received = _dtype_of(array)
        if received != self.key_dtype:
            raise TypeError(f"Dtype of argument `keys` must be {self.key_dtype}, received: {received}")
        return array

    def _entries(self) -> tuple[np.ndarray, np.ndarray]:
        keys = np.array(self._keys, dtype=self.key_dtype.dtype).reshape(-1)
        shape = self._default_value.shape
        values = np.array(self._values, dtype=self.value_dtype.dtype).reshape((len(self._keys), *shape))
        return keys, values

    def _host_lookup(self, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        shape = self._default_value.shape
        rows = np.array([self._index.get(_entry(k), -1) for k in keys.reshape(-1)], dtype=np.int64)
        _, values = self._entries()
        out = np.empty((rows.size, *shape), dtype=values.dtype)
        found = rows >= 0
        out[found] = values[rows[found]]
        fill = np.broadcast_to(default, (*keys.shape, *shape)).reshape((rows.size, *shape))
        out[~found] = fill[~found]
        return out.reshape((*keys.shape, *shape))

    def lookup(self, keys: Any, name: str | None = None) -> Any:
        """The values of `keys` (same shape, the value dtype); the default value for keys not in the table."""
        keys = self._check_keys(keys)
        if is_jax(keys):
            return self._compiled_lookup(keys)
        return as_tensors(self._host_lookup(keys, self._default_value))

    def _compiled_lookup(self, keys: Any) -> Any:
        raise TypeError(f"{type(self).__name__} looks up on the host only (a tf.data map, host code): it changes "
                        "as it is used; pass host tensors, or use a tf.lookup.StaticHashTable in compiled code.")

    def __getitem__(self, keys: Any) -> Any:
        return self.lookup(keys)

    def size(self, name: str | None = None) -> Any:
        """The number of entries (an int64 scalar)."""
        return as_tensors(np.int64(len(self._keys)))

    def export(self, name: str | None = None) -> tuple[Any, Any]:
        """`(keys, values)` of every entry."""
        return as_tensors(self._entries())

    def _add(self, keys: np.ndarray, values: np.ndarray, replace: bool) -> None:
        for key, value in zip(keys.reshape(-1), values.reshape((keys.size, *self._default_value.shape))):
            entry = _entry(key)
            at = self._index.get(entry)
            if at is None:
                self._index[entry] = len(self._keys)
                self._keys.append(entry)
                self._values.append(value)
            elif replace:
                self._values[at] = value
            elif not np.array_equal(self._values[at], value):
                shown = key.decode() if isinstance(key, bytes) else key
                raise FailedPreconditionError(None, None, f"HashTable has different value for same key. Key {shown} "
                                                          f"has {_shown(self._values[at])} and trying to add value "
                                                          f"{_shown(value)}")


def _shown(value: Any) -> str:
    value = value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value
    return value.decode() if isinstance(value, bytes) else str(value)


class StaticHashTable(_Table):
    """`tf.lookup.StaticHashTable(initializer, default_value)`: a table filled once from its initializer."""

    def __init__(self, initializer: KeyValueTensorInitializer | TextFileInitializer, default_value: Any,
                 name: str | None = None, experimental_is_anonymous: bool = False):
        super().__init__()
        self.name, self._initializer = name, initializer
        self.key_dtype, self.value_dtype = initializer.key_dtype, initializer.value_dtype
        self._default_value = _default(default_value, self.value_dtype)
        keys, values = initializer.entries()
        self._add(keys, values, replace=False)
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def _compiled_lookup(self, keys: Any) -> Any:
        if self.value_dtype == string:
            raise TypeError("this StaticHashTable's values are strings, which compiled code has no form for: look "
                            "it up on the host (a tf.data map, host code).")
        if self._sorted is None:
            table_keys, values = self._entries()
            order = np.argsort(table_keys, kind="stable")
            self._sorted = table_keys[order], values[order]
        table_keys, values = self._sorted
        if not table_keys.size:
            return jnp.broadcast_to(jnp.asarray(self._default_value), keys.shape)
        sorted_keys = jnp.asarray(table_keys)
        at = jnp.clip(jnp.searchsorted(sorted_keys, keys), 0, table_keys.size - 1)
        return jnp.where(sorted_keys[at] == keys, jnp.asarray(values)[at], jnp.asarray(self._default_value))


class StaticVocabularyTable(_Table):
    """`tf.lookup.StaticVocabularyTable(initializer, num_oov_buckets, lookup_key_dtype=None)`: int64 ids, an
    unknown key in one of `num_oov_buckets` ids after the table's (by TF's Fingerprint64 of the key)."""

    def __init__(self, initializer: KeyValueTensorInitializer | TextFileInitializer | None, num_oov_buckets: int,
                 lookup_key_dtype: Any = None, name: str | None = None, experimental_is_anonymous: bool = False):
        super().__init__()
        if num_oov_buckets <= 0:
            raise ValueError("`num_oov_buckets` must be > 0; use StaticHashTable.")
        self.name, self._num_oov_buckets = name, int(num_oov_buckets)
        self._default_value = np.asarray(-1, np.int64)
        self.value_dtype = int64
        if initializer is not None:
            if initializer.value_dtype != int64:
                raise TypeError(f"Invalid `value_dtype`, expected {int64} but got {initializer.value_dtype}.")
            keys, values = initializer.entries()
            self._add(keys, values, replace=False)
        default_key = string if initializer is None else initializer.key_dtype
        self.key_dtype = default_key if lookup_key_dtype is None else as_dtype(lookup_key_dtype)
        if self.key_dtype != string and not np.issubdtype(self.key_dtype.dtype, np.integer):
            raise TypeError(f"Invalid `key_dtype`, expected string or integer but got {self.key_dtype}.")

    def size(self, name: str | None = None) -> Any:
        """The table's entries and the OOV buckets (int64)."""
        return as_tensors(np.int64(len(self._keys) + self._num_oov_buckets))

    def _bucket(self, key: Any) -> int:
        text = key if isinstance(key, bytes) else key.encode() if isinstance(key, str) else str(int(key)).encode()
        return len(self._keys) + fingerprint64(text) % self._num_oov_buckets

    def _host_lookup(self, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        flat = [self._index.get(_entry(k)) for k in keys.reshape(-1)]
        ids = [self._values[i].item() if i is not None else self._bucket(k) for i, k in zip(flat, keys.reshape(-1))]
        return np.array(ids, dtype=np.int64).reshape(keys.shape)

    def _compiled_lookup(self, keys: Any) -> Any:
        # hashing an unknown key is FarmHash on its text: computed on the host while the program runs
        shape = jax.ShapeDtypeStruct(keys.shape, jnp.asarray(np.int64(0)).dtype)
        return jax.pure_callback(lambda k: self._host_lookup(np.asarray(k), self._default_value).astype(shape.dtype),
                                 shape, keys)


class MutableHashTable(_Table):
    """`tf.lookup.experimental.MutableHashTable(key_dtype, value_dtype, default_value)`: `insert` (replacing),
    `remove`, `lookup` (with optional per-key `dynamic_default_values`); values may be vectors (the default's
    shape). On the host only."""

    def __init__(self, key_dtype: Any, value_dtype: Any, default_value: Any, name: str = "MutableHashTable",
                 checkpoint: bool = True, experimental_is_anonymous: bool = False):
        super().__init__()
        self.name, self.key_dtype, self.value_dtype = name, as_dtype(key_dtype), as_dtype(value_dtype)
        self._default_value = _default(default_value, self.value_dtype)

    def _converted(self, what: str, value: Any, dtype: DType) -> np.ndarray:
        if is_jax(value):
            raise TypeError(f"{type(self).__name__} changes on the host only (a tf.data map, host code), not "
                            "inside compiled code.")
        python = not isinstance(value, (np.ndarray, np.generic))  # Python values take the table's dtype, as TF's
        array = np.asarray(convert_to_tensor(value))
        if python and dtype != string and _dtype_of(array) != string:
            array = np.asarray(convert_to_tensor(value, dtype=dtype))
        if _dtype_of(array) != dtype:
            raise ValueError(f"{what}: Tensor conversion requested dtype {dtype.name} for Tensor with dtype "
                             f"{_dtype_of(array).name}")
        return array

    def _check_key(self, keys: np.ndarray) -> None:
        """Which keys a table may not hold (DenseHashTable's empty and deleted keys)."""

    def insert(self, keys: Any, values: Any, name: str | None = None) -> None:
        """Adds the entries, replacing the values of keys already in the table."""
        keys = self._converted("keys", keys, self.key_dtype)
        values = self._converted("values", values, self.value_dtype)
        expected = (*keys.shape, *self._default_value.shape)
        if values.shape != expected:
            raise InvalidArgumentError(None, None, f"Expected shape {list(expected)} for value, got "
                                                   f"{list(values.shape)}")
        self._check_key(keys)
        self._add(keys, values, replace=True)

    def remove(self, keys: Any, name: str | None = None) -> None:
        """Deletes the entries of `keys` (keys not in the table are ignored)."""
        keys = self._converted("keys", keys, self.key_dtype)
        self._check_key(keys)
        gone = {_entry(k) for k in keys.reshape(-1)}
        kept = [(k, v) for k, v in zip(self._keys, self._values) if k not in gone]
        self._keys, self._values = [k for k, _ in kept], [v for _, v in kept]
        self._index = {k: i for i, k in enumerate(self._keys)}

    def lookup(self, keys: Any, dynamic_default_values: Any = None, name: str | None = None) -> Any:
        """The values of `keys`; for missing keys `dynamic_default_values` (same shape as the result) if given,
        else the table's default value."""
        keys = self._check_keys(keys)
        if is_jax(keys):
            return self._compiled_lookup(keys)
        self._check_key(keys)
        default = self._default_value if dynamic_default_values is None else self._converted(
            "dynamic_default_values", dynamic_default_values, self.value_dtype)
        return as_tensors(self._host_lookup(keys, default))


class DenseHashTable(MutableHashTable):
    """`tf.lookup.experimental.DenseHashTable`: a `MutableHashTable` with TF's reserved `empty_key` and
    `deleted_key`, which may not be inserted, removed or looked up (`export` gives the entries, not TF's buckets)."""

    def __init__(self, key_dtype: Any, value_dtype: Any, default_value: Any, empty_key: Any, deleted_key: Any,
                 initial_num_buckets: int | None = None, name: str = "MutableDenseHashTable", checkpoint: bool = True,
                 experimental_is_anonymous: bool = False):
        super().__init__(key_dtype, value_dtype, default_value, name, checkpoint)
        self._empty, self._deleted = _entry(np.asarray(empty_key)), _entry(np.asarray(deleted_key))
        if self._empty == self._deleted:
            raise InvalidArgumentError(None, None, "Empty and deleted keys cannot be equal")

    def _check_key(self, keys: np.ndarray) -> None:
        entries = {_entry(k) for k in keys.reshape(-1)}
        for reserved, what in ((self._empty, "empty_key"), (self._deleted, "deleted_key")):
            if reserved in entries:
                raise InvalidArgumentError(None, None, f"Using the {what} as a table key is not allowed")

    def erase(self, keys: Any, name: str | None = None) -> None:
        """TF's other name for `remove`."""
        self.remove(keys, name)


NAMES = dict(KeyValueTensorInitializer=KeyValueTensorInitializer, TextFileInitializer=TextFileInitializer,
             TextFileIndex=TextFileIndex, StaticHashTable=StaticHashTable, StaticVocabularyTable=StaticVocabularyTable)
EXPERIMENTAL = dict(MutableHashTable=MutableHashTable, DenseHashTable=DenseHashTable)
