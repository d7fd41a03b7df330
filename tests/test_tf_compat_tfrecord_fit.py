"""A TF input pipeline of TFRecord files end to end under MirroredStrategy: Examples written with
`tf.io.TFRecordWriter` (GZIP, two shards), read back with `interleave(TFRecordDataset)`, parsed with
`tf.io.parse_single_example` / `parse_tensor`, and trained with Keras `fit` on 4 replicas; then a custom loop over
the distributed dataset with a `tf.lookup` table in the map and `tf.nn.max_pool` in the step.

The same script ran in TF 2.21 (tensorflow-cpu, its Keras 3) on 4 logical CPUs with the same data and weights;
its numbers are recorded below (observed)."""
import os

import numpy as np
import pytest
from sklearn.datasets import load_digits

import jdist.tf_compat as tf

keras = tf.keras
TF_LOSS = [2.6789, 1.8229, 1.4571]  # observed, TF 2.21: fit's epoch losses
TF_ACCURACY = [0.1683, 0.3567, 0.5117]  # observed, TF 2.21
TF_POOLED_SUM = 4928.0  # observed, TF 2.21: the sum of every batch's 2x2 max-pooled images


def _write_shards(directory):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:600]
    y = digits.target.astype(np.int64)[:600]
    paths = []
    for shard in range(2):
        path = os.path.join(directory, f"digits-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for i in range(shard, len(x), 2):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[tf.io.serialize_tensor(x[i]).numpy()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[y[i]])),
                }))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths, y


def _parse(record):
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
    features = tf.io.parse_single_example(record, spec)
    image = tf.reshape(tf.io.parse_tensor(features["image"], tf.float32), [8, 8, 1])
    return image, features["label"]


@pytest.mark.filterwarnings("ignore:Your input ran out of data")  # Keras's, in TF too: the cardinality is unknown
def test_tfrecord_pipeline_trains_under_mirrored_strategy_as_tf(tmp_path):
    paths, labels = _write_shards(str(tmp_path))
    files = tf.data.Dataset.from_tensor_slices(sorted(paths))
    ds = files.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"),
                          cycle_length=2).map(_parse).batch(60)
    first_images, first_labels = next(iter(ds))
    assert first_images.shape == (60, 8, 8, 1)
    np.testing.assert_array_equal(first_labels[:8], np.arange(8))  # the shards interleaved back in order

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                                  keras.layers.Flatten(), keras.layers.Dense(10)])
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype(np.float32) for w in model.get_weights()])
    history = model.fit(ds, epochs=3, verbose=0)
    np.testing.assert_allclose(history.history["loss"], TF_LOSS, atol=1e-4)
    np.testing.assert_allclose(history.history["accuracy"], TF_ACCURACY, atol=1e-4)

    keys = tf.constant(list(range(10)), tf.int64)
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, keys % 2), -1)
    dist = strategy.experimental_distribute_dataset(ds.map(lambda image, label: (image, table.lookup(label))))

    @tf.function
    def step(images, odd):
        return tf.reduce_sum(tf.nn.max_pool(images, 2, 2, "SAME")), tf.reduce_sum(tf.cast(odd, tf.float32))

    pooled = odd = 0.0
    for images, is_odd in dist:
        a, b = strategy.run(step, args=(images, is_odd))
        pooled += float(strategy.reduce("SUM", a, axis=None))
        odd += float(strategy.reduce("SUM", b, axis=None))
    assert pooled == pytest.approx(TF_POOLED_SUM, abs=1e-3)
    assert odd == int((labels % 2).sum())  # every label's parity, looked up once
