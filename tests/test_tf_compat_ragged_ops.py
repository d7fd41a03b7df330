"""`tf.RaggedTensor` ops against TF 2.21 (tensorflow-cpu 2.21.0), observed: each expected text below is TF's `repr`
of the same expression (the ragged tensor guide's `guide/ragged_tensor.ipynb` cells and variations), plus checks of
the values against the same computation on Python lists."""
# ruff: noqa: E501 (TF's reprs, as printed)
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf_compat  # noqa: E402

tf: Any = tf_compat  # ops give a tensor or a RaggedTensor by their inputs, as TF's dispatch does

DIGITS = [[3, 1, 4, 1], [], [5, 9, 2], [6], []]
NESTED = [[[1, 2], [3]], [[4]], [[5], [], [6, 7, 8]]]


def _names():
    return dict(tf=tf, d=tf.ragged.constant(DIGITS), f=tf.ragged.constant([[1.5, 2.], [], [3.]]),
                w=tf.ragged.constant([["So", "long"], ["thanks", "for", "all", "the", "fish"]]),
                r3=tf.ragged.constant(NESTED))


# observed, TF 2.21: (expression, repr of its result)
TF_REPRS = [
    ('tf.add(d, 3)',
     '<tf.RaggedTensor [[6, 4, 7, 4], [], [8, 12, 5], [9], []]>'),
    ('tf.add(3, d)',
     '<tf.RaggedTensor [[6, 4, 7, 4], [], [8, 12, 5], [9], []]>'),
    ('d + [[10], [20], [30], [40], [50]]',
     '<tf.RaggedTensor [[13, 11, 14, 11], [], [35, 39, 32], [46], []]>'),
    ('3 - d',
     '<tf.RaggedTensor [[0, 2, -1, 2], [], [-2, -6, 1], [-3], []]>'),
    ('d * d',
     '<tf.RaggedTensor [[9, 1, 16, 1], [], [25, 81, 4], [36], []]>'),
    ('d > 2',
     '<tf.RaggedTensor [[True, False, True, False], [], [True, True, False], [True], []]>'),
    ('d == d',
     '<tf.RaggedTensor [[True, True, True, True], [], [True, True, True], [True], []]>'),
    ('tf.maximum(d, 2)',
     '<tf.RaggedTensor [[3, 2, 4, 2], [], [5, 9, 2], [6], []]>'),
    ('tf.math.square(d)',
     '<tf.RaggedTensor [[9, 1, 16, 1], [], [25, 81, 4], [36], []]>'),
    ('tf.cast(d, tf.float32)',
     '<tf.RaggedTensor [[3.0, 1.0, 4.0, 1.0], [], [5.0, 9.0, 2.0], [6.0], []]>'),
    ('tf.ones_like(d)',
     '<tf.RaggedTensor [[1, 1, 1, 1], [], [1, 1, 1], [1], []]>'),
    ('tf.abs(-d)',
     '<tf.RaggedTensor [[3, 1, 4, 1], [], [5, 9, 2], [6], []]>'),
    ('tf.reduce_mean(d, axis=1)',
     '<tf.Tensor: shape=(5,), dtype=float64, numpy=array([2.25      ,        nan, 5.33333333, 6.        ,        nan])>'),
    ('tf.reduce_mean(f, axis=1)',
     '<tf.Tensor: shape=(3,), dtype=float32, numpy=array([1.75,  nan, 3.  ], dtype=float32)>'),
    ('tf.reduce_mean(d)',
     '<tf.Tensor: shape=(), dtype=float64, numpy=3.875>'),
    ('tf.reduce_sum(d, axis=0)',
     '<tf.Tensor: shape=(4,), dtype=int32, numpy=array([14, 10,  6,  1], dtype=int32)>'),
    ('tf.reduce_max(d, axis=-1)',
     '<tf.Tensor: shape=(5,), dtype=int32, numpy=\narray([          4, -2147483648,           9,           6, -2147483648],\n      dtype=int32)>'),
    ('tf.reduce_min(d, axis=1)',
     '<tf.Tensor: shape=(5,), dtype=int32, numpy=\narray([         1, 2147483647,          2,          6, 2147483647],\n      dtype=int32)>'),
    ('tf.reduce_sum(d, axis=1, keepdims=True)',
     '<tf.Tensor: shape=(5, 1), dtype=int32, numpy=\narray([[ 9],\n       [ 0],\n       [16],\n       [ 6],\n       [ 0]], dtype=int32)>'),
    ('tf.reduce_prod(d, axis=1)',
     '<tf.Tensor: shape=(5,), dtype=int32, numpy=array([12,  1, 90,  6,  1], dtype=int32)>'),
    ('tf.math.reduce_any(d > 5, axis=1)',
     '<tf.Tensor: shape=(5,), dtype=bool, numpy=array([False, False,  True,  True, False])>'),
    ('tf.reduce_sum(r3, axis=2)',
     '<tf.RaggedTensor [[3, 3], [4], [5, 0, 21]]>'),
    ('tf.reduce_sum(r3)',
     '<tf.Tensor: shape=(), dtype=int32, numpy=36>'),
    ('tf.concat([d, [[5, 3]]], axis=0)',
     '<tf.RaggedTensor [[3, 1, 4, 1], [], [5, 9, 2], [6], [], [5, 3]]>'),
    ('tf.concat([d, d], axis=1)',
     '<tf.RaggedTensor [[3, 1, 4, 1, 3, 1, 4, 1], [], [5, 9, 2, 5, 9, 2], [6, 6], []]>'),
    ('tf.concat([w, w], axis=-1)',
     "<tf.RaggedTensor [[b'So', b'long', b'So', b'long'],\n [b'thanks', b'for', b'all', b'the', b'fish', b'thanks', b'for', b'all',\n  b'the', b'fish']                                                      ]>"),
    ('tf.stack([d, d], axis=0)',
     '<tf.RaggedTensor [[[3, 1, 4, 1], [], [5, 9, 2], [6], []],\n [[3, 1, 4, 1], [], [5, 9, 2], [6], []]]>'),
    ('tf.stack([d, d], axis=1)',
     '<tf.RaggedTensor [[[3, 1, 4, 1], [3, 1, 4, 1]],\n [[], []],\n [[5, 9, 2], [5, 9, 2]],\n [[6], [6]],\n [[], []]]>'),
    ('tf.tile(d, [2, 2])',
     '<tf.RaggedTensor [[3, 1, 4, 1, 3, 1, 4, 1], [], [5, 9, 2, 5, 9, 2], [6, 6], [],\n [3, 1, 4, 1, 3, 1, 4, 1], [], [5, 9, 2, 5, 9, 2], [6, 6], []]>'),
    ('tf.gather(d, [2, 0])',
     '<tf.RaggedTensor [[5, 9, 2], [3, 1, 4, 1]]>'),
    ('tf.gather([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], d)',
     '<tf.RaggedTensor [[40, 20, 50, 20], [], [60, 100, 30], [70], []]>'),
    ('tf.reverse(d, [1])',
     '<tf.RaggedTensor [[1, 4, 1, 3], [], [2, 9, 5], [6], []]>'),
    ('tf.reverse(d, [0])',
     '<tf.RaggedTensor [[], [6], [5, 9, 2], [], [3, 1, 4, 1]]>'),
    ('tf.where(d > 2, d, 0)',
     '<tf.RaggedTensor [[3, 0, 4, 0], [], [5, 9, 0], [6], []]>'),
    ('tf.size(d)',
     '<tf.Tensor: shape=(), dtype=int32, numpy=8>'),
    ('tf.add_n([d, d, d])',
     '<tf.RaggedTensor [[9, 3, 12, 3], [], [15, 27, 6], [18], []]>'),
    ('tf.strings.substr(w, 0, 2)',
     "<tf.RaggedTensor [[b'So', b'lo'], [b'th', b'fo', b'al', b'th', b'fi']]>"),
    ('tf.strings.length(w)',
     '<tf.RaggedTensor [[2, 4], [6, 3, 3, 3, 4]]>'),
    ('tf.strings.upper(w)',
     "<tf.RaggedTensor [[b'SO', b'LONG'], [b'THANKS', b'FOR', b'ALL', b'THE', b'FISH']]>"),
    ("tf.strings.join([w, w], separator='+')",
     "<tf.RaggedTensor [[b'So+So', b'long+long'],\n [b'thanks+thanks', b'for+for', b'all+all', b'the+the', b'fish+fish']]>"),
    ('tf.map_fn(tf.math.square, d)',
     '<tf.RaggedTensor [[9, 1, 16, 1], [], [25, 81, 4], [36], []]>'),
    ('tf.map_fn(tf.reduce_sum, d, fn_output_signature=tf.int32)',
     '<tf.Tensor: shape=(5,), dtype=int32, numpy=array([ 9,  0, 16,  6,  0], dtype=int32)>'),
    ('tf.map_fn(lambda r: r[:1], d, fn_output_signature=tf.RaggedTensorSpec(shape=[None], dtype=tf.int32))',
     '<tf.RaggedTensor [[3], [], [5], [6], []]>'),
    ('d[:, :2]',
     '<tf.RaggedTensor [[3, 1], [], [5, 9], [6], []]>'),
    ('d[:, -2:]',
     '<tf.RaggedTensor [[4, 1], [], [9, 2], [6], []]>'),
    ('d[1:3]',
     '<tf.RaggedTensor [[], [5, 9, 2]]>'),
    ('w[1, 2]',
     "<tf.Tensor: shape=(), dtype=string, numpy=b'all'>"),
    ('r3[:, 1:]',
     '<tf.RaggedTensor [[[3]], [], [[], [6, 7, 8]]]>'),
    ('r3[1, 0]',
     '<tf.Tensor: shape=(1,), dtype=int32, numpy=array([4], dtype=int32)>'),
    ('d.bounding_shape()',
     '<tf.Tensor: shape=(2,), dtype=int64, numpy=array([5, 4])>'),
    ('r3.bounding_shape()',
     '<tf.Tensor: shape=(3,), dtype=int64, numpy=array([3, 3, 3])>'),
    ('w.to_sparse()',
     "SparseTensor(indices=tf.Tensor(\n[[0 0]\n [0 1]\n [1 0]\n [1 1]\n [1 2]\n [1 3]\n [1 4]], shape=(7, 2), dtype=int64), values=tf.Tensor([b'So' b'long' b'thanks' b'for' b'all' b'the' b'fish'], shape=(7,), dtype=string), dense_shape=tf.Tensor([2 5], shape=(2,), dtype=int64))"),
    ('d.to_tensor(default_value=-1, shape=[None, 6])',
     '<tf.Tensor: shape=(5, 6), dtype=int32, numpy=\narray([[ 3,  1,  4,  1, -1, -1],\n       [-1, -1, -1, -1, -1, -1],\n       [ 5,  9,  2, -1, -1, -1],\n       [ 6, -1, -1, -1, -1, -1],\n       [-1, -1, -1, -1, -1, -1]], dtype=int32)>'),
    ('d.to_tensor(shape=[2, 2])',
     '<tf.Tensor: shape=(2, 2), dtype=int32, numpy=\narray([[3, 1],\n       [0, 0]], dtype=int32)>'),
    ("tf.RaggedTensor.from_sparse(tf.SparseTensor(indices=[[0, 0], [2, 0], [2, 1]], values=['a', 'b', 'c'], dense_shape=[3, 3]))",
     "<tf.RaggedTensor [[b'a'], [], [b'b', b'c']]>"),
    ('tf.RaggedTensor.from_row_starts([3, 1, 4, 1, 5], row_starts=[0, 2, 2])',
     '<tf.RaggedTensor [[3, 1], [], [4, 1, 5]]>'),
    ('tf.RaggedTensor.from_row_limits([3, 1, 4, 1, 5], row_limits=[2, 2, 5])',
     '<tf.RaggedTensor [[3, 1], [], [4, 1, 5]]>'),
    ('tf.RaggedTensor.from_uniform_row_length(tf.RaggedTensor.from_row_splits([10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [0, 3, 5, 9, 10]), 2)',
     '<tf.RaggedTensor [[[10, 11, 12], [13, 14]],\n [[15, 16, 17, 18], [19]]]>'),
    ('tf.RaggedTensor.from_uniform_row_length(tf.RaggedTensor.from_row_splits([10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [0, 3, 5, 9, 10]), 2).shape',
     'TensorShape([2, 2, None])'),
    ('d.merge_dims(0, 1)',
     '<tf.Tensor: shape=(8,), dtype=int32, numpy=array([3, 1, 4, 1, 5, 9, 2, 6], dtype=int32)>'),
    ('r3.merge_dims(1, 2)',
     '<tf.RaggedTensor [[1, 2, 3], [4], [5, 6, 7, 8]]>'),
    ('r3.merge_dims(0, 2)',
     '<tf.Tensor: shape=(8,), dtype=int32, numpy=array([1, 2, 3, 4, 5, 6, 7, 8], dtype=int32)>'),
    ('tf.ragged.stack([d, d])',
     '<tf.RaggedTensor [[[3, 1, 4, 1], [], [5, 9, 2], [6], []],\n [[3, 1, 4, 1], [], [5, 9, 2], [6], []]]>'),
    ('tf.ragged.stack([[1, 2], [3]])',
     '<tf.RaggedTensor [[1, 2], [3]]>'),
    ('tf.ragged.boolean_mask([[1, 2, 3], [4, 5, 6]], [[True, False, True], [False, True, True]])',
     '<tf.RaggedTensor [[1, 3],\n [5, 6]]>'),
    ('tf.ragged.boolean_mask(d, d > 2)',
     '<tf.RaggedTensor [[3, 4], [], [5, 9], [6], []]>'),
    ('tf.ragged.boolean_mask(d, [True, False, True, False, True])',
     '<tf.RaggedTensor [[3, 1, 4, 1], [5, 9, 2], []]>'),
    ('tf.ragged.row_splits_to_segment_ids([0, 2, 2, 5])',
     '<tf.Tensor: shape=(5,), dtype=int64, numpy=array([0, 0, 2, 2, 2])>'),
    ('tf.ragged.segment_ids_to_row_splits([0, 0, 2, 2, 2])',
     '<tf.Tensor: shape=(4,), dtype=int64, numpy=array([0, 2, 2, 5])>'),
    ('tf.ragged.segment_ids_to_row_splits([0, 0, 2], num_segments=4)',
     '<tf.Tensor: shape=(5,), dtype=int64, numpy=array([0, 2, 2, 3, 3])>'),
    ('tf.ragged.stack_dynamic_partitions([10, 20, 30, 40, 50], [1, 0, 1, 2, 1], 4)',
     '<tf.RaggedTensor [[20], [10, 30, 50], [40], []]>'),
    ('tf.RaggedTensorSpec(shape=[None, None], dtype=tf.int32)',
     'RaggedTensorSpec(TensorShape([None, None]), tf.int32, 1, tf.int64)'),
    ('tf.RaggedTensorSpec([2, None, 3])',
     'RaggedTensorSpec(TensorShape([2, None, 3]), tf.float32, 2, tf.int64)'),
    ('tf.RaggedTensorSpec.from_value(d)',
     'RaggedTensorSpec(TensorShape([5, None]), tf.int32, 1, tf.int64)'),
    ('tf.RaggedTensorSpec(shape=[None, None], dtype=tf.int32).is_compatible_with(d)',
     'True'),
    ('tf.RaggedTensorSpec(shape=[None, None], dtype=tf.float32).is_compatible_with(d)',
     'False'),
    ('tf.RaggedTensorSpec([2, None, 3]).ragged_rank',
     '2'),
    ('tf.ragged.constant([[[1, 2], [3, 4], [5, 6]], [[7, 8]]], ragged_rank=1) + tf.constant([[10]])',
     '<tf.RaggedTensor [[[11, 12],\n  [13, 14],\n  [15, 16]], [[17, 18]]]>'),
    ('tf.ragged.constant([[[[1], [2]], [], [[3]], [[4]]], [[[5], [6]], [[7]]]], ragged_rank=2) + tf.constant([10, 20, 30])',
     '<tf.RaggedTensor [[[[11, 21, 31],\n   [12, 22, 32]], [], [[13, 23, 33]], [[14, 24, 34]]],\n [[[15, 25, 35],\n   [16, 26, 36]], [[17, 27, 37]]]]>'),
    ('tf.shape(d)',
     '<DynamicRaggedShape lengths=[5, (4, 0, 3, 1, 0)] num_row_partitions=1>'),
    ('tf.shape(r3)',
     '<DynamicRaggedShape lengths=[3, (2, 1, 3), (2, 1, 1, 1, 0, 3)] num_row_partitions=2>'),
    ('tf.shape(d)[0]',
     '<tf.Tensor: shape=(), dtype=int32, numpy=5>'),
    ('tf.shape(d)[:1]',
     '<DynamicRaggedShape lengths=[5] num_row_partitions=0>'),
    ('tf.shape(d).rank',
     '2'),
    ('tf.shape(d).inner_shape',
     '<tf.Tensor: shape=(1,), dtype=int32, numpy=array([8], dtype=int32)>'),
    ('tf.shape(d).row_partitions',
     '(tf.RowPartition(row_splits=[0 4 4 7 8 8]),)'),
    ('tf.shape(tf.ragged.constant([[[1, 2], [3, 4]], [[5, 6]]], ragged_rank=1))',
     '<DynamicRaggedShape lengths=[2, (2, 1), 2] num_row_partitions=1>'),
    ('tf.experimental.DynamicRaggedShape.from_lengths([4, (2, 1, 0, 8), 12])',
     '<DynamicRaggedShape lengths=[4, (2, 1, 0, 8), 12] num_row_partitions=1>'),
    ('tf.experimental.DynamicRaggedShape.from_lengths([4, (2, 1, 0, 8), 12])[2]',
     '<tf.Tensor: shape=(), dtype=int64, numpy=12>'),
    ('tf.experimental.DynamicRaggedShape.from_lengths([2, 3])',
     '<DynamicRaggedShape lengths=[2, 3] num_row_partitions=0>'),
    ('tf.experimental.DynamicRaggedShape(row_partitions=[tf.experimental.RowPartition.from_row_lengths([5, 3, 2])], inner_shape=[10, 8])',
     '<DynamicRaggedShape lengths=[3, (5, 3, 2), 8] num_row_partitions=1>'),
    ('tf.experimental.RowPartition.from_row_lengths([5, 3, 2]).row_splits()',
     '<tf.Tensor: shape=(4,), dtype=int64, numpy=array([ 0,  5,  8, 10])>'),
    ('tf.reshape(tf.range(8), tf.shape(d))',
     '<tf.RaggedTensor [[0, 1, 2, 3], [], [4, 5, 6], [7], []]>'),
    ('tf.zeros(tf.shape(d))',
     '<tf.RaggedTensor [[0.0, 0.0, 0.0, 0.0], [], [0.0, 0.0, 0.0], [0.0], []]>'),
    ('tf.ones(tf.shape(d), tf.int32)',
     '<tf.RaggedTensor [[1, 1, 1, 1], [], [1, 1, 1], [1], []]>'),
    ("tf.fill(tf.shape(d), 'x')",
     "<tf.RaggedTensor [[b'x', b'x', b'x', b'x'], [], [b'x', b'x', b'x'], [b'x'], []]>"),
]

TF_REPRS += [  # observed, TF 2.21
    ('tf.map_fn(lambda x: tf.range(x), tf.constant([1, 3, 0]), fn_output_signature=tf.RaggedTensorSpec(shape=[None], dtype=tf.int32))',
     '<tf.RaggedTensor [[0], [0, 1, 2], []]>'),
    ('d.nested_row_splits',
     "(<tf.Tensor: shape=(6,), dtype=int64, numpy=array([0, 4, 4, 7, 8, 8])>,)"),
    ('tf.RaggedTensor.from_tensor([[1, 2, 0], [3, 0, 0]], padding=0)', '<tf.RaggedTensor [[1, 2], [3]]>'),
]

# observed, TF 2.21: (expression, error type, its message)
TF_ERRORS = [
    ('tf.ragged.constant([[1, 2], [3]]) + tf.ragged.constant([[1], [2, 3]])', 'InvalidArgumentError', 'Condition x == y did not hold.\nIndices of first 1 different values:\n[[1]]\nCorresponding x values:\n[2]\nCorresponding y values:\n[1]\nFirst 3 elements of x:\n[0 2 3]\nFirst 3 elements of y:\n[0 1 3]'),
    ('tf.ragged.constant([[1, 2], [3, 4, 5, 6], [7]]) + tf.constant([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])', 'InvalidArgumentError', 'Condition x == y did not hold.\nIndices of first 3 different values:\n[[1]\n [2]\n [3]]\nCorresponding x values:\n[ 4  8 12]\nCorresponding y values:\n[2 6 7]\nFirst 3 elements of x:\n[0 4 8]\nFirst 3 elements of y:\n[0 2 6]'),
    ("tf.ragged.constant([['one', 'two'], [3, 4]])", 'ValueError', "Can't convert Python sequence with mixed types to Tensor."),
    ("tf.ragged.constant(['A', ['B', 'C']])", 'ValueError', 'all scalar values must have the same nesting depth'),
    ('tf.concat([tf.ragged.constant([[1]]), tf.ragged.constant([[[1]]])], 0)', 'ValueError', 'Shape (1, None, None) must have rank 2'),
    ('tf.ragged.constant([[1, 2, 3], [4], [5, 6]]) + tf.ragged.constant([[10, 20], [30, 40], [50]])', 'InvalidArgumentError', 'Condition x == y did not hold.\nIndices of first 2 different values:\n[[1]\n [3]]\nCorresponding x values:\n[3 6]\nCorresponding y values:\n[2 5]\nFirst 3 elements of x:\n[0 3 4]\nFirst 3 elements of y:\n[0 2 4]'),
    ('tf.ragged.constant([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10]]]) + tf.ragged.constant([[[1, 2, 0], [3, 4, 0], [5, 6, 0]], [[7, 8, 0], [9, 10, 0]]])', 'InvalidArgumentError', 'Condition x == y did not hold.\nIndices of first 3 different values:\n[[1]\n [2]\n [3]]\nCorresponding x values:\n[2 4 6]\nCorresponding y values:\n[3 6 9]\nFirst 3 elements of x:\n[0 2 4]\nFirst 3 elements of y:\n[0 3 6]'),
    ('tf.shape(d)[1]', 'ValueError', 'Index 1 is not uniform'),
]

@pytest.mark.parametrize("expr,want", TF_REPRS, ids=[e for e, _ in TF_REPRS])
def test_repr_as_tf(expr, want):
    assert repr(eval(expr, _names())) == want


@pytest.mark.parametrize("expr,error,message", TF_ERRORS, ids=[e for e, _, _ in TF_ERRORS])
def test_errors_as_tf(expr, error, message):
    with pytest.raises(getattr(tf.errors, error, None) or ValueError) as raised:
        eval(expr, _names())
    assert str(raised.value) == message


def _rows(seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-9, 10, size=rng.integers(0, 5)).tolist() for _ in range(rng.integers(1, 6))]


@pytest.mark.parametrize("seed", range(6))
def test_values_against_lists(seed):
    rows, other = _rows(seed), _rows(seed + 100)
    rt = tf.ragged.constant(rows, dtype=tf.int32)
    ot = tf.ragged.constant(other, dtype=tf.int32)
    assert (rt * 2 + 1).to_list() == [[2 * v + 1 for v in r] for r in rows]
    assert tf.reduce_sum(rt, axis=1).numpy().tolist() == [sum(r) for r in rows]
    assert tf.reduce_max(rt, axis=-1).numpy().tolist() == [max(r, default=-2**31) for r in rows]
    assert tf.concat([rt, ot], axis=0).to_list() == rows + other
    if len(rows) == len(other):
        assert tf.concat([rt, ot], axis=1).to_list() == [a + b for a, b in zip(rows, other)]
    assert rt[:, 1:3].to_list() == [r[1:3] for r in rows]
    assert rt[::-1].to_list() == rows[::-1]
    assert tf.tile(rt, [2, 3]).to_list() == [r * 3 for r in rows] * 2
    assert tf.gather(rt, [0, 0]).to_list() == [rows[0], rows[0]]
    assert tf.reverse(rt, [1]).to_list() == [r[::-1] for r in rows]
    assert tf.ragged.boolean_mask(rt, rt > 0).to_list() == [[v for v in r if v > 0] for r in rows]
    width = max([len(r) for r in rows], default=0)
    assert rt.to_tensor(default_value=7).numpy().tolist() == [r + [7] * (width - len(r)) for r in rows]
    assert rt.bounding_shape().numpy().tolist() == [len(rows), width]
    back = tf.RaggedTensor.from_sparse(rt.to_sparse())
    assert back.to_list() == rows
    assert tf.map_fn(lambda r: r * r, rt).to_list() == [[v * v for v in r] for r in rows]


def test_segments_and_partitions_against_lists():
    ids = [0, 0, 1, 3, 3, 3]
    splits = tf.ragged.segment_ids_to_row_splits(ids).numpy().tolist()
    assert splits == [0, 2, 3, 3, 6]
    assert tf.ragged.row_splits_to_segment_ids(splits).numpy().tolist() == ids
    data, parts = [5, 6, 7, 8], [2, 0, 2, 1]
    out = tf.ragged.stack_dynamic_partitions(data, parts, 3).to_list()
    assert out == [[v for v, p in zip(data, parts) if p == k] for k in range(3)]


def test_merge_dims_and_nested_values():
    r3 = tf.ragged.constant(NESTED)
    assert r3.merge_dims(1, 2).to_list() == [sum(r, []) for r in NESTED]
    assert r3.merge_dims(0, 2).numpy().tolist() == [v for r in NESTED for row in r for v in row]
    assert (r3 + 1).to_list() == [[[v + 1 for v in row] for row in r] for r in NESTED]


def test_spec():
    spec = tf.RaggedTensorSpec(shape=[None, None], dtype=tf.int32)
    assert spec.is_compatible_with(tf.ragged.constant(DIGITS))
    assert not spec.is_compatible_with(tf.ragged.constant(NESTED))
    assert spec == tf.RaggedTensorSpec([None, None], tf.int32, 1)
    assert spec.row_splits_dtype == tf.int64


def test_tf_function_and_compiled_dense():
    @tf.function
    def make_palindrome(x, axis):
        return tf.concat([x, tf.reverse(x, [axis])], axis)

    # observed, TF 2.21 (the guide's cell)
    assert repr(make_palindrome(tf.ragged.constant([[1, 2], [3], [4, 5, 6]]), axis=1)) == \
        "<tf.RaggedTensor [[1, 2, 2, 1], [3, 3], [4, 5, 6, 6, 5, 4]]>"
    rt = tf.ragged.constant(DIGITS)
    padded = jax.jit(lambda x: x.sum(axis=1))(rt.to_tensor())
    assert np.asarray(padded).tolist() == [sum(r) for r in DIGITS]
    dense = tf.constant([[1, 2], [3, 4]])  # dense inputs keep the dense ops
    assert tf.add(dense, 1).numpy().tolist() == [[2, 3], [4, 5]]
    assert tf.reduce_sum(dense, axis=1).numpy().tolist() == [3, 7]
