"""TFRecord files, `tf.train.Example` and `tf.io`'s parsing against TF 2.21 (tensorflow-cpu 2.21.0), observed:
the bytes below are what TF wrote (files, serialized Examples, TensorProtos), and the values and error
texts what TF gave for the same calls."""
import os
import pickle

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.tfdata import crc32c  # noqa: E402

# observed, TF 2.21: tf.train.Example(features=tf.train.Features(feature={"x": Feature(float_list=
# FloatList(value=[1.0, 2.5]))})).SerializeToString()
E1 = b"\n\x13\n\x11\n\x01x\x12\x0c\x12\n\n\x08\x00\x00\x80?\x00\x00 @"
# observed, TF 2.21: TFRecordWriter files. PLAIN holds E1, b"hello", b""; GZ b"hello" then flush() then b"tf";
# ZL b"hello", b"tf".
PLAIN = (b"\x15\x00\x00\x00\x00\x00\x00\x00\xd6\xabk+" + E1 + b"x\x01\x82\xc2\x05\x00\x00\x00\x00\x00\x00\x00"
         b"\xea\xb2\x04>hello\xbb\x1f\x1c\x19\x00\x00\x00\x00\x00\x00\x00\x00)\x03\x98\x07\xd8\xea\x82\xa2")
GZ = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03be\x80\x80W\x9bX\xec2Rsr\xf2w\xcb\xcbH\x02\x04\x18\x13T\xb0B\x9d"
      b"\xdb\xa4$\xad\xb9\xaa\x93\x0f\x00Cq\xd4P'\x00\x00\x00")
ZL = b"x\x9cce\x80\x80W\x9bX\xec2Rsr\xf2w\xcb\xcbH2A\x05+\xd4\xb9MJ\xd2\x9a\xab:\xf9\x00\x95&\x08U"

FILES = [("plain", PLAIN, None, [E1, b"hello", b""]), ("gzip", GZ, "GZIP", [b"hello", b"tf"]),
         ("zlib", ZL, "ZLIB", [b"hello", b"tf"])]


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _records(*args, **kwargs):
    return [r.numpy() for r in tf.data.TFRecordDataset(*args, **kwargs)]


@pytest.mark.parametrize("kind,data,compression,records", FILES, ids=[f[0] for f in FILES])
def test_tfrecord_files_read_and_written_as_tfs(tmp_path, kind, data, compression, records):
    path = _write(tmp_path / "tf.tfrecord", data)
    assert _records(path, compression_type=compression) == records
    element = next(iter(tf.data.TFRecordDataset(path, compression)))
    assert element.dtype == object and element.shape == () and "dtype=string" in repr(element)
    mine = str(tmp_path / "jdist.tfrecord")
    with tf.io.TFRecordWriter(mine, options=compression) as writer:
        for i, record in enumerate(records):
            writer.write(record)
            if kind == "gzip" and i == 0:
                writer.flush()
    assert open(mine, "rb").read() == data  # TF's bytes exactly, compressed ones included


def test_writer_options_and_errors(tmp_path):
    options = tf.io.TFRecordOptions("GZIP")
    assert (options.compression_type, options.compression_level, options.mem_level) == ("GZIP", None, None)
    assert tf.io.TFRecordOptions.get_compression_type_string(tf.io.TFRecordOptions("ZLIB")) == "ZLIB"
    assert tf.io.TFRecordOptions.get_compression_type_string(None) == ""
    assert tf.io.TFRecordOptions.compression_type_map == {1: "ZLIB", 2: "GZIP", 0: ""}
    with pytest.raises(ValueError, match='Not a valid compression_type: "BZ2"'):  # observed, TF 2.21
        tf.io.TFRecordOptions("BZ2")
    with pytest.raises(ValueError, match='Not a valid compression_type: "BZ2"'):
        tf.io.TFRecordWriter(str(tmp_path / "x"), "BZ2")
    with pytest.raises(tf.errors.NotFoundError, match="No such file or directory"):
        tf.io.TFRecordWriter(str(tmp_path / "no" / "dir" / "x"))
    path = str(tmp_path / "w.tfr")
    writer = tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="ZLIB", compression_level=9))
    writer.write("strok")  # text is written as UTF-8 (observed)
    with pytest.raises(TypeError, match="bytes"):
        writer.write(3)
    writer.close()
    writer.close()  # twice is fine
    with pytest.raises(tf.errors.FailedPreconditionError, match="Writer is closed."):
        writer.write(b"b")
    with pytest.raises(tf.errors.FailedPreconditionError, match="Writer is closed."):
        writer.flush()
    assert open(path, "rb").read()[:2] == b"x\xda"  # zlib's header for level 9
    assert _records(path, "ZLIB") == [b"strok"]


CORRUPT = [  # observed, TF 2.21: DataLossError texts for PLAIN with one byte flipped or cut short
    ("data crc", lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], r"corrupted record at 12\b"),
    ("length crc", lambda b: b[:9] + bytes([b[9] ^ 1]) + b[10:], r"corrupted record at 0 \(Is this even a TFRecord"),
    ("second length", lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], r"corrupted record at 37\b"),
    ("cut in data", lambda b: b[:-3], "truncated record at 58"),
]


@pytest.mark.parametrize("case,damage,message", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_a_damaged_file_is_data_loss(tmp_path, case, damage, message):
    path = _write(tmp_path / "bad.tfr", damage(PLAIN))
    with pytest.raises(tf.errors.DataLossError, match=message):
        _records(path)


def test_file_edges(tmp_path):
    assert _records(_write(tmp_path / "e", b"")) == []
    assert _records(_write(tmp_path / "h", PLAIN[:5])) == []  # inside the first header: TF ends quietly
    with pytest.raises(tf.errors.DataLossError):
        _records(_write(tmp_path / "p", PLAIN), compression_type="GZIP")  # not gzip
    with pytest.raises(tf.errors.NotFoundError, match="nonexist.tfrecord"):
        tf.data.TFRecordDataset(str(tmp_path / "nonexist.tfrecord"))
    with pytest.raises(ValueError, match="compression_type"):
        tf.data.TFRecordDataset(str(tmp_path / "e"), compression_type="BZ2")
    a, b = _write(tmp_path / "a", PLAIN), _write(tmp_path / "b", PLAIN)
    # observed, TF 2.21: two files read in parallel take turns, a record at a time
    assert _records([a, b], num_parallel_reads=2)[:4] == [E1, E1, b"hello", b"hello"]
    assert _records(tf.constant([a, b]), buffer_size=10) == [E1, b"hello", b""] * 2
    names = tf.data.Dataset.from_tensor_slices([a, b])
    assert _records(names) == [E1, b"hello", b""] * 2  # a dataset of file names
    assert [r.numpy() for r in names.interleave(tf.data.TFRecordDataset, cycle_length=2)][:2] == [E1, E1]
    assert tf.data.TFRecordDataset(a).cardinality() == -2
    assert str(tf.data.TFRecordDataset(a).element_spec) == "TensorSpec(shape=(), dtype=tf.string, name=None)"


@pytest.mark.parametrize("n", [0, 9, 4095, 4096, 70_001, 300_000])
def test_crc32c_lanes_match_the_byte_loop(n):
    data = b"123456789" if n == 9 else np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    crc = 0xFFFFFFFF
    for byte in data:  # the CRC-32C definition, bit by bit
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    assert crc32c.crc32c(data) == crc ^ 0xFFFFFFFF
    if n == 9:
        assert crc32c.crc32c(data) == 0xE3069283  # CRC-32C's check value


def test_large_records_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (300_000, 5000, 1)]
    for compression in (None, "GZIP", "ZLIB"):
        path = str(tmp_path / f"big{compression}")
        with tf.io.TFRecordWriter(path, compression) as writer:
            for record in records:
                writer.write(record)
        assert _records(path, compression) == records


FIXED = [  # observed, TF 2.21: b"HDR" + b"abcdefghij" + b"FT"
    (dict(record_bytes=5, header_bytes=3, footer_bytes=2), [b"abcde", b"fghij"]),
]
FIXED += [(dict(record_bytes=1, header_bytes=12), [bytes([c]) for c in b"HDRabcdefghijFT"[12:]])]


@pytest.mark.parametrize("kwargs,expected", FIXED)
def test_fixed_length_records(tmp_path, kwargs, expected):
    path = _write(tmp_path / "fixed.bin", b"HDRabcdefghijFT")
    assert [r.numpy() for r in tf.data.FixedLengthRecordDataset(path, **kwargs)] == expected
    both = tf.data.FixedLengthRecordDataset([path, path], num_parallel_reads=2, **kwargs)
    assert [r.numpy() for r in both] == [r for r in expected for _ in range(2)]


def test_fixed_length_errors(tmp_path):
    path = _write(tmp_path / "fixed.bin", b"HDRabcdefghijFT")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Excluding the header \(3 bytes\) and footer "
                       r"\(2 bytes\), input file .* has body length 10 bytes, which is not an exact multiple of "
                       r"the record length \(4 bytes\)"):  # observed, TF 2.21
        list(tf.data.FixedLengthRecordDataset(path, 4, header_bytes=3, footer_bytes=2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`record_bytes` must be > 0"):
        tf.data.FixedLengthRecordDataset(path, 0)


# ------------------------------------------------------------------ tf.train.Example
F = tf.train.Feature
EXAMPLES = [  # observed, TF 2.21: SerializeToString() of each
    (lambda: tf.train.Example(features=tf.train.Features(feature={
        "x": F(float_list=tf.train.FloatList(value=[1.0, 2.5]))})), E1),
    (lambda: tf.train.Example(features=tf.train.Features(feature={
        "ids": F(int64_list=tf.train.Int64List(value=[0, -1, 2**40]))})),
     b"\n\x1e\n\x1c\n\x03ids\x12\x15\x1a\x13\n\x11\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x80\x80\x80\x80\x80 "),
    (lambda: tf.train.Example(features=tf.train.Features(feature={
        "b": F(bytes_list=tf.train.BytesList(value=[b"", b"\x00\xff"]))})),
     b"\n\x0f\n\r\n\x01b\x12\x08\n\x06\n\x00\n\x02\x00\xff"),
    (lambda: tf.train.Example(features=tf.train.Features(feature={"e": F()})), b"\n\x07\n\x05\n\x01e\x12\x00"),
    (lambda: tf.train.Example(), b""),
    (lambda: tf.train.SequenceExample(
        context=tf.train.Features(feature={"len": F(int64_list=tf.train.Int64List(value=[2]))}),
        feature_lists=tf.train.FeatureLists(feature_list={"tok": tf.train.FeatureList(feature=[
            F(int64_list=tf.train.Int64List(value=[1, 2])), F(int64_list=tf.train.Int64List(value=[3]))])})),
     b"\n\x0e\n\x0c\n\x03len\x12\x05\x1a\x03\n\x01\x02\x12\x18\n\x16\n\x03tok\x12\x0f\n\x06\x1a\x04\n\x02\x01"
     b"\x02\n\x05\x1a\x03\n\x01\x03"),
]


@pytest.mark.parametrize("make,expected", EXAMPLES)
def test_examples_serialize_to_tfs_bytes(make, expected):
    message = make()
    assert message.SerializeToString() == expected
    again = type(message).FromString(expected)
    assert again == message
    parsed = type(message)()
    parsed.ParseFromString(expected)
    assert parsed == message


def test_example_fields_text_and_errors():
    example = tf.train.Example(features=tf.train.Features(feature={
        "x": F(float_list=tf.train.FloatList(value=[1.0, 2.5])),
        "label": F(int64_list=tf.train.Int64List(value=[7, -1])),
        "name": F(bytes_list=tf.train.BytesList(value=[b"ab", b"\xff"]))}))
    # observed, TF 2.21 (the map's order in plain SerializeToString() changes from one process to the next in
    # TF too; deterministic=True sorts the keys)
    assert example.SerializeToString(deterministic=True) == (
        b"\n@\n\x18\n\x05label\x12\x0f\x1a\r\n\x0b\x07\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\n\x11\n\x04name\x12"
        b"\t\n\x07\n\x02ab\n\x01\xff\n\x11\n\x01x\x12\x0c\x12\n\n\x08\x00\x00\x80?\x00\x00 @")
    assert list(example.features.feature["x"].float_list.value) == [1.0, 2.5]
    assert example.features.feature["label"].WhichOneof("kind") == "int64_list"
    assert tf.train.Feature().WhichOneof("kind") is None
    assert str(tf.train.Example(features=tf.train.Features(feature={"x": F(float_list=tf.train.FloatList(
        value=[1.0, 2.5]))}))) == ('features {\n  feature {\n    key: "x"\n    value {\n      float_list {\n'
                                   '        value: 1\n        value: 2.5\n      }\n    }\n  }\n}\n')
    assert str(F(bytes_list=tf.train.BytesList(value=["é".encode()]))) == 'bytes_list {\n  value: "\\303\\251"\n}\n'
    built = tf.train.Example()
    built.features.feature["a"].int64_list.value.extend([1, 2])
    assert built.SerializeToString() == b"\n\r\n\x0b\n\x01a\x12\x06\x1a\x04\n\x02\x01\x02"  # observed, TF 2.21
    with pytest.raises(TypeError):
        tf.train.BytesList(value=["abc"])  # observed, TF 2.21: TypeError expected bytes, str found
    with pytest.raises(TypeError):
        tf.train.Int64List(value=[1.5])
    with pytest.raises(Exception, match="Error parsing message with type 'tensorflow.Example'"):
        tf.train.Example.FromString(b"\x0a\x05ab")  # observed, TF 2.21: DecodeError
    assert tf.train.Example.DESCRIPTOR.full_name == "tensorflow.Example"
    assert pickle.loads(pickle.dumps(example)) == example


# ------------------------------------------------------------------ parsing
def _example(**features):
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


E_A = _example(x=F(float_list=tf.train.FloatList(value=[1.0, 2.0])), label=F(int64_list=tf.train.Int64List(value=[3])),
               name=F(bytes_list=tf.train.BytesList(value=[b"a", b"bc"])))
E_B = _example(x=F(float_list=tf.train.FloatList(value=[4.0, 5.0])), label=F(int64_list=tf.train.Int64List(value=[6])),
               name=F(bytes_list=tf.train.BytesList(value=[b"d"])))
SPEC = {"x": tf.io.FixedLenFeature([2], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64),
        "name": tf.io.VarLenFeature(tf.string), "missing": tf.io.FixedLenFeature([], tf.int64, default_value=-1)}


def test_parse_single_example_as_tf():
    out = tf.io.parse_single_example(E_A, SPEC)
    assert list(out) == ["name", "label", "missing", "x"]  # observed, TF 2.21: sparse first, then dense, sorted
    assert repr(out["x"]) == "<tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>"
    assert repr(out["label"]) == "<tf.Tensor: shape=(), dtype=int64, numpy=3>"
    assert repr(out["missing"]) == "<tf.Tensor: shape=(), dtype=int64, numpy=-1>"
    assert repr(out["name"]) == ("SparseTensor(indices=tf.Tensor(\n[[0]\n [1]], shape=(2, 1), dtype=int64), "
                                 "values=tf.Tensor([b'a' b'bc'], shape=(2,), dtype=string), "
                                 "dense_shape=tf.Tensor([2], shape=(1,), dtype=int64))")
    np.testing.assert_array_equal(tf.sparse.to_dense(out["name"], default_value=b""), [b"a", b"bc"])


def test_parse_example_batches_as_tf():
    out = tf.io.parse_example([E_A, E_B], SPEC)
    assert list(out) == ["name", "label", "missing", "x"]
    np.testing.assert_array_equal(out["x"], np.array([[1, 2], [4, 5]], np.float32))
    assert out["x"].dtype == np.float32 and out["label"].dtype == np.int64
    np.testing.assert_array_equal(out["label"], [3, 6])
    np.testing.assert_array_equal(out["missing"], [-1, -1])
    name = out["name"]  # observed, TF 2.21
    np.testing.assert_array_equal(name.indices, [[0, 0], [0, 1], [1, 0]])
    assert list(name.values) == [b"a", b"bc", b"d"] and list(name.dense_shape) == [2, 2]
    empty = tf.io.parse_example(tf.constant([], tf.string), {"label": tf.io.FixedLenFeature((), tf.int64),
                                                           "n": tf.io.VarLenFeature(tf.string)})
    assert list(empty) == ["n", "label"] and empty["label"].shape == (0,)
    assert empty["n"].indices.shape == (0, 2) and list(empty["n"].dense_shape) == [0, 0]
    blank = tf.io.parse_example([b""], {"label": tf.io.FixedLenFeature((), tf.int64, default_value=0),
                                        "n": tf.io.VarLenFeature(tf.string)})
    assert list(blank["label"]) == [0] and list(blank["n"].dense_shape) == [1, 0]


PARSED = [  # observed, TF 2.21
    ("sequence", lambda: tf.io.parse_single_example(E_A, {
        "x": tf.io.FixedLenSequenceFeature([], tf.float32, allow_missing=True),
        "y": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=True)}),
     {"x": np.array([1, 2], np.float32), "y": np.zeros((0, 2), np.float32)}),
    ("sequence batch", lambda: tf.io.parse_example([E_A, E_B], {
        "name": tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True),
        "q": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True, default_value=9)}),
     {"name": np.array([[b"a", b"bc"], [b"d", b""]], object), "q": np.zeros((2, 0), np.int64)}),
    ("sequence rows", lambda: tf.io.parse_example([E_A, E_B], {
        "x": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=True)}),
     {"x": np.array([[[1, 2]], [[4, 5]]], np.float32)}),
    ("shapes and defaults", lambda: tf.io.parse_single_example(E_A, {
        "x": tf.io.FixedLenFeature([1, 2], tf.float32),
        "z": tf.io.FixedLenFeature([2], tf.float32, default_value=[0.5, 1.5]),
        "s": tf.io.FixedLenFeature([], tf.string, default_value="q")}),
     {"s": np.array(b"q", object), "x": np.array([[1, 2]], np.float32), "z": np.array([0.5, 1.5], np.float32)}),
    ("ragged single", lambda: tf.io.parse_single_example(E1, {"x": tf.io.RaggedFeature(tf.float32)}),
     {"x": np.array([1, 2.5], np.float32)}),
]


@pytest.mark.parametrize("case,parse,expected", PARSED, ids=[p[0] for p in PARSED])
def test_parsed_values(case, parse, expected):
    out = parse()
    assert list(out) == list(expected)
    for key, want in expected.items():
        got = np.asarray(out[key])
        assert got.dtype == want.dtype and got.shape == want.shape, key
        np.testing.assert_array_equal(got, want)


def test_varlen_ragged_and_sparse_features():
    # observed, TF 2.21
    text = tf.io.parse_single_example(E_A, {"s": tf.io.FixedLenFeature([], tf.string, default_value="q")})["s"]
    assert repr(text) == "<tf.Tensor: shape=(), dtype=string, numpy=b'q'>" and text.numpy() == b"q"
    out = tf.io.parse_single_example(E_A, {"label": tf.io.VarLenFeature(tf.int64),
                                           "missing": tf.io.VarLenFeature(tf.float32)})
    assert list(out["label"].values) == [3] and list(out["label"].dense_shape) == [1]
    assert out["missing"].indices.shape == (0, 1) and out["missing"].values.dtype == np.float32
    ragged = tf.io.parse_example([E1, b""], {"x": tf.io.RaggedFeature(tf.float32)})["x"]
    assert str(ragged) == "<tf.RaggedTensor [[1.0, 2.5], []]>"
    assert list(ragged.row_splits) == [0, 2, 2]
    with pytest.raises(NotImplementedError, match="partitions"):
        tf.io.parse_example([E1], {"x": tf.io.RaggedFeature(tf.float32, partitions=[1])})
    si = b"\n!\n\x0c\n\x02ix\x12\x06\x1a\x04\n\x02\x05\x01\n\x11\n\x01v\x12\x0c\x12\n\n\x08\x00\x00\x00?\x00\x00\x80>"
    sparse = tf.io.parse_single_example(si, {"sp": tf.io.SparseFeature("ix", "v", tf.float32, 10)})["sp"]
    assert sparse.indices.numpy().tolist() == [[1], [5]] and list(sparse.values) == [0.25, 0.5]
    assert list(sparse.dense_shape) == [10]
    batched = tf.io.parse_example([si], {"sp": tf.io.SparseFeature("ix", "v", tf.float32, 10)})["sp"]
    assert batched.indices.numpy().tolist() == [[0, 1], [0, 5]] and list(batched.dense_shape) == [1, 10]
    assert repr(tf.io.FixedLenFeature([2], tf.float32)) == ("FixedLenFeature(shape=[2], dtype=tf.float32, "
                                                            "default_value=None)")
    assert repr(tf.io.VarLenFeature(tf.string)) == "VarLenFeature(dtype=tf.string)"
    assert repr(tf.io.RaggedFeature(tf.int64)) == ("RaggedFeature(dtype=tf.int64, value_key=None, partitions=(), "
                                                   "row_splits_dtype=tf.int32, validate=False)")
    assert tf.io.FixedLenFeature([2], tf.float32).shape == [2]  # a namedtuple, as TF's


PARSE_ERRORS = [  # observed, TF 2.21: error types and texts
    (lambda: tf.io.parse_single_example(E_A, {"nope": tf.io.FixedLenFeature([], tf.int64)}),
     tf.errors.InvalidArgumentError, r"Feature: nope \(data type: int64\) is required but could not be found."),
    (lambda: tf.io.parse_single_example(_example(e=F()), {"e": tf.io.FixedLenFeature([], tf.float32)}),
     tf.errors.InvalidArgumentError, r"Feature: e \(data type: float\) is required but could not be found."),
    (lambda: tf.io.parse_single_example(E_A, {"x": tf.io.FixedLenFeature([], tf.int64)}),
     tf.errors.InvalidArgumentError, "Key: x.  Data types don't match. Data type: float but expected type: int64"),
    (lambda: tf.io.parse_single_example(E_A, {"x": tf.io.FixedLenFeature([3], tf.float32)}),
     tf.errors.InvalidArgumentError, "Key: x.  Can't parse serialized Example"),
    (lambda: tf.io.parse_single_example(b"\x0a\x05garb", {"x": tf.io.FixedLenFeature([], tf.float32)}),
     tf.errors.InvalidArgumentError, "Could not parse example input, value: '\n.garb'"),
    (lambda: tf.io.parse_single_example(E_A, {"x": tf.io.FixedLenFeature([2], tf.int32)}),
     tf.errors.InvalidArgumentError, "int32"),
    (lambda: tf.io.parse_single_example([E_A], {"x": tf.io.FixedLenFeature([2], tf.float32)}),
     ValueError, "Input serialized must be a scalar"),
    (lambda: tf.io.parse_example(tf.constant([[E_A], [E_B]]), {"x": tf.io.FixedLenFeature([2], tf.float32)}),
     tf.errors.InvalidArgumentError, r"Expected serialized to be a scalar or vector, got shape: \[2,1\]"),
    (lambda: tf.io.parse_single_example(E_A, {}), ValueError, "Invalid argument: features cannot be empty."),
    (lambda: tf.io.parse_single_example(E_A, {"x": tf.io.FixedLenSequenceFeature([], tf.float32)}),
     ValueError, "Unsupported: FixedLenSequenceFeature requires allow_missing to be True."),
    (lambda: tf.io.parse_single_example(E_A, {"z": tf.io.FixedLenFeature([2], tf.float32, default_value=0.5)}),
     tf.errors.InvalidArgumentError, "Input to reshape is a tensor with 1 values, but the requested shape has 2"),
]


@pytest.mark.parametrize("call,error,message", PARSE_ERRORS)
def test_parse_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_parsing_in_a_tfdata_pipeline(tmp_path):
    path = str(tmp_path / "data.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for example in (E_A, E_B, E_A):
            writer.write(example)
    features = {"x": tf.io.FixedLenFeature([2], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
    ds = tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_example(r, features)).batch(2)
    batches = list(ds)
    np.testing.assert_array_equal(batches[0]["x"], [[1, 2], [4, 5]])
    np.testing.assert_array_equal(batches[1]["label"], [3])
    # batch, then parse the batch; a VarLenFeature made dense inside the map
    batched = tf.data.TFRecordDataset(path).batch(3).map(lambda r: tf.io.parse_example(r, features))
    np.testing.assert_array_equal(next(iter(batched))["label"], [3, 6, 3])
    names = tf.data.TFRecordDataset(path).map(lambda r: tf.sparse.to_dense(
        tf.io.parse_single_example(r, {"name": tf.io.VarLenFeature(tf.string)})["name"], default_value=b""))
    assert [list(n.numpy()) for n in names] == [[b"a", b"bc"], [b"d"], [b"a", b"bc"]]
    # the parsed tensors go into compiled code; parsing itself is refused there (no strings in XLA)
    total = jax.jit(lambda x, y: x.sum() * y)(batches[0]["x"], tf.cast(batches[0]["label"], tf.float32))
    np.testing.assert_allclose(total, [36.0, 72.0])
    with pytest.raises(ValueError, match="runs on the host"):
        jax.jit(lambda r: tf.io.parse_single_example(r, features))(np.zeros(()))

    def doubled(records):  # string inputs: the tf.function runs on the host, as TF's graph would
        return tf.io.parse_example(records, features)["x"] * 2

    np.testing.assert_array_equal(tf.function(doubled)(tf.constant([E_A, E_B])), [[2, 4], [8, 10]])  # type: ignore


# observed, TF 2.21: SequenceExamples, context {"len": [2]} / {"len": [3]}; feature lists "tok" (int64 steps
# [1, 2], [3] / [4], [], [5, 6]) and "w" (float steps [0.5], [1.5] / [1.0], [2.0], [3.0])
S1 = (b"\n\x0e\n\x0c\n\x03len\x12\x05\x1a\x03\n\x01\x02\x123\n\x19\n\x01w\x12\x14\n\x08\x12\x06\n\x04\x00\x00\x00?\n"
      b"\x08\x12\x06\n\x04\x00\x00\xc0?\n\x16\n\x03tok\x12\x0f\n\x06\x1a\x04\n\x02\x01\x02\n\x05\x1a\x03\n\x01\x03")
S2 = (b"\n\x0e\n\x0c\n\x03len\x12\x05\x1a\x03\n\x01\x03\x12A\n#\n\x01w\x12\x1e\n\x08\x12\x06\n\x04\x00\x00\x80?\n\x08"
      b"\x12\x06\n\x04\x00\x00\x00@\n\x08\x12\x06\n\x04\x00\x00@@\n\x1a\n\x03tok\x12\x13\n\x05\x1a\x03\n\x01\x04\n\x02"
      b"\x1a\x00\n\x06\x1a\x04\n\x02\x05\x06")
CONTEXT = {"len": tf.io.FixedLenFeature([], tf.int64), "miss": tf.io.FixedLenFeature([], tf.int64, default_value=0)}
LISTS = {"tok": tf.io.VarLenFeature(tf.int64), "w": tf.io.FixedLenSequenceFeature([], tf.float32),
         "none": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=True)}


def test_sequence_examples_as_tf():
    message = tf.train.SequenceExample.FromString(S1)
    assert [list(f.int64_list.value) for f in message.feature_lists.feature_list["tok"].feature] == [[1, 2], [3]]
    context, lists = tf.io.parse_single_sequence_example(S1, CONTEXT, LISTS)  # observed, TF 2.21
    assert list(context) == ["len", "miss"] and list(lists) == ["tok", "none", "w"]
    assert int(context["len"]) == 2 and int(context["miss"]) == 0
    assert lists["tok"].indices.numpy().tolist() == [[0, 0], [0, 1], [1, 0]]
    assert list(lists["tok"].dense_shape) == [2, 2]
    assert lists["none"].shape == (0, 2) and lists["w"].numpy().tolist() == [0.5, 1.5]
    context, lists, lengths = tf.io.parse_sequence_example([S1, S2], CONTEXT, LISTS)
    assert context["len"].numpy().tolist() == [2, 3]
    assert lists["tok"].indices.numpy().tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 2, 0], [1, 2, 1]]
    assert lists["tok"].values.numpy().tolist() == [1, 2, 3, 4, 5, 6] and list(lists["tok"].dense_shape) == [2, 3, 2]
    np.testing.assert_array_equal(lists["w"], np.array([[0.5, 1.5, 0], [1, 2, 3]], np.float32))
    assert lists["none"].shape == (2, 0, 2)
    assert list(lengths) == ["none", "w"] and lengths["w"].numpy().tolist() == [2, 3]
    assert lengths["none"].numpy().tolist() == [0, 0]
    ragged = tf.io.parse_sequence_example([S1, S2], None, {"tok": tf.io.RaggedFeature(tf.int64)})[1]["tok"]
    assert str(ragged) == "<tf.RaggedTensor [[[1, 2], [3]], [[4], [], [5, 6]]]>"
    single = tf.io.parse_single_sequence_example(S1, None, {"tok": tf.io.RaggedFeature(tf.int64)})[1]["tok"]
    assert str(single) == "<tf.RaggedTensor [[1, 2], [3]]>"


SEQUENCE_ERRORS = [  # observed, TF 2.21
    (lambda: tf.io.parse_single_sequence_example(S1, CONTEXT, {"gone": tf.io.FixedLenSequenceFeature([], tf.float32)}),
     tf.errors.InvalidArgumentError, "Feature list 'gone' is required but could not be found."),
    (lambda: tf.io.parse_single_sequence_example(S1, CONTEXT, {"tok": tf.io.FixedLenSequenceFeature([], tf.int64)}),
     tf.errors.InvalidArgumentError, r"Key: tok, Index: 0.  Number of values != expected.  values size: 2 but output "
                                     r"shape: \[\]"),
    (lambda: tf.io.parse_single_sequence_example(S1, None, {"w": tf.io.FixedLenFeature([], tf.float32)}),
     ValueError, "Unsupported FixedLenFeature FixedLenFeature.*for key 'w'"),
    (lambda: tf.io.parse_single_sequence_example(S1, None, None),
     ValueError, "Both context_features and sequence_features are None"),
]


@pytest.mark.parametrize("call,error,message", SEQUENCE_ERRORS)
def test_sequence_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------------------ codecs
CODECS = [  # observed, TF 2.21
    (lambda: tf.io.encode_base64(b"\xfb\xff hello?"), b"-_8gaGVsbG8_"),
    (lambda: tf.io.encode_base64(b"\xfb\xff", pad=True), b"-_8="),
    (lambda: tf.io.encode_base64([b"ab", b"abc"]), [b"YWI", b"YWJj"]),
    (lambda: tf.io.decode_base64(b"-_8gaGVsbG8_"), b"\xfb\xff hello?"),
    (lambda: tf.io.decode_base64(b"-_8="), b"\xfb\xff"),
    (lambda: tf.io.decode_base64(b"YW=="), b"a"),
    (lambda: tf.io.decode_base64(b"YQ"), b"a"),
    (lambda: tf.io.decode_base64(b""), b""),
    (lambda: tf.io.decode_compressed(b"x\x9c\xcbH\xcd\xc9\xc9\x07\x00\x06,\x02\x15", "ZLIB"), b"hello"),
    (lambda: tf.io.decode_compressed(GZ[:10] + b"\xcbH\xcd\xc9\xc9\x07\x00\x86\xa6\x106\x05\x00\x00\x00", "GZIP"),
     b"hello"),
    (lambda: tf.io.decode_compressed(b"hello"), b"hello"),
    (lambda: tf.io.serialize_tensor(tf.constant([1.5, 2.0])), b'\x08\x01\x12\x04\x12\x02\x08\x02"\x08\x00\x00\xc0?'
                                                             b"\x00\x00\x00@"),
    (lambda: tf.io.serialize_tensor(tf.constant(3, tf.int64)), b'\x08\t\x12\x00"\x08\x03\x00\x00\x00\x00\x00\x00\x00'),
    (lambda: tf.io.serialize_tensor(tf.constant([[1, 2]], tf.int32)),
     b'\x08\x03\x12\x08\x12\x02\x08\x01\x12\x02\x08\x02"\x08\x01\x00\x00\x00\x02\x00\x00\x00'),
    (lambda: tf.io.serialize_tensor(tf.constant([b"ab", b"c"])), b"\x08\x07\x12\x04\x12\x02\x08\x02B\x02abB\x01c"),
    (lambda: tf.io.serialize_tensor(tf.constant(True)), b'\x08\n\x12\x00"\x01\x01'),
    (lambda: tf.io.serialize_tensor(tf.constant(np.float16(1.0))), b'\x08\x13\x12\x00"\x02\x00<'),
]


@pytest.mark.parametrize("call,expected", CODECS)
def test_codecs(call, expected):
    got = call()
    assert got.dtype == object
    assert (got.numpy().tolist() if isinstance(expected, list) else got.numpy()) == expected


@pytest.mark.parametrize("value,dtype", [(np.array([1.5, 2.0], np.float32), tf.float32),
                                         (np.array([[1, 2]], np.int32), tf.int32), (np.int64(3), tf.int64),
                                         (np.array([b"ab", b"c"], object), tf.string),
                                         (np.zeros((2, 0), np.float64), tf.float64)])
def test_parse_tensor_round_trip(value, dtype):
    back = tf.io.parse_tensor(tf.io.serialize_tensor(value), dtype)
    assert back.shape == np.shape(value)
    np.testing.assert_array_equal(back, value)


CODEC_ERRORS = [  # observed, TF 2.21
    (lambda: tf.io.decode_base64(b"a"), tf.errors.InvalidArgumentError, "Base64 string length cannot be 1 modulo 4."),
    (lambda: tf.io.decode_base64(b"ab+/"), tf.errors.InvalidArgumentError, "Invalid character found in base64."),
    (lambda: tf.io.decode_base64(b"YQ="), tf.errors.InvalidArgumentError, "Invalid character found in base64."),
    (lambda: tf.io.decode_compressed(b"hello", "ZLIB"), tf.errors.DataLossError, "inflate"),
    (lambda: tf.io.decode_compressed(b"hello", "BZ2"), tf.errors.InvalidArgumentError, "supported compressions"),
    (lambda: tf.io.parse_tensor(tf.io.serialize_tensor(np.array([1.5], np.float32)), tf.int32),
     tf.errors.InvalidArgumentError, r"Type mismatch between parsed tensor \(float\) and dtype \(int32\)"),
    (lambda: tf.io.parse_tensor(b"\xff\xff", tf.int32), tf.errors.InvalidArgumentError,
     "Could not parse `serialized` as TensorProto, base64: //8="),
]


@pytest.mark.parametrize("call,error,message", CODEC_ERRORS)
def test_codec_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_rest_of_tf_io_still_names_the_way_forward():
    with pytest.raises(AttributeError, match=r"tf.io.decode_proto.*TFRecordWriter.*parse_example.*Pillow"):
        tf.io.decode_proto  # noqa: B018
    assert tf.train.Example is tf.train.Example and callable(tf.io.parse_example)
