"""`tf.TensorArray` against TF 2.21 (tensorflow-cpu 2.21.0), observed: each expected value and message below is
what TF printed for the same call, eagerly, inside `tf.function`, and in `tf.while_loop`. jdist's compiled uses
(`jax.jit`, `strategy.run`, a gradient through the array) are checked against the same computation on the host."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


def _values(x):
    return np.asarray(x).tolist()


def test_eager_arrays_are_written_in_place_and_read_once():
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, clear_after_read=False)
    ta = ta.write(0, 10)
    ta = ta.write(1, 20).write(2, 30)
    assert repr(ta.read(1)) == "<tf.Tensor: shape=(), dtype=float32, numpy=20.0>"
    assert _values(ta.stack()) == [10.0, 20.0, 30.0] and ta.stack().dtype == np.float32
    assert int(ta.size()) == 3 and ta.dtype == tf.float32 and ta.element_shape == tf.TensorShape([])
    array = tf.TensorArray(tf.float32, size=2)
    array.write(0, 1.5)  # TF 2.21 eagerly: the write changes the array itself (read gives 1.5)
    assert float(array.read(0)) == 1.5
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Could not read index 0 twice because it was "
                       r"cleared after a previous read \(perhaps try setting clear_after_read = false\?\)"):
        array.read(0)
    assert float(array.read(1)) == 0.0  # never written: zeros of the element shape


@pytest.mark.parametrize("call, error, message", [
    (lambda: tf.TensorArray(tf.float32, size=2).write(2, 1.), tf.errors.OutOfRangeError,
     "Tried to write to index 2 but array is not resizeable and size is: 2"),
    (lambda: tf.TensorArray(tf.float32, size=2).read(5), tf.errors.OutOfRangeError,
     "Tried to read from index 5 but array size is: 2"),
    (lambda: tf.TensorArray(tf.float32, size=2).write(-1, 1.), tf.errors.OutOfRangeError,
     r"Writing to negative indices \(index -1\) is not allowed."),
    (lambda: tf.TensorArray(tf.float32, size=2).write(0, tf.constant(1)), tf.errors.InvalidArgumentError,
     "TensorArray dtype is float32 but Op is trying to write dtype int32"),
    (lambda: tf.TensorArray(tf.float32, size=2).write(0, [1., 2.]).write(1, [1., 2., 3.]), ValueError,
     r"Incompatible shape for value \(\(3,\)\), expected \(\(2,\)\)"),
    (lambda: tf.TensorArray(tf.float32, size=2, element_shape=[3]).write(0, [1., 2.]), ValueError,
     r"Incompatible shape for value \(\(2,\)\), expected \(\(3,\)\)"),
    (lambda: tf.TensorArray(tf.float32, size=2).unstack([1., 2., 3.]), ValueError,
     "Cannot unstack 3 tensors into a TensorArray of static size 2"),
    (lambda: tf.TensorArray(tf.int32, size=2).write(0, [1, 2]).write(1, [3]).concat(), ValueError,
     r"Incompatible shape for value \(\(1,\)\), expected \(\(2,\)\)"),
    (lambda: tf.TensorArray(tf.int32, size=2).write(0, 1).write(1, 3).concat(), tf.errors.InvalidArgumentError,
     "Concat saw a scalar shape at index 0 but requires at least vectors."),
    (lambda: tf.TensorArray(tf.float32), ValueError,
     "Size must be declared for TensorArrays when eager execution is enabled."),
])
def test_bad_calls_raise_tfs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_other_methods_give_tfs_values():
    assert float(tf.TensorArray(tf.float32, size=2).write(0, 1).read(0)) == 1.0  # a Python int, as float32
    assert _values(tf.TensorArray(tf.float32, size=3).write(1, [1., 2.]).stack()) == [[0, 0], [1, 2], [0, 0]]
    assert tf.TensorArray(tf.float32, size=0, element_shape=[2]).stack().shape == (0, 2)
    empty = tf.TensorArray(tf.int32, size=0).stack()
    assert empty.shape == (0,) and empty.dtype == np.int32
    assert _values(tf.TensorArray(tf.float32, size=3).unstack([[1., 2.], [3., 4.], [5., 6.]]).read(2)) == [5, 6]
    grown = tf.TensorArray(tf.float32, size=1, dynamic_size=True).unstack([1., 2., 3.])
    assert _values(grown.stack()) == [1, 2, 3]
    scattered = tf.TensorArray(tf.float32, size=4).scatter([3, 0], [[1., 1.], [2., 2.]]).stack()
    assert _values(scattered) == [[2, 2], [0, 0], [0, 0], [1, 1]]
    gathered = tf.TensorArray(tf.int32, size=3, clear_after_read=False).unstack([7, 8, 9]).gather([2, 0])
    assert _values(gathered) == [9, 7] and gathered.dtype == np.int32
    assert _values(tf.TensorArray(tf.float32, size=2).split([1., 2., 3.], [2, 1]).read(0)) == [1, 2]
    ragged = tf.TensorArray(tf.int32, size=2, infer_shape=False).write(0, [1, 2]).write(1, [3])
    assert _values(ragged.concat()) == [1, 2, 3]


def test_in_tf_function_an_array_is_a_value():
    @tf.function
    def fib(n):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        ta = ta.unstack([0., 1.])
        for i in tf.range(2, n):
            ta = ta.write(i, ta.read(i - 1) + ta.read(i - 2))
        return ta.stack()

    @tf.function
    def squares(x):
        ta = tf.TensorArray(tf.float32, size=tf.shape(x)[0])
        for i in tf.range(tf.shape(x)[0]):
            ta = ta.write(i, x[i] * x[i])
        return ta.stack()

    @tf.function
    def read_twice():
        ta = tf.TensorArray(tf.float32, size=2)
        ta = ta.write(0, 5.)
        return ta.read(0) + ta.read(0)  # TF's graph arrays never clear: 10.0

    @tf.function
    def unassigned_write():
        ta = tf.TensorArray(tf.float32, size=2)
        ta.write(0, 5.)  # lost, but the array learned the element shape: [0., 0.] (observed)
        return ta.stack()

    assert _values(fib(7)) == [0, 1, 1, 2, 3, 5, 8]
    assert _values(squares(tf.constant([1., 2., 3.]))) == [1, 4, 9]
    assert float(read_twice()) == 10.0
    assert _values(unassigned_write()) == [0, 0]


def _squares_loop(n):
    ta = tf.TensorArray(tf.int32, size=4, element_shape=[])
    _, out = tf.while_loop(lambda i, t: i < n, lambda i, t: (i + 1, t.write(i, i * i)), (tf.constant(0), ta))
    return out.stack()


def test_a_while_loop_writes_it_eagerly_and_compiled():
    assert _values(_squares_loop(4)) == [0, 1, 4, 9]  # TF 2.21, eagerly and in tf.function
    assert _values(jax.jit(_squares_loop)(4)) == [0, 1, 4, 9]  # a traced counter: one stacked buffer

    def unknown_shape():
        ta = tf.TensorArray(tf.float32, size=3)
        return tf.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t.write(i, 1.0)), (tf.constant(0), ta))

    with pytest.raises(ValueError, match="its element shape must be known first.*give `element_shape=`"):
        jax.jit(unknown_shape)()


def test_compiled_uses_match_the_host():
    def sum_of_squares(x):
        ta = tf.TensorArray(tf.float32, size=x.shape[0])
        for i in jnp.arange(x.shape[0]):  # traced indices
            ta = ta.write(i, x[i] ** 2)
        return jnp.sum(ta.stack())

    x = np.array([1., 2., 3.], np.float32)
    np.testing.assert_allclose(jax.jit(jax.grad(sum_of_squares))(x), 2 * x)

    def doubled_rows(batch):
        ta = tf.TensorArray(tf.float32, size=batch.shape[0])
        for i in range(batch.shape[0]):
            ta = ta.write(i, batch[i] * 2.0)
        return ta.stack()

    strategy = tf.distribute.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    data = np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2)
    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(data).batch(2 * n))))
    parts = strategy.experimental_local_results(strategy.run(doubled_rows, args=(batch,)))
    np.testing.assert_array_equal(np.concatenate([np.asarray(p) for p in parts]), np.asarray(doubled_rows(data)))


def test_effective_tf2_guides_dynamic_rnn_is_keras_rnn():
    """TF's guide "Better performance with tf.function" / "Effective TF2" loops an LSTM cell with a TensorArray
    (its `get_initial_state(dtype=)` dropped: Keras 3's cell takes no dtype, in TF 2.21 too). Its outputs are
    Keras's own RNN layer's."""
    class DynamicRNN(tf.keras.Model):
        def __init__(self, rnn_cell):
            super().__init__()
            self.cell = rnn_cell

        @tf.function(input_signature=[tf.TensorSpec(dtype=tf.float32, shape=[None, None, 3])])
        def call(self, input_data):
            input_data = tf.transpose(input_data, [1, 0, 2])
            timesteps = tf.shape(input_data)[0]
            batch_size = tf.shape(input_data)[1]
            outputs = tf.TensorArray(tf.float32, timesteps)
            state = self.cell.get_initial_state(batch_size=batch_size)
            for i in tf.range(timesteps):
                output, state = self.cell(input_data[i], state)
                outputs = outputs.write(i, output)
            return tf.transpose(outputs.stack(), [1, 0, 2]), state

    cell = tf.keras.layers.LSTMCell(units=13)
    x = np.random.default_rng(0).normal(size=(10, 20, 3)).astype(np.float32)
    outputs, _ = DynamicRNN(cell)(x)
    assert outputs.shape == (10, 20, 13)  # TF printed (10, 20, 13)
    expected = tf.keras.layers.RNN(cell, return_sequences=True)(x)
    np.testing.assert_allclose(np.asarray(outputs), np.asarray(expected), rtol=1e-5, atol=1e-6)
