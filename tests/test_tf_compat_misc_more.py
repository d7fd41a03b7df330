"""tf.audio, tf.strings' hashes and unicode ops, tf.saved_model's constants, tf.nn.approx_*_k,
tf.distribute.experimental.CollectiveHints, tf.data.experimental's Example readers and tables, and
tf.io.matching_files, against TF 2.21 (tensorflow-cpu 2.21.0): the values below are TF's, observed."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402
from jdist.tf_compat import strings_more  # noqa: E402

# ---------------------------------------------------------------- tf.audio
SAMPLES = np.array([[0.0, 0.5], [-1.0, 0.25], [0.999, -0.3]], np.float32)
# observed, TF 2.21: tf.audio.encode_wav(SAMPLES, 16000)
WAV = bytes.fromhex("524946463000000057415645666d74201000000001000200803e000000fa000004001000646174610c00000000"
                    "00004000800020df7f9ad9")
DECODED = [[0.0, 0.5], [-1.0, 0.25], [0.998992919921875, -0.29998779296875]]  # observed, TF 2.21


def test_encode_wav_writes_tfs_bytes():
    assert tf.audio.encode_wav(SAMPLES, 16000).numpy() == WAV
    # observed, TF 2.21: 1.5 and -2.0 clip, NaN is 0, at 8000 Hz
    clipped = tf.audio.encode_wav(np.array([[1.5], [-2.0], [np.nan]], np.float32), 8000).numpy()
    assert clipped.hex() == ("524946462a00000057415645666d74201000000001000100401f0000803e00000200100064617461060000"
                             "00ff7f00800000")


@pytest.mark.parametrize("channels, samples, expected", [  # observed, TF 2.21
    (-1, -1, DECODED),
    (1, -1, [[0.0], [-1.0], [0.998992919921875]]),
    (3, -1, [[0.0, 0.5, 0.5], [-1.0, 0.25, 0.25], [0.998992919921875, -0.29998779296875, -0.29998779296875]]),
    (-1, 2, [[0.0, 0.5], [-1.0, 0.25]]),
    (-1, 5, DECODED + [[0.0, 0.0], [0.0, 0.0]]),
    (1, 5, [[0.0], [-1.0], [0.998992919921875], [0.0], [0.0]]),
])
def test_decode_wav(channels, samples, expected):
    out = tf.audio.decode_wav(WAV, desired_channels=channels, desired_samples=samples)
    audio, rate = out
    assert out._fields == ("audio", "sample_rate") and out.audio is audio
    assert audio.dtype == np.float32 and rate.dtype == np.int32 and int(rate) == 16000
    np.testing.assert_array_equal(audio.numpy(), np.array(expected, np.float32))
    # independently: the 16-bit samples over 2**15
    pcm = np.frombuffer(WAV[44:], "<i2").reshape(3, 2) / 32768.0
    np.testing.assert_allclose(tf.audio.decode_wav(WAV).audio, pcm, rtol=0, atol=0)


def test_decode_wav_of_mono_and_empty():
    mono = tf.audio.encode_wav(np.array([[0.1], [0.2]], np.float32), 8000)
    # observed, TF 2.21: the one channel repeated
    np.testing.assert_array_equal(tf.audio.decode_wav(mono, desired_channels=2).audio,
                                  np.array([[0.100006103515625] * 2, [0.20001220703125] * 2], np.float32))
    empty = tf.audio.decode_wav(tf.audio.encode_wav(np.zeros([0, 2], np.float32), 44100))
    assert empty.audio.shape == (0, 2) and int(empty.sample_rate) == 44100  # observed, TF 2.21


_W = bytes(WAV)
AUDIO_ERRORS = [  # observed, TF 2.21: InvalidArgumentError and these texts
    (lambda: tf.audio.decode_wav(b"garbage"), "Header mismatch: Expected RIFF but found garb"),
    (lambda: tf.audio.decode_wav(_W[:10]), "Data too short when trying to read string"),
    (lambda: tf.audio.decode_wav(_W[:8] + b"WAVX" + _W[12:]), "Header mismatch: Expected WAVE but found WAVX"),
    (lambda: tf.audio.decode_wav(_W[:34] + b"\x08" + _W[35:]), "Can only read 16-bit WAV files, but received 8"),
    (lambda: tf.audio.decode_wav(_W[:20] + b"\x03" + _W[21:]),
     r"Bad audio format for WAV: Expected 1 \(PCM\), but got3"),
    (lambda: tf.audio.decode_wav([_W]), r"contents must be scalar, got shape \[1\]"),
    (lambda: tf.audio.encode_wav(np.zeros([3], np.float32), 8000), r"audio must be 2-dimensional\[3\]"),
    (lambda: tf.audio.encode_wav(np.zeros([2, 1], np.float32), [8000]),
     r"Input sample_rate should be a scalar tensor, got \[1\] instead."),
]


@pytest.mark.parametrize("call, message", AUDIO_ERRORS)
def test_audio_errors(call, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        call()


# ---------------------------------------------------------------- tf.strings hashes
STRINGS = ["", "a", "b", "ab", "abc", "hello", "1234567", "12345678", "123456789", "héllo wörld", "x" * 15, "y" * 16,
           "z" * 17, "\xff\x80", "The quick brown fox jumps"]
# observed, TF 2.21: tf.strings.to_hash_bucket(STRINGS, 2**63 - 1)
HASH = [105434511174508092, 2996632905371535868, 5795986006276551370, 8190890202413169699, 5658311696057142710,
        5943547241907780938, 7176796633578958316, 421129128932463287, 5084248043126217164, 5299289459348089619,
        7916076849941531781, 6010325902812147623, 6079677648541187785, 83861876517042667, 3669979927035252043]
# observed, TF 2.21: tf.strings.to_hash_bucket_strong(STRINGS, 2**63 - 1, [1, 2])
STRONG = [443797209252341628, 5158252350249958646, 2697063185742112377, 9219471107255029106, 5862226954915230110,
          2957200328589801622, 7477053060497140549, 6508726819379278012, 1922551951543731451, 5179466181642715560,
          708321187392817893, 4954143049119027855, 485167317194287130, 3306915177373432559, 3282741567385410738]
# observed, TF 2.21: to_hash_bucket of bytes([128]), bytes([165]), bytes([202]), bytes([239]), bytes(range(200, 256))
HIGH_BYTES = [bytes([i]) for i in range(128, 256, 37)] + [bytes(range(200, 256))]
HIGH_HASH = [9199487739519693817, 2726268409574974659, 3547413198508233133, 6454084641460488190, 1732462188425126907]


@pytest.mark.parametrize("call, expected", [  # observed, TF 2.21
    (lambda: tf.strings.to_hash_bucket(STRINGS, 2**63 - 1), HASH),
    (lambda: tf.strings.to_hash_bucket(HIGH_BYTES, 2**63 - 1), HIGH_HASH),
    (lambda: tf.strings.to_hash_bucket(STRINGS, 10), [9, 8, 0, 9, 0, 8, 3, 7, 1, 6, 1, 3, 2, 4, 3]),
    (lambda: tf.strings.to_hash_bucket([["a", "b"]], 5), [[3, 0]]),
    (lambda: tf.strings.to_hash_bucket_strong(STRINGS, 2**63 - 1, [1, 2]), STRONG),
    (lambda: tf.strings.to_hash_bucket_strong(STRINGS, 7, [123456789, 987654321]),
     [2, 2, 3, 4, 0, 0, 5, 6, 6, 4, 4, 5, 6, 3, 6]),
    (lambda: tf.strings.to_hash_bucket_strong(["abc", ""], 1000, [-1, -2]), [22, 357]),
])
def test_hash_buckets(call, expected):
    out = call()
    assert out.dtype == np.int64
    assert out.numpy().tolist() == expected


def test_hash_buckets_of_scalars_and_ragged():
    scalar = tf.strings.to_hash_bucket("a", 5)
    assert scalar.shape == () and int(scalar) == 3  # observed, TF 2.21: shape ()
    rt = tf.strings.to_hash_bucket(tf.ragged.constant([["a", "b"], ["c"]]), 5)
    assert rt.to_list() == [[3, 0], [2]]  # observed, TF 2.21
    # independently: the bucket is the unsigned 64-bit hash modulo num_buckets
    assert int(tf.strings.to_hash_bucket("hello", 1000)) == strings_more.hash64(b"hello") % 1000
    # SipHash-2-4's published test vector (key 00..0f, message 00..0e): a15e94...
    key = (int.from_bytes(bytes(range(8)), "little"), int.from_bytes(bytes(range(8, 16)), "little"))
    assert strings_more.siphash24(*key, bytes(range(15))) == 0xA129CA6149BE45E5


@pytest.mark.parametrize("call, error, message", [  # observed, TF 2.21
    (lambda: tf.strings.to_hash_bucket_strong(["a"], 3, [1]), tf.errors.InvalidArgumentError,
     "Key must have 2 elements"),
    (lambda: tf.strings.to_hash_bucket_strong(["a"], 3, [1, 2, 3]), tf.errors.InvalidArgumentError,
     "Key must have 2 elements"),
    (lambda: tf.strings.to_hash_bucket(["a"], 0), tf.errors.InvalidArgumentError,
     "Value for attr 'num_buckets' of 0 must be at least minimum 1"),
    (lambda: tf.strings.to_hash_bucket([1, 2], 5), TypeError, "strings"),
])
def test_hash_bucket_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------- tf.strings unicode ops and segment joins
@pytest.mark.parametrize("call, expected", [  # observed, TF 2.21
    (lambda: tf.strings.unicode_transcode(["héllo", "abc"], "UTF-8", "UTF-16-BE"),
     [b"\x00h\x00\xe9\x00l\x00l\x00o", b"\x00a\x00b\x00c"]),
    (lambda: tf.strings.unicode_transcode([b"a\xffb"], "UTF-8", "UTF-8"), [b"a\xef\xbf\xbdb"]),
    (lambda: tf.strings.unicode_transcode([b"a\xffb"], "UTF-8", "UTF-8", errors="ignore"), [b"ab"]),
    (lambda: tf.strings.unicode_transcode([b"a\xffb"], "UTF-8", "UTF-8", replacement_char=63), [b"a?b"]),
    (lambda: tf.strings.unicode_transcode([b"a\xe9b"], "ISO-8859-1", "UTF-8"), [b"a\xc3\xa9b"]),
    (lambda: tf.strings.unicode_transcode([b"\xff"], "US-ASCII", "UTF-8"), [b"\xef\xbf\xbd"]),
    (lambda: tf.strings.unicode_transcode(["a\x01b\x7f\x85\t"], "UTF-8", "UTF-8", replace_control_characters=True),
     [b"a\xef\xbf\xbdb\x7f\xc2\x85\xef\xbf\xbd"]),
    (lambda: tf.strings.unicode_transcode([b"\xe2\x82y", b"\xf0\x9f\x98", b"\x80\x80", b"a\xed\xa0\x80b",
                                           b"\xc0\xafz"], "UTF-8", "UTF-8"),
     [b"\xef\xbf\xbdy", b"\xef\xbf\xbd", b"\xef\xbf\xbd" * 2, b"a" + b"\xef\xbf\xbd" * 3 + b"b",
      b"\xef\xbf\xbd" * 2 + b"z"]),
    (lambda: tf.strings.unsorted_segment_join(["a", "b", "c", "d"], [1, 0, 1, 3], 4), [b"b", b"ac", b"", b"d"]),
    (lambda: tf.strings.unsorted_segment_join(["a", "b", "c", "d"], [1, 0, 1, 2], 3, separator="-"),
     [b"b", b"a-c", b"d"]),
    (lambda: tf.strings.unsorted_segment_join([["a", "b"], ["c", "d"], ["e", "f"]], [0, 1, 0], 2, separator=","),
     [[b"a,e", b"b,f"], [b"c", b"d"]]),
])
def test_string_ops(call, expected):
    assert call().numpy().tolist() == expected


@pytest.mark.parametrize("strings, kwargs, values, offsets", [  # observed, TF 2.21
    (["héllo", "ab"], {}, [[104, 233, 108, 108, 111], [97, 98]], [[0, 1, 3, 4, 5], [0, 1]]),
    (["hé€"], {}, [[104, 233, 8364]], [[0, 1, 3]]),
    ([b"a\xffb", b"\xc3", b"x\xe2\x82\xacy"], {}, [[97, 65533, 98], [65533], [120, 8364, 121]],
     [[0, 1, 2], [0], [0, 1, 4]]),
    ([b"\xe2\x82y", b"\x80\x80", b"a\xed\xa0\x80b"], {}, [[65533, 121], [65533, 65533], [97, 65533, 65533, 65533, 98]],
     [[0, 2], [0, 1], [0, 1, 2, 3, 4]]),
    ([b"a\xffb"], {"errors": "ignore"}, [[97, 98]], [[0, 2]]),
    (["a\x01b\x7f\x85"], {"replace_control_characters": True}, [[97, 65533, 98, 127, 133]], [[0, 1, 2, 3, 4]]),
])
def test_unicode_decode_with_offsets(strings, kwargs, values, offsets):
    codes, starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8", **kwargs)
    assert codes.to_list() == values and starts.to_list() == offsets
    assert codes.flat_values.dtype == np.int32 and starts.flat_values.dtype == np.int64  # observed, TF 2.21
    # the code points agree with tf.strings.unicode_decode's
    if not kwargs:
        assert tf.strings.unicode_decode(strings, "UTF-8").to_list() == values


def test_unicode_split_with_offsets_and_other_encodings():
    chars, starts = tf.strings.unicode_split_with_offsets(["héllo", "ab"], "UTF-8")  # observed, TF 2.21
    assert chars.to_list() == [[b"h", b"\xc3\xa9", b"l", b"l", b"o"], [b"a", b"b"]]
    assert starts.to_list() == [[0, 1, 3, 4, 5], [0, 1]]
    chars, starts = tf.strings.unicode_split_with_offsets([b"a\xffb"], "UTF-8")
    assert chars.to_list() == [[b"a", b"\xef\xbf\xbd", b"b"]] and starts.to_list() == [[0, 1, 2]]
    codes, starts = tf.strings.unicode_decode_with_offsets("hé", "UTF-8")  # a scalar: plain tensors
    assert codes.numpy().tolist() == [104, 233] and starts.numpy().tolist() == [0, 1]
    utf16 = "h\U0001F600".encode("utf-16-be")
    codes, starts = tf.strings.unicode_decode_with_offsets([utf16], "UTF-16-BE")
    assert codes.to_list() == [[104, 128512]] and starts.to_list() == [[0, 2]]
    codes, starts = tf.strings.unicode_decode_with_offsets([b"\x00h\xd8\x00\x00i"], "UTF-16-BE")
    assert codes.to_list() == [[104, 65533, 105]] and starts.to_list() == [[0, 2, 4]]


@pytest.mark.parametrize("call, message", [  # observed, TF 2.21: InvalidArgumentError
    (lambda: tf.strings.unicode_transcode([b"a\xffb"], "UTF-8", "UTF-8", errors="strict"),
     "Invalid formatting on input string"),
    (lambda: tf.strings.unicode_decode_with_offsets([b"a\xffb"], "UTF-8", errors="strict"),
     "Invalid formatting on input string"),
    (lambda: tf.strings.unicode_transcode(["a"], "UTF-8", "ISO-8859-1"), "UTF-16-BE"),
    (lambda: tf.strings.unsorted_segment_join(["a"], [5], 2),
     "segment_ids are not allowed to exceed num_segments or to have negative values."),
    (lambda: tf.strings.unsorted_segment_join(["a"], [-1], 2),
     "segment_ids are not allowed to exceed num_segments or to have negative values."),
    (lambda: tf.strings.unsorted_segment_join("a", 0, 2), "Segment_id cannot have rank 0"),
    (lambda: tf.strings.unsorted_segment_join(["a", "b"], [[0, 1]], 2),
     r"Invalid segment_id rank 2 for input with 1 dimension\(s\)"),
])
def test_unicode_and_join_errors(call, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        call()


# ---------------------------------------------------------------- tf.saved_model, tf.nn, tf.distribute, tf.config
def test_saved_model_constants_and_asset(tmp_path):
    # observed, TF 2.21: every upper-case name of tf.saved_model
    observed = {
        "ASSETS_DIRECTORY": "assets", "ASSETS_KEY": "saved_model_assets", "CLASSIFY_INPUTS": "inputs",
        "CLASSIFY_METHOD_NAME": "tensorflow/serving/classify", "CLASSIFY_OUTPUT_CLASSES": "classes",
        "CLASSIFY_OUTPUT_SCORES": "scores", "DEBUG_DIRECTORY": "debug",
        "DEBUG_INFO_FILENAME_PB": "saved_model_debug_info.pb", "DEFAULT_SERVING_SIGNATURE_DEF_KEY": "serving_default",
        "GPU": "gpu", "PREDICT_INPUTS": "inputs", "PREDICT_METHOD_NAME": "tensorflow/serving/predict",
        "PREDICT_OUTPUTS": "outputs", "REGRESS_INPUTS": "inputs", "REGRESS_METHOD_NAME": "tensorflow/serving/regress",
        "REGRESS_OUTPUTS": "outputs", "SAVED_MODEL_FILENAME_PB": "saved_model.pb",
        "SAVED_MODEL_FILENAME_PBTXT": "saved_model.pbtxt", "SAVED_MODEL_SCHEMA_VERSION": 1, "SERVING": "serve",
        "TPU": "tpu", "TRAINING": "train", "VARIABLES_DIRECTORY": "variables", "VARIABLES_FILENAME": "variables"}
    assert {k: getattr(tf.saved_model, k) for k in observed} == observed
    path = tmp_path / "vocab.txt"
    path.write_text("a\n")
    asset = tf.saved_model.Asset(str(path))  # observed, TF 2.21: asset_path a string scalar of the path
    assert asset.asset_path.numpy() == str(path).encode() and asset.asset_path.shape == ()


def test_nn_approx_k_are_tf_maths():
    assert tf.nn.approx_max_k is tf.math.approx_max_k and tf.nn.approx_min_k is tf.math.approx_min_k  # as TF's
    values, indices = tf.nn.approx_min_k(np.array([[4.0, 1.0, 3.0]], np.float32), 2)
    np.testing.assert_array_equal(values, [[1.0, 3.0]])
    np.testing.assert_array_equal(indices, [[1, 2]])
    top = jax.jit(lambda x: tf.nn.approx_max_k(x, 1)[0])(jnp.float32([[4.0, 1.0, 3.0]]))
    np.testing.assert_array_equal(top, [[4.0]])


def test_collective_hints_are_communication_options():
    hints = tf.distribute.experimental.CollectiveHints(bytes_per_pack=1024, timeout_seconds=5.0)
    # observed, TF 2.21: a CommunicationOptions (bytes_per_pack 1024, timeout 5.0, implementation AUTO)
    assert isinstance(hints, tf.distribute.experimental.CommunicationOptions)
    assert (hints.bytes_per_pack, hints.timeout_seconds) == (1024, 5.0)
    assert hints.implementation == tf.distribute.experimental.CommunicationImplementation.AUTO
    with pytest.raises(ValueError, match="Argument `bytes_per_pack` must be >=0, Received -1."):  # observed
        tf.distribute.experimental.CollectiveHints(bytes_per_pack=-1)
    # observed, TF 2.21: batch_reduce_to takes it as `options` (1.0 on one replica)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    out = strategy.extended.batch_reduce_to("sum", [(np.float32(1.0), np.float32(1.0))], options=hints)
    np.testing.assert_allclose(np.asarray(out[0]), 1.0)
    # and ReplicaContext.all_reduce / all_gather take it too, as TF's: the same results as without it
    two = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def step():
        ctx = tf.distribute.get_replica_context()
        mine = tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0
        return (ctx.all_reduce("sum", mine, options=hints), ctx.all_gather(mine[None], 0, options=hints),
                ctx.all_reduce("sum", mine))

    summed, gathered, plain = (two.experimental_local_results(v) for v in two.run(step))
    assert [float(v) for v in summed] == [float(v) for v in plain] == [3.0, 3.0]
    assert [np.asarray(v).tolist() for v in gathered] == [[1.0, 2.0], [1.0, 2.0]]


def test_connect_to_host_names_the_way_forward():
    with pytest.raises(NotImplementedError, match="jax.distributed.initialize"):
        tf.config.experimental_connect_to_host("localhost:1234")


# ---------------------------------------------------------------- tf.data.experimental and tf.io.matching_files
FEATURES = {"x": tf.io.FixedLenFeature([2], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}


@pytest.fixture
def record_files(tmp_path):
    """f0 holds labels 0..4, f1 10..14: x = [label, 0.5], as TF's tf.io.TFRecordWriter wrote them."""
    for k in range(2):
        with tf.io.TFRecordWriter(str(tmp_path / f"f{k}.tfrecord")) as writer:
            for i in range(5):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[k * 10 + i, 0.5])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k * 10 + i])),
                    "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"n%d" % (k * 10 + i)]))}))
                    .SerializeToString())
    return tmp_path


def test_parse_example_dataset(record_files):
    path = str(record_files / "f0.tfrecord")
    parsed = tf.data.TFRecordDataset(path).batch(2).apply(tf.data.experimental.parse_example_dataset(FEATURES))
    first = next(iter(parsed))  # observed, TF 2.21: label [0, 1], x [[0, 0.5], [1, 0.5]]
    assert first["label"].numpy().tolist() == [0, 1] and first["x"].numpy().tolist() == [[0.0, 0.5], [1.0, 0.5]]
    assert first["label"].dtype == np.int64 and first["x"].dtype == np.float32
    with pytest.raises(TypeError, match=r"Input dataset should be a dataset of vectors of strings. Instead it is "
                                        r"`TensorSpec\(shape=\(\), dtype=tf.string, name=None\)`."):  # observed
        tf.data.TFRecordDataset(path).apply(tf.data.experimental.parse_example_dataset(FEATURES))
    with pytest.raises(TypeError, match=r"\['name'\].*sparse.to_dense"):
        tf.data.TFRecordDataset(path).batch(2).apply(
            tf.data.experimental.parse_example_dataset({"name": tf.io.VarLenFeature(tf.string)}))


def test_make_batched_features_dataset(record_files):
    pattern = str(record_files / "f*.tfrecord")
    ds = tf.data.experimental.make_batched_features_dataset(pattern, 3, FEATURES, label_key="label", num_epochs=1,
                                                            shuffle=False)
    batches = [(x["x"].numpy().tolist(), y.numpy().tolist()) for x, y in ds]
    assert batches == [  # observed, TF 2.21: files in sorted order, the label popped out of the features
        ([[0.0, 0.5], [1.0, 0.5], [2.0, 0.5]], [0, 1, 2]), ([[3.0, 0.5], [4.0, 0.5], [10.0, 0.5]], [3, 4, 10]),
        ([[11.0, 0.5], [12.0, 0.5], [13.0, 0.5]], [11, 12, 13]), ([[14.0, 0.5]], [14])]
    files = [str(record_files / "f1.tfrecord"), str(record_files / "f0.tfrecord")]
    dropped = tf.data.experimental.make_batched_features_dataset(files, 4, FEATURES, num_epochs=1, shuffle=False,
                                                                 drop_final_batch=True)
    assert [x["label"].numpy().tolist() for x in dropped] == [[0, 1, 2, 3], [4, 10, 11, 12]]  # observed, TF 2.21
    twice = tf.data.experimental.make_batched_features_dataset(pattern, 4, FEATURES, num_epochs=2, shuffle=False)
    assert [x["label"].numpy().tolist() for x in twice] == [  # observed, TF 2.21
        [0, 1, 2, 3], [4, 10, 11, 12], [13, 14, 0, 1], [2, 3, 4, 10], [11, 12, 13, 14]]
    shuffled = tf.data.experimental.make_batched_features_dataset(pattern, 4, FEATURES, num_epochs=1,
                                                                  shuffle_seed=3)
    labels = [v for x in shuffled for v in x["label"].numpy().tolist()]
    assert sorted(labels) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    total = jax.jit(lambda x: x.sum())(next(iter(twice))["x"])  # parsed batches go into compiled code
    np.testing.assert_allclose(total, 8.0)
    with pytest.raises(ValueError, match="label_key"):
        tf.data.experimental.make_batched_features_dataset(pattern, 2, FEATURES, label_key="y")


def test_tfrecord_writer_of_a_dataset(tmp_path):
    path = str(tmp_path / "w.tfrecord")
    assert tf.data.experimental.TFRecordWriter(path).write(tf.data.Dataset.from_tensor_slices([b"a", b"bc"])) is None
    # observed, TF 2.21: the file's bytes
    assert open(path, "rb").read().hex() == ("01000000000000000175de4161786ee428020000000000000078270b3462633433"
                                             "dba7")
    gz = str(tmp_path / "w.gz")
    tf.data.experimental.TFRecordWriter(gz, compression_type="GZIP").write(tf.data.Dataset.from_tensor_slices([b"a"]))
    assert [r.numpy() for r in tf.data.TFRecordDataset(gz, compression_type="GZIP")] == [b"a"]
    with pytest.raises(TypeError, match=r"Expected a`dataset` that produces scalar `tf.string` elements, but got a "
                                        r"dataset which produces elements with shapes \(\) and types "
                                        r"<dtype: 'int32'>."):  # observed, TF 2.21
        tf.data.experimental.TFRecordWriter(path).write(tf.data.Dataset.from_tensor_slices([1, 2]))


def test_tables_from_datasets():
    pairs = tf.data.Dataset.from_tensor_slices((["a", "b", "c"], [10, 20, 30]))
    keys = np.array(["b", "z"], object)
    table = tf.data.experimental.table_from_dataset(pairs, default_value=-1)
    assert table.lookup(keys).numpy().tolist() == [20, -1] and int(table.size()) == 3  # observed, TF 2.21
    assert isinstance(table, tf.lookup.StaticHashTable)
    floats = tf.data.experimental.table_from_dataset(tf.data.Dataset.from_tensor_slices((["a", "b"], [1.5, 2.5])))
    assert floats.lookup(np.array(["a", "z"], object)).numpy().tolist() == [1.5, -1.0]  # observed: default -1
    ids = tf.data.Dataset.from_tensor_slices(["x", "y", "z"])
    index = tf.data.experimental.index_table_from_dataset(ids, num_oov_buckets=1)
    assert index.lookup(np.array(["y", "q", "x"], object)).numpy().tolist() == [1, 3, 0]  # observed, TF 2.21
    assert int(index.size()) == 4
    plain = tf.data.experimental.index_table_from_dataset(ids)
    assert plain.lookup(np.array(["y", "q", "x"], object)).numpy().tolist() == [1, -1, 0]  # observed, TF 2.21
    cut = tf.data.experimental.index_table_from_dataset(ids, vocab_size=2)
    assert cut.lookup(np.array(["y", "z"], object)).numpy().tolist() == [1, -1]  # observed, TF 2.21
    int64 = tf.data.Dataset.from_tensor_slices((["a", "b"], np.array([10, 20], np.int64)))
    oov = tf.data.experimental.table_from_dataset(int64, num_oov_buckets=2)
    assert oov.lookup(np.array(["b", "z", "q"], object)).numpy().tolist() == [20, 3, 3]  # observed, TF 2.21


def test_matching_files(record_files):
    d = str(record_files)
    names = [f"{d}/f0.tfrecord".encode(), f"{d}/f1.tfrecord".encode()]
    # observed, TF 2.21: all matches sorted together, none is an empty vector, a missing folder too
    assert tf.io.matching_files(f"{d}/*.tfrecord").numpy().tolist() == names
    assert tf.io.matching_files([f"{d}/f1*", f"{d}/f0*"]).numpy().tolist() == names
    assert tf.io.matching_files(f"{d}/f?.tfrecord").numpy().tolist() == names
    assert tf.io.matching_files(f"{d}/f[1].tfrecord").numpy().tolist() == names[1:]
    empty = tf.io.matching_files(f"{d}/nothing*")
    assert empty.shape == (0,) and empty.numpy().tolist() == []
    assert tf.io.matching_files("/nonexistent_dir/x*").numpy().tolist() == []
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Input patterns tensor must be scalar or vector, but had shape: \[1,1\]"):  # observed
        tf.io.matching_files([[f"{d}/f*"]])


def test_names_reach_every_namespace():
    assert tf.audio.decode_wav.__name__ == "decode_wav" and "audio" in tf.__all__
    assert tf.distribute.experimental.CollectiveHints(bytes_per_pack=0).bytes_per_pack == 0
    assert jdist.CommunicationOptions is tf.distribute.experimental.CommunicationOptions


# ---------------------------------------------------------------- tf.keras.layers.Hashing (Keras 3's needs TF)
@pytest.mark.parametrize("kwargs, inputs, dtype, expected", [  # observed, TF 2.21 (Keras 3)
    ({"num_bins": 3}, ["a", "b", "c", "hello"], "int64", [0, 1, 1, 1]),
    ({"num_bins": 3}, [["a"], ["b"]], "int64", [[0], [1]]),
    ({"num_bins": 3}, np.array([1, 2, 3, 42]), "int64", [0, 1, 0, 0]),
    ({"num_bins": 3}, np.array([1.5, 2.5]), "int64", [0, 1]),
    ({"num_bins": 3, "dtype": "int32"}, ["a"], "int32", [0]),
    ({"num_bins": 3, "mask_value": ""}, ["a", "", "b", "hello"], "int64", [2, 0, 1, 1]),
    ({"num_bins": 3, "mask_value": 0}, np.array([0, 1, 2, 42]), "int64", [0, 2, 2, 1]),
    ({"num_bins": 5, "salt": [1, 2]}, ["a", "b", "c", "hello"], "int64", [1, 4, 4, 2]),
    ({"num_bins": 5, "salt": 7}, ["a", "b", "c", "hello"], "int64", [1, 3, 3, 3]),
    ({"num_bins": 4, "output_mode": "one_hot"}, ["a", "b", "c"], "float32",
     [[0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0]]),
    ({"num_bins": 4, "output_mode": "multi_hot"}, ["a", "b", "c"], "float32", [1, 0, 1, 1]),
    ({"num_bins": 4, "output_mode": "multi_hot"}, [["a", "b"], ["c", "c"]], "float32", [[0, 0, 1, 1], [1, 0, 0, 0]]),
    ({"num_bins": 4, "output_mode": "count"}, [["a", "b"], ["c", "c"]], "float32", [[0, 0, 1, 1], [2, 0, 0, 0]]),
    ({"num_bins": 4, "salt": [1, 2], "output_mode": "count"}, [["a", "b"], ["c", "c"]], "float32",
     [[1, 0, 1, 0], [0, 2, 0, 0]]),
])
def test_keras_hashing(kwargs, inputs, dtype, expected):
    out = tf.keras.layers.Hashing(**kwargs)(inputs)
    assert out.dtype == np.dtype(dtype) and out.numpy().tolist() == expected


def test_keras_hashing_in_a_pipeline_and_its_errors():
    layer = tf.keras.layers.Hashing(num_bins=3)
    batches = tf.data.Dataset.from_tensor_slices(["a", "b"]).batch(2).map(layer)
    assert [b.numpy().tolist() for b in batches] == [[0, 1]]  # observed, TF 2.21
    assert tf.keras.layers.Hashing.from_config(layer.get_config())(["hello"]).numpy().tolist() == [1]
    for kwargs, message in [  # observed, TF 2.21: ValueError
        ({"num_bins": 4, "salt": [1, 2, 3]}, r"The `salt` argument for `Hashing` can only be a tuple of size 2 "
                                             r"integers, or a single integer. Received: salt=\[1, 2, 3\]."),
        ({"num_bins": 0}, "The `num_bins` for `Hashing` cannot be `None` or non-positive values. Received: "
                          "num_bins=0."),
        ({"num_bins": 4, "output_mode": "tf_idf"}, r"Invalid value for argument `output_mode`. Expected one of "
                                                   r"\('int', 'one_hot', 'multi_hot', 'count'\). Received: "
                                                   r"output_mode=tf_idf"),
    ]:
        with pytest.raises(ValueError, match=message):
            tf.keras.layers.Hashing(**kwargs)


# ---------------------------------------------------------------- tf.io's SparseTensor serialization
# observed, TF 2.21: tf.io.serialize_sparse(SparseTensor([[0, 1], [2, 0]], [1.5, 2.5], [3, 4]))
SERIALIZED = [b'\x08\t\x12\x08\x12\x02\x08\x02\x12\x02\x08\x02" ' + np.array([0, 1, 2, 0], "<i8").tobytes(),
              b'\x08\x01\x12\x04\x12\x02\x08\x02"\x08\x00\x00\xc0?\x00\x00 @',
              b'\x08\t\x12\x04\x12\x02\x08\x02"\x10\x03\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00']
SHAPE_34 = SERIALIZED[2]
# observed, TF 2.21: tf.io.serialize_many_sparse(SparseTensor([[0, 0, 1], [2, 1, 0]], [7, 8] int32, [3, 3, 4]))
MANY = [[b'\x08\t\x12\x08\x12\x02\x08\x01\x12\x02\x08\x02"\x10' + np.array([0, 1], "<i8").tobytes(),
         b'\x08\x03\x12\x04\x12\x02\x08\x01"\x04\x07\x00\x00\x00', SHAPE_34],
        [b'\x08\t\x12\x06\x12\x00\x12\x02\x08\x02', b'\x08\x03\x12\x02\x12\x00', SHAPE_34],
        [b'\x08\t\x12\x08\x12\x02\x08\x01\x12\x02\x08\x02"\x10' + np.array([1, 0], "<i8").tobytes(),
         b'\x08\x03\x12\x04\x12\x02\x08\x01"\x04\x08\x00\x00\x00', SHAPE_34]]


def _sparse_lists(sp):
    return (np.asarray(sp.indices).tolist(), np.asarray(sp.values).tolist(), np.asarray(sp.dense_shape).tolist())


def test_serialize_sparse_writes_tfs_bytes():
    sp = tf.sparse.SparseTensor([[0, 1], [2, 0]], np.array([1.5, 2.5], np.float32), [3, 4])
    assert tf.io.serialize_sparse(sp).numpy().tolist() == SERIALIZED
    words = tf.sparse.SparseTensor([[0], [3]], np.array([b"ab", b"c"], object), [5])
    assert tf.io.serialize_sparse(words).numpy().tolist() == [  # observed, TF 2.21: strings as tensor_content
        b'\x08\t\x12\x08\x12\x02\x08\x02\x12\x02\x08\x01"\x10' + np.array([0, 3], "<i8").tobytes(),
        b'\x08\x07\x12\x04\x12\x02\x08\x02"\x05\x02\x01abc', b'\x08\t\x12\x04\x12\x02\x08\x01"\x08' +
        np.array([5], "<i8").tobytes()]
    sp3 = tf.sparse.SparseTensor([[0, 0, 1], [2, 1, 0]], np.array([7, 8], np.int32), [3, 3, 4])
    many = tf.io.serialize_many_sparse(sp3)
    assert many.shape == (3, 3) and many.numpy().tolist() == MANY
    back = tf.io.deserialize_many_sparse(np.array(MANY, dtype=object), tf.int32)
    assert _sparse_lists(back) == ([[0, 0, 1], [2, 1, 0]], [7, 8], [3, 3, 4])  # observed, TF 2.21
    assert np.asarray(back.values).dtype == np.int32
    # observed, TF 2.21: rows of different shapes stack in order under the largest shape; a vector is one
    first = tf.io.serialize_sparse(tf.sparse.SparseTensor([[0, 1]], np.array([1.0], np.float32), [2, 2]))
    second = tf.io.serialize_sparse(tf.sparse.SparseTensor([[2, 0], [0, 3]], np.array([2.0, 3.0], np.float32), [3, 5]))
    stacked = tf.io.deserialize_many_sparse(np.stack([first, second]), tf.float32)
    assert _sparse_lists(stacked) == ([[0, 0, 1], [1, 2, 0], [1, 0, 3]], [1.0, 2.0, 3.0], [2, 3, 5])
    assert _sparse_lists(tf.io.deserialize_many_sparse(tf.io.serialize_sparse(sp3), tf.int32)) == _sparse_lists(sp3)


@pytest.mark.parametrize("call, error, message", [  # observed, TF 2.21
    (lambda: tf.io.serialize_many_sparse(tf.sparse.SparseTensor([[0]], [1], [2])), tf.errors.InvalidArgumentError,
     "Rank of input SparseTensor should be > 1, but saw rank: 1"),
    (lambda: tf.io.deserialize_many_sparse(np.array(MANY, dtype=object), tf.float32), tf.errors.InvalidArgumentError,
     r"Requested SparseTensor of type float but SparseTensor\[0\].values.dtype\(\) == int32"),
    (lambda: tf.io.deserialize_many_sparse(np.array(MANY, dtype=object), tf.int32, rank=2), ValueError,
     r"Tensor's shape \(2, 3\) is not compatible with supplied shape \(None, 2\)."),
])
def test_sparse_serialization_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_batched_records_keep_trailing_nul_bytes(tmp_path):
    # a serialized Example ending in an int64 0 ends in b"\x00": batching must keep it (TF 2.21 does)
    path = str(tmp_path / "z.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"ab\x00")
        writer.write(b"c\x00\x00")
    assert next(iter(tf.data.TFRecordDataset(path).batch(2))).numpy().tolist() == [b"ab\x00", b"c\x00\x00"]
    zero = tf.train.Example(features=tf.train.Features(feature={
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))})).SerializeToString()
    assert zero.endswith(b"\x00")
    ds = tf.data.Dataset.from_tensor_slices(np.array([zero, zero], dtype=object)).batch(2)
    parsed = next(iter(ds.apply(tf.data.experimental.parse_example_dataset(
        {"label": tf.io.FixedLenFeature([], tf.int64)}))))
    assert parsed["label"].numpy().tolist() == [0, 0]
