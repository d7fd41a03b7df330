"""`tf.data` as TF's data guides (guide/data.ipynb, data_performance.ipynb) and scripts like them use it, against
TF 2.21 (tensorflow-cpu 2.21.0, Keras 3), observed: each expected text below is what the same expression printed
under `import tensorflow as tf`.

A `map`'s element spec is the function traced on the input's spec, as TF traces it: a size that depends on a
value (`tf.fill([x], x)`), on an unknown input dimension, or on a `tf.py_function`, is unknown; a size the ops fix
is known. Also: errors TF raises when the dataset is made (`padded_batch` shapes, `sample_from_datasets` /
`choose_from_datasets` of unlike datasets), `take_while`'s predicate check, `set_shape` on the guide's
`py_function` outputs, `list_files` names, and class names in `repr`.
"""
import os
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

D = tf.data.Dataset


def _eval(code: str):
    return eval(code, {"D": D, "tf": tf, "np": np})


# observed, TF 2.21 (Keras 3): `str(ds.element_spec)` and `repr(list(ds.as_numpy_iterator()))` of each expression.
TF_MAPPED = [
    ('D.range(4).map(lambda x: tf.fill([x], x))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)',
     '[array([], dtype=int64), array([1]), array([2, 2]), array([3, 3, 3])]'),
    ('D.range(6).map(lambda x: tf.fill([tf.cast(x, tf.int32)], x)).padded_batch(4, padded_shapes=(None,))',
     'TensorSpec(shape=(None, None), dtype=tf.int64, name=None)',
     '[array([[0, 0, 0],\n       [1, 0, 0],\n       [2, 2, 0],\n       [3, 3, 3]]), array([[4, 4, 4, 4, 0],\n'
     '       [5, 5, 5, 5, 5]])]'),
    ('D.from_tensor_slices(np.zeros((4, 10))).map(lambda x: x[:3])',
     'TensorSpec(shape=(3,), dtype=tf.float64, name=None)',
     '[array([0., 0., 0.]), array([0., 0., 0.]), array([0., 0., 0.]), array([0., 0., 0.])]'),
    ('D.from_generator(lambda: (np.arange(5) for _ in range(2)), output_signature=tf.TensorSpec([None], tf.i'
     'nt64)).map(lambda x: x[:3])',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)',
     '[array([0, 1, 2]), array([0, 1, 2])]'),
    ('D.from_generator(lambda: (np.zeros((3, i + 1)) for i in range(2)), output_signature=tf.TensorSpec([3, '
     'None], tf.float64)).map(lambda x: x * 2)',
     'TensorSpec(shape=(3, None), dtype=tf.float64, name=None)',
     '[array([[0.],\n       [0.],\n       [0.]]), array([[0., 0.],\n       [0., 0.],\n       [0., 0.]])]'),
    ('D.from_generator(lambda: (np.zeros((i + 1, 3)) for i in range(2)), output_signature=tf.TensorSpec([Non'
     'e, 3], tf.float64)).map(lambda x: tf.reduce_sum(x, 0))',
     'TensorSpec(shape=(3,), dtype=tf.float64, name=None)',
     '[array([0., 0., 0.]), array([0., 0., 0.])]'),
    ('D.from_tensor_slices(np.arange(6).reshape(3, 2)).map(lambda x: tf.boolean_mask(x, x > 0))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)',
     '[array([1]), array([2, 3]), array([4, 5])]'),
    ('D.from_tensor_slices(np.zeros((2, 2, 3))).map(lambda x: tf.reshape(x, [-1]))',
     'TensorSpec(shape=(6,), dtype=tf.float64, name=None)',
     '[array([0., 0., 0., 0., 0., 0.]), array([0., 0., 0., 0., 0., 0.])]'),
    ('D.range(1, 4).map(lambda x: tf.range(x))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)',
     '[array([0]), array([0, 1]), array([0, 1, 2])]'),
    ('D.range(10).batch(4).map(lambda b: tf.shape(b))',
     'TensorSpec(shape=(1,), dtype=tf.int32, name=None)',
     '[array([4], dtype=int32), array([4], dtype=int32), array([2], dtype=int32)]'),
    ('D.range(10).batch(4).map(lambda b: (b[:-1], b[1:]))',
     '(TensorSpec(shape=(None,), dtype=tf.int64, name=None), TensorSpec(shape=(None,), dtype=tf.int64, name=None))',
     '[(array([0, 1, 2]), array([1, 2, 3])), (array([4, 5, 6]), array([5, 6, 7])), (array([8]), array([9]))]'),
    ('D.range(30).batch(15, drop_remainder=True).map(lambda b: (b[:-5], b[-5:]))',
     '(TensorSpec(shape=(10,), dtype=tf.int64, name=None), TensorSpec(shape=(5,), dtype=tf.int64, name=None))',
     '[(array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]), array([10, 11, 12, 13, 14])), (array([15, 16, 17, 18, 19, 20,'
     ' 21, 22, 23, 24]), array([25, 26, 27, 28, 29]))]'),
    ('D.range(3).map(lambda x: tf.py_function(lambda v: v * 2, [x], tf.int64))',
     'TensorSpec(shape=<unknown>, dtype=tf.int64, name=None)',
     '[np.int64(0), np.int64(2), np.int64(4)]'),
    ('D.range(3).map(lambda x: tf.py_function(lambda v: (v * 2, v), [x], [tf.int64, tf.int64]))',
     '(TensorSpec(shape=<unknown>, dtype=tf.int64, name=None), TensorSpec(shape=<unknown>, dtype=tf.int64, n'
     'ame=None))',
     '[(np.int64(0), np.int64(0)), (np.int64(2), np.int64(1)), (np.int64(4), np.int64(2))]'),
    ('D.range(3).map(lambda x: tf.numpy_function(lambda v: v * 2, [x], tf.int64))',
     'TensorSpec(shape=<unknown>, dtype=tf.int64, name=None)',
     '[np.int64(0), np.int64(2), np.int64(4)]'),
    # tf.ensure_shape gives a py_function's output the shape asked for, None dimensions unknown
    ('D.range(3).map(lambda x: tf.ensure_shape(tf.py_function(lambda v: v * 2, [x], tf.int64), []))',
     'TensorSpec(shape=(), dtype=tf.int64, name=None)',
     '[np.int64(0), np.int64(2), np.int64(4)]'),
    ('D.range(3).map(lambda x: tf.ensure_shape(tf.py_function(lambda v: tf.fill([2], v), [x], tf.int64), [None]))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)',
     '[array([0, 0]), array([1, 1]), array([2, 2])]'),
    ('D.range(3).map(lambda x: tf.ensure_shape(tf.py_function(lambda v: v, [x], tf.int64), None))',
     'TensorSpec(shape=<unknown>, dtype=tf.int64, name=None)',
     '[np.int64(0), np.int64(1), np.int64(2)]'),
    ('D.range(3).map(lambda x: (tf.py_function(lambda v: v * 2, [x], tf.int64), x + 1))',
     '(TensorSpec(shape=<unknown>, dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf.int64, name=None))',
     '[(np.int64(0), np.int64(1)), (np.int64(2), np.int64(2)), (np.int64(4), np.int64(3))]'),
    ('D.from_tensor_slices(np.zeros((2, 3))).concatenate(D.from_tensor_slices(np.ones((2, 3)))).map(lambda x'
     ': tf.concat([x, x], 0))',
     'TensorSpec(shape=(6,), dtype=tf.float64, name=None)',
     '[array([0., 0., 0., 0., 0., 0.]), array([0., 0., 0., 0., 0., 0.]), array([1., 1., 1., 1., 1., 1.]), ar'
     'ray([1., 1., 1., 1., 1., 1.])]'),
    ('D.choose_from_datasets([D.from_tensor_slices(np.zeros((2, 3))), D.from_tensor_slices(np.ones((2, 4)))]'
     ', D.range(2))',
     'TensorSpec(shape=(None,), dtype=tf.float64, name=None)',
     '[array([0., 0., 0.]), array([1., 1., 1., 1.])]'),
    ('D.range(4).map(lambda x: {"a": tf.fill([x], x), "b": tf.cast(x, tf.float32) * 2.0})',
     "{'a': TensorSpec(shape=(None,), dtype=tf.int64, name=None), 'b': TensorSpec(shape=(), dtype=tf.float32"
     ', name=None)}',
     "[{'a': array([], dtype=int64), 'b': np.float32(0.0)}, {'a': array([1]), 'b': np.float32(2.0)}, {'a': a"
     "rray([2, 2]), 'b': np.float32(4.0)}, {'a': array([3, 3, 3]), 'b': np.float32(6.0)}]"),
]

TF_ERRORS = [
    ('list(D.range(10).take_while(lambda x: x))',
     'ValueError',
     'Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor but its return type isTensorSpe'
     'c(shape=(), dtype=tf.int64, name=None).'),
    ('D.range(3).map(lambda x: tf.fill([3], x)).padded_batch(2, padded_shapes=[2])',
     'ValueError',
     'The padded shape (2,) is not compatible with the shape (3,) of the corresponding input component.'),
    ('D.range(3).map(lambda x: {"a": tf.fill([3], x)}).padded_batch(2, padded_shapes={"a": [2, 1]})',
     'ValueError',
     'The padded shape (2, 1) is not compatible with the shape (3,) of the corresponding input component.'),
    ('D.range(1, 5).map(lambda x: tf.fill([x], x)).padded_batch(2, padded_shapes=[2, 2])',
     'ValueError',
     'The padded shape (2, 2) is not compatible with the shape (None,) of the corresponding input component.'),
    ('D.sample_from_datasets([D.range(2), D.from_tensors((1, 2))])',
     'TypeError',
     'Invalid `datasets`. `datasets` must have compatible element specs.\n Dataset 0 element_spec=TensorSpec'
     '(shape=(), dtype=tf.int64, name=None).\nDataset 1 element_spec=(TensorSpec(shape=(), dtype=tf.int32, n'
     'ame=None), TensorSpec(shape=(), dtype=tf.int32, name=None)).'),
    ('D.choose_from_datasets([D.range(3), D.from_tensor_slices([1.0, 2.0])], D.range(2))',
     'TypeError',
     'Invalid `datasets`. `datasets` must have compatible element specs.\n Dataset 0 element_spec=TensorSpec'
     '(shape=(), dtype=tf.int64, name=None).\nDataset 1 element_spec=TensorSpec(shape=(), dtype=tf.float32, '
     'name=None).'),
    ('D.choose_from_datasets([D.range(3), D.range(3)], D.from_tensor_slices([0, 1]))',
     'TypeError',
     'Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` tensors but are Tenso'
     'rSpec(shape=(), dtype=tf.int32, name=None).'),
    ('tf.constant([1, 2, 3]).set_shape([4])',
     'ValueError',
     "Tensor's shape (3,) is not compatible with supplied shape (4,)."),
    ('next(iter(D.range(1))).set_shape([2])',
     'ValueError',
     "Tensor's shape () is not compatible with supplied shape (2,)."),
    ('next(iter(D.from_tensors(np.zeros((2, 3))))).set_shape([2, None, 1])',
     'ValueError',
     "Tensor's shape (2, 3) is not compatible with supplied shape (2, None, 1)."),
]

TF_REPRS = [
    ('tf.data.TextLineDataset(["cowper.txt"])',
     '<TextLineDatasetV2 element_spec=TensorSpec(shape=(), dtype=tf.string, name=None)>'),
    ('tf.data.TFRecordDataset("r.tfrec")',
     '<TFRecordDatasetV2 element_spec=TensorSpec(shape=(), dtype=tf.string, name=None)>'),
    ('next(iter(D.range(3).window(2)))',
     '<_VariantDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('D.counter()',
     '<_ScanDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('tf.data.experimental.Counter()',
     '<_ScanDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
]


@pytest.mark.parametrize("code,spec,elements", TF_MAPPED)
def test_mapped_spec_is_traced_as_tf(code, spec, elements):
    ds = _eval(code)
    assert str(ds.element_spec) == spec
    assert repr(list(ds.as_numpy_iterator())) == elements


def test_sampled_datasets_of_unlike_sizes():
    a, b = D.from_tensor_slices(np.zeros((2, 3))), D.from_tensor_slices(np.ones((2, 4)))
    sampled = D.sample_from_datasets([a, b], seed=1)
    # observed, TF 2.21 (Keras 3); the order is numpy's draws, not TF's
    assert str(sampled.element_spec) == "TensorSpec(shape=(None,), dtype=tf.float64, name=None)"
    assert sorted(x.size for x in sampled.as_numpy_iterator()) == [3, 3, 4, 4]


@pytest.mark.parametrize("code,kind,message", TF_ERRORS)
def test_errors_match_tf(code, kind, message):
    with pytest.raises(Exception) as info:
        _eval(code)
    assert type(info.value).__name__ == kind
    assert str(info.value) == message


@pytest.mark.parametrize("code,expected", TF_REPRS)
def test_repr_names_tf_class(code, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cowper.txt").write_text("a\n")
    with tf.io.TFRecordWriter("r.tfrec") as writer:
        writer.write(b"abc")
    assert repr(_eval(code)) == expected


def test_py_function_outputs_take_set_shape():
    images = np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)

    @tf.py_function(Tout=tf.float32)
    def rotate(image):
        return np.rot90(image.numpy())

    def tf_rotate(image, label):  # the guide's pattern: the py_function's unknown shape set back
        shape = image.shape
        image = rotate(image)
        image.set_shape(shape)
        return image, label

    ds = D.from_tensor_slices((images, ["a", "b"])).map(tf_rotate)
    # observed, TF 2.21 (Keras 3)
    assert str(ds.element_spec) == ("(TensorSpec(shape=(4, 4, 3), dtype=tf.float32, name=None), TensorSpec(shape=(),"
                                    " dtype=tf.string, name=None))")
    rows = [(image.shape, image.numpy()[0, 0].tolist(), label.numpy()) for image, label in ds]
    assert rows == [((4, 4, 3), [9.0, 10.0, 11.0], b"a"), ((4, 4, 3), [57.0, 58.0, 59.0], b"b")]
    assert [np.rot90(i)[0, 0].tolist() for i in images] == [r[1] for r in rows]
    x = next(iter(D.from_tensors([1, 2, 3])))
    x.set_shape([None])
    assert str(x.get_shape()) == "(3,)"  # observed, TF 2.21 (Keras 3)


def test_list_files_names_as_tf(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for name in ("b.txt", "a.txt", "sub/c.txt"):
        (tmp_path / name).write_text("x\n")

    def listed(pattern):
        return list(D.list_files(pattern, shuffle=False).as_numpy_iterator())
    # observed, TF 2.21 (Keras 3): a wildcard with no folder before it reads "./"
    assert listed("*.txt") == [b"./a.txt", b"./b.txt"]
    assert listed("a.txt") == [b"a.txt"]
    assert listed("sub/*.txt") == [b"sub/c.txt"]
    assert listed("s*/*.txt") == [b"./sub/c.txt"]
    assert listed("./sub/*.txt") == [b"./sub/c.txt"]


def test_float_division_by_zero_in_a_map_is_silent():
    ds = D.from_tensor_slices([1.0, 0.0, -1.0]).map(lambda x: 1.0 / x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = list(ds.as_numpy_iterator())
    assert values == [np.float32(1.0), np.float32(np.inf), np.float32(-1.0)]  # observed, TF 2.21 (Keras 3)
    ignored = D.from_tensor_slices([1.0, 0.0, 2.0]).map(
        lambda x: tf.debugging.check_numerics(1.0 / x, "bad")).ignore_errors()
    assert list(ignored.as_numpy_iterator()) == [np.float32(1.0), np.float32(0.5)]  # observed, TF 2.21 (Keras 3)


def test_generator_tuples_become_the_signature_tensors():
    class Artificial(tf.data.Dataset):  # the performance guide's ArtificialDataset
        def _generator(num_samples):  # noqa: N805  # pyright: ignore[reportSelfClsParameterName] (the guide's form)
            for i in range(num_samples):
                yield (i,)

        def __new__(cls, num_samples=3):
            return tf.data.Dataset.from_generator(cls._generator, args=(num_samples,),
                                                  output_signature=tf.TensorSpec(shape=(1,), dtype=tf.int64))
    ds = Artificial()
    # observed, TF 2.21 (Keras 3)
    assert (repr(ds), repr(list(ds.as_numpy_iterator()))) == (
        "<_FlatMapDataset element_spec=TensorSpec(shape=(1,), dtype=tf.int64, name=None)>",
        "[array([0]), array([1]), array([2])]")
    nested = D.from_generator(lambda: iter([({"a": (1, 2)}, [3.0])]), output_signature=(
        {"a": tf.TensorSpec((2,), tf.int32)}, tf.TensorSpec((1,), tf.float32)))
    assert repr(list(nested.as_numpy_iterator())) == "[({'a': array([1, 2], dtype=int32)}, array([3.], dtype=float32))]"


def test_a_string_tensors_dtype_names_tf_string():
    ds = D.from_tensor_slices(["a", "b"]).map(lambda s: tf.py_function(lambda v: v.numpy() + b"!", [s], s.dtype))
    assert list(ds.as_numpy_iterator()) == [b"a!", b"b!"]  # observed, TF 2.21 (Keras 3)
    assert tf.as_dtype(next(iter(D.from_tensors("a"))).dtype) == tf.string


# observed, TF 2.21 (Keras 3) on 2 CPU cores: `interleave` of `from_tensors(x).repeat(3)` over `range(4)` by
# `num_parallel_calls`, the cycle length left to TF.
TF_INTERLEAVED = [
    (None, [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3]),
    (tf.data.AUTOTUNE, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]),
    (2, [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3]),
]


@pytest.mark.parametrize("calls,expected", TF_INTERLEAVED)
def test_interleave_default_cycle_length(calls, expected, monkeypatch):
    from jdist.tfdata import combinators

    monkeypatch.setattr(combinators, "cores", lambda: 2)
    ds = D.range(4).interleave(lambda x: D.from_tensors(x).repeat(3), num_parallel_calls=calls)
    assert [int(v) for v in ds.as_numpy_iterator()] == expected


def test_interleave_more_calls_than_its_cycle(monkeypatch):
    from jdist.tfdata import combinators

    monkeypatch.setattr(combinators, "cores", lambda: 2)
    ds = D.range(4).interleave(lambda x: D.from_tensors(x).repeat(3), num_parallel_calls=4)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        list(ds)
    # observed, TF 2.21 (Keras 3) on 2 CPU cores, when iterated
    assert str(info.value) == ("If `cycle_length` is set to a fixed value, `num_parallel_calls` must be either "
                               "`tf.data.AUTOTUNE` or a value less than or equal to `cycle_length`. However, "
                               "`num_parallel_calls` is 4 and `cycle_length` is 2")


def test_cache_to_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cachedir").mkdir()
    calls = []
    ds = D.range(4).map(lambda x: tf.py_function(lambda v: calls.append(1) or v * 10, [x], tf.int64)).cache(
        "cachedir/c")
    # observed, TF 2.21 (Keras 3): the first complete pass fills the files, later passes and other datasets read them
    assert ([int(v) for v in ds.as_numpy_iterator()], len(calls)) == ([0, 10, 20, 30], 4)
    assert sorted(os.listdir("cachedir")) == ["c.data-00000-of-00001", "c.index"]
    assert ([int(v) for v in ds.as_numpy_iterator()], len(calls)) == ([0, 10, 20, 30], 4)
    assert [int(v) for v in D.range(7).cache("cachedir/c").as_numpy_iterator()] == [0, 10, 20, 30]
    partial = D.range(5).cache("cachedir/p")
    it = iter(partial)
    next(it)
    del it
    assert sorted(os.listdir("cachedir")) == ["c.data-00000-of-00001", "c.index"]  # an unfinished pass keeps nothing
    assert [int(v) for v in partial.as_numpy_iterator()] == [0, 1, 2, 3, 4]
    assert len(os.listdir("cachedir")) == 4
    with pytest.raises(tf.errors.NotFoundError) as info:
        list(D.range(3).cache("nodir/x"))
    assert str(info.value) == "nodir/x_0.lockfile; No such file or directory"  # TF's, its op prefix left out
