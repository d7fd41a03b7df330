"""tf.data's function semantics as TF 2.21 has them: a dataset function traced once when the dataset is made
(its Python prints then, `tf.print` and `tf.py_function` per element), its output checked then, and the text,
take/skip, padded_batch, save/load and ragged_batch behaviour TF users meet. Every expected value was observed
in TF 2.21 (tensorflow-cpu 2.21, Keras 3.15) with the same code under `import tensorflow as tf`."""
import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import InvalidArgumentError, NotFoundError

D = tf.data.Dataset


def _values(ds):
    return [np.asarray(v).tolist() for v in ds.as_numpy_iterator()]


# ---------------------------------------------------------------- traced once, when the dataset is made
def test_map_python_print_runs_once_when_made_not_per_element(capsys):
    def f(x):
        print("trace map")
        return x * 2

    ds = D.range(3).map(f)
    # observed in TF 2.21: "trace map" once, before the dataset is iterated; two passes print nothing more
    assert capsys.readouterr().out == "trace map\n"
    assert _values(ds) == [0, 2, 4] and _values(ds) == [0, 2, 4]
    for _ in ds:
        pass
    assert capsys.readouterr().out == ""


def _gbw(f):
    return D.range(4).group_by_window(f, lambda k, w: w.batch(2), window_size=2)


TRACED_ONCE = [  # (making code, its elements): each function prints "t" when called (TF 2.21: once, at creation)
    (lambda p: D.range(4).filter(lambda x: p(x % 2 == 0)), [0, 2]),
    (lambda p: D.range(3).flat_map(lambda x: p(D.from_tensors(x).repeat(2))), [0, 0, 1, 1, 2, 2]),
    (lambda p: D.range(3).interleave(lambda x: p(D.from_tensors(x).repeat(2)), cycle_length=2), [0, 1, 0, 1, 2, 2]),
    (lambda p: D.range(3).scan(np.int64(0), lambda s, x: p((s + x, s))), [0, 0, 1]),
    (lambda p: D.range(4).take_while(lambda x: p(x < 2)), [0, 1]),
    (lambda p: D.range(4).map(lambda x: p(x + 1), num_parallel_calls=tf.data.AUTOTUNE), [1, 2, 3, 4]),
    (lambda p: D.from_tensor_slices(["a", "b"]).map(lambda s: p(tf.strings.upper(s))), [b"A", b"B"]),
    (lambda p: D.from_tensor_slices(["a", "bb"]).filter(lambda s: p(tf.strings.length(s) > 1)), [b"bb"]),
    (lambda p: _gbw(lambda x: p(x % 2)), [[0, 2], [1, 3]]),
    (lambda p: D.range(1, 4).map(lambda x: tf.fill([x], x)).bucket_by_sequence_length(
        lambda x: p(tf.shape(x)[0]), [3], [2, 2]), [[[1, 0], [2, 2]], [[3, 3, 3]]]),
]


@pytest.mark.parametrize("make,elements", TRACED_ONCE)
def test_dataset_functions_print_once_when_made(make, elements, capsys):
    def p(value):
        print("t")
        return value

    ds = make(p)
    assert capsys.readouterr().out == "t\n"  # observed in TF 2.21: printed at creation, once
    assert _values(ds) == elements
    assert capsys.readouterr().out == ""


def test_reduce_function_prints_once(capsys):
    def add(s, x):
        print("trace reduce")
        return s + x

    assert int(D.range(3).reduce(np.int64(0), add)) == 3
    assert capsys.readouterr().out == "trace reduce\n"  # observed in TF 2.21


def test_nested_dataset_functions_print_once(capsys):
    def inner(x):
        print("inner")
        return x * 2

    def outer(x):
        print("outer")
        return D.range(x).map(inner)

    ds = D.range(1, 4).flat_map(outer)
    assert capsys.readouterr().out == "outer\ninner\n"  # observed in TF 2.21, before iterating
    assert _values(ds) == [0, 0, 2, 0, 2, 4]
    assert capsys.readouterr().out == ""


def test_tf_print_and_py_function_run_per_element_not_when_made(capsys):
    calls = []

    def h(x):
        tf.print("tfprint", x)
        return x

    ds = D.range(2).map(h).map(lambda x: tf.py_function(lambda v: calls.append(1) or v * 3, [x], tf.int64))
    made = capsys.readouterr()
    assert (made.out, made.err, calls) == ("", "", [])  # observed in TF 2.21: nothing runs at creation
    assert _values(ds) == [0, 3]
    assert capsys.readouterr().err == "tfprint 0\ntfprint 1\n" and len(calls) == 2


# ---------------------------------------------------------------- the function's output, checked when made
PREDICATES = [  # observed in TF 2.21: ValueError when the dataset is made, the return type named
    (lambda x: x, "TensorSpec(shape=(), dtype=tf.int64, name=None)"),
    (lambda x: tf.fill([2], True), "TensorSpec(shape=(2,), dtype=tf.bool, name=None)"),
    (lambda x: 1, "TensorSpec(shape=(), dtype=tf.int32, name=None)"),
    (lambda x: None, "NoneTensorSpec()"),
]


@pytest.mark.parametrize("predicate,spec", PREDICATES)
def test_filter_and_take_while_check_the_predicate_when_made(predicate, spec):
    with pytest.raises(ValueError) as filtered:
        D.range(4).filter(predicate)
    assert str(filtered.value) == ("Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor, but its "
                                   f"return type is {spec}.")
    with pytest.raises(ValueError) as taken:
        D.range(4).take_while(predicate)
    assert str(taken.value) == ("Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor but its "
                                f"return type is{spec}.")


def test_predicate_checks_on_text_batches_and_structures():
    # observed in TF 2.21: an int32 length of a string, a (None,) batch comparison, a tuple (AttributeError)
    with pytest.raises(ValueError, match=r"return type is TensorSpec\(shape=\(\), dtype=tf.int32"):
        D.from_tensor_slices(["a", "bb"]).filter(lambda s: tf.strings.length(s))
    with pytest.raises(ValueError, match=r"return type is TensorSpec\(shape=\(None,\), dtype=tf.bool"):
        D.range(4).batch(2).filter(lambda b: b > 0)
    with pytest.raises(AttributeError, match="^'tuple' object has no attribute 'is_compatible_with'"):
        D.range(4).filter(lambda x: (x > 1, x > 2))
    assert _values(D.range(3).filter(lambda x: True)) == [0, 1, 2]  # a Python bool is fine


def test_map_returning_none_and_flat_map_of_no_dataset_raise_when_made():
    # observed in TF 2.21: InvalidArgumentError "Length for attr 'output_types' of 0 must be at least minimum 1"
    with pytest.raises(InvalidArgumentError, match="^Length for attr 'output_types' of 0 must be at least minimum 1"):
        D.range(3).map(lambda x: None)
    # observed: AttributeError "'Tensor' object has no attribute '_name'" at flat_map / interleave
    with pytest.raises(AttributeError, match="must return a Dataset"):
        D.range(3).flat_map(lambda x: x)
    with pytest.raises(AttributeError, match="must return a Dataset"):
        D.range(3).interleave(lambda x: x)


# ---------------------------------------------------------------- element specs of text
_LINES = "hello\nworld  x\n"
TEXT_SPECS = [  # observed in TF 2.21
    (lambda p: D.from_tensor_slices(["a", "bb"]), "TensorSpec(shape=(), dtype=tf.string, name=None)"),
    (lambda p: D.from_tensor_slices([["a", "b"], ["c", "d"]]), "TensorSpec(shape=(2,), dtype=tf.string, name=None)"),
    (lambda p: D.from_tensor_slices({"t": ["a", "b"], "y": [1, 2]}),
     "{'t': TensorSpec(shape=(), dtype=tf.string, name=None), 'y': TensorSpec(shape=(), dtype=tf.int32, name=None)}"),
    (lambda p: tf.data.TextLineDataset(p), "TensorSpec(shape=(), dtype=tf.string, name=None)"),
    (lambda p: tf.data.TextLineDataset(p).map(lambda s: tf.strings.split(s)),
     "TensorSpec(shape=(None,), dtype=tf.string, name=None)"),
    (lambda p: D.range(3).map(lambda x: tf.strings.as_string(x)), "TensorSpec(shape=(), dtype=tf.string, name=None)"),
    (lambda p: D.from_tensor_slices(["a", "bb"]).map(lambda s: (s, tf.strings.length(s))),
     "(TensorSpec(shape=(), dtype=tf.string, name=None), TensorSpec(shape=(), dtype=tf.int32, name=None))"),
    (lambda p: D.from_tensor_slices(["a", "bb", "c"]).batch(2),
     "TensorSpec(shape=(None,), dtype=tf.string, name=None)"),
    (lambda p: D.from_tensor_slices(["a", "bb", "c"]).batch(2, drop_remainder=True),
     "TensorSpec(shape=(2,), dtype=tf.string, name=None)"),
    (lambda p: D.from_tensor_slices(["a b", "bb", "c"]).batch(2).map(tf.strings.reduce_join),
     "TensorSpec(shape=(), dtype=tf.string, name=None)"),
]


@pytest.mark.parametrize("make,spec", TEXT_SPECS)
def test_text_element_specs(make, spec, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text(_LINES)
    assert str(make(str(path)).element_spec) == spec


# ---------------------------------------------------------------- padded_batch, take, save/load, ragged_batch
def test_padded_batch_checks_padding_values_dtype_when_made():
    ds = D.range(1, 4).map(lambda x: tf.fill([x], x))
    with pytest.raises(TypeError) as err:  # a Python int is int32; the component int64 (observed in TF 2.21)
        ds.padded_batch(2, padding_values=-1)
    assert str(err.value) == ("Invalid `padding_values`. `padding_values` values type <dtype: 'int32'> does not "
                              "match type <dtype: 'int64'> of the corresponding input component.")
    padded = ds.padded_batch(2, padded_shapes=[5], padding_values=tf.constant(-1, tf.int64))
    assert _values(padded) == [[[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]], [[3, 3, 3, -1, -1]]]


def test_take_of_negative_counts():
    # observed in TF 2.21: take(-1) is a _TakeDataset of every element, count kept; below -1 the count is unknown
    taken = D.range(5).take(-1)
    assert repr(taken) == "<_TakeDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>"
    assert (_values(taken), int(taken.cardinality())) == ([0, 1, 2, 3, 4], 5)
    assert (_values(D.range(5).take(-2)), int(D.range(5).take(-2).cardinality())) == ([0, 1, 2, 3, 4], -2)


def test_save_and_load(tmp_path):
    ds = D.range(3).map(lambda x: (x, tf.fill([x], x)))
    assert ds.save(str(tmp_path / "g"), compression="GZIP") is None
    loaded = D.load(str(tmp_path / "g"), compression="GZIP")
    spec = ("(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(None,), dtype=tf.int64, "
            "name=None))")
    assert repr(loaded) == f"<_LoadDataset element_spec={spec}>"  # observed in TF 2.21
    assert [(int(a), b.tolist()) for a, b in loaded.as_numpy_iterator()] == [(0, []), (1, [1]), (2, [2, 2])]
    assert int(loaded.cardinality()) == 3
    D.range(5).save(str(tmp_path / "r"))
    D.range(2).save(str(tmp_path / "r"))  # overwrites (observed)
    assert _values(D.load(str(tmp_path / "r"))) == [0, 1]
    tf.data.experimental.save(D.range(2), str(tmp_path / "e"))
    assert _values(tf.data.experimental.load(str(tmp_path / "e"))) == [0, 1]
    with pytest.raises(NotFoundError) as missing:
        D.load(str(tmp_path / "nope"))
    assert str(missing.value) == f"tf.data snapshot element_spec file not found: {tmp_path / 'nope'}/dataset_spec.pb."


def test_ragged_batch_of_one_shape_is_a_batch():
    ds = D.range(5).map(lambda x: tf.fill([2], x)).ragged_batch(2)
    # observed in TF 2.21: TensorSpec(shape=(None, 2)), dense arrays, and a _BatchDataset
    assert str(ds.element_spec) == "TensorSpec(shape=(None, 2), dtype=tf.int64, name=None)"
    assert _values(ds) == [[[0, 0], [1, 1]], [[2, 2], [3, 3]], [[4, 4]]]
    assert repr(D.range(5).ragged_batch(2)).startswith("<_BatchDataset element_spec=TensorSpec(shape=(None,)")


GRAPH_DTYPE_ERRORS = [  # observed in TF 2.21: TypeError when the dataset is made (the function's trace)
    (lambda: D.range(3).map(lambda x: x + tf.constant(1)), "AddV2", "int32", "int64"),
    (lambda: D.range(3).map(lambda x: tf.constant(1) + x), "AddV2", "int64", "int32"),
    (lambda: D.range(3).map(lambda x: x * tf.constant(1.5)), "Mul", "float32", "int64"),
    (lambda: D.range(3).map(lambda x: tf.cast(x, tf.float32) + tf.constant(1.0, tf.float64)), "AddV2", "float64",
     "float32"),
    (lambda: D.range(3).filter(lambda x: x > tf.constant(1)), "Greater", "int32", "int64"),
    (lambda: D.range(3).reduce(0, lambda s, x: s + x), "AddV2", "int64", "int32"),
    (lambda: D.range(3).scan(0, lambda s, x: (s + x, s)), "AddV2", "int64", "int32"),
    (lambda: D.from_tensor_slices(["a"]).map(lambda s: tf.strings.length(s) + tf.constant(1, tf.int64)), "AddV2",
     "int64", "int32"),
]


@pytest.mark.parametrize("make,op,got,expected", GRAPH_DTYPE_ERRORS)
def test_ops_on_two_dtypes_raise_tf_trace_error_when_made(make, op, got, expected):
    with pytest.raises(TypeError) as err:
        make()
    assert str(err.value) == (f"Input 'y' of '{op}' Op has type {got} that does not match type {expected} of "
                              "argument 'x'.")


def test_inputs_print_as_tf_symbolic_tensors_at_the_trace(capsys):
    D.from_tensor_slices(([1, 2], [3.0, 4.0])).map(lambda a, b: (print(a, b), a)[1])
    D.from_tensor_slices({"x": [1, 2], "y": [[1.0], [2.0]]}).map(lambda d: (print(d), d)[1])
    D.range(4).batch(2).map(lambda b: (print(b), b)[1])
    assert capsys.readouterr().out.splitlines() == [  # observed in TF 2.21
        'Tensor("args_0:0", shape=(), dtype=int32) Tensor("args_1:0", shape=(), dtype=float32)',
        "{'x': <tf.Tensor 'args_0:0' shape=() dtype=int32>, 'y': <tf.Tensor 'args_1:0' shape=(1,) dtype=float32>}",
        'Tensor("args_0:0", shape=(None,), dtype=int64)']


def test_keras_random_layers_in_a_map_keep_working_after_the_trace():
    keras = tf.keras
    flip = keras.layers.RandomFlip("horizontal", seed=1)
    images = np.arange(2 * 4 * 4 * 1, dtype=np.float32).reshape(2, 4, 4, 1)
    ds = D.from_tensor_slices((images, np.arange(2))).batch(2).map(lambda x, y: (flip(x, training=True), y))
    # observed in TF 2.21 (Keras 3.15): the spec, and elements drawn per pass (the trace assigned no seed state)
    assert str(ds.element_spec) == ("(TensorSpec(shape=(None, 4, 4, 1), dtype=tf.float32, name=None), "
                                    "TensorSpec(shape=(None,), dtype=tf.int64, name=None))")
    for _ in range(2):
        (x, y), = list(ds.as_numpy_iterator())
        assert x.shape == (2, 4, 4, 1) and y.tolist() == [0, 1]
        assert all(np.array_equal(r, i) or np.array_equal(r, i[:, ::-1]) for r, i in zip(x, images))


def test_a_text_maps_py_function_output_has_an_unknown_shape():
    ds = D.from_tensor_slices(["a", "bb"]).map(lambda s: tf.py_function(lambda v: v.numpy().upper(), [s], tf.string))
    # observed in TF 2.21: the output's shape is unknown; the values are the function's
    assert str(ds.element_spec) == "TensorSpec(shape=<unknown>, dtype=tf.string, name=None)"
    assert list(ds.as_numpy_iterator()) == [b"A", b"BB"]
    pair = D.from_tensor_slices(["a"]).map(lambda s: (s, tf.py_function(lambda v: v.numpy() + b"!", [s], tf.string)))
    assert str(pair.element_spec) == ("(TensorSpec(shape=(), dtype=tf.string, name=None), "
                                      "TensorSpec(shape=<unknown>, dtype=tf.string, name=None))")
