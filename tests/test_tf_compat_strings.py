"""`tf.strings`, `tf.ragged` and `tf.RaggedTensor` against TF 2.21 (tensorflow-cpu 2.21.0), observed: each expected
text below is TF's `repr` of the same expression (the tensor guide's `guide/tensor.ipynb` cells and variations)."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

RAGGED_LIST = [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]


def _names():
    return dict(tf=tf, rl=RAGGED_LIST, rt=tf.ragged.constant(RAGGED_LIST), s=tf.constant("Gray wolf"),
                t=tf.constant(["Gray wolf", "Quick brown fox", "Lazy dog"]), u=tf.constant("\u30a2\u30d2\u30eb \U0001f986"))  # noqa: E501 (TF's text, as printed)


TF_REPRS = [
    ('str(rt)',
     '<tf.RaggedTensor [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]>'),
    ('rt',
     '<tf.RaggedTensor [[0, 1, 2, 3], [4, 5], [6, 7, 8], [9]]>'),
    ('rt.values',
     '<tf.Tensor: shape=(10,), dtype=int32, numpy=array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], dtype=int32)>'),
    ('rt.row_splits',
     '<tf.Tensor: shape=(5,), dtype=int64, numpy=array([ 0,  4,  6,  9, 10])>'),
    ('rt.row_lengths()',
     '<tf.Tensor: shape=(4,), dtype=int64, numpy=array([4, 2, 3, 1])>'),
    ('rt.nrows()',
     '<tf.Tensor: shape=(), dtype=int64, numpy=4>'),
    ('rt.value_rowids()',
     '<tf.Tensor: shape=(10,), dtype=int64, numpy=array([0, 0, 0, 0, 1, 1, 2, 2, 2, 3])>'),
    ('rt.to_tensor()',
     '<tf.Tensor: shape=(4, 4), dtype=int32, numpy=\narray([[0, 1, 2, 3],\n       [4, 5, 0, 0],\n       [6, 7, 8, 0],\n       [9, 0, 0, 0]], dtype=int32)>'),  # noqa: E501 (TF's text, as printed)
    ('rt.to_tensor(default_value=-1)',
     '<tf.Tensor: shape=(4, 4), dtype=int32, numpy=\narray([[ 0,  1,  2,  3],\n       [ 4,  5, -1, -1],\n       [ 6,  7,  8, -1],\n       [ 9, -1, -1, -1]], dtype=int32)>'),  # noqa: E501 (TF's text, as printed)
    ('rt[1]',
     '<tf.Tensor: shape=(2,), dtype=int32, numpy=array([4, 5], dtype=int32)>'),
    ('rt[1:3]',
     '<tf.RaggedTensor [[4, 5], [6, 7, 8]]>'),
    ('rt[0, 2]',
     '<tf.Tensor: shape=(), dtype=int32, numpy=2>'),
    ('rt + 1',
     '<tf.RaggedTensor [[1, 2, 3, 4], [5, 6], [7, 8, 9], [10]]>'),
    ('rt * 2',
     '<tf.RaggedTensor [[0, 2, 4, 6], [8, 10], [12, 14, 16], [18]]>'),
    ('tf.ragged.constant([[1.5], [2.0, 3.0]])',
     '<tf.RaggedTensor [[1.5], [2.0, 3.0]]>'),
    ('tf.ragged.constant([[[1, 2], [3]], [[4]]])',
     '<tf.RaggedTensor [[[1, 2], [3]], [[4]]]>'),
    ('tf.ragged.constant([[1], [], [2, 3]])',
     '<tf.RaggedTensor [[1], [], [2, 3]]>'),
    ('tf.RaggedTensor.from_row_splits(values=[3, 1, 4, 1, 5, 9, 2], row_splits=[0, 4, 4, 6, 7])',
     '<tf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>'),
    ('tf.RaggedTensor.from_row_lengths(values=[3, 1, 4, 1, 5, 9, 2], row_lengths=[4, 0, 2, 1])',
     '<tf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2]]>'),
    ('tf.RaggedTensor.from_value_rowids(values=[3, 1, 4, 1, 5, 9, 2], value_rowids=[0, 0, 0, 0, 2, 2, 3], nrows=5)',
     '<tf.RaggedTensor [[3, 1, 4, 1], [], [5, 9], [2], []]>'),
    ('tf.RaggedTensor.from_tensor([[1, 2, 0], [3, 0, 0]], padding=0)',
     '<tf.RaggedTensor [[1, 2], [3]]>'),
    ('tf.RaggedTensor.from_tensor([[1, 2, 0], [3, 0, 0]], lengths=[2, 1])',
     '<tf.RaggedTensor [[1, 2], [3]]>'),
    ('tf.ragged.map_flat_values(tf.ones_like, rt)',
     '<tf.RaggedTensor [[1, 1, 1, 1], [1, 1], [1, 1, 1], [1]]>'),
    ('tf.reduce_sum(rt, axis=1)',
     '<tf.Tensor: shape=(4,), dtype=int32, numpy=array([ 6,  9, 21,  9], dtype=int32)>'),
    ('tf.reduce_mean(tf.ragged.constant([[1., 2.], [3.]]), axis=1)',
     '<tf.Tensor: shape=(2,), dtype=float32, numpy=array([1.5, 3. ], dtype=float32)>'),
    ('tf.ragged.constant([["a", "b"], ["c"]])',
     "<tf.RaggedTensor [[b'a', b'b'], [b'c']]>"),
    ('tf.strings.split(s, sep=" ")',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'Gray', b'wolf'], dtype=object)>"),
    ('tf.strings.split(t)',
     "<tf.RaggedTensor [[b'Gray', b'wolf'], [b'Quick', b'brown', b'fox'], [b'Lazy', b'dog']]>"),
    ('tf.strings.split(t, maxsplit=1)',
     "<tf.RaggedTensor [[b'Gray', b'wolf'],\n [b'Quick', b'brown fox'],\n [b'Lazy', b'dog']]>"),
    ('tf.strings.split(tf.constant("a,,b"), sep=",")',
     "<tf.Tensor: shape=(3,), dtype=string, numpy=array([b'a', b'', b'b'], dtype=object)>"),
    ('tf.strings.split(tf.constant("  a  b "))',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'a', b'b'], dtype=object)>"),
    ('tf.strings.to_number(tf.strings.split(tf.constant("1 10 100"), " "))',
     '<tf.Tensor: shape=(3,), dtype=float32, numpy=array([  1.,  10., 100.], dtype=float32)>'),
    ('tf.strings.to_number(["3", "-4"], out_type=tf.int32)',
     '<tf.Tensor: shape=(2,), dtype=int32, numpy=array([ 3, -4], dtype=int32)>'),
    ('tf.strings.bytes_split(tf.constant("Duck"))',
     "<tf.Tensor: shape=(4,), dtype=string, numpy=array([b'D', b'u', b'c', b'k'], dtype=object)>"),
    ('tf.strings.bytes_split(tf.constant(["ab", "c"]))',
     "<tf.RaggedTensor [[b'a', b'b'], [b'c']]>"),
    ('tf.io.decode_raw(tf.constant("Duck"), tf.uint8)',
     '<tf.Tensor: shape=(4,), dtype=uint8, numpy=array([ 68, 117,  99, 107], dtype=uint8)>'),
    ('tf.strings.unicode_split(u, "UTF-8")',
     "<tf.Tensor: shape=(5,), dtype=string, numpy=\narray([b'\\xe3\\x82\\xa2', b'\\xe3\\x83\\x92', b'\\xe3\\x83\\xab', b' ',\n       b'\\xf0\\x9f\\xa6\\x86'], dtype=object)>"),  # noqa: E501 (TF's text, as printed)
    ('tf.strings.unicode_decode(u, "UTF-8")',
     '<tf.Tensor: shape=(5,), dtype=int32, numpy=array([ 12450,  12498,  12523,     32, 129414], dtype=int32)>'),
    ('tf.strings.unicode_decode(tf.constant(["ab", "é"]), "UTF-8")',
     '<tf.RaggedTensor [[97, 98], [233]]>'),
    ('tf.strings.unicode_encode([72, 105], "UTF-8")',
     "<tf.Tensor: shape=(), dtype=string, numpy=b'Hi'>"),
    ('tf.strings.unicode_encode(tf.ragged.constant([[72, 105], [233]]), "UTF-8")',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'Hi', b'\\xc3\\xa9'], dtype=object)>"),
    ('tf.strings.length(tf.constant(["ab", "é", ""]))',
     '<tf.Tensor: shape=(3,), dtype=int32, numpy=array([2, 2, 0], dtype=int32)>'),
    ('tf.strings.length(tf.constant(["ab", "é", ""]), unit="UTF8_CHAR")',
     '<tf.Tensor: shape=(3,), dtype=int32, numpy=array([2, 1, 0], dtype=int32)>'),
    ('tf.strings.lower(tf.constant(["AbC", "É"]))',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'abc', b'\\xc3\\x89'], dtype=object)>"),
    ('tf.strings.upper(tf.constant("abc"))',
     "<tf.Tensor: shape=(), dtype=string, numpy=b'ABC'>"),
    ('tf.strings.join([tf.constant(["a", "b"]), tf.constant(["c", "d"])], separator="-")',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'a-c', b'b-d'], dtype=object)>"),
    ('tf.strings.join(["x", tf.constant(["a", "b"])])',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'xa', b'xb'], dtype=object)>"),
    ('tf.strings.reduce_join(tf.constant([["a", "b"], ["c", "d"]]), axis=1, separator=",")',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'a,b', b'c,d'], dtype=object)>"),
    ('tf.strings.reduce_join(tf.constant(["a", "b"]))',
     "<tf.Tensor: shape=(), dtype=string, numpy=b'ab'>"),
    ('tf.strings.strip(tf.constant(["  a b  ", "\\tc\\n"]))',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'a b', b'c'], dtype=object)>"),
    ('tf.strings.regex_replace(tf.constant(["aaa bb", "ab"]), "a+", "X")',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'X bb', b'Xb'], dtype=object)>"),
    ('tf.strings.regex_replace(tf.constant("aaa a"), "a", "X", replace_global=False)',
     "<tf.Tensor: shape=(), dtype=string, numpy=b'Xaa a'>"),
    ('tf.strings.regex_full_match(tf.constant(["abc", "ab1"]), "[a-z]+")',
     '<tf.Tensor: shape=(2,), dtype=bool, numpy=array([ True, False])>'),
    ('tf.strings.substr(tf.constant(["Hello", "World"]), 1, 3)',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'ell', b'orl'], dtype=object)>"),
    ('tf.strings.substr(tf.constant("héllo"), 1, 2, unit="UTF8_CHAR")',
     "<tf.Tensor: shape=(), dtype=string, numpy=b'\\xc3\\xa9l'>"),
    ('tf.strings.as_string([1, 2])',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'1', b'2'], dtype=object)>"),
    ('tf.strings.as_string([1.5, 2.0])',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'1.500000', b'2.000000'], dtype=object)>"),
    ('tf.strings.as_string([1.23456], precision=2)',
     "<tf.Tensor: shape=(1,), dtype=string, numpy=array([b'1.23'], dtype=object)>"),
    ('tf.strings.as_string([True])',
     "<tf.Tensor: shape=(1,), dtype=string, numpy=array([b'true'], dtype=object)>"),
    ('tf.strings.ngrams(tf.constant(["a", "b", "c"]), 2)',
     "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'a b', b'b c'], dtype=object)>"),
    ('tf.constant("a") == tf.constant("a")',
     '<tf.Tensor: shape=(), dtype=bool, numpy=True>'),
    ("str(tf.ragged.constant([]))", "tf.Tensor([], shape=(0,), dtype=float32)"),
    ("tf.ragged.constant([[1, 2], [3, 4]])", "<tf.RaggedTensor [[1, 2],\n [3, 4]]>"),
    ("str(tf.reduce_max(tf.ragged.constant([[1, 2], []]), axis=1))",
     "tf.Tensor([          2 -2147483648], shape=(2,), dtype=int32)"),
    ("str(tf.reduce_mean(tf.ragged.constant([[1., 2.], []]), axis=1))", "tf.Tensor([1.5 nan], shape=(2,), dtype=float32)"),
    ("tf.ragged.range([3, 1])", "<tf.RaggedTensor [[0, 1, 2], [0]]>"),
    ("str(tf.ragged.constant([[[1, 2], [3]], [[4]]]).numpy())",
     "[array([array([1, 2], dtype=int32), array([3], dtype=int32)], dtype=object)\n"
     " array([array([4], dtype=int32)], dtype=object)]"),
    ("str(tf.sparse.SparseTensor(indices=[[0, 0], [1, 2]], values=[1, 2], dense_shape=[3, 4]))",  # the guide's
     "SparseTensor(indices=tf.Tensor(\n[[0 0]\n [1 2]], shape=(2, 2), dtype=int64), values=tf.Tensor([1 2], "
     "shape=(2,), dtype=int32), dense_shape=tf.Tensor([3 4], shape=(2,), dtype=int64))"),
]


@pytest.mark.parametrize("expression, text", TF_REPRS, ids=[e for e, _ in TF_REPRS])
def test_values_print_as_tfs(expression, text):
    value = eval(expression, _names())
    assert (value if isinstance(value, str) else repr(value)) == text


@pytest.mark.parametrize("expression, error, message", [
    ("tf.constant(rl)", ValueError, "Can't convert non-rectangular Python sequence to Tensor."),
    ("tf.strings.to_number(['x'])", tf.errors.InvalidArgumentError,
     "StringToNumberOp could not correctly convert string: x"),
    ("tf.RaggedTensor.from_row_splits(values=[1, 2, 3], row_splits=[0, 2, 1])", tf.errors.InvalidArgumentError,
     "row_splits"),
    ("np.asarray(rt)", ValueError, "rows of different lengths.*to_tensor"),
    ("tf.reduce_sum(tf.ragged.constant([[[1]], [[2, 3]]]), axis=1)", NotImplementedError, "along axis 1"),
    ("tf.strings.length(np.array([1, 2], dtype=object))", TypeError, "expects strings, got int.*as_string"),
    ("tf.strings.upper(tf.constant([1.5]))", TypeError, "expects strings, got a tensor of float32"),
])
def test_bad_input_raises(expression, error, message):
    with pytest.raises(error, match=message):
        eval(expression, {**_names(), "np": np})


def test_ragged_structure_and_conversions():
    rt = tf.ragged.constant(RAGGED_LIST)
    assert rt.shape == tf.TensorShape([4, None]) and rt.dtype == tf.int32 and rt.ragged_rank == 1
    assert rt.to_list() == RAGGED_LIST and isinstance(rt, tf.RaggedTensor)
    assert [r.numpy().tolist() for r in rt] == RAGGED_LIST
    assert [row.tolist() for row in rt.numpy()] == RAGGED_LIST and rt.numpy().dtype == object
    nested = tf.ragged.constant([[[1, 2], [3]], [[4]]])
    assert nested.shape == tf.TensorShape([2, None, None]) and nested.to_list() == [[[1, 2], [3]], [[4]]]
    assert nested.to_tensor().numpy().tolist() == [[[1, 2], [3, 0]], [[4, 0], [0, 0]]]
    # a tf.data map function splits, converts and reduces text on the host, as TF's does
    lines = tf.data.Dataset.from_tensor_slices(["1 2 3", "4 5"])
    totals = lines.map(lambda line: tf.reduce_sum(tf.strings.to_number(tf.strings.split(line))))
    assert list(totals.as_numpy_iterator()) == [6.0, 9.0]


# tf.strings.format and tf.print write tensors alike; every text below was printed by TF 2.21.
FORMAT_CASES = [
    ("x: {}", lambda: tf.constant([1, 2, 3]), b"x: [1 2 3]"),
    ("{} and {}", lambda: [tf.constant(1.5), tf.constant([[1, 2], [3, 4]])], b"1.5 and [[1 2]\n [3 4]]"),
    ("{}", lambda: tf.range(10), b"[0 1 2 ... 7 8 9]"),
    ("s={}", lambda: tf.constant(["ab", "c"]), b's=["ab" "c"]'),
    ("scalar {}", lambda: tf.constant("hi"), b'scalar "hi"'),
    ("b {}", lambda: tf.constant([True, False]), b"b [1 0]"),
    ("f {}", lambda: tf.constant([0.1, 2.0, 3.25]), b"f [0.1 2 3.25]"),
    ("{}", lambda: tf.constant([1 / 3, 123456789.0, 1e-7, np.nan, np.inf, -0.0, 1234567.0, 0.5], tf.float32),
     b"[0.333333343 123456792 1e-07 ... -0 1234567 0.5]"),
    ("{}", lambda: tf.constant([1 / 3, 123456789.0], tf.float64), b"[0.33333333333333331 123456789]"),
    ("{}", lambda: tf.reshape(tf.range(8), [2, 2, 2]), b"[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]"),
    ("{}", lambda: tf.reshape(tf.range(40), [8, 5]),
     b"[[0 1 2 3 4]\n [5 6 7 8 9]\n [10 11 12 13 14]\n ...\n [25 26 27 28 29]\n [30 31 32 33 34]\n [35 36 37 38 39]]"),
    ("{}", lambda: tf.constant([1, 10, -100]), b"[1 10 -100]"),
    ("{}", lambda: tf.zeros([0]), b"[]"),
]


@pytest.mark.parametrize("template,inputs,expected", FORMAT_CASES)
def test_strings_format_writes_tensors_as_tf(template, inputs, expected):
    assert tf.strings.format(template, inputs()).numpy() == expected


def test_strings_format_summarize_placeholder_and_count():
    assert tf.strings.format("{}", tf.range(10), summarize=2).numpy() == b"[0 1 ... 8 9]"
    assert tf.strings.format("{}", tf.range(10), summarize=-1).numpy() == b"[0 1 2 3 4 5 6 7 8 9]"
    assert tf.strings.format("<>", tf.constant(1), placeholder="<>").numpy() == b"1"
    with pytest.raises(ValueError, match="The template expects 2 tensors, but the inputs only has 1"):
        tf.strings.format("{} {}", tf.constant(1))


def test_tf_print_writes_tensors_as_tf(capsys):
    tf.print(tf.constant([1, 10, -100]), tf.constant([1 / 3, 2.0]), tf.reshape(tf.range(8), [2, 2, 2]))
    tf.print(tf.constant(["ab", "c"]), "plain")
    assert capsys.readouterr().err == ("[1 10 -100] [0.333333343 2] [[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]\n"
                                       '["ab" "c"] plain\n')


def test_to_hash_bucket_fast_is_tfs_farmhash():
    """TF 2.21: to_hash_bucket_fast(["Who", "is", "Dan"], 1024) -> [633 768 237]; [["zz", "yy"], ["a", "q"]] over
    3 buckets -> [[1 1] [0 2]]; a RaggedTensor keeps its rows ([[633, 768], [28]] for [["Who", "is"], ["Pause"]]);
    num_buckets 0 is an InvalidArgumentError. The fingerprints themselves (num_buckets 2**63 - 1) were equal to TF's
    for random strings of every length from 0 to 199 bytes and of 255, 256, 257 and 1000 bytes; two are held here."""
    assert tf.strings.to_hash_bucket_fast(["Who", "is", "Dan"], 1024).numpy().tolist() == [633, 768, 237]
    assert tf.strings.to_hash_bucket_fast([["zz", "yy"], ["a", "q"]], 3).numpy().tolist() == [[1, 1], [0, 2]]
    ragged = tf.strings.to_hash_bucket_fast(tf.ragged.constant([["Who", "is"], ["Pause"]]), 1024)
    assert ragged.to_list() == [[633, 768], [28]]
    assert int(tf.strings.to_hash_bucket_fast("Who", 1024)) == 633
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_buckets"):
        tf.strings.to_hash_bucket_fast(["a"], 0)
    from jdist.tf_compat.farmhash import fingerprint64

    n = (1 << 63) - 1
    assert fingerprint64(b"") % n == TF_EMPTY and fingerprint64(bytes(range(200))) % n == TF_200_BYTES


TF_EMPTY = 1936946117179621456  # TF 2.21: to_hash_bucket_fast(b"", 2**63 - 1)
TF_200_BYTES = 525935771297148851  # TF 2.21: to_hash_bucket_fast(bytes(range(200)), 2**63 - 1)
