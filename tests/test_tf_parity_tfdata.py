"""`tf.data` pipelines as TF scripts write them, against TF 2.21 (tensorflow-cpu 2.21.0, Keras 3), observed: each
expected text below is what the same expression printed under `import tensorflow as tf`.

Sources, `map` (tuples spread into arguments, dicts, lists, Python numbers, strings, tf ops), `filter`, `flat_map`,
`interleave`, `batch` / `padded_batch` / `unbatch` / `rebatch`, `window`, `group_by_window`,
`bucket_by_sequence_length`, `scan`, `concatenate`, `zip`, `enumerate`, `unique`: their elements (through
`as_numpy_iterator`, so numpy scalars and dtypes count), printed `element_spec`, `cardinality()`, and the errors TF
raises. Shuffle orders are numpy's, not TF's permutation: only their properties are compared.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

D = tf.data.Dataset


def _eval(code: str):
    return eval(code, {"D": D, "tf": tf, "np": np})


def describe(ds) -> str:
    return f"{ds.element_spec} | {int(ds.cardinality())} | {list(ds.as_numpy_iterator())!r}"


# observed, TF 2.21 (Keras 3): `describe(ds)` (element_spec | cardinality | as_numpy_iterator list) of each
# expression.
TF_DESCRIBED = [
    ('D.from_tensor_slices(({"a": np.arange(3)}, (np.ones(3), np.zeros((3, 2), np.int32))))',
     "({'a': TensorSpec(shape=(), dtype=tf.int64, name=None)}, (TensorSpec(shape=(), dtype=tf.float64, name=Non"
     "e), TensorSpec(shape=(2,), dtype=tf.int32, name=None))) | 3 | [({'a': np.int64(0)}, (np.float64(1.0), arr"
     "ay([0, 0], dtype=int32))), ({'a': np.int64(1)}, (np.float64(1.0), array([0, 0], dtype=int32))), ({'a': np"
     '.int64(2)}, (np.float64(1.0), array([0, 0], dtype=int32)))]'),
    ('D.from_tensor_slices(([1.0, 2], ["x", "y"]))',
     '(TensorSpec(shape=(), dtype=tf.float32, name=None), TensorSpec(shape=(), dtype=tf.string, name=None)) | 2'
     " | [(np.float32(1.0), b'x'), (np.float32(2.0), b'y')]"),
    ('D.from_tensors(([1, 2, 3], "s"))',
     '(TensorSpec(shape=(3,), dtype=tf.int32, name=None), TensorSpec(shape=(), dtype=tf.string, name=None)) | 1'
     " | [(array([1, 2, 3], dtype=int32), b's')]"),
    ('D.range(5, 0, -2)',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | 3 | [np.int64(5), np.int64(3), np.int64(1)]'),
    ('D.from_generator(lambda: ((i, [float(i)] * i) for i in range(3)), output_signature=(tf.TensorSpec((), tf.'
     'int32), tf.TensorSpec((None,), tf.float32)))',
     '(TensorSpec(shape=(), dtype=tf.int32, name=None), TensorSpec(shape=(None,), dtype=tf.float32, name=None))'
     ' | -2 | [(np.int32(0), array([], dtype=float32)), (np.int32(1), array([1.], dtype=float32)), (np.int32(2)'
     ', array([2., 2.], dtype=float32))]'),
    ('D.range(3).map(lambda x: (x, 1, 2.0, "s", True))',
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf.int32, name=None), Tensor'
     'Spec(shape=(), dtype=tf.float32, name=None), TensorSpec(shape=(), dtype=tf.string, name=None), TensorSpec'
     "(shape=(), dtype=tf.bool, name=None)) | 3 | [(np.int64(0), np.int32(1), np.float32(2.0), b's', np.True_),"
     " (np.int64(1), np.int32(1), np.float32(2.0), b's', np.True_), (np.int64(2), np.int32(1), np.float32(2.0),"
     " b's', np.True_)]"),
    ('D.range(3).map(lambda x: [x, x + 1])',
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf.int64, name=None)) | 3 | '
     '[(np.int64(0), np.int64(1)), (np.int64(1), np.int64(2)), (np.int64(2), np.int64(3))]'),
    ('D.range(2).map(lambda x: (x, [x, x]))',
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(2,), dtype=tf.int64, name=None)) | 2 '
     '| [(np.int64(0), array([0, 0])), (np.int64(1), array([1, 1]))]'),
    ('D.range(3).map(lambda x: {"x": x * 2, "y": tf.cast(x, tf.float32)}, num_parallel_calls=tf.data.AUTOTUNE)',
     "{'x': TensorSpec(shape=(), dtype=tf.int64, name=None), 'y': TensorSpec(shape=(), dtype=tf.float32, name=N"
     "one)} | 3 | [{'x': np.int64(0), 'y': np.float32(0.0)}, {'x': np.int64(2), 'y': np.float32(1.0)}, {'x': np"
     ".int64(4), 'y': np.float32(2.0)}]"),
    ('D.from_tensor_slices((np.arange(4, dtype=np.uint8), [0, 1, 2, 1])).map(lambda x, y: (tf.cast(x, tf.float3'
     '2) / 255.0, tf.one_hot(y, 3)))',
     '(TensorSpec(shape=(), dtype=tf.float32, name=None), TensorSpec(shape=(3,), dtype=tf.float32, name=None)) '
     '| 4 | [(np.float32(0.0), array([1., 0., 0.], dtype=float32)), (np.float32(0.003921569), array([0., 1., 0.'
     '], dtype=float32)), (np.float32(0.007843138), array([0., 0., 1.], dtype=float32)), (np.float32(0.01176470'
     '6), array([0., 1., 0.], dtype=float32))]'),
    ('D.from_tensor_slices(["a", "bb"]).map(lambda s: s + "!")',
     "TensorSpec(shape=(), dtype=tf.string, name=None) | 2 | [b'a!', b'bb!']"),
    ('D.from_tensor_slices(["a", "bb"]).map(lambda s: (s == "a", s != "a"))',
     '(TensorSpec(shape=(), dtype=tf.bool, name=None), TensorSpec(shape=(), dtype=tf.bool, name=None)) | 2 | [('
     'np.True_, np.False_), (np.False_, np.True_)]'),
    ('D.from_tensor_slices(["a", "bb"]).filter(lambda s: s != "a")',
     "TensorSpec(shape=(), dtype=tf.string, name=None) | -2 | [b'bb']"),
    ('D.from_tensor_slices(["Hello World", "a b c"]).map(tf.strings.lower)',
     "TensorSpec(shape=(), dtype=tf.string, name=None) | 2 | [b'hello world', b'a b c']"),
    ('D.range(10).filter(lambda x: x % 3 == 0)',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | -2 | [np.int64(0), np.int64(3), np.int64(6), np.int64(9)]'),
    ('D.range(4).flat_map(lambda x: D.range(x))',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | -2 | [np.int64(0), np.int64(0), np.int64(1), np.int64(0'
     '), np.int64(1), np.int64(2)]'),
    ('D.range(1, 4).interleave(lambda x: D.from_tensors(x).repeat(3), cycle_length=2, block_length=2)',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | -2 | [np.int64(1), np.int64(1), np.int64(2), np.int64(2'
     '), np.int64(1), np.int64(2), np.int64(3), np.int64(3), np.int64(3)]'),
    ('D.range(7).batch(3, drop_remainder=True)',
     'TensorSpec(shape=(3,), dtype=tf.int64, name=None) | 2 | [array([0, 1, 2]), array([3, 4, 5])]'),
    ('D.range(1, 5).map(lambda x: tf.fill([x], x)).padded_batch(2, padded_shapes=[5], padding_values=tf.constan'
     't(-1, tf.int64))',
     'TensorSpec(shape=(None, 5), dtype=tf.int64, name=None) | 2 | [array([[ 1, -1, -1, -1, -1],\n       [ 2,  '
     '2, -1, -1, -1]]), array([[ 3,  3,  3, -1, -1],\n       [ 4,  4,  4,  4, -1]])]'),
    ('D.range(1, 5).map(lambda x: (tf.fill([x, 2], x), tf.range(x))).padded_batch(2, padded_shapes=([6, None], '
     '[-1]), drop_remainder=True)',
     '(TensorSpec(shape=(2, 6, None), dtype=tf.int64, name=None), TensorSpec(shape=(2, None), dtype=tf.int64, n'
     'ame=None)) | 2 | [(array([[[1, 1],\n        [0, 0],\n        [0, 0],\n        [0, 0],\n        [0, 0],\n '
     '       [0, 0]],\n\n       [[2, 2],\n        [2, 2],\n        [0, 0],\n        [0, 0],\n        [0, 0],\n '
     '       [0, 0]]]), array([[0, 0],\n       [0, 1]])), (array([[[3, 3],\n        [3, 3],\n        [3, 3],\n '
     '       [0, 0],\n        [0, 0],\n        [0, 0]],\n\n       [[4, 4],\n        [4, 4],\n        [4, 4],\n '
     '       [4, 4],\n        [0, 0],\n        [0, 0]]]), array([[0, 1, 2, 0],\n       [0, 1, 2, 3]]))]'),
    ('D.range(1, 3).map(lambda x: tf.fill([x], tf.cast(x, tf.float32))).padded_batch(2, padding_values=-1.0)',
     'TensorSpec(shape=(None, None), dtype=tf.float32, name=None) | 1 | [array([[ 1., -1.],\n       [ 2.,  2.]]'
     ', dtype=float32)]'),
    ('D.from_tensor_slices({"a": [1, 2], "s": ["x", "y"]}).padded_batch(2)',
     "{'a': TensorSpec(shape=(None,), dtype=tf.int32, name=None), 's': TensorSpec(shape=(None,), dtype=tf.strin"
     "g, name=None)} | 1 | [{'a': array([1, 2], dtype=int32), 's': array([b'x', b'y'], dtype=object)}]"),
    ('D.from_tensor_slices(["a b", "c"]).map(lambda s: tf.strings.split(s)).padded_batch(2, padded_shapes=[3], '
     'padding_values="<pad>")',
     "TensorSpec(shape=(None, 3), dtype=tf.string, name=None) | 1 | [array([[b'a', b'b', b'<pad>'],\n       [b'"
     "c', b'<pad>', b'<pad>']], dtype=object)]"),
    ('D.from_tensors({"a": [[1, 2], [3, 4]], "b": ["x", "y"]}).unbatch()',
     "{'a': TensorSpec(shape=(2,), dtype=tf.int32, name=None), 'b': TensorSpec(shape=(), dtype=tf.string, name="
     "None)} | 2 | [{'a': array([1, 2], dtype=int32), 'b': b'x'}, {'a': array([3, 4], dtype=int32), 'b': b'y'}]"),
    ('D.range(8).batch(4, drop_remainder=True).unbatch()',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | 8 | [np.int64(0), np.int64(1), np.int64(2), np.int64(3)'
     ', np.int64(4), np.int64(5), np.int64(6), np.int64(7)]'),
    ('D.range(10).batch(4).unbatch()',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | -2 | [np.int64(0), np.int64(1), np.int64(2), np.int64(3'
     '), np.int64(4), np.int64(5), np.int64(6), np.int64(7), np.int64(8), np.int64(9)]'),
    ('D.range(8).batch(4, drop_remainder=True).rebatch(3)',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0, 1, 2]), array([3, 4, 5]), array([6, 7])]'),
    ('D.range(8).batch(4, drop_remainder=True).rebatch(3, drop_remainder=True)',
     'TensorSpec(shape=(3,), dtype=tf.int64, name=None) | -2 | [array([0, 1, 2]), array([3, 4, 5])]'),
    ('D.range(8).batch(4).rebatch([1, 3])',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0]), array([1, 2, 3]), array([4]), ar'
     'ray([5, 6, 7])]'),
    ('D.range(7).window(3, shift=2, drop_remainder=True).flat_map(lambda w: w.batch(3))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0, 1, 2]), array([2, 3, 4]), array([4'
     ', 5, 6])]'),
    ('D.range(10).window(3, shift=2, stride=3, drop_remainder=True).flat_map(lambda w: w.batch(3))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0, 3, 6]), array([2, 5, 8])]'),
    ('D.from_tensor_slices((np.arange(6), np.arange(6) * 10)).window(2).flat_map(lambda a, b: D.zip((a.batch(2)'
     ', b.batch(2))))',
     '(TensorSpec(shape=(None,), dtype=tf.int64, name=None), TensorSpec(shape=(None,), dtype=tf.int64, name=Non'
     'e)) | -2 | [(array([0, 1]), array([ 0, 10])), (array([2, 3]), array([20, 30])), (array([4, 5]), array([40'
     ', 50]))]'),
    ('D.from_tensor_slices(np.arange(10, dtype=np.float32)).window(4, shift=1, drop_remainder=True).flat_map(la'
     'mbda w: w.batch(4)).map(lambda w: (w[:-1], w[-1])).batch(3)',
     '(TensorSpec(shape=(None, None), dtype=tf.float32, name=None), TensorSpec(shape=(None,), dtype=tf.float32,'
     ' name=None)) | -2 | [(array([[0., 1., 2.],\n       [1., 2., 3.],\n       [2., 3., 4.]], dtype=float32), a'
     'rray([3., 4., 5.], dtype=float32)), (array([[3., 4., 5.],\n       [4., 5., 6.],\n       [5., 6., 7.]], dt'
     'ype=float32), array([6., 7., 8.], dtype=float32)), (array([[6., 7., 8.]], dtype=float32), array([9.], dty'
     'pe=float32))]'),
    ('D.range(10).group_by_window(lambda x: x % 2, lambda k, w: w.map(lambda v: (k, v)), window_size=3)',
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf.int64, name=None)) | -2 |'
     ' [(np.int64(0), np.int64(0)), (np.int64(0), np.int64(2)), (np.int64(0), np.int64(4)), (np.int64(1), np.in'
     't64(1)), (np.int64(1), np.int64(3)), (np.int64(1), np.int64(5)), (np.int64(0), np.int64(6)), (np.int64(0)'
     ', np.int64(8)), (np.int64(1), np.int64(7)), (np.int64(1), np.int64(9))]'),
    ('D.range(10).group_by_window(lambda x: x % 3, lambda k, w: w.batch(10), window_size_func=lambda k: k + 1)',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0]), array([3]), array([1, 4]), array'
     '([6]), array([2, 5, 8]), array([9]), array([7])]'),
    ('D.from_generator(lambda: iter([[1], [2, 2], [3, 3, 3], [4, 4, 4, 4], [5] * 5, [6], [7, 7]]), output_signa'
     'ture=tf.TensorSpec([None], tf.int32)).bucket_by_sequence_length(lambda x: tf.shape(x)[0], bucket_boundari'
     'es=[3, 5], bucket_batch_sizes=[2, 2, 2])',
     'TensorSpec(shape=(None, None), dtype=tf.int32, name=None) | -2 | [array([[1, 0],\n       [2, 2]], dtype=i'
     'nt32), array([[3, 3, 3, 0],\n       [4, 4, 4, 4]], dtype=int32), array([[6, 0],\n       [7, 7]], dtype=in'
     't32), array([[5, 5, 5, 5, 5]], dtype=int32)]'),
    ('D.range(5).scan(0.0, lambda s, x: (s + 1.0, (x, s)))',
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf.float32, name=None)) | 5 '
     '| [(np.int64(0), np.float32(0.0)), (np.int64(1), np.float32(1.0)), (np.int64(2), np.float32(2.0)), (np.in'
     't64(3), np.float32(3.0)), (np.int64(4), np.float32(4.0))]'),
    ('D.range(3).batch(2).scan(np.int64(0), lambda s, x: (s + 1, x * 2))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | 2 | [array([0, 2]), array([4])]'),
    ('D.from_tensor_slices(np.zeros((2, 3))).concatenate(D.from_tensor_slices(np.ones((1, 4))))',
     'TensorSpec(shape=(None,), dtype=tf.float64, name=None) | 3 | [array([0., 0., 0.]), array([0., 0., 0.]), a'
     'rray([1., 1., 1., 1.])]'),
    ('D.from_tensor_slices(np.zeros((1, 3))).concatenate(D.from_tensor_slices(np.ones((1, 3, 1))))',
     'TensorSpec(shape=<unknown>, dtype=tf.float64, name=None) | 2 | [array([0., 0., 0.]), array([[1.],\n      '
     ' [1.],\n       [1.]])]'),
    ('D.zip({"x": D.range(3), "y": D.range(10, 15).map(lambda v: tf.cast(v, tf.float32))})',
     "{'x': TensorSpec(shape=(), dtype=tf.int64, name=None), 'y': TensorSpec(shape=(), dtype=tf.float32, name=N"
     "one)} | 3 | [{'x': np.int64(0), 'y': np.float32(10.0)}, {'x': np.int64(1), 'y': np.float32(11.0)}, {'x': "
     "np.int64(2), 'y': np.float32(12.0)}]"),
    ('D.from_tensor_slices((["a", "b"], [1, 2])).enumerate(start=5)',
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), (TensorSpec(shape=(), dtype=tf.string, name=None), Tens'
     "orSpec(shape=(), dtype=tf.int32, name=None))) | 2 | [(np.int64(5), (b'a', np.int32(1))), (np.int64(6), (b"
     "'b', np.int32(2)))]"),
    ('D.from_tensor_slices([1, 2, 2, 3, 1]).unique()',
     'TensorSpec(shape=(), dtype=tf.int32, name=None) | -2 | [np.int32(1), np.int32(2), np.int32(3)]'),
    ('D.from_tensor_slices(["a", "b", "a"]).unique()',
     "TensorSpec(shape=(), dtype=tf.string, name=None) | -2 | [b'a', b'b']"),
    ('D.range(10).repeat().skip(3).take(2)',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | 2 | [np.int64(3), np.int64(4)]'),
    ('D.range(10).take_while(lambda x: tf.less(x, 3))',
     'TensorSpec(shape=(), dtype=tf.int64, name=None) | -2 | [np.int64(0), np.int64(1), np.int64(2)]'),
    ('D.from_generator(lambda: iter([[1], [2, 2], [3, 3, 3], [4] * 4, [5] * 5, [6], [7, 7], [8] * 3]), output_s'
     'ignature=tf.TensorSpec([None], tf.int32)).bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [2,'
     ' 2, 2], pad_to_bucket_boundary=True)',
     'TensorSpec(shape=(None, None), dtype=tf.int32, name=None) | -2 | [array([[1, 0],\n       [2, 2]], dtype=i'
     'nt32), array([[3, 3, 3, 0, 0],\n       [4, 4, 4, 4, 0]], dtype=int32), array([[6, 0],\n       [7, 7]], dt'
     'ype=int32), array([[5, 5, 5, 5, 5],\n       [8, 8, 8, 0, 0]], dtype=int32)]'),
    ('D.range(10).bucket_by_sequence_length(lambda x: tf.cast(x, tf.int32) % 3, [1, 2], [2, 2, 2], no_padding=True)',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0, 3]), array([1, 4]), array([2, 5]),'
     ' array([6, 9]), array([7]), array([8])]'),
    ('D.range(6).filter(lambda x: x < 4).shuffle(tf.data.UNKNOWN_CARDINALITY, seed=1).batch(4).map(lambda x: tf'
     '.sort(x))',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None) | -2 | [array([0, 1, 2, 3])]'),
]

# observed, TF 2.21 (Keras 3): `str(ds.element_spec)`.
TF_SPECS = [
    ('D.range(7).window(3)',
     'DatasetSpec(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorShape([]))'),
    ('D.range(10).batch(3).window(2)',
     'DatasetSpec(TensorSpec(shape=(None,), dtype=tf.int64, name=None), TensorShape([]))'),
    ('D.from_tensor_slices({"a": np.zeros((5, 2)), "b": np.arange(5)}).window(2, shift=2)',
     "{'a': DatasetSpec(TensorSpec(shape=(2,), dtype=tf.float64, name=None), TensorShape([])), 'b': DatasetSpec"
     '(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorShape([]))}'),
    ('D.range(10).window(3, shift=2, stride=2)',
     'DatasetSpec(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorShape([]))'),
    ('D.from_generator(lambda: iter([[1], [2, 2], [3, 3, 3], [4] * 4, [5] * 5, [6], [7, 7], [8] * 3]), output_s'
     'ignature=tf.TensorSpec([None], tf.int32)).bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [2,'
     ' 2, 2], pad_to_bucket_boundary=True)',
     'TensorSpec(shape=(None, None), dtype=tf.int32, name=None)'),
    ('D.from_generator(lambda: iter([[1], [2, 2], [3, 3, 3]]), output_signature=tf.TensorSpec([None], tf.int32)'
     ').bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3], [2, 3], drop_remainder=True, padding_values=-1'
     ')',
     'TensorSpec(shape=(None, None), dtype=tf.int32, name=None)'),
    ('D.from_generator(lambda: iter([[1], [2, 2], [3, 3, 3]]), output_signature=tf.TensorSpec([None], tf.int32)'
     ').bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3], [2, 2], padded_shapes=[5])',
     'TensorSpec(shape=(None, 5), dtype=tf.int32, name=None)'),
    ('D.range(4).bucket_by_sequence_length(lambda x: tf.cast(x, tf.int32), [3], [2, 2])',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)'),
    ('D.range(10).bucket_by_sequence_length(lambda x: tf.cast(x, tf.int32) % 3, [1, 2], [2, 2, 2], no_padding=True)',
     'TensorSpec(shape=(None,), dtype=tf.int64, name=None)'),
]

# observed, TF 2.21 (Keras 3): `int(ds.cardinality())`.
TF_CARDINALITIES = [
    ('D.range(10).window(3)', 4),
    ('D.range(10).window(3, shift=3, stride=2, drop_remainder=True)', 2),
    ('D.range(10).window(3, shift=2, stride=3)', 5),
    ('D.range(2).window(3, shift=5, drop_remainder=True)', 0),
    ('D.range(10).batch(4).repeat().unbatch()', -1),
    ('D.from_tensor_slices(np.zeros((4, 3, 2))).unbatch()', 12),
    ('D.range(8).batch(4, drop_remainder=True).filter(lambda x: True).unbatch()', -2),
    ('D.range(8).repeat().batch(4).rebatch(3)', -2),
    ('D.range(10).filter(lambda x: x > 2).take(3)', -2),
    ('D.range(10).repeat().batch(3)', -1),
    ('D.range(10).shard(3, 1)', 3),
    ('D.range(1, 4).map(lambda x: tf.range(x)).unbatch()', -2),
]

# observed, TF 2.21 (Keras 3): `repr(ds)` (its class name and element_spec; an empty dataset's mapped spec too).
TF_REPRS = [
    ('D.range(3).map(lambda x: x, num_parallel_calls=tf.data.AUTOTUNE)',
     '<_ParallelMapDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('D.range(3).cache()',
     '<CacheDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('D.range(3).with_options(tf.data.Options())',
     '<_OptionsDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('D.range(3).enumerate()',
     '<_ZipDataset element_spec=(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf'
     '.int64, name=None))>'),
    ('D.range(3).interleave(lambda x: D.range(x), num_parallel_calls=2)',
     '<_ParallelInterleaveDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('D.range(3).batch(2).window(2)',
     '<_WindowDataset element_spec=DatasetSpec(TensorSpec(shape=(None,), dtype=tf.int64, name=None), TensorShap'
     'e([]))>'),
    ('D.range(0).map(lambda x: x * 2)',
     '<_MapDataset element_spec=TensorSpec(shape=(), dtype=tf.int64, name=None)>'),
    ('D.range(3).filter(lambda x: False).map(lambda x: (x, tf.cast(x, tf.float32)))',
     '<_MapDataset element_spec=(TensorSpec(shape=(), dtype=tf.int64, name=None), TensorSpec(shape=(), dtype=tf'
     '.float32, name=None))>'),
    ('D.from_tensor_slices(np.zeros((0, 3), np.float32)).map(lambda x: {"y": x * 2}).batch(2)',
     "<_BatchDataset element_spec={'y': TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)}>"),
    ('D.from_tensor_slices(["a"]).filter(lambda s: False).map(lambda s: tf.strings.length(s))',
     '<_MapDataset element_spec=TensorSpec(shape=(), dtype=tf.int32, name=None)>'),
]

# observed, TF 2.21 (Keras 3): the error's class and the first line of its text (TF's op-name prefix and
# `[Op:...]` suffix left out).
TF_ERRORS = [
    ('list(D.range(10).filter(lambda x: x % 3))',
     'ValueError',
     'Invalid `predicate`. `predicate` must return a `tf.bool` scalar tensor, but its return type is TensorSpec'
     '(shape=(), dtype=tf.int64, name=None).'),
    ('list(D.from_generator(lambda: iter([[1, 2, 3]]), output_signature=tf.TensorSpec((2,), tf.int32)))',
     'InvalidArgumentError',
     'TypeError: `generator` yielded an element of shape (3,) where an element of shape (2,) was expected.'),
    ('list(D.from_generator(lambda: iter(["hello"]), output_signature=tf.TensorSpec((), tf.int32)))',
     'InvalidArgumentError',
     'TypeError: `generator` yielded an element that could not be converted to the expected type. The expected '
     'type was int32, but the yielded element was hello.'),
    ('list(D.from_generator(lambda: iter([(1, 2, 3)]), output_signature=(tf.TensorSpec((), tf.int32), tf.Tensor'
     'Spec((), tf.int32))))',
     'InvalidArgumentError',
     'TypeError: `generator` yielded an element that did not match the expected structure. The expected structu'
     're was (tf.int32, tf.int32), but the yielded element was (1, 2, 3).'),
    ('D.from_generator((i for i in range(3)), output_signature=tf.TensorSpec((), tf.int32))',
     'TypeError',
     '`generator` must be a Python callable.'),
    ('D.range(3).batch(0)',
     'InvalidArgumentError',
     'Batch size must be greater than zero.'),
    ('list(D.range(1, 3).map(lambda x: tf.fill([x], x)).padded_batch(2, padding_values=-1))',
     'TypeError',
     "Invalid `padding_values`. `padding_values` values type <dtype: 'int32'> does not match type <dtype: 'int6"
     "4'> of the corresponding input component."),
    ('D.from_tensor_slices([1.0, 1.0]).unique()',
     'TypeError',
     "`tf.data.Dataset.unique` does not support type <dtype: 'float32'> -- only `tf.int32`, `tf.int64`, and `tf"
     '.string` are supported.'),
    ('D.zip((D.range(3), [1, 2]))',
     'TypeError',
     'Invalid input to `zip`. Inputs are expected to be (nested) structures of `tf.data.Dataset` objects. Pytho'
     'n `list` is not supported and you should use `tuple` instead.'),
    ('D.range(10).shard(3, 3)',
     'InvalidArgumentError',
     'Index must be between 0 and 2 (currently index = 3).'),
    ('D.from_tensor_slices([[1, 2], [3]])',
     'ValueError',
     "Can't convert non-rectangular Python sequence to Tensor."),
    ('D.range(3).concatenate(D.from_tensor_slices([1, 2]))',
     'TypeError',
     'Incompatible dataset elements:'),
    ('len(D.range(5).repeat())',
     'TypeError',
     'The dataset is infinite.'),
    ('len(D.range(5).filter(lambda x: True))',
     'TypeError',
     'The dataset length is unknown.'),
    ('D.range(2).get_single_element()',
     'InvalidArgumentError',
     'Dataset had more than one element.'),
    ('list(D.range(1, 4).map(lambda x: tf.range(x)).batch(2))',
     'InvalidArgumentError',
     'Cannot add tensor to the batch: number of elements does not match. Shapes are:'),
    ('D.range(6).shuffle(0)',
     'InvalidArgumentError',
     'buffer_size must be greater than zero or UNKNOWN_CARDINALITY'),
    ('D.range(6).shuffle(tf.data.AUTOTUNE)',
     'InvalidArgumentError',
     'buffer_size must be greater than zero or UNKNOWN_CARDINALITY'),
    ('list(D.choose_from_datasets([D.range(2)], D.from_tensor_slices(tf.constant([0, 1], tf.int64))))',
     'InvalidArgumentError',
     'Selector index out of range: 1 >= 1'),
]


@pytest.mark.parametrize("code,expected", TF_DESCRIBED)
def test_elements_spec_and_cardinality_match_tf(code, expected):
    assert describe(_eval(code)) == expected


@pytest.mark.parametrize("code,expected", TF_SPECS)
def test_element_spec_text_matches_tf(code, expected):
    assert str(_eval(code).element_spec) == expected


@pytest.mark.parametrize("code,expected", TF_CARDINALITIES)
def test_cardinality_matches_tf(code, expected):
    ds = _eval(code)
    assert int(ds.cardinality()) == expected
    if expected >= 0:
        assert len(list(ds)) == expected


@pytest.mark.parametrize("code,expected", TF_REPRS)
def test_repr_names_tf_class_and_spec(code, expected):
    assert repr(_eval(code)) == expected


@pytest.mark.parametrize("code,kind,message", TF_ERRORS)
def test_errors_match_tf(code, kind, message):
    with pytest.raises(Exception) as info:
        _eval(code)
    assert type(info.value).__name__ == kind
    assert str(info.value).startswith(message), str(info.value)


# observed, TF 2.21 (Keras 3): `print(result)` of `reduce`, whose state is a structure of tensors.
TF_REDUCED = [
    ("D.range(5).reduce(np.int64(0), lambda s, x: s + x)", "tf.Tensor(10, shape=(), dtype=int64)"),
    ("D.range(5).reduce(0, lambda s, x: s + 1)", "tf.Tensor(5, shape=(), dtype=int32)"),
    ("D.range(5).reduce((np.int64(0), np.int64(1)), lambda s, x: (s[0] + x, s[1] * (x + 1)))",
     "(<tf.Tensor: shape=(), dtype=int64, numpy=10>, <tf.Tensor: shape=(), dtype=int64, numpy=120>)"),
    ("D.range(5).map(lambda x: tf.cast(x, tf.float32)).reduce(0.0, lambda s, x: s + x)",
     "tf.Tensor(10.0, shape=(), dtype=float32)"),
]


@pytest.mark.parametrize("code,expected", TF_REDUCED)
def test_reduce_gives_tensors(code, expected):
    assert str(_eval(code)) == expected
    assert str(_eval(code)) == expected  # a second pass folds the same elements


def test_py_function_with_a_string_output():
    ds = D.range(2).map(lambda x: tf.py_function(lambda v: (v.numpy() * 2, str(v.numpy())), [x],
                                                 [tf.int64, tf.string]))
    # observed, TF 2.21 (Keras 3); TF's spec has unknown shapes here, jdist's the first element's
    assert list(ds.as_numpy_iterator()) == [(np.int64(0), b"0"), (np.int64(2), b"1")]


def test_iterating_in_python_and_in_a_tf_function():
    # observed, TF 2.21 (Keras 3)
    rows = [" ".join([str(x), str(s), repr(x.numpy()), repr(s.numpy()), str(x.shape)])
            for x, s in D.from_tensor_slices(([1, 2], ["a", "b"]))]
    assert rows == ["tf.Tensor(1, shape=(), dtype=int32) tf.Tensor(b'a', shape=(), dtype=string) np.int32(1) b'a' ()",
                    "tf.Tensor(2, shape=(), dtype=int32) tf.Tensor(b'b', shape=(), dtype=string) np.int32(2) b'b' ()"]

    @tf.function
    def total(ds):
        s = tf.constant(0, tf.int64)
        for x in ds:
            s += x
        return s
    assert str(total(D.range(5))) == "tf.Tensor(10, shape=(), dtype=int64)"  # observed, TF 2.21 (Keras 3)


@pytest.mark.parametrize("buffer", [2, 5, 20])
def test_shuffle_orders_are_permutations_reshuffled_each_pass(buffer):
    n = 20
    ds = D.range(n).shuffle(buffer, seed=7)
    first, second = ([int(v) for v in ds] for _ in range(2))
    assert sorted(first) == sorted(second) == list(range(n))
    assert first != second  # reshuffle_each_iteration=True
    # a buffer of b: output i comes from the first i + b inputs, as TF's
    assert all(v < i + buffer for i, v in enumerate(first))
    assert [int(v) for v in D.range(n).shuffle(buffer, seed=7)] == first  # the seed fixes the order
    fixed = D.range(n).shuffle(buffer, seed=7, reshuffle_each_iteration=False)
    assert list(fixed.as_numpy_iterator()) == list(fixed.as_numpy_iterator())
    epochs = list(D.range(n).shuffle(buffer, seed=1).repeat(2).as_numpy_iterator())
    assert sorted(epochs[:n]) == sorted(epochs[n:]) == list(range(n))


def test_list_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "files").mkdir()
    for i in range(3):
        (tmp_path / "files" / f"f{i}.txt").write_text(f"line{i}a\nline{i}b\n")
    # observed, TF 2.21 (Keras 3): the matches of all patterns sorted together, a name matched twice listed twice
    listed = D.list_files(["files/f2.txt", "files/f0*.txt"], shuffle=False)
    assert describe(listed) == ("TensorSpec(shape=(), dtype=tf.string, name=None) | 2 | "
                                "[b'files/f0.txt', b'files/f2.txt']")
    twice = D.list_files(["files/f0.txt", "files/f0.txt"], shuffle=False)
    assert list(twice.as_numpy_iterator()) == [b"files/f0.txt", b"files/f0.txt"]
    # observed, TF 2.21 (Keras 3): two files at a time, a line from each in turn
    lines = D.list_files("files/*.txt", shuffle=False).interleave(tf.data.TextLineDataset, cycle_length=2)
    assert list(lines.as_numpy_iterator()) == [b"line0a", b"line1a", b"line0b", b"line1b", b"line2a", b"line2b"]
    shuffled = D.list_files("files/*.txt", seed=3)  # shuffled by default: numpy's order, not TF's
    assert int(shuffled.cardinality()) == 3
    assert sorted(shuffled.as_numpy_iterator()) == [b"files/f0.txt", b"files/f1.txt", b"files/f2.txt"]
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        D.list_files("files/*.xyz")
    # observed, TF 2.21 (Keras 3)
    assert str(info.value) == ("Expected 'tf.Tensor(False, shape=(), dtype=bool)' to be true. Summarized data: "
                               "b'No files matched pattern: files/*.xyz'")


def test_seedless_shuffles_follow_the_global_seed():
    # TF 2.21 (observed): after tf.random.set_seed(5) two seedless shuffles differ from each other, and a run of
    # the script repeats both orders (numpy's orders here, not TF's)
    def orders():
        tf.random.set_seed(5)
        first, second = D.range(10).shuffle(10), D.range(10).shuffle(10)
        return list(first.as_numpy_iterator()), list(second.as_numpy_iterator()), list(first.as_numpy_iterator())
    try:
        runs = [orders(), orders()]
        assert runs[0] == runs[1]
        assert len({tuple(order) for order in runs[0]}) == 3  # two datasets, and a reshuffled second pass
        tf.random.set_seed(None)
        np.random.seed(3)  # as keras.utils.set_random_seed does: orders repeat, numpy's own draws stay as they were
        first = list(D.range(10).shuffle(10).as_numpy_iterator())
        drawn = np.random.rand()
        np.random.seed(3)
        assert list(D.range(10).shuffle(10).as_numpy_iterator()) != first  # a second dataset: its own seed
        assert np.random.rand() == drawn
    finally:
        tf.random.set_seed(None)


def test_an_iterators_next_method():
    # observed, TF 2.21: it.next(), it.get_next(), next(it) give 0, 1, 2; then it.next() is StopIteration and
    # get_next_as_optional() has no value
    it = iter(tf.data.Dataset.range(3))
    assert [int(it.next()), int(it.get_next()), int(next(it))] == [0, 1, 2]
    with pytest.raises(StopIteration):
        it.next()
    assert not bool(it.get_next_as_optional().has_value())
