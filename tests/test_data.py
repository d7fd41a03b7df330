"""Tests for jdist.datasets: bundled digits, synthetic data, stdlib text, MNIST readers."""
import gzip

import jax
import numpy as np
import pytest

from jdist.datasets import (
    CharTokenizer,
    load_corpus,
    load_digits,
    load_mnist,
    load_text_lm,
    make_classification,
    make_tokens,
    num_classes,
    read_idx,
)
from jdist.datasets.digits import resize_bilinear

# --- digits -----------------------------------------------------------------

def test_digits_shapes_dtypes_range():
    images, labels = load_digits("train")
    assert images.shape[1:] == (28, 28, 1) and images.dtype == np.float32
    assert labels.shape == images.shape[:1] and labels.dtype == np.int32
    assert images.min() >= 0.0 and images.max() <= 1.0 and images.max() > 0.9
    assert set(np.unique(labels)) == set(range(num_classes))


def test_digits_split_sizes_disjoint_and_deterministic():
    train_x, train_y = load_digits("train", test_fraction=0.2, seed=3)
    test_x, test_y = load_digits("test", test_fraction=0.2, seed=3)
    assert len(train_y) + len(test_y) == 1797
    assert abs(len(test_y) - 0.2 * 1797) <= 1
    # No test image appears in the training split.
    train_rows = {row.tobytes() for row in train_x.reshape(len(train_x), -1)}
    assert not any(row.tobytes() in train_rows for row in test_x.reshape(len(test_x), -1))
    again_x, again_y = load_digits("train", test_fraction=0.2, seed=3)
    np.testing.assert_array_equal(train_x, again_x)
    np.testing.assert_array_equal(train_y, again_y)
    other_y = load_digits("train", test_fraction=0.2, seed=4)[1]
    assert not np.array_equal(train_y, other_y)


def test_digits_native_size():
    images, _ = load_digits("test", image_size=8)
    assert images.shape[1:] == (8, 8, 1)


def test_resize_bilinear_matches_jax_image_resize():
    images = np.random.default_rng(0).uniform(size=(3, 8, 8))
    expected = jax.image.resize(images, (3, 28, 28), "bilinear")
    np.testing.assert_allclose(resize_bilinear(images, 28), expected, atol=1e-5)


# --- synthetic --------------------------------------------------------------

def test_make_classification_deterministic_and_learnable():
    x, y = make_classification(256, image_shape=(784,), seed=1)
    assert x.shape == (256, 784) and x.dtype == np.float32
    assert y.shape == (256,) and y.dtype == np.int32
    x2, y2 = make_classification(256, image_shape=(784,), seed=1)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert make_classification(4, seed=0)[0].shape == (4, 28, 28, 1)
    # Nearest class mean (estimated on one draw) classifies another draw.
    means = np.stack([x[y == c].mean(0) for c in range(10)])
    test_x, test_y = make_classification(256, image_shape=(784,), seed=2)
    predicted = np.argmin(((test_x[:, None] - means[None]) ** 2).sum(-1), axis=1)
    assert (predicted == test_y).mean() > 0.9


def test_make_tokens():
    tokens = make_tokens(5, 7, vocab_size=11, seed=0)
    assert tokens.shape == (5, 7) and tokens.dtype == np.int32
    assert tokens.min() >= 0 and tokens.max() < 11
    np.testing.assert_array_equal(tokens, make_tokens(5, 7, vocab_size=11, seed=0))
    assert not np.array_equal(tokens, make_tokens(5, 7, vocab_size=11, seed=1))


# --- text -------------------------------------------------------------------

def test_corpus_size_and_determinism():
    corpus = load_corpus()
    assert len(corpus.encode("utf-8")) >= 200_000
    assert corpus == load_corpus()


def test_char_tokenizer_round_trip():
    tokenizer = CharTokenizer()
    text = "Beautiful is better than ugly. Ünïcödé ✓"
    ids = tokenizer.encode(text)
    assert ids.dtype == np.int32 and ids.max() < tokenizer.vocab_size
    assert tokenizer.decode(ids) == text


def test_text_lm_windows_shift_by_one():
    seq_len = 64
    inputs, targets = load_text_lm(seq_len=seq_len, split="train")
    test_inputs, _ = load_text_lm(seq_len=seq_len, split="test")
    assert inputs.shape == targets.shape and inputs.shape[1] == seq_len
    assert inputs.dtype == np.int32 and targets.dtype == np.int32
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
    # Windows are consecutive and non-overlapping.
    np.testing.assert_array_equal(targets[:-1, -1], inputs[1:, 0])
    stream = CharTokenizer().encode(load_corpus())
    np.testing.assert_array_equal(inputs.reshape(-1), stream[: inputs.size])
    assert 0.05 < len(test_inputs) / (len(inputs) + len(test_inputs)) < 0.15


# --- MNIST files ------------------------------------------------------------

def write_idx(path, array, compress=False):
    codes = {np.uint8: 0x08, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D}
    header = bytes([0, 0, codes[array.dtype.type], array.ndim])
    header += np.asarray(array.shape, ">u4").tobytes()
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, compress):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 4, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=(5,)).astype(np.uint8)
    floats = rng.standard_normal((2, 3)).astype(np.float32)
    ints = rng.integers(-1000, 1000, size=(6,)).astype(np.int32)
    for name, array in [("img", images), ("lab", labels), ("f", floats), ("i", ints)]:
        path = tmp_path / name
        write_idx(path, array, compress)
        result = read_idx(str(path))
        assert result.shape == array.shape and result.dtype == array.dtype
        np.testing.assert_array_equal(result, array)


def write_mnist_dir(directory, n_train=6, n_test=4, compress=False):
    rng = np.random.default_rng(0)
    suffix = ".gz" if compress else ""
    arrays = {}
    for prefix, n in [("train", n_train), ("t10k", n_test)]:
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=(n,)).astype(np.uint8)
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images, compress)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress)
        arrays[prefix] = images, labels
    return arrays


@pytest.mark.parametrize("compress", [False, True])
def test_load_mnist_from_idx_directory(tmp_path, compress):
    arrays = write_mnist_dir(tmp_path, compress=compress)
    for split, prefix in [("train", "train"), ("test", "t10k")]:
        images, labels = load_mnist(str(tmp_path), split)
        raw_images, raw_labels = arrays[prefix]
        assert images.shape == (len(raw_labels), 28, 28, 1) and images.dtype == np.float32
        assert labels.dtype == np.int32
        np.testing.assert_allclose(images[..., 0], raw_images / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(labels, raw_labels)


def test_load_mnist_from_npz(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (6, 28, 28), dtype=np.uint8),
        "y_train": rng.integers(0, 10, 6).astype(np.uint8),
        "x_test": rng.integers(0, 256, (4, 28, 28), dtype=np.uint8),
        "y_test": rng.integers(0, 10, 4).astype(np.uint8),
    }
    np.savez(tmp_path / "mnist.npz", **arrays)
    for path in (tmp_path / "mnist.npz", tmp_path):  # The file, or its directory.
        images, labels = load_mnist(str(path), "test")
        assert images.shape == (4, 28, 28, 1) and images.dtype == np.float32
        assert images.min() >= 0.0 and images.max() <= 1.0
        np.testing.assert_array_equal(labels, arrays["y_test"])
        assert labels.dtype == np.int32


def test_mnist_errors(tmp_path):
    write_mnist_dir(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    load_mnist(str(tmp_path), "train")  # Only the test split is incomplete.
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        load_mnist(str(tmp_path), "test")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_idx(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_mnist(str(tmp_path / "nowhere.npz"))
    bad = tmp_path / "bad-idx"
    bad.write_bytes(b"\x12\x34\x56\x78" + bytes(16))
    with pytest.raises(ValueError, match="magic number 0x12345678"):
        read_idx(str(bad))
    truncated = tmp_path / "short-idx"
    header = bytes([0, 0, 0x08, 1]) + np.asarray([10], ">u4").tobytes()
    truncated.write_bytes(header + bytes(3))  # Header promises 10 bytes.
    with pytest.raises(ValueError, match="10 bytes"):
        read_idx(str(truncated))
