"""`tf.keras.layers.TextVectorization` on the host, against Keras 3 on TF 2.21 (observed: tensorflow-cpu 2.21.0,
its Keras 3, the same calls). Each expected vocabulary, id, count and tf-idf value below is what TF printed."""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf

DOCS = ["The cat sat.", "the dog SAT on the mat!", "a cat, a dog", "zebra's day-off", "cat cat cat"]
QUERY = ["the cat sat on a new mat", "dog"]
VOCABULARY = ["cat", "the", "sat", "dog", "a", "zebras", "on", "mat", "dayoff"]  # by count, ties descending
# idf = log(1 + 5 documents / (1 + documents holding the token)); '[UNK]' takes the mean of the others
IDF = {"cat": 0.81093, "the": 0.98083, "sat": 0.98083, "dog": 0.98083, "a": 1.25276}

TF_OUTPUTS = {  # (output_mode, max_tokens): (vocabulary, output of QUERY)
    ("int", None): (["", "[UNK]", *VOCABULARY], [[3, 2, 4, 8, 6, 1, 9], [5, 0, 0, 0, 0, 0, 0]]),
    ("int", 6): (["", "[UNK]", *VOCABULARY[:4]], [[3, 2, 4, 1, 1, 1, 1], [5, 0, 0, 0, 0, 0, 0]]),
    ("multi_hot", None): (["[UNK]", *VOCABULARY], [[1, 1, 1, 1, 0, 1, 0, 1, 1, 0], [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]]),
    ("multi_hot", 6): (["[UNK]", *VOCABULARY[:5]], [[1, 1, 1, 1, 0, 1], [0, 0, 0, 0, 1, 0]]),
    ("count", None): (["[UNK]", *VOCABULARY], [[1, 1, 1, 1, 0, 1, 0, 1, 1, 0], [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]]),
    ("count", 6): (["[UNK]", *VOCABULARY[:5]], [[3, 1, 1, 1, 0, 1], [0, 0, 0, 0, 1, 0]]),
    ("tf_idf", None): (["[UNK]", *VOCABULARY], [
        [1.11303, 0.81093, 0.98083, 0.98083, 0.0, 1.25276, 0.0, 1.25276, 1.25276, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.98083, 0.0, 0.0, 0.0, 0.0, 0.0]]),
    ("tf_idf", 6): (["[UNK]", *VOCABULARY[:5]], [[3.00371, 0.81093, 0.98083, 0.98083, 0.0, 1.25276],
                                                [0.0, 0.0, 0.0, 0.0, 0.98083, 0.0]]),
}


@pytest.mark.parametrize("mode, max_tokens", list(TF_OUTPUTS))
def test_modes_give_tfs_vocabulary_and_values(mode, max_tokens):
    layer = tf.keras.layers.TextVectorization(output_mode=mode, max_tokens=max_tokens)
    layer.adapt(DOCS)
    vocabulary, expected = TF_OUTPUTS[(mode, max_tokens)]
    assert layer.get_vocabulary() == vocabulary and layer.vocabulary_size() == len(vocabulary)
    out = layer(QUERY)
    assert out.dtype == (np.float32 if mode == "tf_idf" else np.int64)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_sequences_ngrams_standardizing_and_inputs():
    layer = tf.keras.layers.TextVectorization(output_sequence_length=4)
    layer.adapt(DOCS)
    assert layer(QUERY).numpy().tolist() == [[3, 2, 4, 8], [5, 0, 0, 0]]
    plain = tf.keras.layers.TextVectorization()
    plain.adapt(DOCS)
    assert plain(tf.constant([["the cat"], ["dog"]])).numpy().tolist() == [[3, 2], [5, 0]]  # an (N, 1) column
    bigrams = tf.keras.layers.TextVectorization(ngrams=2)
    bigrams.adapt(DOCS)
    assert bigrams.get_vocabulary()[:12] == ["", "[UNK]", "cat", "the", "sat", "dog", "cat cat", "a", "zebras dayoff",
                                             "zebras", "the mat", "the dog"]
    raw = tf.keras.layers.TextVectorization(standardize=None)
    raw.adapt(DOCS)
    assert raw.get_vocabulary() == ["", "[UNK]", "cat", "the", "dog", "a", "zebra's", "sat.", "on", "mat!", "day-off",
                                    "cat,", "The", "SAT"]
    accents = tf.keras.layers.TextVectorization()
    accents.adapt(["Héllo wörld ÉTÉ", "héllo"])
    assert accents.get_vocabulary() == ["", "[UNK]", "héllo", "ÉtÉ", "wörld"]  # ASCII letters lowered only
    given = tf.keras.layers.TextVectorization(vocabulary=["cat", "dog"])
    assert given(["cat dog bird"]).numpy().tolist() == [[2, 3, 1]]
    assert given.get_vocabulary() == ["", "[UNK]", "cat", "dog"]


def test_pad_to_max_tokens_and_a_dataset():
    padded = tf.keras.layers.TextVectorization(output_mode="tf_idf", max_tokens=6, pad_to_max_tokens=True)
    padded.adapt(DOCS)
    assert padded(["cat"]).numpy().shape == (1, 6)
    unpadded = tf.keras.layers.TextVectorization(output_mode="tf_idf", max_tokens=20)
    unpadded.adapt(DOCS)
    assert unpadded(["cat"]).numpy().shape == (1, 10)
    ds = tf.data.Dataset.from_tensor_slices(DOCS).batch(2)
    counts = tf.keras.layers.TextVectorization(output_mode="count")
    counts.adapt(ds)
    assert counts.get_vocabulary() == ["[UNK]", *VOCABULARY]
    assert ds.map(counts).take(1).get_single_element().numpy().tolist() == [[0, 1, 1, 1, 0, 0, 0, 0, 0, 0],
                                                                             [0, 0, 2, 1, 1, 0, 0, 1, 1, 0]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Dataset had more than one element"):
        ds.get_single_element()


def test_a_vocabulary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("cat\ndog\n")
    layer = tf.keras.layers.TextVectorization(vocabulary=str(path))
    assert layer.get_vocabulary() == ["", "[UNK]", "cat", "dog"]
    with pytest.raises(ValueError, match="no such file exists"):
        tf.keras.layers.TextVectorization(vocabulary=str(tmp_path / "missing.txt"))


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="output_mode 'one_hot' is not one of"):
        tf.keras.layers.TextVectorization(output_mode="one_hot")
    with pytest.raises(ValueError, match="`output_sequence_length` must not be set"):
        tf.keras.layers.TextVectorization(output_mode="count", output_sequence_length=3)
    with pytest.raises(TypeError, match="TextVectorization takes a batch of strings"):
        tf.keras.layers.TextVectorization()(np.zeros((2, 3)))
