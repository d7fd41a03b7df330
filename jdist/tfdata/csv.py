"""`tf.data.experimental.CsvDataset`, `make_csv_dataset` and `tf.io.decode_csv`: CSV records as tensors.

As TF 2.21 (observed, tests/test_tfdata_experimental.py): a field is parsed by its column's record default
(an int32/int64, float32/float64 or string value: the type and the value for an empty field or one equal to
`na_value`; a dtype alone: the field is required); quotes follow RFC 4180 (`"y,z"`, `""` for a quote).
`make_csv_dataset` reads the column names from the header, infers each column's type from the first
`num_rows_for_inference` rows (int32, int64 past int32's range, float32, else string; a column with no value is
string; the defaults 0, 0.0, b""), shuffles and repeats the rows (forever for `num_epochs=None`) and batches
them into an OrderedDict of feature columns in file order, or `(features, label)` with `label_name`; with
`num_parallel_reads` > 1 it reads that many files in turn, a row from each. `decode_csv` takes `[0]`-style defaults.
"""
from __future__ import annotations

import collections
import csv
import glob
import io
import itertools
from typing import Any, Iterator, Sequence

import numpy as np

from jdist.tfdata import combinators, structure
from jdist.tfdata._iterators import Generated
from jdist.tfdata.dataset import Dataset
from jdist.tfdata.options import UNKNOWN
from jdist.tfdata.text_line import _lines, _paths

_REQUIRED = object()


def _column(default: Any) -> tuple[np.dtype, Any]:
    """A record default as (dtype, value or _REQUIRED): a value gives both, a dtype makes the field required."""
    dtype = getattr(default, "as_numpy_dtype", None)
    if dtype is not None or isinstance(default, (type, np.dtype)):
        kind = np.dtype(dtype if dtype is not None else default)
        return (np.dtype(object) if kind.kind in "OSU" else kind), _REQUIRED
    value = structure.to_leaf(default)
    if np.ndim(value) == 1 and np.size(value) == 0:  # TF's empty tensor of a dtype: a required field
        return (np.dtype(object) if value.dtype.kind in "OSU" else value.dtype), _REQUIRED
    if np.ndim(value) == 1 and np.size(value) == 1:  # TF's `[0]`, `[0.0]`, `[""]`: the value of a one-item list
        value = np.asarray(value).reshape(())
    if np.ndim(value) == 1:
        from jdist.errors import InvalidArgumentError

        raise InvalidArgumentError(None, None, f"There should only be 1 default per field but field has "
                                               f"{np.size(value)} ({default!r}: give one value, as `[0]`)")
    if np.ndim(value) != 0:
        raise ValueError(f"record_defaults: each default must be a scalar, a one-item list or a dtype; got "
                         f"{default!r}")
    dtype = np.asarray(value).dtype
    if dtype.kind in "OSU":
        return np.dtype(object), bytes(np.asarray(value).item())
    if dtype.kind not in "iuf":
        raise TypeError(f"record_defaults: a column must be int32, int64, float32, float64 or string; got {dtype}")
    return dtype, dtype.type(np.asarray(value).item())


def _parse(fields: list[str], columns: list[tuple[np.dtype, Any]], na_value: str, where: str) -> tuple:
    """The fields of one record as numpy scalars of their columns' types."""
    out = []
    for i, (text, (dtype, default)) in enumerate(zip(fields, columns)):
        if text == "" or text == na_value:
            if default is _REQUIRED:
                from jdist.errors import InvalidArgumentError

                raise InvalidArgumentError(None, None, f"Field {i} is required but missing in record{where}!")
            out.append(default)
            continue
        if dtype.kind == "O":
            out.append(text.encode())
            continue
        try:
            number = int(text) if dtype.kind in "iu" else float(text)
            if dtype.kind in "iu" and not np.iinfo(dtype).min <= number <= np.iinfo(dtype).max:
                raise ValueError(text)
        except ValueError:
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, f"Field {i} in record{where} is not a valid "
                                                   f"{dtype.name}: {text}") from None
        out.append(dtype.type(number))
    return tuple(out)


def _split(line: str, field_delim: str, use_quote_delim: bool) -> list[str]:
    reader = csv.reader(io.StringIO(line), delimiter=field_delim,
                        quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE)
    return next(reader, [""])


def _chosen(count: int, select_cols: Sequence[int] | None, exclude_cols: Sequence[int] | None) -> list[int]:
    if select_cols is not None and exclude_cols is not None:
        raise ValueError("Either select_cols or exclude_cols should be empty")
    if select_cols is not None:
        return [int(c) for c in select_cols]
    skip = {int(c) for c in exclude_cols or ()}
    return [c for c in range(count + len(skip)) if c not in skip]


def CsvDataset(filenames: Any, record_defaults: Sequence[Any], compression_type: str | None = None,  # noqa: N802
               buffer_size: int | None = None, header: bool = False, field_delim: str = ",",
               use_quote_delim: bool = True, na_value: str = "", select_cols: Sequence[int] | None = None,
               exclude_cols: Sequence[int] | None = None, encoding: str = "utf-8") -> Dataset:
    """One tuple of scalars per CSV line (the header line of each file skipped with `header=True`); a
    bad or missing required field fails the pass with InvalidArgumentError, as TF's."""
    columns = [_column(d) for d in record_defaults]
    paths = _paths(filenames)
    picked = _chosen(len(columns), select_cols, exclude_cols)
    if len(picked) != len(columns):
        raise ValueError(f"CsvDataset: {len(picked)} columns are selected but record_defaults has {len(columns)}")

    def rows() -> Iterator[tuple]:
        for path in paths:
            lines = _lines(path, compression_type or None)
            if header:
                next(lines, None)
            for line in lines:
                fields = _split(line.decode(encoding), field_delim, use_quote_delim)
                if select_cols is None and exclude_cols is None and len(fields) != len(columns):
                    from jdist.errors import InvalidArgumentError

                    raise InvalidArgumentError(None, None, f"Expect {len(columns)} fields but have {len(fields)} "
                                                           "in record")
                if max(picked) >= len(fields):
                    from jdist.errors import InvalidArgumentError

                    raise InvalidArgumentError(None, None, f"Expect {max(picked) + 1} fields but have "
                                                           f"{len(fields)} in record")
                yield _parse([fields[c] for c in picked], columns, na_value, "")

    spec = tuple(structure.TensorSpec((), dtype) for dtype, _ in columns)
    return Dataset(lambda key: Generated(rows), UNKNOWN, lambda: spec, kind="CsvDatasetV2")


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",", use_quote_delim: bool = True,
               na_value: str = "", select_cols: Sequence[int] | None = None, name: str | None = None) -> list:
    """`tf.io.decode_csv`: a list of tensors, one per column, each of `records`' shape. A default is a value
    (`0`, `[0]`) or an empty list (`[]`, a required float32 field); a dtype is TF's ValueError (CsvDataset's only)."""
    for d in record_defaults:
        if getattr(d, "as_numpy_dtype", None) is not None or isinstance(d, (type, np.dtype)):
            raise ValueError(f"Attempt to convert a value ({d!r}) with an unsupported type ({type(d)}) to a Tensor. "
                             "(decode_csv: give a default value, as `[0]`, or `[]` for a required field)")
    columns = [_column(d) for d in record_defaults]
    lines = np.asarray(structure.to_leaf(records), dtype=object)
    picked = _chosen(len(columns), select_cols, None)
    parsed = []
    for r, line in enumerate(lines.reshape(-1)):
        text = line.decode() if isinstance(line, bytes) else str(line)
        fields = _split(text, field_delim, use_quote_delim)
        if (select_cols is None and len(fields) != len(columns)) or max(picked) >= len(fields):
            from jdist.errors import InvalidArgumentError

            raise InvalidArgumentError(None, None, f"Expect {len(columns)} fields but have {len(fields)} in "
                                                   f"record {r}")
        parsed.append(_parse([fields[c] for c in picked], columns, na_value, f" {r}"))
    return [structure.HostTensor.of(np.array([p[i] for p in parsed], dtype=dtype).reshape(lines.shape))
            for i, (dtype, _) in enumerate(columns)]


def _inferred(values: list[str], na_value: str) -> Any:
    """TF's inferred default of a column from its first values: 0 (int32 / int64), 0.0 (float32), or b""."""
    rank = 0  # 0 int32, 1 int64, 2 float32, 3 string
    for text in values:
        if text == "" or text == na_value:
            continue
        try:
            number = int(text)
            rank = max(rank, 0 if -2**31 <= number < 2**31 else 1)
        except ValueError:
            try:
                float(text)
                rank = max(rank, 2)
            except ValueError:
                return b""
    if all(text == "" or text == na_value for text in values):
        return b""
    return (np.int32(0), np.int64(0), np.float32(0.0))[rank]


def _cycled(files: list[Dataset], cycle: int, like: Dataset) -> Dataset:
    """TF's `num_parallel_reads` (observed in TF 2.21): `cycle` files read at once, one row from each in turn; a
    finished file's slot goes to the next file, read from on the slot's next turn."""
    def rows(key: tuple) -> Iterator[tuple]:
        pending = iter(files)
        slots = [f._elements(key) for f in itertools.islice(pending, cycle)]
        while slots:
            i = 0
            while i < len(slots):
                row = next(slots[i], None)
                if row is None:
                    successor = next(pending, None)
                    if successor is None:
                        slots.pop(i)
                    else:  # the next file takes the slot, and is first read on the slot's next turn
                        slots[i] = successor._elements(key)
                        i += 1
                    continue
                yield row
                i += 1
    return like._derive(lambda key: Generated(lambda: rows(key)), UNKNOWN, lambda: like.element_spec, "CsvDatasetV2")


def make_csv_dataset(file_pattern: Any, batch_size: int, column_names: Sequence[str] | None = None,
                     column_defaults: Sequence[Any] | None = None, label_name: str | None = None,
                     select_columns: Sequence[Any] | None = None, field_delim: str = ",",
                     use_quote_delim: bool = True, na_value: str = "", header: bool = True,
                     num_epochs: int | None = None, shuffle: bool = True, shuffle_buffer_size: int = 10000,
                     shuffle_seed: int | None = None, prefetch_buffer_size: int | None = None,
                     num_parallel_reads: int | None = None, sloppy: bool = False,
                     num_rows_for_inference: int = 100, compression_type: str | None = None,
                     ignore_errors: bool = False, encoding: str = "utf-8") -> Dataset:
    """Batches of CSV rows as a dict of feature columns (or `(features, label)` with `label_name`)."""
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes)) else list(file_pattern)
    paths = sorted({p for pattern in patterns for p in glob.glob(pattern.decode() if isinstance(pattern, bytes)
                                                                   else str(pattern))})
    if not paths:
        raise ValueError(f"make_csv_dataset: no file matches {file_pattern!r}")
    compression = compression_type or None
    if column_names is None:
        if not header:
            raise ValueError("Expected `column_names` or `header` arguments. Neither is provided.")
        first = next(_lines(paths[0], compression), b"").decode(encoding)
        column_names = _split(first, field_delim, use_quote_delim)
    names = list(column_names)
    if len(set(names)) != len(names):
        raise ValueError("Cannot have duplicate column names.")
    picked = list(range(len(names)))
    if select_columns is not None:
        by_name = all(isinstance(c, str) for c in select_columns)
        for c in select_columns:
            if (by_name and c not in names) or (not by_name and not 0 <= int(c) < len(names)):
                raise ValueError(f"Column {c} specified in `select_columns` must be of one of the columns: "
                                 f"{ {n: None for n in names}.keys() }.")
        wanted = {names.index(c) if by_name else int(c) for c in select_columns}
        picked = sorted(wanted)
    chosen = [names[c] for c in picked]
    if label_name is not None and label_name not in chosen:
        raise ValueError(f"`label_name` provided must be one of the columns: {chosen}. Received: {label_name}.")
    if column_defaults is None:
        samples: list[list[str]] = [[] for _ in picked]
        for path in paths:
            lines = _lines(path, compression)
            if header:
                next(lines, None)
            for line in lines:
                if len(samples[0]) >= num_rows_for_inference:
                    break
                fields = _split(line.decode(encoding), field_delim, use_quote_delim)
                for column, c in zip(samples, picked):
                    column.append(fields[c] if c < len(fields) else "")
        column_defaults = [_inferred(values, na_value) for values in samples]
    elif len(column_defaults) != len(picked):
        raise ValueError(f"make_csv_dataset: column_defaults has {len(column_defaults)} entries for "
                         f"{len(picked)} columns")

    def read(files: list[str]) -> Dataset:
        return CsvDataset(files, column_defaults, compression, header=header, field_delim=field_delim,
                          use_quote_delim=use_quote_delim, na_value=na_value, select_cols=picked, encoding=encoding)
    rows = read(paths)
    if (num_parallel_reads or 1) > 1 and len(paths) > 1:
        rows = _cycled([read([p]) for p in paths], int(num_parallel_reads or 1), rows)
    if ignore_errors:
        rows = combinators.ignore_errors(rows)
    if shuffle:
        rows = rows.shuffle(shuffle_buffer_size, shuffle_seed)
    rows = rows.repeat(num_epochs).batch(batch_size, drop_remainder=num_epochs is None)

    def features(*columns: Any) -> Any:
        out = collections.OrderedDict(zip(chosen, columns))  # TF 2.21's element type (observed)
        if label_name is None:
            return out
        label = out.pop(label_name)
        return out, label
    return rows.map(features).prefetch(-1)  # TF's pipeline ends in a prefetch: `<_PrefetchDataset ...>`
