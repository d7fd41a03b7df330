"""What TF 2.21's namespaces have beyond `jdist.tf_compat`'s core ops, gathered per namespace from the modules
that implement them (each says why it is as it is), so that the package adds each namespace's names in one place.

`TOP_LEVEL` are `tf.` names; `NEW` are whole namespaces TF has (`tf.lookup`, `tf.signal`, ...); `ADDITIONS`
maps an existing namespace's path ("io", "data.experimental") to the names it gains."""
from __future__ import annotations

from typing import Any

from jdist.tf_compat import (
    audio_ops,
    checkpoint_utils,
    example_parsing,
    example_proto,
    image_boxes,
    image_codecs,
    image_color,
    image_filters,
    image_quality,
    io_codecs,
    lookup_tables,
    math_more,
    misc_names,
    moving_averages,
    nn_conv,
    nn_ctc,
    nn_more,
    nn_pooling,
    set_ops,
    sparse_more,
    summary_images,
    summary_writers,
    utility_names,
)
from jdist.tf_compat.namespace import Namespace
from jdist.tfdata import csv as tfdata_csv, tfrecord

TOP_LEVEL: dict[str, Any] = {**utility_names.TOP_LEVEL, **math_more.TOP_LEVEL}

NEW: dict[str, Namespace] = {
    "lookup": Namespace("tf.lookup", **lookup_tables.NAMES,
                        experimental=Namespace("tf.lookup.experimental", **lookup_tables.EXPERIMENTAL)),
    "bitwise": Namespace("tf.bitwise", **math_more.BITWISE),
    "signal": Namespace("tf.signal", **math_more.SIGNAL),
    "sets": Namespace("tf.sets", **set_ops.SETS),
    "audio": Namespace("tf.audio", **audio_ops.AUDIO),
}

_ADDED: list[tuple[str, dict[str, Any]]] = [
    ("debugging", utility_names.DEBUGGING),
    ("nest", utility_names.NEST),
    ("dtypes", utility_names.DTYPES),
    ("math", {**math_more.MATH, "special": Namespace("tf.math.special", **math_more.SPECIAL)}),
    ("random", math_more.RANDOM),
    ("nn", {**nn_pooling.NN, **nn_conv.NN, **nn_more.NN, **nn_ctc.NN}),
    ("image", {**image_color.NAMES, **image_filters.NAMES, **image_quality.NAMES, **image_boxes.NAMES,
               **image_codecs.NAMES}),
    # TFRecord files (jdist.tfdata.tfrecord), Example parsing, tf.io's codecs (tf.image's decoders too, as TF's)
    ("io", {**example_parsing.PARSING, **io_codecs.NAMES, **image_codecs.NAMES, "decode_csv": tfdata_csv.decode_csv,
            "TFRecordWriter": tfrecord.TFRecordWriter, "TFRecordOptions": tfrecord.TFRecordOptions}),
    ("train", {**example_proto.TRAIN, **moving_averages.NAMES, **checkpoint_utils.NAMES}),
    ("summary", {**summary_images.NAMES, **summary_writers.NAMES}),
    ("sparse", sparse_more.SPARSE),
    *misc_names.UPDATES.items(),  # tf.strings, tf.saved_model, tf.config, tf.io, tf.data and tf.distribute's others
]
ADDITIONS: dict[str, dict[str, Any]] = {}
for _path, _names in _ADDED:
    ADDITIONS.setdefault(_path, {}).update(_names)

# The namespaces whose ops compute on the host and so return TF's tensors (jdist.tf_compat.host_tensors).
HOST_OPS = ("io", "bitwise", "signal", "sets", "audio", "math.special")
version_names = utility_names.version_names
namespace = misc_names.namespace
