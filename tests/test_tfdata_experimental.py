"""`tf.data.experimental`, `tf.data.Iterator` / `NumpyIterator` / `IteratorSpec` / `DatasetSpec`, the options
classes, `tf.experimental.Optional`, and the CSV readers (jdist.tfdata.experimental, iterator, spec, csv).

Every expected value marked "observed" was printed by TF 2.21 (tensorflow-cpu 2.21.0) for the same pipeline.
"""
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import FailedPreconditionError, InvalidArgumentError

D = tf.data.Dataset
E = tf.data.experimental
CSV_DIR = Path("/nonexistent")  # the `csv_dir` fixture's folder while a test runs


def _values(x) -> Any:
    """An element as plain Python values (bytes for strings), structure kept."""
    if isinstance(x, dict):
        return {k: _values(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_values(v) for v in x)
    v = np.asarray(x)
    return v.tolist() if v.dtype.kind != "O" or v.ndim else v.item()


def _all(dataset):
    return [_values(x) for x in dataset]


def _raises_on_zero(x):
    if float(x) == 0.0:
        raise ValueError("division by zero")
    return 1.0 / x


# ---------------------------------------------------------------- `apply` forms, TF 2.21's outputs (observed)
CASES = {
    "unbatch": (lambda: D.range(6).batch(4).apply(E.unbatch()), [0, 1, 2, 3, 4, 5]),
    "enumerate_dataset": (lambda: D.from_tensor_slices([7, 8]).apply(E.enumerate_dataset(start=5)), [(5, 7), (6, 8)]),
    "ignore_errors": (lambda: D.from_tensor_slices(np.array([1.0, 0.0, 2.0], np.float32)).map(_raises_on_zero)
                      .apply(E.ignore_errors()), [1.0, 0.5]),
    "map_and_batch": (lambda: D.range(6).apply(E.map_and_batch(lambda x: x * 2, 4)), [[0, 2, 4, 6], [8, 10]]),
    "map_and_batch_drop": (lambda: D.range(6).apply(E.map_and_batch(lambda x: x * 2, 4, drop_remainder=True)),
                           [[0, 2, 4, 6]]),
    "parallel_interleave": (lambda: D.range(1, 4).apply(E.parallel_interleave(
        lambda x: D.from_tensors(x).repeat(3), cycle_length=2, block_length=2)), [1, 1, 2, 2, 1, 2, 3, 3, 3]),
    "parallel_interleave_block1": (lambda: D.range(1, 4).apply(E.parallel_interleave(
        lambda x: D.from_tensors(x).repeat(3), cycle_length=2)), [1, 2, 1, 2, 1, 2, 3, 3, 3]),
    "scan": (lambda: D.range(6).apply(E.scan(np.int64(0), lambda s, x: (s + x, s * 10))), [0, 0, 10, 30, 60, 100]),
    "take_while": (lambda: D.range(6).apply(E.take_while(lambda x: x < 3)), [0, 1, 2]),
    "unique": (lambda: D.from_tensor_slices([1, 2, 1, 3, 2]).apply(E.unique()), [1, 2, 3]),
    "counter": (lambda: E.Counter().take(3), [0, 1, 2]),
    "counter_int32": (lambda: E.Counter(2, 3, tf.int32).take(3), [2, 5, 8]),
    "from_list": (lambda: E.from_list([(1, "a"), (2, "b")]), [(1, b"a"), (2, b"b")]),
    "from_list_lengths_differ": (lambda: E.from_list([[1, 2], [3]]), [[1, 2], [3]]),
    "choose": (lambda: E.choose_from_datasets(
        [D.from_tensors("a").repeat(), D.from_tensors("b").repeat()],
        D.from_tensor_slices(np.array([0, 1, 1, 0], np.int64))), [b"a", b"b", b"b", b"a"]),
    "choose_skips_empty": (lambda: E.choose_from_datasets(  # experimental's default: stop_on_empty_dataset=False
        [D.range(2), D.range(10, 13)], D.from_tensor_slices(np.array([0, 0, 0, 1], np.int64))), [0, 1, 10]),
    "group_by_window": (lambda: D.range(10).apply(E.group_by_window(lambda x: x % 2, lambda k, w: w.batch(3),
                                                                    window_size=3)),
                        [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]),
    "bucket_by_sequence_length": (lambda: D.from_generator(
        lambda: (np.ones(n, np.int32) for n in [1, 3, 2, 5, 4, 1]),
        output_signature=tf.TensorSpec([None], tf.int32)).apply(
            E.bucket_by_sequence_length(lambda x: len(x), [3], [2, 2])),
        [[[1, 0], [1, 1]], [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], [[1]], [[1, 1, 1, 1]]]),
    "group_by_reducer_sum": (lambda: D.range(10).apply(E.group_by_reducer(
        lambda x: x % 3, E.Reducer(lambda k: np.int64(0), lambda s, x: s + x, lambda s: s))), [18, 12, 15]),
    "group_by_reducer_keys_ascending": (lambda: D.from_tensor_slices(np.array([5, 3, 5, 1, 3, 5, 7], np.int64)).apply(
        E.group_by_reducer(lambda x: x, E.Reducer(lambda k: (k, np.int64(0)), lambda s, x: (s[0], s[1] + 1),
                                                  lambda k, n: {"key": k, "n": n}))),
        [{"key": 1, "n": 1}, {"key": 3, "n": 2}, {"key": 5, "n": 3}, {"key": 7, "n": 1}]),
    "pad_to_cardinality": (lambda: D.range(10).take(2).map(lambda x: {"x": x}).apply(E.pad_to_cardinality(4)),
                           [{"x": 0, "valid": True}, {"x": 1, "valid": True}, {"x": 0, "valid": False},
                            {"x": 0, "valid": False}]),
    "pad_to_cardinality_strings": (lambda: D.from_tensor_slices({"s": ["a", "b"], "f": [1.5, 2.5]}).apply(
        E.pad_to_cardinality(3)), [{"s": b"a", "f": 1.5, "valid": True}, {"s": b"b", "f": 2.5, "valid": True},
                                   {"s": b"", "f": 0.0, "valid": False}]),
    "copy_to_device": (lambda: D.range(2).apply(E.copy_to_device("/cpu:0")), [0, 1]),
    "prefetch_to_device": (lambda: D.range(2).apply(E.prefetch_to_device("/gpu:0")), [0, 1]),
    "dense_to_ragged_batch_uniform": (lambda: D.from_tensor_slices(np.array([[1, 2], [3, 4], [5, 6]], np.int32))
                                      .apply(E.dense_to_ragged_batch(2)), [[[1, 2], [3, 4]], [[5, 6]]]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_experimental_transformations_give_tf_elements(name):
    make, expected = CASES[name]
    assert _all(make()) == expected  # observed, TF 2.21


# observed, TF 2.21: the cardinality of each (-1 infinite, -2 unknown).
CARDINALITIES = {
    "map_and_batch": (lambda: D.range(6).apply(E.map_and_batch(lambda x: x * 2, 4)), 2),
    "enumerate_dataset": (lambda: D.range(6).apply(E.enumerate_dataset()), 6),
    "scan": (lambda: D.range(5).apply(E.scan(np.int64(0), lambda s, x: (s, x))), 5),
    "ignore_errors": (lambda: D.range(6).apply(E.ignore_errors()), -2),
    "take_while": (lambda: D.range(6).apply(E.take_while(lambda x: x < 2)), -2),
    "parallel_interleave": (lambda: D.range(6).apply(E.parallel_interleave(lambda x: D.range(x), 2)), -2),
    "shuffle_and_repeat_forever": (lambda: D.range(6).apply(E.shuffle_and_repeat(2)), -1),
    "shuffle_and_repeat_twice": (lambda: D.range(6).apply(E.shuffle_and_repeat(3, 2, seed=1)), 12),
    "counter": (lambda: E.Counter(), -1),
    "sample_infinite": (lambda: E.sample_from_datasets([D.range(3).repeat(), D.range(3)]), -1),
    "sample_finite": (lambda: E.sample_from_datasets([D.range(3), D.range(3)], stop_on_empty_dataset=True), -2),
    "choose_infinite": (lambda: E.choose_from_datasets([D.range(3).repeat(), D.range(3).repeat()],
                                                       D.from_tensor_slices(np.array([0, 1], np.int64))), -1),
    "choose_finite": (lambda: E.choose_from_datasets([D.range(3), D.range(3)],
                                                     D.from_tensor_slices(np.array([0, 1], np.int64)).repeat()), -2),
    "random": (lambda: E.RandomDataset(seed=1), -1),
    "assert_cardinality_known": (lambda: D.range(6).apply(E.assert_cardinality(6)), 6),
    "assert_cardinality_unknown": (lambda: D.range(6).filter(lambda x: True).apply(E.assert_cardinality(6)), 6),
    "group_by_reducer": (lambda: D.range(3).apply(E.group_by_reducer(
        lambda x: x, E.Reducer(lambda k: np.int64(0), lambda s, x: s + x, lambda s: s))), -2),
    "pad_to_cardinality": (lambda: D.range(3).map(lambda x: {"x": x}).apply(E.pad_to_cardinality(3)), 3),
    "csv_finite": (lambda: E.CsvDataset(str(CSV_DIR / "f.csv"), [0, 0.0, "n", 0], header=True), -2),
}


@pytest.mark.parametrize("name", list(CARDINALITIES))
def test_experimental_cardinalities_are_tfs(name, csv_dir):
    make, expected = CARDINALITIES[name]
    assert int(E.cardinality(make())) == expected  # observed, TF 2.21


def test_specs_of_sources_are_tfs():
    # observed, TF 2.21: TensorSpec(shape=(), dtype=tf.int64) / tf.int32; from_list: (int32, string)
    assert repr(E.Counter().element_spec) == "TensorSpec(shape=(), dtype=tf.int64, name=None)"
    assert repr(E.Counter(2, 3, tf.int32).element_spec) == "TensorSpec(shape=(), dtype=tf.int32, name=None)"
    assert repr(E.RandomDataset(seed=1).element_spec) == "TensorSpec(shape=(), dtype=tf.int64, name=None)"
    assert repr(E.from_list([(1, "a"), (2, "b")]).element_spec) == (
        "(TensorSpec(shape=(), dtype=tf.int32, name=None), TensorSpec(shape=(), dtype=tf.string, name=None))")
    assert repr(E.from_list([[1, 2], [3]]).element_spec) == "TensorSpec(shape=(None,), dtype=tf.int32, name=None)"
    assert int(E.from_list([[1, 2], [3]]).cardinality()) == 2
    padded = D.from_tensor_slices({"a": [1, 2], "b": [[1.0, 2.0], [3.0, 4.0]]}).apply(E.pad_to_cardinality(4))
    assert repr(padded.element_spec) == (
        "{'a': TensorSpec(shape=(), dtype=tf.int32, name=None), 'b': TensorSpec(shape=(2,), dtype=tf.float32, "
        "name=None), 'valid': TensorSpec(shape=(), dtype=tf.bool, name=None)}")
    assert E.get_structure(D.range(2)) == D.range(2).element_spec
    assert int(E.get_single_element(D.from_tensors(3))) == 3
    random = [int(x) for x in E.RandomDataset(seed=1).take(3)]
    assert random == [int(x) for x in E.RandomDataset(seed=1).take(3)] and len(set(random)) == 3


def test_shuffle_and_repeat_is_shuffle_then_repeat():
    # observed, TF 2.21: shuffle_and_repeat(6, count=2, seed=3) gives what shuffle(6, seed=3).repeat(2) gives
    fused = _all(D.range(6).apply(E.shuffle_and_repeat(6, count=2, seed=3)))
    assert fused == _all(D.range(6).shuffle(6, seed=3).repeat(2))
    assert sorted(fused[:6]) == sorted(fused[6:]) == list(range(6)) and fused[:6] != fused[6:]
    drawn = _all(E.sample_from_datasets([D.range(3), D.range(10, 13)], seed=1))
    assert sorted(drawn) == [0, 1, 2, 10, 11, 12]  # observed, TF 2.21 (its order is its own draws)


@pytest.mark.parametrize("expected, message", [
    (4, "Input dataset was expected to contain 4 elements but contained at least 5 elements."),
    (8, "Input dataset was expected to contain 8 elements but contained only 6 elements."),
])
def test_assert_cardinality_fails_the_pass_as_tf(expected, message):
    ds = D.range(6).filter(lambda x: True).apply(E.assert_cardinality(expected))  # no error until read (TF too)
    with pytest.raises(FailedPreconditionError) as info:
        _all(ds)
    assert str(info.value) == message  # observed, TF 2.21


@pytest.mark.parametrize("make, error, message", [
    (lambda: D.range(3).apply(E.pad_to_cardinality(5)), ValueError,
     "`pad_to_cardinality` requires its input dataset to be a dictionary."),
    (lambda: D.range(10).take(5).map(lambda x: {"x": x}).apply(E.pad_to_cardinality(3)), ValueError,
     "The dataset passed into `pad_to_cardinality` must have a cardinalty less than the target cardinality (3), "
     "but has cardinality 5"),
    (lambda: D.range(10).filter(lambda x: True).map(lambda x: {"x": x}).apply(E.pad_to_cardinality(3)), ValueError,
     "The dataset passed into `pad_to_cardinality` must have a known cardinalty, but has cardinality -2"),
    (lambda: E.from_list([]), ValueError, "Invalid `elements`. `elements` should not be empty. If you want an empty "
                                          "dataset, use `tf.data.Dataset.range(0)`."),
    (lambda: E.choose_from_datasets([D.range(2)], D.from_tensor_slices(np.array([0, 0], np.int32))), TypeError,
     "Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` tensors but are "
     "TensorSpec(shape=(), dtype=tf.int32, name=None)."),
    (lambda: E.get_single_element(D.range(2)), InvalidArgumentError, "Dataset had more than one element."),
])
def test_experimental_errors_are_tfs(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert str(info.value) == message  # observed, TF 2.21


def test_from_list_mixed_items_ragged_batches_and_missing_names_are_refused_clearly():
    with pytest.raises(AttributeError, match="tf.data.experimental.rejection_resample.*docs/tf_mapping.md"):
        E.rejection_resample  # noqa: B018
    with pytest.raises(TypeError, match="one structure and dtype"):  # TF 2.21: an internal AttributeError
        E.from_list([1, "a"])
    varying = D.from_generator(lambda: (np.ones(n, np.int32) for n in [1, 2]),
                               output_signature=tf.TensorSpec([None], tf.int32))
    # TF 2.21 (observed): rows of varying length batch into a RaggedTensor (tests/test_tf_parity_tfdata_ragged.py)
    assert str(next(iter(varying.apply(E.dense_to_ragged_batch(2))))) == "<tf.RaggedTensor [[1], [1, 1]]>"


# ---------------------------------------------------------------- iterators, optionals, specs
def test_iterator_types_get_next_and_optional_as_tf():
    it = iter(D.range(3))
    # observed, TF 2.21: isinstance(iter(ds), tf.data.Iterator) True, iter([]) False; get_next_as_optional takes one
    assert isinstance(it, tf.data.Iterator) and not isinstance(iter([]), tf.data.Iterator)
    first = it.get_next_as_optional()
    assert bool(first.has_value()) and int(first.get_value()) == 0
    assert repr(first.element_spec) == "TensorSpec(shape=(), dtype=tf.int64, name=None)"
    assert int(it.get_next()) == 1 and int(next(it)) == 2
    assert repr(it.element_spec) == "TensorSpec(shape=(), dtype=tf.int64, name=None)"
    assert repr(tf.data.IteratorSpec.from_value(it)) == "IteratorSpec(TensorSpec(shape=(), dtype=tf.int64, name=None),)"
    empty = E.get_next_as_optional(it)
    assert empty.has_value().numpy() is np.False_ and isinstance(empty, E.Optional)
    with pytest.raises(InvalidArgumentError, match="^The given optional does not have a value.$"):
        empty.get_value()
    with pytest.raises(StopIteration):  # TF's OutOfRangeError (jdist's is StopIteration)
        it.get_next()
    numpy_it = D.range(2).as_numpy_iterator()
    assert isinstance(numpy_it, tf.data.NumpyIterator) and list(numpy_it) == [0, 1]
    assert type(list(D.range(1).as_numpy_iterator())[0]) is np.int64  # observed, TF 2.21: [np.int64(0), ...]


def test_optional_from_value_and_empty():
    opt = E.Optional.from_value((1, 2.0))
    # observed, TF 2.21: has_value True, values (int32 1, float32 2.0), specs (int32, float32)
    assert bool(opt.has_value()) and [(_values(v), np.asarray(v).dtype) for v in opt.get_value()] == [
        (1, np.int32), (2.0, np.float32)]
    assert repr(opt.element_spec) == ("(TensorSpec(shape=(), dtype=tf.int32, name=None), "
                                      "TensorSpec(shape=(), dtype=tf.float32, name=None))")
    from jdist.input.tensor_spec import Optional as DistributedOptional

    assert isinstance(DistributedOptional(1, True), E.Optional)  # a distributed iterator's get_next_as_optional
    none = E.Optional.empty(tf.TensorSpec([], tf.int32))
    assert not none.has_value() and none.element_spec == tf.TensorSpec([], tf.int32)


def test_dataset_and_iterator_specs():
    # observed, TF 2.21
    spec = tf.data.DatasetSpec.from_value(D.range(4).batch(2))
    assert repr(spec) == "DatasetSpec(TensorSpec(shape=(None,), dtype=tf.int64, name=None), TensorShape([]))"
    same = tf.data.DatasetSpec(tf.TensorSpec([None], tf.int64))
    assert spec == same and spec.is_compatible_with(D.range(6).batch(3)) and spec.value_type is D
    assert not spec.is_compatible_with(D.range(4)) and not isinstance(D.range(2), tf.data.DatasetSpec)
    assert repr(tf.data.IteratorSpec(D.range(3).element_spec)) == (
        "IteratorSpec(TensorSpec(shape=(), dtype=tf.int64, name=None),)")


# ---------------------------------------------------------------- options
def test_options_records_set_as_tf():
    options = tf.data.Options()
    # observed, TF 2.21: all None by default; settable; experimental_threading is threading
    assert options.autotune.enabled is None and options.threading.private_threadpool_size is None
    options.autotune.enabled = False
    options.threading.private_threadpool_size = 4
    options.experimental_optimization.map_parallelization = True
    options.experimental_external_state_policy = E.ExternalStatePolicy.IGNORE
    assert options.experimental_threading is options.threading
    ds = D.range(3).with_options(options)
    assert ds.options().autotune.enabled is False and ds.options().threading.private_threadpool_size == 4
    assert ds.options().experimental_optimization.map_parallelization is True
    assert [int(p) for p in E.ExternalStatePolicy] == [0, 1, 2] and E.SHARD_HINT == -1
    assert E.ThreadingOptions is tf.data.ThreadingOptions and isinstance(options.threading, tf.data.ThreadingOptions)
    assert isinstance(options.autotune, E.AutotuneOptions)
    assert isinstance(options.experimental_optimization, E.OptimizationOptions)
    with pytest.raises(AttributeError, match="Cannot set the property bogus on AutotuneOptions"):
        options.autotune.bogus = 1
    with pytest.raises(TypeError, match='Property "autotune" must be of type'):
        options.autotune = 3
    with pytest.raises(TypeError, match='Property "experimental_external_state_policy" must be of type'):
        options.experimental_external_state_policy = 1
    other = tf.data.Options()
    other.autotune.ram_budget = 10
    merged = options.merge(other)  # observed, TF 2.21: 10 False
    assert (merged.autotune.ram_budget, merged.autotune.enabled) == (10, False)


# ---------------------------------------------------------------- CSV
@pytest.fixture
def csv_dir(tmp_path, monkeypatch):
    (tmp_path / "f.csv").write_text('a,b,c,d\n1,2.5,x,7\n3,,"y,z",8\n5,4.0,w,\n')
    (tmp_path / "nohdr.csv").write_text('10,0.5,q\n11,1.5,"r"\n')
    (tmp_path / "inf.csv").write_text("i,big,f,e,s,m\n1,3000000000,1.5,1e3,True,\n2,4,2,5,False,\n")
    monkeypatch.setitem(globals(), "CSV_DIR", tmp_path)
    return tmp_path


def _spec_text(spec):
    return {k: (v.shape, np.dtype(v.dtype).name if np.dtype(v.dtype).kind != "O" else "string")
            for k, v in spec.items()}


def test_make_csv_dataset_infers_types_and_batches_as_tf(csv_dir):
    ds = E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=2, num_epochs=1, shuffle=False)
    # observed, TF 2.21
    assert _spec_text(ds.element_spec) == {"a": ((None,), "int32"), "b": ((None,), "float32"),
                                           "c": ((None,), "string"), "d": ((None,), "int32")}
    assert _all(ds) == [{"a": [1, 3], "b": [2.5, 0.0], "c": [b"x", b"y,z"], "d": [7, 8]},
                        {"a": [5], "b": [4.0], "c": [b"w"], "d": [0]}]
    assert list(next(iter(ds))) == ["a", "b", "c", "d"]
    labelled = E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=2, num_epochs=1, shuffle=False,
                                  label_name="d", select_columns=["d", "a"])
    assert _all(labelled) == [({"a": [1, 3]}, [7, 8]), ({"a": [5]}, [0])]
    inferred = E.make_csv_dataset(str(csv_dir / "inf.csv"), batch_size=2, num_epochs=1, shuffle=False)
    assert _spec_text(inferred.element_spec) == {
        "i": ((None,), "int32"), "big": ((None,), "int64"), "f": ((None,), "float32"), "e": ((None,), "float32"),
        "s": ((None,), "string"), "m": ((None,), "string")}
    assert _all(inferred) == [{"i": [1, 2], "big": [3000000000, 4], "f": [1.5, 2.0], "e": [1000.0, 5.0],
                               "s": [b"True", b"False"], "m": [b"", b""]}]
    named = E.make_csv_dataset(str(csv_dir / "nohdr.csv"), batch_size=3, column_names=["i", "f", "s"], header=False,
                               num_epochs=1, shuffle=False)
    assert _all(named) == [{"i": [10, 11], "f": [0.5, 1.5], "s": [b"q", b"r"]}]
    twice = E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=2, num_epochs=2, shuffle=False,
                               column_defaults=[0, 0.0, "n", 0])
    assert [b["a"] for b in _all(twice)] == [[1, 3], [5, 1], [3, 5]] and int(twice.cardinality()) == -2
    na = E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=2, num_epochs=1, shuffle=False, na_value="x")
    assert [b["c"] for b in _all(na)] == [[b"", b"y,z"], [b"w"]]
    forever = E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=2, shuffle=False)
    assert int(forever.cardinality()) == -1 and [b["a"] for b in _all(forever.take(3))] == [[1, 3], [5, 1], [3, 5]]
    shuffled = E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=3, num_epochs=1, shuffle_seed=1)
    assert sorted(_all(shuffled)[0]["a"]) == [1, 3, 5]


@pytest.mark.parametrize("kwargs, message", [
    ({"label_name": "zz"}, "`label_name` provided must be one of the columns: ['a', 'b', 'c', 'd']. Received: zz."),
    ({"select_columns": ["zz"]}, "Column zz specified in `select_columns` must be of one of the columns: "
                                 "dict_keys(['a', 'b', 'c', 'd'])."),
    ({"header": False}, "Expected `column_names` or `header` arguments. Neither is provided."),
])
def test_make_csv_dataset_errors_are_tfs(csv_dir, kwargs, message):
    with pytest.raises(ValueError) as info:
        E.make_csv_dataset(str(csv_dir / "f.csv"), batch_size=2, **kwargs)
    assert str(info.value) == message  # observed, TF 2.21


@pytest.mark.parametrize("defaults, kwargs, expected", [
    ([0, 0.0, "n", np.int64(-1)], {}, [(1, 2.5, b"x", 7), (3, 0.0, b"y,z", 8), (5, 4.0, b"w", -1)]),
    ([0, 0.0], {"select_cols": [0, 1]}, [(1, 2.5), (3, 0.0), (5, 4.0)]),
    ([0, "n"], {"exclude_cols": [1, 3]}, [(1, b"x"), (3, b"y,z"), (5, b"w")]),
    ([tf.int32, 0.0, "n", 0], {}, [(1, 2.5, b"x", 7), (3, 0.0, b"y,z", 8), (5, 4.0, b"w", 0)]),
])
def test_csv_dataset_rows_as_tf(csv_dir, defaults, kwargs, expected):
    ds = E.CsvDataset(str(csv_dir / "f.csv"), defaults, header=True, **kwargs)
    assert _all(ds) == expected  # observed, TF 2.21


def test_csv_dataset_specs_and_errors_as_tf(csv_dir):
    ds = E.CsvDataset(str(csv_dir / "f.csv"), [tf.int32, tf.float32, tf.string, np.int64(-1)], header=True)
    assert repr(ds.element_spec) == (  # observed, TF 2.21
        "(TensorSpec(shape=(), dtype=tf.int32, name=None), TensorSpec(shape=(), dtype=tf.float32, name=None), "
        "TensorSpec(shape=(), dtype=tf.string, name=None), TensorSpec(shape=(), dtype=tf.int64, name=None))")
    with pytest.raises(InvalidArgumentError) as info:
        _all(ds)
    assert str(info.value) == "Field 1 is required but missing in record!"
    with pytest.raises(InvalidArgumentError) as info:
        _all(E.CsvDataset(str(csv_dir / "f.csv"), [0, 0.0, "n", 0], header=False))
    assert str(info.value) == "Field 0 in record is not a valid int32: a"


def test_decode_csv_in_a_text_line_map_as_tf(csv_dir):
    from jdist.tfdata.csv import decode_csv

    ds = tf.data.TextLineDataset(str(csv_dir / "nohdr.csv")).map(lambda line: tuple(decode_csv(line, [0, 0.0, "z"])))
    # observed, TF 2.21: (int32, float32, string) scalars; [(10, 0.5, b'q'), (11, 1.5, b'r')]
    assert repr(ds.element_spec) == (
        "(TensorSpec(shape=(), dtype=tf.int32, name=None), TensorSpec(shape=(), dtype=tf.float32, name=None), "
        "TensorSpec(shape=(), dtype=tf.string, name=None))")
    assert list(ds.as_numpy_iterator()) == [(10, 0.5, b"q"), (11, 1.5, b"r")]


def test_decode_csv_as_tf():
    from jdist.tfdata.csv import decode_csv

    # observed, TF 2.21
    got = decode_csv(["1,2.5,a", '3,,"b,c"'], [0, 1.0, "z"])
    assert [_values(t) for t in got] == [[1, 3], [2.5, 1.0], [b"a", b"b,c"]]
    assert [np.asarray(t).dtype for t in got[:2]] == [np.int32, np.float32]
    assert [_values(t) for t in decode_csv("4,5", [0, np.int64(0)])] == [4, 5]
    assert np.asarray(decode_csv("4,5", [0, np.int64(0)])[1]).dtype == np.int64
    assert [_values(t) for t in decode_csv(np.array([["1,2"], ["3,4"]]), [0, 0])] == [[[1], [3]], [[2], [4]]]
    assert [_values(t) for t in decode_csv(["1.5,x"], [0.0, "n"], na_value="x")] == [[1.5], [b"n"]]
    assert [_values(t) for t in decode_csv(["1;2"], [0, 0], field_delim=";")] == [[1], [2]]
    assert [_values(t) for t in decode_csv(['"a""b",2'], ["", 0])] == [[b'a"b'], [2]]
    assert [_values(t) for t in decode_csv(["3,4,5"], [0, 0], select_cols=[0, 2])] == [[3], [5]]
    with pytest.raises(InvalidArgumentError, match=r"^Expect 1 fields but have 2 in record 0$"):
        decode_csv(["1,2"], [0])
    with pytest.raises(InvalidArgumentError, match=r"^Field 1 in record 0 is not a valid int32: a$"):
        decode_csv(["1,a"], [0, 0])
    with pytest.raises(InvalidArgumentError, match=r"^Field 0 in record 0 is not a valid int32: 1.5$"):
        decode_csv(["1.5"], [0])


def test_iterator_methods_inside_tf_function():
    # observed, TF 2.21: the function reads the iterator on every call: [0, 2, 4] and [True, True, False]
    it = iter(D.range(3))

    def scaled(scale):
        return it.get_next() * scale

    step: Any = tf.function(scaled)
    assert [int(step(2)) for _ in range(3)] == [0, 2, 4]
    more = iter(D.range(2))

    def compared(flag):
        return more.get_next_as_optional().has_value() == flag

    has_next: Any = tf.function(compared)
    assert [bool(has_next(True)) for _ in range(3)] == [True, True, False]
