"""`tf.data.TextLineDataset` and string elements, against TF 2.21 (tensorflow-cpu 2.21.0), observed on the same
files: the lines, their order with `num_parallel_reads`, GZIP, the cardinality and the element spec."""
import gzip
import os
import zlib

os.environ.setdefault("KERAS_BACKEND", "jax")

import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


@pytest.fixture
def files(tmp_path):
    (tmp_path / "one.txt").write_bytes(b"a b\r\nsecond line\n\nlast")
    (tmp_path / "two.txt").write_bytes(b"x\ny\n")
    (tmp_path / "three.txt.gz").write_bytes(gzip.compress(b"g1\ng2\n"))
    (tmp_path / "four.z").write_bytes(zlib.compress(b"z1\nz2"))
    return tmp_path


def test_lines_as_tf_reads_them(files):
    both = [str(files / "one.txt"), str(files / "two.txt")]
    ds = tf.data.TextLineDataset(both)
    assert list(ds.as_numpy_iterator()) == [b"a b", b"second line", b"", b"last", b"x", b"y"]
    assert int(ds.cardinality()) == -2 and repr(ds.element_spec) == "TensorSpec(shape=(), dtype=tf.string, name=None)"
    interleaved = tf.data.TextLineDataset(both, num_parallel_reads=2)
    assert list(interleaved.as_numpy_iterator()) == [b"a b", b"x", b"second line", b"y", b"", b"last"]
    gz = tf.data.TextLineDataset(str(files / "three.txt.gz"), compression_type="GZIP")
    assert list(gz.as_numpy_iterator()) == [b"g1", b"g2"]
    z = tf.data.TextLineDataset(str(files / "four.z"), compression_type="ZLIB")
    assert list(z.as_numpy_iterator()) == [b"z1", b"z2"]


def test_iterated_lines_are_string_tensors(files):
    """TF's text tutorials print `line.numpy()` for each line of a dataset."""
    ds = tf.data.TextLineDataset(str(files / "one.txt"))
    first = next(iter(ds))
    assert str(first) == "tf.Tensor(b'a b', shape=(), dtype=string)" and first.numpy() == b"a b"
    lengths = ds.map(lambda line: tf.strings.length(line))
    assert [int(n) for n in lengths.as_numpy_iterator()] == [3, 11, 0, 4]
    words = ds.map(lambda line: tf.strings.reduce_join(tf.strings.split(line), separator="|"))
    assert list(words.as_numpy_iterator()) == [b"a|b", b"second|line", b"", b"last"]


def test_bad_arguments_name_the_problem(files):
    with pytest.raises(FileNotFoundError, match="missing.txt does not exist"):
        tf.data.TextLineDataset(str(files / "missing.txt"))
    with pytest.raises(ValueError, match="compression_type must be"):
        tf.data.TextLineDataset(str(files / "one.txt"), compression_type="BZ2")
