"""TF's guides "Ragged tensors" and "Working with sparse tensors", run under jdist: the rules they showed apart.

Each expected value was observed in TF 2.21 with Keras 3.15 (tensorflow-cpu, the guides' cells run one by one).
"""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf


def _pprint_sparse_tensor(st: tf.SparseTensor) -> str:
    """The sparse guide's own printer: it iterates `st.indices` and calls `.numpy()` on each row."""
    s = f"<SparseTensor shape={st.dense_shape.numpy().tolist()} \n values={{"
    for (index, value) in zip(st.indices, st.values):
        s += f"\n  {index.numpy().tolist()}: {value.numpy().tolist()}"
    return s + "}>"


def test_sparse_parts_are_tensors_with_numpy() -> None:
    st = tf.sparse.SparseTensor(indices=[[0, 3], [2, 4]], values=[10, 20], dense_shape=[3, 10])
    # observed in TF 2.21: the guide's pprint_sparse_tensor(st1) text
    assert _pprint_sparse_tensor(st) == "<SparseTensor shape=[3, 10] \n values={\n  [0, 3]: 10\n  [2, 4]: 20}>"
    # observed in TF 2.21: each part is an EagerTensor, a row of indices too
    assert repr(st.dense_shape) == "<tf.Tensor: shape=(2,), dtype=int64, numpy=array([ 3, 10])>"
    assert repr(st.values) == "<tf.Tensor: shape=(2,), dtype=int32, numpy=array([10, 20], dtype=int32)>"
    assert repr(st.indices[0]) == "<tf.Tensor: shape=(2,), dtype=int64, numpy=array([0, 3])>"
    st2 = tf.sparse.from_dense([[1, 0, 0, 8], [0, 0, 0, 0], [0, 0, 3, 0]])
    assert _pprint_sparse_tensor(st2) == ("<SparseTensor shape=[3, 4] \n values={\n  [0, 0]: 1\n  [0, 3]: 8\n"
                                          "  [2, 2]: 3}>")  # observed in TF 2.21


@pytest.mark.parametrize("start, size, shape", [
    ([0, 10], [8, 6], [8, 0]),  # the guide's sparse_slice_C: observed in TF 2.21, tf.Tensor([], shape=(8, 0))
    ([3, 1], [8, 6], [5, 5]),   # observed in TF 2.21
    ([9, 0], [2, 2], [0, 2]),   # observed in TF 2.21: a start past the end is an empty dimension, no error
])
def test_sparse_slice_past_the_end_is_empty(start: list, size: list, shape: list) -> None:
    pattern = tf.sparse.SparseTensor(indices=[[3, 0], [4, 0]], values=[1, 1], dense_shape=[8, 6])
    part = tf.sparse.slice(pattern, start=start, size=size)
    assert part.dense_shape.numpy().tolist() == shape
    assert part.indices.shape == (0, 2)
    assert tf.sparse.to_dense(part).shape == tuple(shape)


def test_sparse_slice_inside_keeps_entries_shifted() -> None:
    pattern = tf.sparse.SparseTensor(indices=[[3, 0], [4, 0]], values=[1, 1], dense_shape=[8, 6])
    part = tf.sparse.slice(pattern, start=[4, 0], size=[8, 6])
    assert part.dense_shape.numpy().tolist() == [4, 6]
    assert part.indices.numpy().tolist() == [[0, 0]]


_SPARSE_DATA = dict(indices=[(0, 0), (0, 1), (0, 2), (4, 3), (5, 0), (5, 1)], values=[1, 1, 1, 1, 1, 1],
                    dense_shape=(6, 4))
# observed in TF 2.21, Keras 3.15: Dense(2) with kernel arange(8).reshape(4, 2), bias [0.5, -0.5]
_DENSE_OUT = [[6.5, 8.5], [0.5, -0.5], [0.5, -0.5], [0.5, -0.5], [6.5, 6.5], [2.5, 3.5]]


def _model(sparse: bool) -> tf.keras.Model:
    x = tf.keras.Input(shape=(4,), sparse=sparse)
    dense = tf.keras.layers.Dense(2)
    model = tf.keras.Model(x, dense(x))
    dense.set_weights([np.arange(8, dtype=np.float32).reshape(4, 2), np.array([0.5, -0.5], np.float32)])
    return model


def test_keras_sparse_input_takes_a_sparse_tensor() -> None:
    model = _model(sparse=True)
    sparse_data = tf.sparse.SparseTensor(**_SPARSE_DATA)
    out = model(sparse_data)  # observed in TF 2.21: a dense (6, 2) float32 tensor
    assert out.shape == (6, 2) and np.dtype(out.dtype) == np.float32
    np.testing.assert_allclose(np.asarray(out), _DENSE_OUT)
    np.testing.assert_allclose(model.predict(sparse_data, verbose=0), _DENSE_OUT)  # observed in TF 2.21


def test_keras_dense_input_densifies_a_sparse_tensor() -> None:
    model = _model(sparse=False)
    sparse_data = tf.sparse.SparseTensor(**_SPARSE_DATA)
    np.testing.assert_allclose(np.asarray(model(sparse_data)), _DENSE_OUT)  # observed in TF 2.21
    np.testing.assert_allclose(model.predict(sparse_data, verbose=0), _DENSE_OUT)  # observed in TF 2.21


def test_concrete_function_of_a_ragged_tensor() -> None:
    @tf.function
    def increment(x: tf.RaggedTensor) -> tf.RaggedTensor:
        return x + 1

    rt = tf.ragged.constant([[1, 2], [3], [4, 5, 6]])
    cf = increment.get_concrete_function(rt)
    assert str(cf(rt)) == "<tf.RaggedTensor [[2, 3], [4], [5, 6, 7]]>"  # observed in TF 2.21


def test_concrete_function_of_a_ragged_spec() -> None:
    @tf.function
    def grow(x: tf.RaggedTensor) -> tf.RaggedTensor:
        return x * 100.0

    cf = grow.get_concrete_function(tf.RaggedTensorSpec(shape=[None, None], dtype=tf.float32))
    out = cf(tf.ragged.constant([[1.0, 4.0, 3.0], [2.0]]))
    assert str(out) == "<tf.RaggedTensor [[100.0, 400.0, 300.0], [200.0]]>"  # observed in TF 2.21


def test_concrete_function_of_a_ragged_spec_refuses_another_dtype() -> None:
    @tf.function
    def increment(x: tf.RaggedTensor) -> tf.RaggedTensor:
        return x + 1

    cf = increment.get_concrete_function(tf.RaggedTensorSpec(shape=[None, None], dtype=tf.float32))
    # observed in TF 2.21: TypeError "Binding inputs to tf.function failed due to `Can not cast
    # TensorSpec(shape=(3,), dtype=tf.int32, name=None) to TensorSpec(shape=(None,), dtype=tf.float32, name=None)`.
    # ... for signature: (x: RaggedTensorSpec(TensorShape([None, None]), tf.float32, 1, tf.int64)) -> ..."
    with pytest.raises(TypeError) as caught:
        cf(tf.ragged.constant([[1, 4], [2]]))
    assert ("Binding inputs to tf.function failed due to `Can not cast TensorSpec(shape=(3,), dtype=tf.int32, "
            "name=None) to TensorSpec(shape=(None,), dtype=tf.float32, name=None)`") in str(caught.value)
    assert "(x: RaggedTensorSpec(TensorShape([None, None]), tf.float32, 1, tf.int64))" in str(caught.value)


def test_saving_a_ragged_signature_is_refused_clearly(tmp_path: object) -> None:
    # TF 2.21 saves the guide's CustomModule.grow traced on a RaggedTensorSpec (observed); jdist's saved programs
    # take dense arrays only, so it refuses with the way out instead of numpy's "data type not understood".
    class CustomModule(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.v = tf.Variable(100.0)

        @tf.function
        def grow(self, x: tf.RaggedTensor) -> tf.RaggedTensor:
            return x * self.v

    module = CustomModule()
    assert str(module.grow(tf.ragged.constant([[1.0, 4.0, 3.0], [2.0]]))) == (
        "<tf.RaggedTensor [[100.0, 400.0, 300.0], [200.0]]>")  # observed in TF 2.21
    with pytest.raises(ValueError, match="RaggedTensor.*flat_values and rt.row_splits"):
        tf.saved_model.save(module, str(tmp_path))


def test_keras_fit_on_a_sparse_tensor_matches_fit_on_its_dense_form() -> None:
    # TF 2.21 fits a Keras model on a tf.SparseTensor x as on its dense form (observed)
    sparse_data = tf.sparse.SparseTensor(**_SPARSE_DATA)
    y = np.arange(12, dtype=np.float32).reshape(6, 2)
    losses = []
    for x in (sparse_data, tf.sparse.to_dense(sparse_data)):
        model = _model(sparse=True)
        model.compile(loss="mse", optimizer="sgd")
        losses.append(model.fit(x, y, epochs=2, batch_size=3, shuffle=False, verbose=0).history["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    # observed in TF 2.21, Keras 3.15: [30.364538192749023, 30.01378631591797] for both
    np.testing.assert_allclose(losses[0], [30.364538192749023, 30.01378631591797], rtol=1e-6)
