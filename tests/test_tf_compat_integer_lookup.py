"""`tf.keras.layers.IntegerLookup` on the host, against Keras 3 on TF 2.21 (observed: tensorflow-cpu 2.21.0, its
Keras 3, the same calls). Each expected vocabulary and output below is what TF printed."""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf

DATA = [12, 36, 1138, 36, 42, 12, 36, 7, 7, 7, 42]
VOCAB = [12, 36, 1138, 42]
LAYER = tf.keras.layers.IntegerLookup

TF_CALLS = [  # (case, layer arguments, input, TF's output)
    ("given", {}, [[12, 1138, 42], [42, 1000, 36]], [[1, 3, 4], [4, 0, 2]]),
    ("mask", {"mask_token": 0}, [[12, 0, 42], [42, 1000, 36]], [[2, 0, 5], [5, 1, 3]]),
    ("two_oov", {"num_oov_indices": 2}, [[12, 1138, 42], [42, 1000, 36], [5, 6, 7]], [[2, 4, 5], [5, 0, 3],
                                                                                          [1, 0, 1]]),
    ("invert", {"invert": True}, [[1, 3, 4], [0, 2, 1]], [[12, 1138, 42], [-1, 36, 12]]),
    ("multi_hot", {"output_mode": "multi_hot"}, [[12, 1138, 42, 42], [1000, 36, 36, 36]], [[0, 1, 0, 1, 1],
                                                                                            [1, 0, 1, 0, 0]]),
    ("count", {"output_mode": "count"}, [[12, 1138, 42, 42], [1000, 36, 36, 36]], [[0, 1, 0, 1, 2],
                                                                                    [1, 0, 3, 0, 0]]),
    ("one_hot", {"output_mode": "one_hot"}, [12, 1000, 36], [[0, 1, 0, 0, 0], [1, 0, 0, 0, 0], [0, 0, 1, 0, 0]]),
    ("scalar", {}, 12, 1),
    ("mask_multi_hot", {"mask_token": 0, "output_mode": "multi_hot"}, [[12, 0, 5]], [[1, 1, 0, 0, 0]]),
    ("padded", {"pad_to_max_tokens": True, "max_tokens": 8, "output_mode": "multi_hot"}, [[12]],
     [[0, 1, 0, 0, 0, 0, 0, 0]]),
    ("two_oov_count", {"num_oov_indices": 2, "output_mode": "count"}, [[12, 5, 6, 6]], [[2, 1, 1, 0, 0, 0]]),
]


@pytest.mark.parametrize("kwargs,inputs,expected", [c[1:] for c in TF_CALLS], ids=[c[0] for c in TF_CALLS])
def test_lookups_give_tfs_indices(kwargs, inputs, expected):
    out = LAYER(vocabulary=VOCAB, **kwargs)(inputs)
    assert out.dtype == np.int64 and out.numpy().tolist() == expected


def test_adapt_vocabulary_and_tf_idf():
    layer = LAYER()
    layer.adapt(DATA)
    assert layer.get_vocabulary() == [-1, 36, 7, 42, 12, 1138]  # by count, ties descending (TF's)
    assert layer([[12, 1138, 42], [42, 1000, 36]]).numpy().tolist() == [[4, 5, 3], [3, 0, 1]]
    limited = LAYER(max_tokens=3)
    limited.adapt(DATA)
    assert limited.get_vocabulary() == [-1, 36, 7]
    ds = tf.data.Dataset.from_tensor_slices(np.array(DATA)).batch(4)
    from_ds = LAYER()
    from_ds.adapt(ds)
    assert from_ds.get_vocabulary() == [-1, 36, 7, 42, 12, 1138]
    assert ds.map(LAYER(vocabulary=VOCAB)).take(1).get_single_element().numpy().tolist() == [1, 2, 3, 2]
    assert LAYER(vocabulary=VOCAB, num_oov_indices=2).get_vocabulary() == [-1, -1, *VOCAB]
    assert LAYER(vocabulary=VOCAB, mask_token=0).get_vocabulary() == [0, -1, *VOCAB]
    weighted = LAYER(vocabulary=VOCAB, output_mode="tf_idf", idf_weights=[0.5, 0.25, 0.2, 0.125])
    out = weighted([[12, 1138, 42, 42], [1000, 36, 36, 36]])
    assert out.dtype == np.float32  # '[UNK]' weighs the mean of the given weights (0.26875)
    np.testing.assert_allclose(out.numpy(), [[0.0, 0.5, 0.0, 0.2, 0.25], [0.26875, 0.0, 0.75, 0.0, 0.0]])
    assert LAYER(vocabulary=[-1, 1, 2]).get_vocabulary() == [-1, 1, 2]  # a leading OOV token is the OOV's


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match=r"repeated term.*\[1\]"):
        LAYER(vocabulary=[1, 1, 2])
    with pytest.raises(TypeError, match="Cannot convert .* to EagerTensor of dtype int64"):
        LAYER(vocabulary=VOCAB)([12.0, 36.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="When `num_oov_indices=0` all inputs should be in "
                                                              "vocabulary"):
        LAYER(vocabulary=VOCAB, num_oov_indices=0)([12, 5])
