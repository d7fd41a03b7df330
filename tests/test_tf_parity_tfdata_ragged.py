"""RaggedTensor and SparseTensor components as `tf.data` elements: slicing, batch, unbatch, map, element_spec,
iteration, ragged_batch, from_generator, as TF 2.21 gives them (each value observed in TF 2.21, Keras 3.15, with
the TF guides ragged_tensor.ipynb and sparse_tensor.ipynb and further cases of the same rules)."""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import InvalidArgumentError


def _feature_dataset():
    return tf.data.Dataset.from_tensor_slices({
        "colors": tf.ragged.constant([["red", "blue"], ["orange"], ["green", "a", "b"]]),
        "lengths": tf.ragged.constant([[1, 2], [3], [4, 5, 6]])})


def test_slices_of_ragged_rank_one_are_dense_rows_with_a_ragged_spec():
    ds = _feature_dataset()
    # observed in TF 2.21, Keras 3.15
    assert repr(ds.element_spec) == (
        "{'colors': RaggedTensorSpec(TensorShape([None]), tf.string, 0, tf.int64), "
        "'lengths': RaggedTensorSpec(TensorShape([None]), tf.int32, 0, tf.int64)}")
    rows = list(ds)
    assert [r["colors"].numpy().tolist() for r in rows] == [[b"red", b"blue"], [b"orange"], [b"green", b"a", b"b"]]
    assert [r["lengths"].numpy().tolist() for r in rows] == [[1, 2], [3], [4, 5, 6]]
    assert rows[0]["lengths"].dtype == tf.int32
    # the guide's print_dictionary_dataset line (observed): "colors = [b'red' b'blue']"
    assert "{:>14} = {}".format("colors", rows[0]["colors"]) == "        colors = [b'red' b'blue']"
    assert int(ds.cardinality()) == 3


def test_batch_of_ragged_rows_is_ragged_and_unbatch_restores_them():
    ds = _feature_dataset()
    batched = ds.batch(2)
    # observed in TF 2.21, Keras 3.15
    assert repr(batched.element_spec["colors"]) == "RaggedTensorSpec(TensorShape([None, None]), tf.string, 1, tf.int64)"
    assert repr(ds.batch(2, drop_remainder=True).element_spec["lengths"]) == \
        "RaggedTensorSpec(TensorShape([2, None]), tf.int32, 1, tf.int64)"
    first, second = list(batched)
    assert str(first["colors"]) == "<tf.RaggedTensor [[b'red', b'blue'], [b'orange']]>"
    assert str(second["lengths"]) == "<tf.RaggedTensor [[4, 5, 6]]>"
    unbatched = batched.unbatch()
    assert repr(unbatched.element_spec["lengths"]) == "RaggedTensorSpec(TensorShape([None]), tf.int32, 0, tf.int64)"
    assert [r["lengths"].numpy().tolist() for r in unbatched] == [[1, 2], [3], [4, 5, 6]]
    assert int(batched.cardinality()) == 2 and int(unbatched.cardinality()) == -2
    # rows of one length still batch into a RaggedTensor: the spec decides (observed)
    same = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2], [3, 4]])).batch(2)
    assert str(next(iter(same))) == "<tf.RaggedTensor [[1, 2],\n [3, 4]]>"


def test_map_with_ragged_outputs_and_ragged_inputs():
    ds = _feature_dataset().map(lambda x: {"c": x["colors"], "n": tf.ragged.range(x["lengths"])})
    # observed in TF 2.21, Keras 3.15
    assert repr(ds.element_spec) == ("{'c': TensorSpec(shape=(None,), dtype=tf.string, name=None), "
                                     "'n': RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64)}")
    assert [str(e["n"]) for e in ds] == ["<tf.RaggedTensor [[0], [0, 1]]>", "<tf.RaggedTensor [[0, 1, 2]]>",
                                         "<tf.RaggedTensor [[0, 1, 2, 3], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]]>"]
    doubled = _feature_dataset().batch(2).map(lambda x: x["lengths"] * 2)
    assert repr(doubled.element_spec) == "RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64)"
    assert [str(e) for e in doubled] == ["<tf.RaggedTensor [[2, 4], [6]]>", "<tf.RaggedTensor [[8, 10, 12]]>"]
    dense = _feature_dataset().batch(2).map(lambda x: x["lengths"].to_tensor())
    assert [e.numpy().tolist() for e in dense] == [[[1, 2], [3, 0]], [[4, 5, 6]]]


def test_ragged_rank_two_rows_and_from_tensors():
    rt3 = tf.ragged.constant([[[1], [2, 3]], [[4]]])
    ds = tf.data.Dataset.from_tensor_slices(rt3)
    # observed in TF 2.21, Keras 3.15
    assert repr(ds.element_spec) == "RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64)"
    assert [str(e) for e in ds] == ["<tf.RaggedTensor [[1], [2, 3]]>", "<tf.RaggedTensor [[4]]>"]
    assert repr(ds.batch(2).element_spec) == "RaggedTensorSpec(TensorShape([None, None, None]), tf.int32, 2, tf.int64)"
    assert str(next(iter(ds.batch(2)))) == "<tf.RaggedTensor [[[1], [2, 3]], [[4]]]>"
    whole = tf.data.Dataset.from_tensors(tf.ragged.constant([[1, 2], [3], [4, 5, 6]]))
    assert repr(whole.element_spec) == "RaggedTensorSpec(TensorShape([3, None]), tf.int32, 1, tf.int64)"
    assert [e.numpy().tolist() for e in whole.unbatch()] == [[1, 2], [3], [4, 5, 6]]
    assert repr(whole.unbatch().element_spec) == "RaggedTensorSpec(TensorShape([None]), tf.int32, 0, tf.int64)"


def test_ragged_rows_through_other_transformations():
    ds = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2], [3], [4, 5, 6], [7]]))
    # observed in TF 2.21, Keras 3.15
    assert [e.numpy().tolist() for e in ds.filter(lambda x: tf.size(x) > 1)] == [[1, 2], [4, 5, 6]]
    assert [str(e) for e in ds.repeat(2).batch(3, drop_remainder=True)] == [
        "<tf.RaggedTensor [[1, 2], [3], [4, 5, 6]]>", "<tf.RaggedTensor [[7], [1, 2], [3]]>"]
    zipped = tf.data.Dataset.zip((ds, tf.data.Dataset.range(4))).batch(2)
    assert repr(zipped.element_spec) == ("(RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64), "
                                         "TensorSpec(shape=(None,), dtype=tf.int64, name=None))")
    assert str(next(iter(zipped))[0]) == "<tf.RaggedTensor [[1, 2], [3]]>"
    assert [str(e) for e in ds.cache().batch(4)] == ["<tf.RaggedTensor [[1, 2], [3], [4, 5, 6], [7]]>"]
    assert int(ds.reduce(tf.constant(0, tf.int32), lambda s, x: s + tf.reduce_sum(x))) == 28
    assert [str(e) for e in ds.take(2).concatenate(ds.take(1)).batch(3)] == ["<tf.RaggedTensor [[1, 2], [3], [1, 2]]>"]
    assert str(next(iter(ds.enumerate().batch(3)))[1]) == "<tf.RaggedTensor [[1, 2], [3], [4, 5, 6]]>"
    assert repr(iter(ds).element_spec) == "RaggedTensorSpec(TensorShape([None]), tf.int32, 0, tf.int64)"
    with pytest.raises(ValueError, match="same size in dimension 0"):  # TF: "Dimensions 4 and 2 are not compatible"
        tf.data.Dataset.from_tensor_slices((tf.ragged.constant([[1], [2], [3], [4]]), tf.constant([1, 2])))


def test_ragged_batch_and_dense_to_ragged_batch():
    ds = tf.data.Dataset.from_tensor_slices([1, 5, 3, 2, 8]).map(tf.range)
    batched = ds.apply(tf.data.experimental.dense_to_ragged_batch(2))
    # the guide's cell, observed in TF 2.21, Keras 3.15
    assert [str(e) for e in batched] == ["<tf.RaggedTensor [[0], [0, 1, 2, 3, 4]]>",
                                         "<tf.RaggedTensor [[0, 1, 2], [0, 1]]>",
                                         "<tf.RaggedTensor [[0, 1, 2, 3, 4, 5, 6, 7]]>"]
    assert repr(batched.element_spec) == "RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64)"
    mixed = tf.data.Dataset.range(1, 4).map(lambda i: (tf.range(i), tf.fill([3], i), tf.zeros([i, 2]), i))
    rb = mixed.ragged_batch(2)
    assert repr(rb.element_spec) == (
        "(RaggedTensorSpec(TensorShape([None, None]), tf.int64, 1, tf.int64), TensorSpec(shape=(None, 3), "
        "dtype=tf.int64, name=None), RaggedTensorSpec(TensorShape([None, None, 2]), tf.float32, 1, tf.int64), "
        "TensorSpec(shape=(None,), dtype=tf.int64, name=None))")
    first = next(iter(rb))
    assert str(first[0]) == "<tf.RaggedTensor [[0], [0, 1]]>"
    assert first[1].numpy().tolist() == [[1, 1, 1], [2, 2, 2]]
    assert [len(r) for r in first[2].to_list()] == [1, 2] and first[3].numpy().tolist() == [1, 2]
    assert repr(mixed.ragged_batch(2, drop_remainder=True).element_spec[0]) == \
        "RaggedTensorSpec(TensorShape([2, None]), tf.int64, 1, tf.int64)"
    assert [r.tolist() for r in ds.ragged_batch(2).unbatch().as_numpy_iterator()] == [
        [0], [0, 1, 2, 3, 4], [0, 1, 2], [0, 1], [0, 1, 2, 3, 4, 5, 6, 7]]


def _sparse():
    return tf.sparse.SparseTensor(indices=[[0, 0], [0, 3], [2, 1]], values=[1, 2, 3], dense_shape=[3, 4])


def _parts(sp):
    return sp.indices.numpy().tolist(), sp.values.numpy().tolist(), sp.dense_shape.numpy().tolist()


def test_sparse_rows_batch_unbatch_and_map():
    ds = tf.data.Dataset.from_tensor_slices(_sparse())
    # observed in TF 2.21, Keras 3.15
    assert repr(ds.element_spec) == "SparseTensorSpec(TensorShape([4]), tf.int32)"
    rows = list(ds)
    assert all(isinstance(r, tf.SparseTensor) for r in rows)
    assert [_parts(r) for r in rows] == [([[0], [3]], [1, 2], [4]), ([], [], [4]), ([[1]], [3], [4])]
    batched = ds.batch(2)
    assert repr(batched.element_spec) == "SparseTensorSpec(TensorShape([None, 4]), tf.int32)"
    assert [_parts(b) for b in batched] == [([[0, 0], [0, 3]], [1, 2], [2, 4]), ([[0, 1]], [3], [1, 4])]
    assert repr(ds.batch(2, drop_remainder=True).element_spec) == "SparseTensorSpec(TensorShape([2, 4]), tf.int32)"
    unbatched = batched.unbatch()
    assert repr(unbatched.element_spec) == "SparseTensorSpec(TensorShape([4]), tf.int32)"
    assert [_parts(r) for r in unbatched] == [_parts(r) for r in rows]
    mapped = ds.map(lambda x: x * 2)
    assert repr(mapped.element_spec) == "SparseTensorSpec(TensorShape([4]), tf.int32)"
    assert [_parts(r)[1] for r in mapped] == [[2, 4], [], [6]]
    dense = ds.map(tf.sparse.to_dense)
    assert repr(dense.element_spec) == "TensorSpec(shape=(4,), dtype=tf.int32, name=None)"
    assert [e.numpy().tolist() for e in dense] == [[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]]
    assert repr(tf.data.Dataset.from_tensors(_sparse()).element_spec) == \
        "SparseTensorSpec(TensorShape([3, 4]), tf.int32)"
    made = tf.data.Dataset.from_tensor_slices(tf.constant([[0, 1], [2, 0]])).map(tf.sparse.from_dense)
    assert repr(made.element_spec) == "SparseTensorSpec(TensorShape([2]), tf.int32)"
    zipped = tf.data.Dataset.from_tensor_slices((_sparse(), tf.constant([1.0, 2.0, 3.0])))
    assert repr(zipped.element_spec) == ("(SparseTensorSpec(TensorShape([4]), tf.int32), "
                                         "TensorSpec(shape=(), dtype=tf.float32, name=None))")


def test_as_numpy_iterator_of_ragged_and_sparse():
    # observed in TF 2.21, Keras 3.15: a ragged batch as its `.numpy()` (an object array of rows where their
    # lengths differ), a sparse one dense
    got = list(tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2], [3]])).batch(2).as_numpy_iterator())
    assert got[0].dtype == object and [r.tolist() for r in got[0]] == [[1, 2], [3]]
    rows = list(tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[[1], [2, 3]], [[4]]])).as_numpy_iterator())
    assert rows[0].dtype == object and rows[1].tolist() == [[4]] and rows[1].dtype == np.int32
    sparse = list(tf.data.Dataset.from_tensor_slices(_sparse()).batch(2).as_numpy_iterator())
    assert [s.tolist() for s in sparse] == [[[1, 0, 0, 2], [0, 0, 0, 0]], [[0, 3, 0, 0]]]


def test_from_generator_with_composite_signatures():
    spec = tf.RaggedTensorSpec(shape=(None, None), dtype=tf.int32, ragged_rank=1)

    def gen():
        yield tf.ragged.constant([[1], [2, 3]])
        yield tf.ragged.constant([[4, 5, 6]])
    ds = tf.data.Dataset.from_generator(gen, output_signature=spec)
    # observed in TF 2.21, Keras 3.15
    assert repr(ds.element_spec) == "RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64)"
    assert [str(e) for e in ds.batch(2)] == ["<tf.RaggedTensor [[[1], [2, 3]], [[4, 5, 6]]]>"]
    expected = "where an element of RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64) was expected"
    for value, got in [(np.array([[1, 2]], np.int32), "TensorSpec(shape=(1, 2), dtype=tf.int32, name=None)"),
                       (tf.ragged.constant([[1.5]]), "RaggedTensorSpec(TensorShape([1, None]), tf.float32, 1, "
                                                     "tf.int64)")]:
        bad = tf.data.Dataset.from_generator(lambda v=value: iter([v]), output_signature=spec)
        with pytest.raises(InvalidArgumentError, match=f"yielded an element of {got} {expected}".replace(
                "(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
            list(bad)
    other = tf.data.Dataset.from_generator(lambda: iter([tf.sparse.from_dense([[1, 0]])]), output_signature=spec)
    with pytest.raises(InvalidArgumentError, match="did not match the expected structure. The expected structure "
                                                   r"was RaggedTensorSpec\(TensorShape"):
        list(other)
    sparse = tf.data.Dataset.from_generator(lambda: iter([tf.sparse.from_dense([[1, 0]])]),
                                            output_signature=tf.SparseTensorSpec([None, 2], tf.int32))
    assert repr(sparse.element_spec) == "SparseTensorSpec(TensorShape([None, 2]), tf.int32)"
    assert [_parts(s) for s in sparse] == [([[0, 0]], [1], [1, 2])]


def test_padded_batch_refuses_composite_components():
    ragged = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2], [3]]))
    # observed in TF 2.21, Keras 3.15 (raised when the dataset is made)
    with pytest.raises(TypeError, match=r"`padded_batch` is only supported for datasets that produce tensor "
                                        r"elements but type spec of elements in the input dataset is not a subclass "
                                        r"of TensorSpec: `RaggedTensorSpec\(TensorShape\(\[None\]\), tf.int32, 0"):
        ragged.padded_batch(2)
    with pytest.raises(TypeError, match=r"not a subclass of TensorSpec: `SparseTensorSpec\(TensorShape\(\[4\]\)"):
        tf.data.Dataset.from_tensor_slices(_sparse()).padded_batch(2)
