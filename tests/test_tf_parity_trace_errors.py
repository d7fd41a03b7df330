"""TF's trace-time dtype errors: `tf.stack`/`tf.concat` on mixed dtypes, `tf.where` with a Python branch, and
`Dataset.range` with an int32 tensor bound (`jdist.tfdata.graph_dtypes`). Each value observed in TF 2.21,
Keras 3.15."""
import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import InvalidArgumentError

PACK = "Tensors in list passed to 'values' of 'Pack' Op have types [{}] that don't all match."
CONCAT = "Tensors in list passed to 'values' of 'ConcatV2' Op have types [{}] that don't all match."


def _message(call):
    with pytest.raises(Exception) as info:
        call()
    return info.type, str(info.value)


def test_stack_mixed_dtypes_in_map_is_tf_trace_type_error():
    # observed: TypeError "in user code: ... TypeError: Tensors in list passed to 'values' of 'Pack' Op have
    # types [float32, int32] that don't all match."
    kind, text = _message(lambda: tf.data.Dataset.range(3).map(
        lambda v: tf.stack([tf.cast(v, tf.float32), tf.cast(v, tf.int32)])))
    assert issubclass(kind, TypeError)
    assert text.startswith("in user code:")
    assert text.endswith(PACK.format("float32, int32") + "\n")


def test_pack_features_vector_dict_with_int_column():
    # the walkthrough's pack_features_vector with one int column; observed: "... have types [float32, float32,
    # int32, float32] that don't all match."
    features = {"a": np.ones(4, np.float32), "b": np.ones(4, np.float32), "c": np.ones(4, np.int32),
                "d": np.ones(4, np.float32)}
    ds = tf.data.Dataset.from_tensor_slices(features)
    kind, text = _message(lambda: ds.map(lambda f: tf.stack(list(f.values()), axis=0)))
    assert issubclass(kind, TypeError) and PACK.format("float32, float32, int32, float32") in text


def test_stack_and_concat_in_tf_function():
    x, i = tf.constant(1.0), tf.constant(2)
    kind, text = _message(lambda: tf.function(lambda: tf.stack([x, x, i, x]))())
    assert kind.__name__ == "TypeError" and issubclass(kind, TypeError)
    assert text == PACK.format("float32, float32, int32, float32")  # observed
    kind, text = _message(lambda: tf.function(lambda: tf.concat([tf.reshape(i, [1]), tf.reshape(x, [1])], 0))())
    assert issubclass(kind, TypeError) and text == CONCAT.format("int32, float32")  # observed
    kind, text = _message(lambda: tf.function(lambda: tf.stack([tf.constant(1, tf.int64), i]))())
    assert text == PACK.format("int64, int32")  # observed


def test_concat_mixed_dtypes_in_map():
    # observed: "... 'ConcatV2' Op have types [float32, int32] that don't all match."
    kind, text = _message(lambda: tf.data.Dataset.range(3).map(
        lambda v: tf.concat([tf.reshape(tf.cast(v, tf.float32), [1]), tf.reshape(tf.cast(v, tf.int32), [1])], 0)))
    assert issubclass(kind, TypeError) and CONCAT.format("float32, int32") in text


def test_stack_and_concat_eager_text():
    x, i = tf.constant(1.0), tf.constant(2)
    with pytest.raises(InvalidArgumentError) as info:
        tf.stack([x, x, i, x])
    # observed: the position of the first input of another dtype
    assert str(info.value) == ("cannot compute Pack as input #2(zero-based) was expected to be a float tensor but "
                               "is a int32 tensor [Op:Pack] name: stack")
    with pytest.raises(InvalidArgumentError) as info:
        tf.concat([tf.reshape(i, [1]), tf.reshape(x, [1])], 0)
    assert str(info.value) == ("cannot compute ConcatV2 as input #1(zero-based) was expected to be a int32 tensor "
                               "but is a float tensor [Op:ConcatV2] name: concat")  # observed


def test_where_python_branch_traced_and_eager():
    xi = tf.constant([1, -2], tf.int64)
    eager = tf.where(xi > 0, 0, xi)  # observed eagerly: int64 [0, -2]
    assert np.dtype(eager.dtype) == np.int64 and np.asarray(eager).tolist() == [0, -2]
    want = "Input 'e' of 'SelectV2' Op has type int64 that does not match type int32 of argument 't'."
    kind, text = _message(lambda: tf.function(lambda: tf.where(xi > 0, 0, xi))())
    assert issubclass(kind, TypeError) and text == want  # observed
    kind, text = _message(lambda: tf.data.Dataset.range(3).map(lambda v: tf.where(v > 0, 0, v)))
    assert issubclass(kind, TypeError) and text.startswith("in user code:") and want in text  # observed
    f = tf.constant([1.0, 2.0])
    kind, text = _message(lambda: tf.function(lambda: tf.where(tf.constant([True, False]), 0, f))())
    assert text == "Input 'e' of 'SelectV2' Op has type float32 that does not match type int32 of argument 't'."
    # observed: the Python value in `y` takes `x`'s dtype; a float beside float32 matches
    out = tf.function(lambda: tf.where(xi > 0, xi, 0))()
    assert np.dtype(out.dtype) == np.int64 and np.asarray(out).tolist() == [1, 0]
    ds = tf.data.Dataset.range(3).map(lambda v: tf.where(v > 0, v, 0))
    assert [int(v) for v in ds] == [0, 1, 2]
    out = tf.function(lambda: tf.where(xi > 0, 0.5, f))()
    assert np.asarray(out).tolist() == [0.5, 2.0]


def test_range_int32_tensor_bound():
    kind, text = _message(lambda: tf.data.Dataset.range(tf.constant(3, tf.int32)))
    assert kind.__name__ == "ValueError" and issubclass(kind, ValueError)
    assert text == ("stop: Tensor conversion requested dtype int64 for Tensor with dtype int32: "
                    "<tf.Tensor: shape=(), dtype=int32, numpy=3>")  # observed eagerly
    kind, text = _message(lambda: tf.data.Dataset.range(tf.constant(1, tf.int32), 3))
    assert text.startswith("start: Tensor conversion requested dtype int64 for Tensor with dtype int32")  # observed
    assert [int(v) for v in tf.data.Dataset.range(np.array(3, np.int32))] == [0, 1, 2]  # observed: numpy converts
    assert [int(v) for v in tf.data.Dataset.range(tf.constant(3, tf.int64))] == [0, 1, 2]
    for make in (lambda v: tf.data.Dataset.range(tf.constant(3, tf.int32)),
                 lambda v: tf.data.Dataset.range(tf.cast(v, tf.int32))):
        kind, text = _message(lambda: tf.data.Dataset.range(2).flat_map(make))
        # observed: "in user code: ... ValueError: stop: Tensor conversion requested dtype int64 for Tensor with
        # dtype int32: <tf.Tensor 'Const:0' shape=() dtype=int32>"
        assert issubclass(kind, ValueError) and text.startswith("in user code:")
        assert "ValueError: stop: Tensor conversion requested dtype int64 for Tensor with dtype int32" in text


def test_range_of_an_int64_element_in_flat_map():
    # observed: range(3).flat_map(lambda x: range(x)) is 0, 0, 1 (int64 bounds are TF's)
    ds = tf.data.Dataset.range(3).flat_map(lambda x: tf.data.Dataset.range(x))
    assert [int(v) for v in ds] == [0, 0, 1]
    assert np.dtype(ds.element_spec.dtype) == np.int64
