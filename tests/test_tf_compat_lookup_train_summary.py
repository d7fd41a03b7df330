"""`tf.lookup`, `tf.train.ExponentialMovingAverage` and TF's checkpoint utilities, and `tf.summary.image` /
`audio` / `write` in jdist.tf_compat, against TF 2.21 (tensorflow-cpu 2.21.0) observed with /work/tfvenv/bin/python:
lookup results and dtypes, OOV buckets, averages after each apply, the checkpoint state and the events TF writes
(read back with `tf.compat.v1.train.summary_iterator`, images decoded with `tf.io.decode_png`)."""
import glob
import io
import os
import threading

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402  (matplotlib's dependency, in the test extra)

import jdist.tf_compat as tf  # noqa: E402
from jdist.callbacks.event_file import read_tensors  # noqa: E402
from jdist.tf_compat.farmhash import fingerprint64  # noqa: E402

L = tf.lookup


def _words_table():
    init = L.KeyValueTensorInitializer(tf.constant(["a", "b", "c"]), tf.constant([7, 8, 9], tf.int64))
    return L.StaticHashTable(init, default_value=-1)


# ------------------------------------------------------------------------------------------- tf.lookup
def test_static_hash_table_of_strings():
    table = _words_table()
    out = table.lookup(tf.constant(["a", "z", "c"]))
    assert out.dtype == np.int64 and out.numpy().tolist() == [7, -1, 9]  # observed, TF 2.21: [7 -1 9] int64
    assert table.lookup(tf.constant([["a"], ["q"]])).numpy().tolist() == [[7], [-1]]  # observed: shape (2, 1)
    assert table[tf.constant("b")].numpy() == 8 and table[tf.constant("b")].shape == ()
    assert table.size().numpy() == 3 and table.size().dtype == np.int64
    assert (str(table.key_dtype), str(table.value_dtype)) == ("<dtype: 'string'>", "<dtype: 'int64'>")
    assert table.default_value.numpy() == -1
    keys, values = table.export()  # TF's order is its hash order: compared as a mapping
    assert dict(zip(keys.numpy().tolist(), values.numpy().tolist())) == {b"a": 7, b"b": 8, b"c": 9}


@pytest.mark.parametrize("keys, values, value_dtype, keys_in, expected, dtypes", [
    # observed, TF 2.21: Python ints are int32 keys, floats float32 values; the default -1 becomes -1.0
    ([1, 2, 3], [10., 20., 30.], None, tf.constant([1, 5]), [10., -1.], ("int32", "float32")),
    (tf.constant([1, 2], tf.int64), tf.constant(["one", "two"]), None, tf.constant([2, 3], tf.int64),
     [b"two", b"UNK"], ("int64", "string")),
    (np.array([4, 5]), np.array([1.5, 2.5]), None, np.array([5, 6]), [2.5, -1.0], ("int64", "float64")),
    (["a"], ["x"], tf.string, tf.constant(["a", "b"]), [b"x", b"UNK"], ("string", "string")),
])
def test_key_value_initializer_dtypes(keys, values, value_dtype, keys_in, expected, dtypes):
    init = L.KeyValueTensorInitializer(keys, values, value_dtype=value_dtype)
    assert (init.key_dtype.name, init.value_dtype.name) == dtypes
    table = L.StaticHashTable(init, "UNK" if dtypes[1] == "string" else -1)
    out = table.lookup(keys_in)
    assert out.numpy().tolist() == expected
    assert out.dtype == (object if dtypes[1] == "string" else np.dtype(dtypes[1]))


@pytest.mark.parametrize("make, call, error, message", [
    # observed, TF 2.21
    (_words_table, lambda t: t.lookup(tf.constant([1, 2])), TypeError,
     "Dtype of argument `keys` must be <dtype: 'string'>, received: <dtype: 'int32'>"),
    (lambda: L.StaticHashTable(L.KeyValueTensorInitializer([1, 2], [1., 2.]), -1),
     lambda t: t.lookup(tf.constant([1], tf.int64)), TypeError,
     "Dtype of argument `keys` must be <dtype: 'int32'>, received: <dtype: 'int64'>"),
    (lambda: L.StaticHashTable(L.KeyValueTensorInitializer(["a", "a"], [1, 2]), 0), None,
     tf.errors.FailedPreconditionError, "HashTable has different value for same key. Key a has 1 and trying to add "
                                        "value 2"),
    (lambda: L.StaticHashTable(L.KeyValueTensorInitializer([1, 2], ["one", "two"]), 5), None, TypeError,
     "Cannot convert 5 to EagerTensor of dtype string"),
    (lambda: L.StaticHashTable(L.KeyValueTensorInitializer([1, 2], [1, 2]), -1.5), None, TypeError,
     "Cannot convert -1.5 to EagerTensor of dtype int32"),
    (lambda: L.StaticHashTable(L.KeyValueTensorInitializer(["a", "b"], [1, 2, 3]), 0), None,
     tf.errors.InvalidArgumentError, "Expected shape [2] for value, got [3]"),
    (lambda: L.StaticVocabularyTable(L.KeyValueTensorInitializer(["a"], [0]), 2), None, TypeError,
     "Invalid `value_dtype`, expected <dtype: 'int64'> but got <dtype: 'int32'>."),
    (lambda: L.StaticVocabularyTable(None, 0), None, ValueError, "`num_oov_buckets` must be > 0; use StaticHashTable."),
])
def test_lookup_errors(make, call, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("(", r"\(").replace(".", r"\.")):
        table = make()
        call(table)


def test_integer_table_inside_compiled_code_and_string_table_refused():
    table = L.StaticHashTable(L.KeyValueTensorInitializer([1, 2, 3], [10., 20., 30.]), -1.0)
    np.testing.assert_array_equal(jax.jit(table.lookup)(jnp.array([2, 3, 9])), [20., 30., -1.])
    # observed, TF 2.21: tf.function(lambda x: table.lookup(x))([2, 3, 9]) -> [20. 30. -1.]
    np.testing.assert_array_equal(tf.function(lambda x: table.lookup(x))(tf.constant([2, 3, 9])), [20., 30., -1.])
    with pytest.raises(TypeError, match="a table of strings looks up on the host"):
        jax.jit(lambda k: _words_table().lookup(k))(jnp.zeros(2, jnp.int32))


def test_lookup_in_a_tf_data_map():
    table = _words_table()
    ds = tf.data.Dataset.from_tensor_slices(["a", "b", "x"]).map(lambda w: table.lookup(w))
    assert [int(v) for v in ds.as_numpy_iterator()] == [7, 8, -1]  # observed, TF 2.21
    batched = tf.data.Dataset.from_tensor_slices(["a", "b", "x"]).batch(2).map(lambda w: table.lookup(w))
    assert [v.tolist() for v in batched.as_numpy_iterator()] == [[7, 8], [-1]]


def test_static_vocabulary_table_oov_buckets():
    init = L.KeyValueTensorInitializer(["emerson", "lake", "palmer"], tf.constant([0, 1, 2], tf.int64))
    table = L.StaticVocabularyTable(init, num_oov_buckets=5)
    words = ["emerson", "lake", "and", "palmer", "king", "crimson", "", "a" * 40, "zz", "hello world"]
    out = table.lookup(tf.constant(words))
    assert out.dtype == np.int64 and out.numpy().tolist() == [0, 1, 5, 2, 6, 7, 6, 4, 5, 4]  # observed, TF 2.21
    known = {"emerson": 0, "lake": 1, "palmer": 2}  # independently: 3 + Fingerprint64(word) % 5
    assert out.numpy().tolist() == [known.get(w, 3 + fingerprint64(w.encode()) % 5) for w in words]
    assert table.size().numpy() == 8
    assert L.StaticVocabularyTable(None, 3).lookup(tf.constant(["a", "b"])).numpy().tolist() == [0, 1]  # observed


def test_static_vocabulary_table_integer_keys():
    init = L.KeyValueTensorInitializer(tf.constant([10, 20], tf.int64), tf.constant([0, 1], tf.int64))
    keys = [10, 20, 0, 1, 2, 3, -1, 100, 12345678901, -5]
    # observed, TF 2.21: an integer key hashes as its decimal text (2 + to_hash_bucket_fast(as_string(k), 7))
    looked_up = L.StaticVocabularyTable(init, 7).lookup(tf.constant(keys, tf.int64))
    assert looked_up.numpy().tolist() == [0, 1, 4, 7, 7, 4, 6, 6, 5, 2]
    small = L.StaticVocabularyTable(init, 7, lookup_key_dtype=tf.int32)
    assert small.key_dtype == tf.int32
    assert small.lookup(tf.constant(keys[:6], tf.int32)).numpy().tolist() == [0, 1, 4, 7, 7, 4]  # observed, int64 ids
    np.testing.assert_array_equal(jax.jit(small.lookup)(jnp.array(keys[:6], jnp.int32)), [0, 1, 4, 7, 7, 4])
    with pytest.raises(TypeError, match="must be <dtype: 'int64'>, received: <dtype: 'int32'>"):  # observed
        L.StaticVocabularyTable(init, 7).lookup(tf.constant([1], tf.int32))


@pytest.mark.parametrize("args, keys, expected", [
    # observed, TF 2.21, on the file "apple 3\nbanana 5\ncherry 7\n"
    ((tf.string, 0, tf.int64, 1), ["banana", "x"], [5, -1]),
    ((tf.string, L.TextFileIndex.WHOLE_LINE, tf.int64, L.TextFileIndex.LINE_NUMBER), ["banana 5", "x"], [1, -1]),
    ((tf.int64, L.TextFileIndex.LINE_NUMBER, tf.string, L.TextFileIndex.WHOLE_LINE), [0, 2, 5],
     [b"apple 3", b"cherry 7", b"?"]),
    ((tf.int64, 1, tf.string, 0), [5, 4], [b"banana", b"?"]),
])
def test_text_file_initializer(tmp_path, args, keys, expected):
    path = tmp_path / "vocab.txt"
    path.write_text("apple 3\nbanana 5\ncherry 7\n")
    table = L.StaticHashTable(L.TextFileInitializer(str(path), *args, delimiter=" "),
                              "?" if args[2] == tf.string else -1)
    assert table.lookup(tf.constant(keys, args[0] if args[0] != tf.string else None)).numpy().tolist() == expected
    assert table.size().numpy() == 3
    limited = L.StaticHashTable(L.TextFileInitializer(str(path), tf.string, 0, tf.string, 1, vocab_size=2,
                                                      delimiter=" "), "?")
    assert limited.lookup(tf.constant(["apple", "cherry"])).numpy().tolist() == [b"3", b"?"]  # observed, TF 2.21
    ids = L.StaticVocabularyTable(L.TextFileInitializer(str(path), tf.string, 0, tf.int64,
                                                        L.TextFileIndex.LINE_NUMBER, delimiter=" "), 2)
    assert ids.lookup(tf.constant(["cherry", "kiwi", "fig"])).numpy().tolist() == [2, 4, 4]  # observed, TF 2.21


def test_text_file_initializer_errors(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("apple 3\nbanana 5\n")
    # observed, TF 2.21 (with the file's name): the default delimiter is a tab
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"line 0 \(apple 3\) : expected at least 2 got 1"):
        L.StaticHashTable(L.TextFileInitializer(str(path), tf.string, 0, tf.int64, 1), -1)
    with pytest.raises(tf.errors.NotFoundError, match="No such file or directory"):
        L.StaticHashTable(L.TextFileInitializer(str(tmp_path / "none.txt"), tf.string, 0, tf.int64, 1), -1)
    with pytest.raises(ValueError, match="`key_dtype` must be int64 if `key_index` is -1, received: <dtype: 'string'>"):
        L.TextFileInitializer(str(path), tf.string, L.TextFileIndex.LINE_NUMBER, tf.int64, 1)
    assert (int(L.TextFileIndex.WHOLE_LINE), int(L.TextFileIndex.LINE_NUMBER)) == (-2, -1)  # observed


def test_mutable_hash_table():
    table = L.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
    assert table.size().numpy() == 0
    table.insert(tf.constant(["a", "b"]), tf.constant([1, 2], tf.int64))
    table.insert(tf.constant(["b", "c"]), tf.constant([20, 30], tf.int64))
    assert table.lookup(tf.constant(["a", "b", "c", "d"])).numpy().tolist() == [1, 20, 30, -1]  # observed, TF 2.21
    assert table.size().numpy() == 3
    table.remove(tf.constant(["a", "zz"]))
    assert table.lookup(tf.constant(["a", "b"])).numpy().tolist() == [-1, 20] and table.size().numpy() == 2  # observed
    keys, values = table.export()
    assert dict(zip(keys.numpy().tolist(), values.numpy().tolist())) == {b"b": 20, b"c": 30}
    table.insert("q", 5)  # observed: Python values convert
    assert table.lookup(tf.constant("q")).numpy() == 5
    defaults = tf.constant([7, 8], tf.int64)
    assert table.lookup(tf.constant(["q", "none"]), dynamic_default_values=defaults).numpy().tolist() == [5, 8]
    with pytest.raises(ValueError, match="values: Tensor conversion requested dtype int64 for Tensor with dtype int32"):
        table.insert(tf.constant(["x"]), tf.constant([1], tf.int32))  # observed, TF 2.21
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Expected shape \[2\] for value, got \[1\]"):
        table.insert(tf.constant(["x", "y"]), tf.constant([1], tf.int64))  # observed, TF 2.21
    vectors = L.experimental.MutableHashTable(tf.int64, tf.float32, default_value=[0., 0.])
    vectors.insert(tf.constant([3], tf.int64), tf.constant([[1., 2.]]))
    assert vectors.lookup(tf.constant([3, 4], tf.int64)).numpy().tolist() == [[1., 2.], [0., 0.]]  # observed, TF 2.21
    with pytest.raises(TypeError, match="changes on the host only|looks up on the host only"):
        jax.jit(vectors.lookup)(jnp.array([3]))


def test_dense_hash_table():
    table = L.experimental.DenseHashTable(tf.int64, tf.int64, default_value=-1, empty_key=0, deleted_key=-1)
    table.insert(tf.constant([5, 6], tf.int64), tf.constant([50, 60], tf.int64))
    assert table.lookup(tf.constant([5, 7], tf.int64)).numpy().tolist() == [50, -1] and table.size().numpy() == 2
    for call, message in [(lambda: table.insert(tf.constant([0], tf.int64), tf.constant([1], tf.int64)), "empty_key"),
                          (lambda: table.insert(tf.constant([-1], tf.int64), tf.constant([1], tf.int64)),
                           "deleted_key"),
                          (lambda: table.lookup(tf.constant([0], tf.int64)), "empty_key")]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"Using the {message} as a table key is not allowed"):
            call()
    table.remove(tf.constant([5], tf.int64))
    # observed
    assert table.lookup(tf.constant([5, 6], tf.int64)).numpy().tolist() == [-1, 60] and table.size().numpy() == 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="Empty and deleted keys cannot be equal"):
        L.experimental.DenseHashTable(tf.int64, tf.int64, -1, empty_key=3, deleted_key=3)
    strings = L.experimental.DenseHashTable(tf.string, tf.float32, default_value=0., empty_key="", deleted_key="$")
    strings.insert(["a"], [1.5])
    assert strings.lookup(["a", "b"]).numpy().tolist() == [1.5, 0.0]  # observed, TF 2.21


# ------------------------------------------------------------------------------ ExponentialMovingAverage
def test_exponential_moving_average_values():
    w, b = tf.Variable(1.0, name="w"), tf.Variable([1., 2.], name="b")
    ema = tf.train.ExponentialMovingAverage(0.9)
    assert ema.name == "ExponentialMovingAverage" and ema.average(w) is None
    assert ema.apply([w, b]) is None
    shadow = ema.average(w)
    assert shadow.numpy() == 1.0 and not shadow.trainable and ema.average_name(w) == "w/ExponentialMovingAverage"
    assert shadow.path == "w/ExponentialMovingAverage"
    # observed, TF 2.21 (float32 values)
    expected = [(1.1, [1.1, 2.2]), (1.2900001, [1.3900001, 2.7800002]), (1.5610001, [2.051, 4.102])]
    for scalar, vector in expected:
        w.assign_add(1.0)
        b.assign(b * 2)
        ema.apply([w, b])
        assert ema.average(w).numpy() == np.float32(scalar)
        np.testing.assert_array_equal(ema.average(b).numpy(), np.float32(vector))
    assert ema.variables_to_restore() == {"w/ExponentialMovingAverage": w, "b/ExponentialMovingAverage": b}


@pytest.mark.parametrize("decay, num_updates, values, expected", [
    # observed, TF 2.21: decay = min(decay, (1 + n) / (10 + n)), n read at each apply, never increased by it
    (0.99, "variable0", [0., 1., 2., 3.], [0.9, 1.89, 2.889]),
    (0.99, "variable5", [0., 1.], [0.6]),
    (0.5, 3, [0., 2.], [1.3846154]),
])
def test_exponential_moving_average_num_updates(decay, num_updates, values, expected):
    if isinstance(num_updates, str):
        num_updates = tf.Variable(int(num_updates[-1]), dtype=tf.int64)
    ema = tf.train.ExponentialMovingAverage(decay, num_updates=num_updates)
    var = tf.Variable(values[0])
    ema.apply([var])
    got = []
    for value in values[1:]:
        var.assign(value)
        ema.apply([var])
        got.append(ema.average(var).numpy())
    np.testing.assert_array_equal(got, np.float32(expected))


def test_exponential_moving_average_zero_debias_errors_and_keras_variables():
    ema = tf.train.ExponentialMovingAverage(0.9, zero_debias=True)  # observed: no effect on variables
    z = tf.Variable(5.0)
    ema.apply([z])
    z.assign(1.0)
    ema.apply([z])
    assert ema.average(z).numpy() == np.float32(4.6)  # observed, TF 2.21
    with pytest.raises(TypeError, match="The variables must be half, float, or double: Variable:0"):  # observed
        ema.apply([tf.Variable(1, dtype=tf.int32)])
    with pytest.raises(TypeError, match="does not support non-Variable tensors when eager execution is enabled"):
        ema.apply([tf.constant(1.0)])
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="dense")], name="sequential")
    ema.apply(model.trainable_variables)
    kernel = model.trainable_variables[0]
    assert ema.average_name(kernel) == "sequential/dense/kernel/ExponentialMovingAverage"
    np.testing.assert_array_equal(ema.average(kernel).numpy(), kernel.numpy())


def test_exponential_moving_average_in_tf_function_and_strategy():
    v = tf.Variable(1.0)
    ema = tf.train.ExponentialMovingAverage(0.5)
    ema.apply([v])

    @tf.function
    def step():
        v.assign_add(1.0)
        ema.apply([v])
        return ema.average(v).read_value()

    assert float(step()) == 1.5 and float(step()) == 2.25  # 1 - (1 - 2) / 2, then 1.5 - (1.5 - 3) / 2
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        w = tf.Variable(1.0, name="mw")
        mirrored = tf.train.ExponentialMovingAverage(0.9)
        mirrored.apply([w])
    assert type(mirrored.average(w)).__name__ == "MirroredVariable"  # observed, TF 2.21

    def replica_step():
        w.assign_add(1.0)
        mirrored.apply([w])
        return mirrored.average(w).read_value()

    out = strategy.experimental_local_results(strategy.run(replica_step))
    np.testing.assert_allclose([float(x) for x in out], [1.1] * strategy.num_replicas_in_sync, rtol=1e-6)
    assert mirrored.average(w).numpy() == np.float32(1.1)
    with strategy.scope():
        late = tf.Variable(1.0, name="late")
    with pytest.raises(RuntimeError, match="call ema.apply\\(var_list\\) once in the strategy's scope"):
        strategy.run(lambda: mirrored.apply([late]))


# ----------------------------------------------------------------------------------- checkpoint utilities
def test_get_checkpoint_state_and_load_variable(tmp_path):
    checkpoint = tf.train.Checkpoint(v=tf.Variable([1., 2.]), step=tf.Variable(3, dtype=tf.int64))
    assert tf.train.get_checkpoint_state(str(tmp_path / "none")) is None  # observed, TF 2.21
    checkpoint.save(str(tmp_path / "a" / "model"))
    checkpoint.save(str(tmp_path / "a" / "model"))
    state = tf.train.get_checkpoint_state(str(tmp_path / "a"))
    # observed, TF 2.21: Checkpoint.save lists the newest only, joined to the directory given
    assert state.model_checkpoint_path == str(tmp_path / "a" / "model-2")
    assert list(state.all_model_checkpoint_paths) == [str(tmp_path / "a" / "model-2")]
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "b"), max_to_keep=2)
    for _ in range(3):
        manager.save()
    state = tf.train.get_checkpoint_state(str(tmp_path / "b"))
    assert state.model_checkpoint_path == str(tmp_path / "b" / "ckpt-5")  # observed: ckpt-4 and ckpt-5 kept
    assert list(state.all_model_checkpoint_paths) == [str(tmp_path / "b" / f"ckpt-{n}") for n in (4, 5)]
    assert 'model_checkpoint_path: "' in str(state)
    directory = str(tmp_path / "b")
    np.testing.assert_array_equal(tf.train.load_variable(directory, "v/.ATTRIBUTES/VARIABLE_VALUE"), [1., 2.])
    counter = tf.train.load_variable(directory + "/ckpt-5", "save_counter/.ATTRIBUTES/VARIABLE_VALUE:0")
    assert counter == 5 and np.ndim(counter) == 0  # observed, TF 2.21: np.int64(5)
    with pytest.raises(tf.errors.NotFoundError, match="Key nope not found in checkpoint"):  # observed
        tf.train.load_variable(directory, "nope")
    with pytest.raises(tf.errors.NotFoundError, match="Failed to find any matching files for"):  # observed
        tf.train.load_variable(str(tmp_path / "b" / "ckpt-1"), "nope")
    options = tf.train.CheckpointOptions(experimental_io_device="/job:localhost",
                                         experimental_enable_async_checkpoint=True)
    assert options.experimental_io_device == "/job:localhost" and options.experimental_enable_async_checkpoint
    assert checkpoint.save(str(tmp_path / "c" / "x"), options=options) == str(tmp_path / "c" / "x-6")  # observed
    assert checkpoint.write(str(tmp_path / "c" / "y"), options=options) == str(tmp_path / "c" / "y")
    checkpoint.restore(str(tmp_path / "c" / "y"), options=options).assert_consumed()
    assert manager.save(options=options) == str(tmp_path / "b" / "ckpt-7")  # observed: the 7th save


def test_coordinator_stops_threads_and_reraises():
    coord = tf.train.Coordinator()

    def work(i):
        with coord.stop_on_exception():
            n = 0
            while not coord.should_stop():
                n += 1
                if i == 1 and n > 3:
                    raise ValueError("boom")
                coord.wait_for_stop(0.01)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    with pytest.raises(ValueError, match="boom"):
        coord.join(threads)
    assert coord.should_stop() and not any(t.is_alive() for t in threads)
    clean = tf.train.Coordinator()
    clean.request_stop(StopIteration())  # TF's clean stop (OutOfRangeError): not re-raised
    clean.join([])


# ---------------------------------------------------------------------------------------------- summaries
def _events(logdir):
    (path,) = glob.glob(os.path.join(str(logdir), "events.out.tfevents.*"))
    return {tag: (step, plugin, value) for step, tag, plugin, value in read_tensors(path)}


def _png(data):
    return np.asarray(Image.open(io.BytesIO(data)))


def test_image_summary(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    images = np.linspace(0, 1, 2 * 3 * 4 * 3, dtype=np.float32).reshape(2, 3, 4, 3)
    with writer.as_default():
        assert tf.summary.image("im", images, step=1)
        assert tf.summary.image("im_u8", (np.arange(8) * 30).astype(np.uint8).reshape(2, 2, 2, 1), step=2,
                                max_outputs=1, description="dd")
        assert tf.summary.image("im_neg", np.array([[[[-0.5], [1.5]], [[0.25], [np.nan]]]], np.float32), step=3)
        assert tf.summary.image("im_f64", np.full((1, 1, 1, 4), 0.5), step=4)
        assert tf.summary.image("none", images, step=5, max_outputs=0)
        assert jax.jit(lambda x: tf.summary.image("jit", x, step=6))(jnp.asarray(images))
        with pytest.raises(ValueError, match=r"must have rank 4.  Received rank 3, shape \(2, 2, 2\)"):  # observed
            tf.summary.image("bad", np.zeros((2, 2, 2)), step=1)
        with pytest.raises(tf.errors.InvalidArgumentError, match="image must have 1, 2, 3, or 4 channels, got 5"):
            tf.summary.image("bad", np.zeros((1, 2, 2, 5)), step=1)
        tf.summary.flush()
    writer.close()
    events = _events(tmp_path)
    step, plugin, value = events["im"]
    # observed, TF 2.21: [b'4', b'3', png, png] under "images"; the first pixels as TF decodes them
    assert (step, plugin, value.shape, value[0], value[1]) == (1, "images", (4,), b"4", b"3")
    first, second = _png(value[2]), _png(value[3])
    assert first.shape == (3, 4, 3)
    assert first.reshape(-1)[:12].tolist() == [0, 3, 7, 10, 14, 17, 21, 25, 28, 32, 35, 39]  # observed
    assert second.reshape(-1)[:6].tolist() == [129, 133, 136, 140, 143, 147]  # observed
    assert second.reshape(-1)[-6:].tolist() == [237, 241, 244, 248, 251, 255]  # observed
    np.testing.assert_array_equal(np.stack([first, second]), (images * 255.5).astype(np.uint8))
    assert events["im_u8"][2].shape == (3,) and _png(events["im_u8"][2][2]).reshape(-1).tolist() == [0, 30, 60, 90]
    assert _png(events["im_neg"][2][2]).reshape(-1).tolist() == [0, 255, 63, 0]  # observed: clipped, NaN is 0
    assert _png(events["im_f64"][2][2]).tolist() == [[[127, 127, 127, 127]]]  # observed: RGBA
    assert events["none"][2].tolist() == [b"4", b"3"]  # observed: max_outputs=0 writes the dimensions only
    np.testing.assert_array_equal(_png(events["jit"][2][3]), second)


def test_audio_write_and_noop_writer(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    clip = np.array([-1.5, -1., -0.5, 0., 0.25, 0.4546487, 0.5, 0.99999, 1., 2., 1 / 65536, 3 / 65536], np.float32)
    metadata = b"\n\r\n\x06custom\x12\x03xyz\x12\x02dn\x1a\x04desc \x01"  # TF's SummaryMetadata, serialized
    with writer.as_default(step=3):
        assert tf.summary.audio("au", clip.reshape(1, 12, 1), 16000)
        assert tf.summary.write("gen", tf.constant([1, 2], tf.int64))
        assert tf.summary.write("gen2", 3.5, step=6, metadata=metadata)
        assert tf.summary.write("lazy", lambda: tf.constant("hey"), step=7, metadata=metadata)
    writer.close()
    events = _events(tmp_path)
    step, plugin, value = events["au"]
    assert (step, plugin, value.shape, value[0, 1]) == (3, "audio", (1, 2), b"")  # observed, TF 2.21
    wav = value[0, 0]
    # observed, TF 2.21's tf.audio.encode_wav of the same samples at 16000 Hz: header and 16-bit samples
    assert wav[:44] == (b"RIFF<\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80>\x00\x00\x00}\x00\x00\x02"
                        b"\x00\x10\x00data\x18\x00\x00\x00")
    assert np.frombuffer(wav[44:], "<i2").tolist() == [-32768, -32768, -16384, 0, 8192, 14898, 16384, 32767, 32767,
                                                        32767, 1, 2]
    assert events["gen"][1] == "" and events["gen"][2].dtype == np.int64  # observed: no plugin without metadata
    assert events["gen2"][:2] == (6, "custom") and events["gen2"][2].dtype == np.float32
    assert events["lazy"][2].item() == b"hey"
    noop = tf.summary.create_noop_writer()
    with noop.as_default():
        assert not tf.summary.scalar("x", 1.0, step=1) and not tf.summary.should_record_summaries()  # observed
        assert not tf.summary.image("i", np.zeros((1, 1, 1, 1)), step=1)
    assert tf.summary.flush() is None
    with pytest.warns(UserWarning, match="jax.profiler"):
        tf.summary.trace_on(graph=True, profiler=False)
    assert tf.summary.trace_export("trace", step=0) is None and tf.summary.trace_off() is None
    with pytest.raises(NotImplementedError, match="TensorFlow graph"):
        tf.summary.graph(None)
