"""`tf.data.Dataset`'s transformations that combine or regroup elements (jdist.tfdata.combinators).

Every expected value below was printed by TF 2.21 (tensorflow-cpu 2.21.0) for the same pipeline, on this 2-core
machine (so `interleave`'s default cycle length, TF's AUTOTUNE, was 2).
"""
import os

import numpy as np
import pytest

import jdist.tf_compat as tf
from jdist.errors import DataLossError, InvalidArgumentError

D = tf.data.Dataset


def _ints(dataset):
    return [int(x) for x in dataset]


def _lists(dataset):
    return [np.asarray(x).tolist() for x in dataset]


def test_concatenate_and_flat_map():
    both = D.range(3).concatenate(D.range(2))
    assert (int(both.cardinality()), _ints(both)) == (5, [0, 1, 2, 0, 1])
    with pytest.raises(TypeError, match="Incompatible dataset elements"):
        D.range(3).concatenate(D.from_tensor_slices([1.0]))
    assert _ints(D.range(3).flat_map(lambda x: D.range(x))) == [0, 0, 1]
    assert _ints(D.range(4).concatenate(D.range(2)).take(5)) == [0, 1, 2, 3, 0]


def test_interleave_cycles_blocks_and_refills_slots_as_tf():
    assert _ints(D.range(3).interleave(lambda i: D.range(i * 10, i * 10 + 2), cycle_length=2,
                                       num_parallel_calls=tf.data.AUTOTUNE)) == [0, 10, 1, 11, 20, 21]
    assert _ints(D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6), cycle_length=2, block_length=4)) == [
        1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    default = _ints(D.range(1, 4).interleave(lambda x: D.from_tensors(x).repeat(3)))
    if os.cpu_count() == 2:  # TF's AUTOTUNE cycle length is the CPU count; observed on 2 cores
        assert default == [1, 2, 1, 2, 1, 2, 3, 3, 3]
    assert sorted(default) == [1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_padded_batch_pads_to_the_longest_or_the_given_shape():
    ranges = D.range(1, 4).map(lambda x: tf.range(x))
    assert _lists(ranges.padded_batch(2)) == [[[0, 0], [0, 1]], [[0, 1, 2]]]
    assert _lists(ranges.padded_batch(2, drop_remainder=True)) == [[[0, 0], [0, 1]]]
    assert str(ranges.padded_batch(2).element_spec) == "TensorSpec(shape=(None, None), dtype=tf.int64, name=None)"
    assert _lists(D.range(3).padded_batch(2)) == [[0, 1], [2]]
    strings = D.range(1, 4).map(lambda x: tf.strings.as_string(tf.range(x))).padded_batch(3)
    assert _lists(strings) == [[[b"0", b"", b""], [b"0", b"1", b""], [b"0", b"1", b"2"]]]
    pairs = D.range(1, 4).map(lambda x: (tf.range(x), tf.fill([2, x], x))).padded_batch(
        2, padded_shapes=([4], [None, None]), padding_values=(tf.constant(-1, tf.int64), tf.constant(7, tf.int64)))
    assert [(np.asarray(a).tolist(), np.asarray(b).tolist()) for a, b in pairs] == [
        ([[0, -1, -1, -1], [0, 1, -1, -1]], [[[1, 7], [1, 7]], [[2, 2], [2, 2]]]),
        ([[0, 1, 2, -1]], [[[3, 3, 3], [3, 3, 3]]])]
    with pytest.raises(DataLossError, match="Attempted to pad to a smaller size than the input element"):
        list(ranges.padded_batch(2, padded_shapes=[2]))


def test_window_group_and_bucket():
    assert [_ints(w) for w in D.range(7).window(3, shift=1, stride=2, drop_remainder=True)] == [
        [0, 2, 4], [1, 3, 5], [2, 4, 6]]
    # TF 2.21 on range(11): windows further apart than they are long, and longer than their shift
    assert [_ints(w) for w in D.range(11).window(2, shift=4)] == [[0, 1], [4, 5], [8, 9]]
    assert [_ints(w) for w in D.range(11).window(4, shift=3, stride=2)] == [[0, 2, 4, 6], [3, 5, 7, 9], [6, 8, 10],
                                                                           [9]]
    assert _lists(D.range(5).window(2, shift=1, drop_remainder=True).flat_map(lambda w: w.batch(2))) == [
        [0, 1], [1, 2], [2, 3], [3, 4]]
    pairs = D.zip((D.range(4), D.range(10, 14))).window(3, shift=2)
    assert [[(int(a), int(b)) for a, b in D.zip(w)] for w in pairs] == [[(0, 10), (1, 11), (2, 12)], [(2, 12),
                                                                                                    (3, 13)]]
    values = D.from_tensor_slices(np.array([5, 2, 7, 4, 1, 9, 3, 8], np.int64))
    # full windows when they fill, the rest at the end in ascending key order (TF's)
    assert _lists(values.take(7).group_by_window(lambda x: x % 3, lambda k, w: w.batch(10), window_size=10)) == [
        [9, 3], [7, 4, 1], [5, 2]]
    assert _lists(values.group_by_window(lambda x: x % 3, lambda k, w: w.batch(2), window_size=2)) == [
        [5, 2], [7, 4], [9, 3], [1], [8]]
    filled = D.range(1, 7).map(lambda x: tf.fill([x], x))
    assert _lists(filled.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 5], [2, 2, 2])) == [
        [[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]], [[5, 5, 5, 5, 5, 0], [6, 6, 6, 6, 6, 6]]]
    boundary = D.range(1, 5).map(lambda x: tf.fill([x], x)).bucket_by_sequence_length(
        lambda x: tf.shape(x)[0], [3, 5], [2, 2, 2], pad_to_bucket_boundary=True)
    assert [list(np.shape(b)) for b in boundary] == [[2, 2], [2, 4]]
    with pytest.raises(InvalidArgumentError, match="pad_to_bucket_boundary=True, elements must have length"):
        list(filled.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 5], [2, 2, 2],
                                              pad_to_bucket_boundary=True))


def test_scan_unique_take_while_rebatch():
    assert [(int(a), int(b)) for a, b in D.range(4).scan(
        (tf.constant(0, tf.int64), tf.constant(1, tf.int64)),
        lambda st, x: ((st[0] + x, st[1] * 2), (st[0], st[1])))] == [(0, 1), (0, 2), (1, 4), (3, 8)]
    assert _ints(D.range(5).scan(tf.constant(0, tf.int64), lambda st, x: (st + x, st + x))) == [0, 1, 3, 6, 10]
    assert _ints(D.from_tensor_slices([1, 2, 1, 3]).unique()) == [1, 2, 3]
    with pytest.raises(TypeError, match="does not support type"):
        D.from_tensor_slices([1.0, 2.0]).unique()
    assert _ints(D.range(10).take_while(lambda x: x < 3)) == [0, 1, 2]
    assert int(D.range(10).take_while(lambda x: x < 3).cardinality()) == -2
    assert _lists(D.range(10).batch(4).rebatch(3)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert _lists(D.range(10).batch(4).rebatch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_sources_choose_sample_counter():
    choices = D.from_tensor_slices(np.array([0, 1, 0, 1, 0, 1], np.int64))
    assert _ints(D.choose_from_datasets([D.range(2), D.range(10, 13)], choices)) == [0, 10, 1, 11]
    assert _ints(D.choose_from_datasets([D.range(2), D.range(10, 13)], choices, stop_on_empty_dataset=False)) == [
        0, 10, 1, 11, 12]
    assert _ints(D.choose_from_datasets([D.range(3), D.range(10, 13)], D.range(2).repeat(3))) == [
        0, 10, 1, 11, 2, 12]
    sampled = _ints(D.sample_from_datasets([D.range(3), D.range(10, 13)], seed=1))
    assert sorted(sampled) == [0, 1, 2, 10, 11, 12]  # each dataset's order kept, all of both (TF's default)
    assert [x for x in sampled if x < 10] == [0, 1, 2]
    assert _ints(D.counter(start=2).take(3)) == [2, 3, 4] and int(D.counter().cardinality()) == -1
    assert len(list(D.random(seed=4).take(3))) == 3
    assert _ints(D.range(3).map(lambda x: x).ignore_errors()) == [0, 1, 2]


def test_a_distributed_tuple_element_is_indexed_as_tfs():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def gen():
        return ((np.float32(i), i % 2) for i in range(6))

    signature = (tf.TensorSpec(shape=(), dtype=tf.float32), tf.TensorSpec(shape=(), dtype=tf.int32))
    dataset = D.from_generator(gen, output_signature=signature).batch(4)
    sums = [[float(np.asarray(t).sum()) for t in strategy.experimental_local_results(batch[0])]
            for batch in strategy.experimental_distribute_dataset(dataset)]
    assert sums == [[1.0, 5.0], [4.0, 5.0]]  # TF 2.21 on 2 logical CPUs
