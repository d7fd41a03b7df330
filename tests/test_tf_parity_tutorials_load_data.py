"""TF's load_data tutorials (csv, numpy, pandas_dataframe, tfrecord) as TF 2.21 runs them: `Dataset.snapshot`
(`jdist.tfdata.snapshots`), `make_csv_dataset`'s OrderedDict batches ending in a prefetch, OrderedDict elements
kept through from_tensor_slices / map / batch, `tf.io.decode_csv`'s one-item-list defaults, and a
`tf.py_function`'s errors raised as tf.errors' classes.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) on this machine, on files of
the tutorials' columns.
"""
from __future__ import annotations

import collections
import gzip
import os

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import InvalidArgumentError
from jdist.tfdata.snapshots import snapshot

TITANIC = ("survived,sex,age,n_siblings_spouses,parch,fare,class,deck,embark_town,alone\n"
           "0,male,22.0,1,0,7.25,Third,unknown,Southampton,n\n"
           "1,female,38.0,1,0,71.2833,First,C,Cherbourg,n\n"
           "1,female,26.0,0,0,7.925,Third,unknown,Southampton,y\n")
TYPES = [int(), str(), float(), int(), int(), float(), str(), str(), str(), str()]  # noqa: UP018 (the tutorial's)


@pytest.fixture
def titanic(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(TITANIC)
    return str(path)


def _values(ds):
    return [int(x) for x in ds.as_numpy_iterator()]


# ---------------------------------------------------------------- Dataset.snapshot (csv.ipynb)
def test_snapshot_writes_on_the_first_pass_and_keeps_spec_and_cardinality(tmp_path):
    path = str(tmp_path / "snap")
    ds = snapshot(tf.data.Dataset.range(5).map(lambda x: x * 2), path)
    # observed in TF 2.21, Keras 3.15: repr `<_MapDataset ...>`, cardinality 5, nothing written before a pass,
    # one numbered sub-directory after it, and the same elements on every pass
    assert repr(ds) == "<_MapDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>"
    assert int(ds.cardinality()) == 5
    assert not os.path.exists(path)
    assert _values(ds) == [0, 2, 4, 6, 8]
    (sub,) = os.listdir(path)
    assert sub.isdigit()
    assert _values(ds) == [0, 2, 4, 6, 8]
    # observed: another dataset snapshotted to the same path gives its own elements
    assert _values(snapshot(tf.data.Dataset.range(3), path)) == [0, 1, 2]
    # observed: -1 for an infinite input, -2 for an unknown count
    assert int(snapshot(tf.data.Dataset.range(3).repeat(), str(tmp_path / "i")).cardinality()) == -1
    assert int(snapshot(tf.data.Dataset.range(3).filter(lambda x: x > 0), str(tmp_path / "u")).cardinality()) == -2


def test_snapshot_freezes_a_shuffle_and_survives_an_unfinished_pass(tmp_path):
    shuffled = snapshot(tf.data.Dataset.range(8).shuffle(8), str(tmp_path / "s"))
    first = _values(shuffled)
    assert sorted(first) == list(range(8))
    assert _values(shuffled) == first  # observed in TF 2.21: the second pass reads the written order
    partial = snapshot(tf.data.Dataset.range(6), str(tmp_path / "p"))
    # observed: take(2) gives [0, 1]; the next full pass gives all six, twice
    assert _values(partial.take(2)) == [0, 1]
    assert _values(partial) == list(range(6))
    assert _values(partial) == list(range(6))


def test_snapshot_of_dict_batches_gzip_and_the_experimental_form(tmp_path):
    ds = snapshot(tf.data.Dataset.from_tensor_slices({"a": [1, 2], "b": [b"x", b"y"]}).batch(2), str(tmp_path / "d"))
    # observed in TF 2.21: the input's spec (batch dimension None) and elements
    assert repr(ds.element_spec) == ("{'a': TensorSpec(shape=(None,), dtype=tf.int32, name=None), "
                                     "'b': TensorSpec(shape=(None,), dtype=tf.string, name=None)}")
    for _ in range(2):
        (batch,) = list(ds.as_numpy_iterator())
        assert batch["a"].tolist() == [1, 2] and batch["b"].tolist() == [b"x", b"y"]
    gz = snapshot(tf.data.Dataset.range(3), str(tmp_path / "g"), compression="GZIP")
    assert _values(gz) == [0, 1, 2] and _values(gz) == [0, 1, 2]  # observed: [0, 1, 2]
    applied = tf.data.Dataset.range(3).apply(tf.data.experimental.snapshot(str(tmp_path / "e")))
    assert repr(applied).startswith("<_MapDataset ")  # observed
    assert _values(applied) == [0, 1, 2]


# ---------------------------------------------------------------- make_csv_dataset, CsvDataset (csv.ipynb)
def test_make_csv_dataset_gives_ordered_dicts_and_prints_as_a_prefetch(titanic):
    ds = tf.data.experimental.make_csv_dataset(titanic, batch_size=2, label_name="survived", num_epochs=1,
                                               shuffle=False)
    features, label = next(iter(ds))
    # observed in TF 2.21: `(OrderedDict, label)` elements and spec, columns in file order, `<_PrefetchDataset`
    assert type(features) is collections.OrderedDict
    assert type(ds.element_spec[0]) is collections.OrderedDict
    assert list(features) == ["sex", "age", "n_siblings_spouses", "parch", "fare", "class", "deck", "embark_town",
                              "alone"]
    assert repr(ds).startswith("<_PrefetchDataset element_spec=(OrderedDict([('sex', TensorSpec(shape=(None,), "
                               "dtype=tf.string, name=None)), ('age', TensorSpec(shape=(None,), dtype=tf.float32")
    assert label.numpy().tolist() == [0, 1] and features["sex"].numpy().tolist() == [b"male", b"female"]
    assert int(ds.cardinality()) == -2
    plain = tf.data.experimental.make_csv_dataset(titanic, batch_size=2, num_epochs=1, shuffle=False)
    assert type(next(plain.as_numpy_iterator())) is collections.OrderedDict  # observed
    assert repr(plain.map(lambda d: d).element_spec).startswith("OrderedDict([('survived', TensorSpec(")  # observed
    assert type(plain.map(lambda d: dict(d)).element_spec) is dict  # observed


def test_make_csv_dataset_reads_gzip(tmp_path):
    path = str(tmp_path / "traffic.csv.gz")
    with gzip.open(path, "wt") as f:
        f.write("holiday,temp,traffic_volume\n" + "".join(f"None,{280 + i * 0.5},{100 + i}\n" for i in range(600)))
    ds = tf.data.experimental.make_csv_dataset(path, batch_size=256, label_name="traffic_volume", num_epochs=1,
                                               compression_type="GZIP", shuffle=False)
    assert [int(label.shape[0]) for _, label in ds] == [256, 256, 88]  # observed for 600 rows


def test_make_csv_dataset_takes_one_item_list_defaults(titanic):
    picked = tf.data.experimental.make_csv_dataset(titanic, batch_size=2, num_epochs=1, shuffle=False,
                                                   select_columns=["survived", "age"], column_defaults=[[0], [0.0]])
    # observed in TF 2.21: an OrderedDict spec of the selected columns, the defaults' dtypes
    assert repr(picked.element_spec) == ("OrderedDict([('survived', TensorSpec(shape=(None,), dtype=tf.int32, "
                                         "name=None)), ('age', TensorSpec(shape=(None,), dtype=tf.float32, "
                                         "name=None))])")
    assert next(iter(picked))["age"].numpy().tolist() == [22.0, 38.0]


def test_make_csv_dataset_reads_files_in_turn_with_num_parallel_reads(tmp_path):
    for name, rows in (("a", 3), ("b", 1), ("c", 2)):
        (tmp_path / f"{name}.csv").write_text("font,n\n" + "".join(f"{name},{i}\n" for i in range(rows)))
    pattern = str(tmp_path / "*.csv")

    def fonts(**kw):
        ds = tf.data.experimental.make_csv_dataset(pattern, batch_size=6, num_epochs=1, shuffle=False, **kw)
        return [f"{f.decode()}{n}" for f, n in zip(*(next(iter(ds))[k].numpy() for k in ("font", "n")))]
    # observed in TF 2.21: one row from each open file in turn, a finished file's slot taken by the next file,
    # first read on the slot's next turn
    assert fonts(num_parallel_reads=2) == ["a0", "b0", "a1", "a2", "c0", "c1"]
    assert fonts(num_parallel_reads=3) == ["a0", "b0", "c0", "a1", "c1", "a2"]
    assert fonts() == ["a0", "a1", "a2", "b0", "c0", "c1"]


def test_ordered_dict_elements_keep_their_type_through_slices_map_and_batch():
    od = tf.data.Dataset.from_tensor_slices(collections.OrderedDict([("b", [1, 2]), ("a", [3, 4])]))
    # observed in TF 2.21: OrderedDict spec (insertion order), elements and batches
    assert repr(od.element_spec) == ("OrderedDict([('b', TensorSpec(shape=(), dtype=tf.int32, name=None)), "
                                     "('a', TensorSpec(shape=(), dtype=tf.int32, name=None))])")
    assert type(next(iter(od))) is collections.OrderedDict
    assert type(next(iter(od.batch(2)))) is collections.OrderedDict
    assert type(next(od.map(lambda d: d).as_numpy_iterator())) is collections.OrderedDict
    assert type(next(iter(tf.data.Dataset.from_tensor_slices({"b": [1], "a": [2]})))) is dict


def test_csv_dataset_and_text_lines_decode_the_tutorial_rows(titanic):
    simple = tf.data.experimental.CsvDataset(titanic, record_defaults=TYPES, header=True)
    manual = tf.data.TextLineDataset(titanic).skip(1).map(lambda line: tf.io.decode_csv(line, TYPES))
    row = [np.int32(0), b"male", np.float32(22.0), np.int32(1), np.int32(0), np.float32(7.25), b"Third", b"unknown",
           b"Southampton", b"n"]  # observed in TF 2.21 for both readers
    for ds in (simple, manual):
        first = [e.numpy() for e in next(iter(ds))]
        assert first == row and [type(v) for v in first] == [type(v) for v in row]
    assert int(simple.cardinality()) == -2 and sum(1 for _ in simple) == 3  # observed: -2, every row
    listed = tf.data.experimental.CsvDataset(titanic, record_defaults=[[0], [""]], header=True, select_cols=[0, 1])
    assert [tuple(r) for r in listed.as_numpy_iterator()][0] == (0, b"male")  # observed
    typed = tf.data.experimental.CsvDataset(titanic, record_defaults=[tf.int32, tf.string], header=True,
                                            select_cols=[0, 1])
    assert [s.dtype for s in typed.element_spec] == [tf.int32, tf.string]  # observed


# ---------------------------------------------------------------- tf.io.decode_csv's record defaults
def test_decode_csv_takes_one_item_lists_and_empty_lists():
    out = tf.io.decode_csv(["1,,x", ",2.5,"], record_defaults=[[0], [1.5], ["d"]])
    # observed in TF 2.21: [[1, 0], [1.5, 2.5], [b'x', b'd']], int32 / float32 / string
    assert [x.numpy().tolist() for x in out] == [[1, 0], [1.5, 2.5], [b"x", b"d"]]
    assert [x.dtype for x in out] == [tf.int32, tf.float32, tf.string]
    required = tf.io.decode_csv(["1,2"], record_defaults=[[], [0]])
    assert [(x.dtype, x.numpy().tolist()) for x in required] == [(tf.float32, [1.0]), (tf.int32, [2])]  # observed
    with pytest.raises(InvalidArgumentError, match="Field 0 is required but missing in record 0!"):  # observed
        tf.io.decode_csv([",2"], record_defaults=[[], [0]])
    with pytest.raises(InvalidArgumentError, match="There should only be 1 default per field"):  # observed
        tf.io.decode_csv(["1,2"], record_defaults=[[0, 1], [0]])
    with pytest.raises(ValueError, match="Attempt to convert a value"):  # observed: a dtype is no default here
        tf.io.decode_csv(["1,2"], record_defaults=[tf.int64, [0]])
    # observed: select_cols, quotes, field_delim and na_value
    assert [x.numpy().tolist() for x in tf.io.decode_csv(["1,2,3"], [[0], [0]], select_cols=[0, 2])] == [[1], [3]]
    assert [x.numpy().tolist() for x in tf.io.decode_csv(['"a,b",2'], [[""], [0]])] == [[b"a,b"], [2]]
    assert [x.numpy().tolist() for x in tf.io.decode_csv(["a;2"], [[""], [0]], field_delim=";")] == [[b"a"], [2]]
    assert [x.numpy().tolist() for x in tf.io.decode_csv(["NA,2"], [[7], [0]], na_value="NA")] == [[7], [2]]


# ---------------------------------------------------------------- tf.py_function errors (tfrecord.ipynb)
@pytest.mark.parametrize("raised, expected", [
    (TypeError, InvalidArgumentError), (ValueError, InvalidArgumentError),
    (AttributeError, tf.errors.UnknownError), (KeyError, tf.errors.UnknownError),
    (IndexError, tf.errors.UnknownError), (StopIteration, tf.errors.OutOfRangeError)])
def test_py_function_raises_tf_error_classes(raised, expected):
    def fn(x):
        raise raised("boom")
    # observed in TF 2.21: TypeError/ValueError -> InvalidArgumentError, StopIteration -> OutOfRangeError,
    # AttributeError/KeyError/IndexError -> UnknownError (tf.errors.OpError, text naming the original)
    with pytest.raises(expected) as info:
        tf.py_function(fn, [tf.constant(1)], Tout=tf.int32)
    if expected is not tf.errors.OutOfRangeError:
        assert isinstance(info.value, tf.errors.OpError) and raised.__name__ in str(info.value)


def test_py_function_decorator_serializes_a_tutorial_example():
    @tf.py_function(Tout=tf.string)
    def serialize(f0, f2):
        feature = {"feature0": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(f0)])),
                   "feature2": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f2.numpy()]))}
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    out = serialize(False, b"goat")
    assert out.dtype == tf.string and out.shape == ()  # observed: a scalar string tensor
    parsed = tf.io.parse_single_example(out, {"feature0": tf.io.FixedLenFeature([], tf.int64, default_value=0),
                                              "feature2": tf.io.FixedLenFeature([], tf.string, default_value="")})
    assert int(parsed["feature0"]) == 0 and parsed["feature2"].numpy() == b"goat"


# ---------------------------------------------------------------- numpy's global random state (tfrecord.ipynb)
def test_importing_leaves_numpys_global_random_state_alone():
    import subprocess
    import sys

    script = ("import numpy as np; np.random.seed(0); import jdist.tf_compat as tf; "
              "print(np.random.randint(0, 5, 200)[:4].tolist(), float(np.random.randn()), sep='|')")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "KERAS_BACKEND": "jax"}).stdout.strip().splitlines()[-1]
    # observed in TF 2.21: `np.random.seed(0); import tensorflow as tf` draws as if nothing were imported
    fresh = np.random.RandomState(0)
    assert out == f"{fresh.randint(0, 5, 200)[:4].tolist()}|{float(fresh.randn())}"


# ---------------------------------------------------------------- pandas values as tensors (pandas_dataframe.ipynb)
def test_pandas_frames_and_series_convert_with_numpys_dtype():
    import pandas as pd

    frame = pd.DataFrame({"age": [63, 37], "oldpeak": [2.3, 3.5]})
    # observed in TF 2.21: numpy's dtypes (float64 for mixed int64/float64 columns, int64 for int64), not the
    # int32/float32 of Python lists
    assert tf.convert_to_tensor(frame).dtype == tf.float64
    assert tf.constant(frame).dtype == tf.float64
    assert tf.convert_to_tensor(frame["age"]).dtype == tf.int64
    assert tf.convert_to_tensor(pd.DataFrame({"a": [1, 2]})).dtype == tf.int64
    assert np.asarray(tf.convert_to_tensor(frame)).tolist() == [[63.0, 2.3], [37.0, 3.5]]
    assert tf.convert_to_tensor([1.5]).dtype == tf.float32  # a Python list still float32 (observed)


def test_text_keeps_trailing_nul_bytes():
    # observed in TF 2.21: a serialized proto ending in 0x00 (an int64 feature of 0 written last) stays whole
    assert np.asarray(tf.constant(b"a\x00")).item() == b"a\x00"
    assert np.asarray(tf.constant("x\x00")).item() == b"x\x00"
    assert np.asarray(tf.convert_to_tensor([b"a\x00", b"b"])).tolist() == [b"a\x00", b"b"]
    assert tf.py_function(lambda: b"a\x00", [], Tout=tf.string).numpy() == b"a\x00"
    example = tf.train.Example(features=tf.train.Features(feature={
        "feature0": tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))})).SerializeToString()
    assert example.endswith(b"\x00")
    parsed = tf.io.parse_single_example(tf.py_function(lambda: example, [], Tout=tf.string),
                                        {"feature0": tf.io.FixedLenFeature([], tf.int64)})
    assert int(parsed["feature0"]) == 0
