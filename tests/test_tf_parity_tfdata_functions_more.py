"""`flat_map` / `interleave` functions and functions with `tf.random` ops traced once, as TF 2.21 traces them.

Every expected value below was observed in TF 2.21 (tensorflow-cpu, Keras 3.15) with the same script: counters in
the function read 1 after two passes; `tf.random` ops still draw per element; the inner datasets' spec is the
trace's (`(None,)` for rows of different lengths), so `batch` raises the batch kernel's text and `ragged_batch`
gives RaggedTensors; `tf.where(x > 0, x, 0)` takes the Python 0 as int64.
"""
import contextlib
import io

import numpy as np
import pytest
from tf_parity_common import counted as _counted
from tf_parity_common import no_global_seed  # noqa: F401  (a fixture)

import jdist.tf_compat as tf
from jdist.tfdata import dataset_plan

pytestmark = pytest.mark.usefixtures("no_global_seed")

D = tf.data.Dataset


def _passes(ds, n=2):
    return [[np.asarray(v).tolist() for v in ds] for _ in range(n)]


def test_flat_map_and_interleave_bodies_run_once():
    # observed in TF 2.21: a counter reads 1 after two passes (jdist before: 7, once per element and pass)
    f, calls = _counted(lambda x: D.from_tensors(x).repeat(2))
    assert _passes(D.range(3).flat_map(f)) == [[0, 0, 1, 1, 2, 2]] * 2
    assert calls[0] == 1
    f, calls = _counted(lambda x: D.from_tensors(x).repeat(2))
    assert _passes(D.range(3).interleave(f, cycle_length=2)) == [[0, 1, 0, 1, 2, 2]] * 2
    assert calls[0] == 1
    f, calls = _counted(lambda x: D.range(x))
    assert _passes(D.range(4).flat_map(f), 1) == [[0, 0, 1, 0, 1, 2]]
    assert calls[0] == 1


def test_flat_map_recorded_transformations():
    # observed in TF 2.21 (each counter 1)
    f, calls = _counted(lambda x: D.from_tensor_slices(tf.stack([x, x + 1])).repeat(2).batch(3))
    ds = D.range(2).interleave(f, cycle_length=2, block_length=1)
    assert _passes(ds, 1) == [[[0, 1, 0], [1, 2, 1], [1], [2]]]
    assert ds.element_spec == tf.TensorSpec((None,), tf.int64)
    f, calls2 = _counted(lambda x: D.range(x).take(2).concatenate(D.from_tensors(x * 100)))
    ds = D.range(4).flat_map(f)
    assert _passes(ds, 1) == [[0, 0, 100, 0, 1, 200, 0, 1, 300]]
    assert ds.element_spec == tf.TensorSpec((), tf.int64)
    f, calls3 = _counted(lambda x, y: D.zip((D.from_tensors(x), D.range(y))))
    ds = D.from_tensor_slices((tf.constant([1, 2], tf.int64), tf.constant([2, 1], tf.int64))).flat_map(f)
    assert _passes(ds, 1) == [[[1, 0], [2, 0]]]
    assert ds.element_spec == (tf.TensorSpec((), tf.int64), tf.TensorSpec((), tf.int64))
    f, calls4 = _counted(lambda d: D.from_tensors(d["a"] + d["b"]))
    assert _passes(D.from_tensor_slices({"a": [1, 2], "b": [3, 4]}).flat_map(f), 1) == [[4, 6]]
    assert calls[0] == calls2[0] == calls3[0] == calls4[0] == 1


def test_flat_map_inner_map_traced_once_and_closure_fallback():
    # observed in TF 2.21: an inner `map` keeps the outer counter at 1 and prints its Python print once
    f, calls = _counted(lambda x: D.from_tensor_slices(tf.fill([2], x)).map(lambda y: y * 10))
    assert _passes(D.range(3).flat_map(f)) == [[0, 0, 10, 10, 20, 20]] * 2
    assert calls[0] == 1

    def g(y):
        print("inner print")
        return y + 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ds = D.range(3).interleave(lambda x: D.from_tensors(x).map(g), cycle_length=1)
        values = [int(v) for v in ds]
    assert values == [1, 2, 3] and out.getvalue() == "inner print\n"
    # an inner function using the outer element (TF: [0, 11, 22]): called per element, the values right
    assert [int(v) for v in D.range(3).flat_map(lambda x: D.from_tensors(x).map(lambda y: y + x * 10))] == [0, 11, 22]


def test_flat_map_prints_and_not_a_dataset():
    # observed in TF 2.21: the Python print once, at flat_map; tf.print per element, when iterated
    def p(x):
        print("py print")
        tf.print("tf print", x)
        return D.from_tensors(x)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        ds = D.range(2).flat_map(p)
        made = out.getvalue()
        values = [int(v) for v in ds]
    assert made == "py print\n" and values == [0, 1]
    assert out.getvalue() == "py print\n" and err.getvalue() == "tf print 0\ntf print 1\n"  # tf.print: stderr
    with pytest.raises(AttributeError):  # TF 2.21: AttributeError ("'Tensor' object has no attribute '_name'")
        D.range(2).flat_map(lambda x: x)
    assert dataset_plan.trace(D.range(2), lambda x: x) is None


def test_random_map_traced_once_drawing_per_element():
    # observed in TF 2.21: counter 1; 3 different numbers; unseeded: new numbers each pass; seeded: the same
    f, calls = _counted(lambda x: tf.cast(x, tf.float32) + tf.random.uniform([]))
    ds = D.range(3).map(f)
    a, b = _passes(ds)
    assert calls[0] == 1 and len(set(np.round(np.subtract(a, [0, 1, 2]), 6))) == 3 and a != b
    f, calls = _counted(lambda x: tf.cast(x, tf.float32) + tf.random.uniform([], seed=3))
    a, b = _passes(D.range(3).map(f))
    assert calls[0] == 1 and a == b and len(set(np.round(np.subtract(a, [0, 1, 2]), 6))) == 3
    f, calls = _counted(lambda x: x + tf.random.uniform([2], maxval=100, dtype=tf.int64, seed=3))
    ds = D.range(3).map(f)
    a, b = _passes(ds)
    assert calls[0] == 1 and a == b and ds.element_spec == tf.TensorSpec((2,), tf.int64)
    assert all(0 <= v - i < 100 for i, row in enumerate(a) for v in row)
    f, calls = _counted(lambda x: tf.random.normal([], seed=1) + tf.cast(x, tf.float32))
    a, b = _passes(D.range(3).map(f))
    assert calls[0] == 1 and a == b


def test_random_filter_and_flat_map_traced_once():
    # observed in TF 2.21: counters 1; the filter keeps [0, 1, 2]; flat_map's seeded draws differ per element,
    # the same in both passes
    f, calls = _counted(lambda x: tf.random.uniform([]) < 2.0)
    assert _passes(D.range(3).filter(f)) == [[0, 1, 2]] * 2 and calls[0] == 1
    f, calls = _counted(lambda x: D.from_tensors(tf.random.uniform([], seed=7)))
    a, b = _passes(D.range(3).flat_map(f))
    assert calls[0] == 1 and a == b and len(set(a)) == 3


def test_python_scalar_takes_the_tensor_dtype_in_one_trace():
    # observed in TF 2.21: counter 1, int64 [0, 0, 0, 1] (jdist before: 3 calls, the strict trace refused int32 0)
    f, calls = _counted(lambda x: tf.where(x > 0, x, 0))
    ds = D.range(-2, 2).map(f)
    assert _passes(ds, 1) == [[0, 0, 0, 1]] and calls[0] == 1
    assert ds.element_spec == tf.TensorSpec((), tf.int64)
    f, calls = _counted(lambda x: tf.where(x > 0, tf.cast(x, tf.float32), 0.5))
    assert _passes(D.range(-1, 2).map(f), 1) == [[0.5, 0.5, 1.0]] and calls[0] == 1
    with pytest.raises(TypeError, match="Input 'y' of 'AddV2' Op has type int32 that does not match type float32"):
        D.range(3).map(lambda x: tf.cast(x, tf.float32) + tf.constant(1))  # TF 2.21's TypeError stays


def test_ragged_rows_spec_batch_and_ragged_batch():
    # observed in TF 2.21: spec (None,); batch: InvalidArgumentError "Cannot batch tensors with different shapes
    # in component 0. First element had shape [1] and element 1 had shape [2]."; ragged_batch:
    # [[[0], [0, 1]], [[0, 1, 2]]] (jdist before: spec (1,), and both raised "Cannot add tensor to the batch")
    for make in (lambda d, f: d.flat_map(f), lambda d, f: d.interleave(f, cycle_length=2)):
        ds = make(D.range(1, 4), lambda x: D.from_tensors(tf.range(x)))
        assert ds.element_spec == tf.TensorSpec((None,), tf.int64)
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Cannot batch tensors with different shapes in "
                           r"component 0\. First element had shape \[1\] and element 1 had shape \[2\]\."):
            list(ds.batch(2))
        assert [v.to_list() for v in ds.ragged_batch(2)] == [[[0], [0, 1]], [[0, 1, 2]]]


def test_batch_text_by_input():
    # observed in TF 2.21: a map right before batch (fused): "Cannot add tensor to the batch: number of elements
    # does not match."; after prefetch, a tuple's second component, a 2-d shape: the batch kernel's text
    with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot add tensor to the batch"):
        list(D.range(1, 4).map(lambda x: tf.range(x)).batch(2))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in component 0\. First element had shape \[1\]"):
        list(D.range(1, 4).map(lambda x: tf.range(x)).prefetch(1).batch(2))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"in component 1\. First element had shape \[1\] and "
                       r"element 1 had shape \[2\]"):
        list(D.range(1, 4).flat_map(lambda x: D.from_tensors((x, tf.range(x)))).batch(2))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"First element had shape \[2,1\] and element 1 had "
                       r"shape \[2,2\]"):
        list(D.range(1, 4).flat_map(lambda x: D.from_tensors(tf.zeros([2, x]))).batch(2))


def test_where_python_operand_takes_tensor_dtype_eagerly():
    # observed in TF 2.21 (eager): int64 [0 2], [-1 0]; float64 [-1. 0.5]; float32 [1. 2.]
    x = tf.constant([-1, 2], tf.int64)
    out = tf.where(x > 0, x, 0)
    assert np.asarray(out).dtype == np.int64 and np.asarray(out).tolist() == [0, 2]
    out = tf.where(x > 0, 0, x)
    assert np.asarray(out).dtype == np.int64 and np.asarray(out).tolist() == [-1, 0]
    out = tf.where(x > 0, 0.5, tf.cast(x, tf.float64))
    assert np.asarray(out).dtype == np.float64 and np.asarray(out).tolist() == [-1.0, 0.5]
    out = tf.where(x > 0, tf.cast(x, tf.float32), 1)
    assert np.asarray(out).dtype == np.float32 and np.asarray(out).tolist() == [1.0, 2.0]


def test_interleave_seeded_random_and_unknown_dims_fallback():
    # observed in TF 2.21: counter 1, three different draws, the same in both passes
    f, calls = _counted(lambda x: D.from_tensors(tf.random.uniform([], seed=7)))
    a, b = _passes(D.range(3).interleave(f, cycle_length=2))
    assert calls[0] == 1 and a == b and len(set(a)) == 3
    # a batched input (its first dimension unknown) is not traced: the function per element, the values TF's
    # (observed: [0, 1, 2], spec ())
    ds = D.range(3).batch(2).flat_map(lambda x: D.from_tensor_slices(x))
    assert _passes(ds, 1) == [[0, 1, 2]] and ds.element_spec == tf.TensorSpec((), tf.int64)
