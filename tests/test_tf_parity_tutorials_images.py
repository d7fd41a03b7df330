"""TensorFlow's image tutorials (images/cnn, images/data_augmentation, generative/autoencoder) as a script sees them.

Every expected value is TF's, observed in TF 2.21 with Keras 3.15 (tensorflow-cpu) running the same code on the
same arrays. The tutorials download CIFAR-10, tf_flowers and Fashion-MNIST; here the data are small seeded
random arrays of the same dtypes (uint8 images, integer labels).
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

_IMAGE = np.random.default_rng(2).integers(0, 256, (24, 32, 3), dtype=np.uint8)
# Pixels whose float32 saturation lands within one unit in the last place of a uint8 rounding boundary.
_EDGE = np.array([[[87, 183, 255], [83, 58, 204], [204, 36, 255], [85, 204, 170]]], np.uint8)
_FLOAT = np.array([[[0.1, 0.7, 0.3], [0.9, 0.2, 0.6], [0.25, 0.5, 0.75], [0.8, 0.8, 0.1]]], np.float32)


def _f32(values: list[float]) -> np.ndarray:
    return np.asarray(values, np.float64).astype(np.float32).reshape(_FLOAT.shape)


def _summary(image: Any) -> tuple[str, list[int], int, list[int]]:
    array = np.asarray(image)
    return str(array.dtype), list(array.shape), int(array.astype(np.int64).sum()), array.reshape(-1)[:5].tolist()


# observed in TF 2.21: (dtype, shape, sum, first five values) of data_augmentation's tf.image cells on _IMAGE
_TUTORIAL_OPS = {
    "flip_left_right": (lambda x: tf.image.flip_left_right(x),
                        ("uint8", [24, 32, 3], 293545, [123, 106, 38, 153, 66])),
    "rgb_to_grayscale": (lambda x: tf.image.rgb_to_grayscale(x),
                         ("uint8", [24, 32, 1], 98489, [121, 106, 124, 184, 179])),
    "adjust_saturation": (lambda x: tf.image.adjust_saturation(x, 3),
                          ("uint8", [24, 32, 3], 229077, [193, 0, 34, 214, 70])),
    "adjust_brightness": (lambda x: tf.image.adjust_brightness(x, 0.4),
                          ("uint8", [24, 32, 3], 480273, [255, 190, 209, 255, 174])),
    "central_crop": (lambda x: tf.image.central_crop(x, central_fraction=0.5),
                     ("uint8", [12, 16, 3], 73191, [117, 211, 38, 49, 202])),
    "rot90": (lambda x: tf.image.rot90(x), ("uint8", [32, 24, 3], 293545, [123, 106, 38, 91, 139])),
    "stateless_random_brightness": (lambda x: tf.image.stateless_random_brightness(x, max_delta=0.95, seed=(1, 0)),
                                    ("uint8", [24, 32, 3], 563666, [255, 255, 255, 255, 255])),
    "stateless_random_contrast": (lambda x: tf.image.stateless_random_contrast(x, lower=0.1, upper=0.9, seed=(2, 0)),
                                  ("uint8", [24, 32, 3], 292975, [175, 99, 112, 191, 87])),
    "stateless_random_crop": (lambda x: tf.image.stateless_random_crop(x, size=[16, 20, 3], seed=(0, 0)),
                              ("uint8", [16, 20, 3], 120593, [25, 123, 117, 154, 130])),
}


@pytest.mark.parametrize("name", sorted(_TUTORIAL_OPS))
def test_data_augmentation_image_cells(name: str) -> None:
    op, expected = _TUTORIAL_OPS[name]
    assert _summary(op(_IMAGE)) == expected


def test_adjust_saturation_is_tfs_kernel_to_the_last_bit() -> None:
    # observed in TF 2.21: AdjustSaturation's own float32 arithmetic (not rgb_to_hsv / hsv_to_rgb); one unit in the
    # last place decides these uint8 values (a colour-space round trip gives [0, 145, 255], [35, 0, 204], ...)
    expected = [[[0, 146, 255], [34, 0, 204], [195, 0, 255], [0, 204, 145]]]
    assert np.asarray(tf.image.adjust_saturation(_EDGE, 3)).tolist() == expected
    assert np.asarray(tf.image.adjust_saturation(jnp.asarray(_EDGE), 3)).tolist() == expected
    assert np.asarray(tf.image.stateless_random_saturation(_EDGE, 0.5, 3.0, seed=(1, 2))).tolist() == expected
    half = _f32([0.4000000059604645, 0.699999988079071, 0.5000000596046448, 0.8999999761581421, 0.5499999523162842,
                 0.7499998807907104, 0.5, 0.625, 0.75, 0.800000011920929, 0.800000011920929, 0.45000001788139343])
    more = _f32([0.0, 0.699999988079071, 0.23333343863487244, 0.8999999761581421, 0.0, 0.5142854452133179, 0.0,
                 0.375, 0.75, 0.800000011920929, 0.800000011920929, 0.0])
    for image in (_FLOAT, jnp.asarray(_FLOAT)):
        np.testing.assert_array_equal(np.asarray(tf.image.adjust_saturation(image, 0.5)), half)
        np.testing.assert_array_equal(np.asarray(tf.image.adjust_saturation(image, 1.7)), more)


def test_adjust_hue_is_tfs_kernel_to_the_last_bit() -> None:
    # observed in TF 2.21: AdjustHue turns the hue in sextants [0, 6) and rebuilds the middle channel
    plus = _f32([0.10000000149011612, 0.3799998462200165, 0.699999988079071, 0.8999999761581421, 0.64000004529953,
                 0.20000000298023224, 0.5999999046325684, 0.25, 0.75, 0.10000000149011612, 0.800000011920929,
                 0.24000003933906555])
    minus = _f32([0.699999988079071, 0.10000000149011612, 0.3199997842311859, 0.20000000298023224,
                  0.8999999761581421, 0.7099999785423279, 0.75, 0.6500000953674316, 0.25, 0.31000012159347534,
                  0.10000000149011612, 0.800000011920929])
    for image in (_FLOAT, jnp.asarray(_FLOAT)):
        np.testing.assert_array_equal(np.asarray(tf.image.adjust_hue(image, 0.2)), plus)
        np.testing.assert_array_equal(np.asarray(tf.image.adjust_hue(image, -0.45)), minus)
    expected = [[[255, 87, 242], [204, 58, 84], [255, 127, 36], [128, 85, 204]]]
    assert np.asarray(tf.image.stateless_random_hue(_EDGE, 0.4, seed=(1, 2))).tolist() == expected


def test_rgb_to_hsv_uses_tfs_reciprocal_order() -> None:
    # observed in TF 2.21: RGBToHSV's hue is (1 / range) * (1 / 6) * difference, float32 (1 / (6 * range) is one
    # unit in the last place off for these pixels)
    rgb = np.array([[[0.4602406620979309, 0.8949360847473145, 0.0019273161888122559],
                     [0.5727314352989197, 0.5359308123588562, 0.3359670042991638],
                     [0.7646201252937317, 0.5115174055099487, 0.32804083824157715]]], np.float32)
    expected = np.array([0.24779602885246277, 0.9978464245796204, 0.8949360847473145, 0.14076144993305206,
                         0.4133951961994171, 0.5727314352989197, 0.07004324346780777, 0.5709754228591919,
                         0.7646201252937317], np.float32).reshape(rgb.shape)
    np.testing.assert_array_equal(np.asarray(tf.image.rgb_to_hsv(rgb)), expected)
    np.testing.assert_array_equal(np.asarray(tf.image.rgb_to_hsv(jnp.asarray(rgb))), expected)


def test_split_of_an_int64_seed_tuple_from_zipped_counters() -> None:
    # data_augmentation's `Dataset.zip((images, (counter, counter)))`: the seed is a tuple of int64 scalars, and
    # TF 2.21 (observed) splits it as an int64 seed: int64 draws, not the int32 ones of a Python (1, 1)
    counter = tf.data.experimental.Counter()
    seeds = tf.data.Dataset.zip((tf.data.Dataset.range(2), (counter, counter))).map(
        lambda x, seed: tf.random.split(seed, num=1)[0, :])
    got = [np.asarray(s).tolist() for s in seeds]
    assert got == [[-6856063536328932722, -6061095977527908230], [-2228718385069517736, 3102316654818379955]]
    one = tf.constant(1, tf.int64)
    split = tf.random.split((one, one), num=1)
    assert split.dtype == tf.int64 and np.asarray(split).tolist() == [[-2228718385069517736, 3102316654818379955]]
    assert np.asarray(tf.random.split((1, 1), num=1)).tolist() == [[-510880680, -518913937]]  # int32, as TF
    assert tf.random.split((np.int64(1), np.int64(1)), num=1).dtype == tf.int32  # numpy scalars: as Python ints


def test_a_list_holding_tensors_packs_in_the_first_tensors_dtype() -> None:
    # observed in TF 2.21: tf.convert_to_tensor packs a list with tensors in the first tensor's dtype
    c64: Any = tf.constant(1, tf.int64)
    u8: Any = tf.constant(3, tf.uint8)
    assert tf.convert_to_tensor((c64, c64)).dtype == tf.int64
    assert tf.convert_to_tensor([[c64, 1], [2, 3]]).dtype == tf.int64
    assert tf.convert_to_tensor((c64, np.int64(2))).dtype == tf.int64
    big = tf.convert_to_tensor([c64, 2**40])
    assert big.dtype == tf.int64 and np.asarray(big).tolist() == [1, 2**40]
    wrapped = tf.convert_to_tensor([u8, 300])
    assert wrapped.dtype == tf.uint8 and np.asarray(wrapped).tolist() == [3, 44]
    f64: Any = tf.constant(1.5, tf.float64)
    double = tf.convert_to_tensor((f64, 2))
    assert double.dtype == tf.float64 and np.asarray(double).tolist() == [1.5, 2.0]
    assert tf.convert_to_tensor([1, 2]).dtype == tf.int32  # no tensor: Python ints, int32
    with pytest.raises(TypeError, match="Cannot convert 2.5 to EagerTensor of dtype int64"):
        tf.convert_to_tensor([c64, 2.5])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"cannot compute Pack as input #1\(zero-based\) was expected to be a int64 tensor but "
                             r"is a int32 tensor \[Op:Pack\] name: packed"):
        tf.convert_to_tensor([c64, tf.constant(2)])


def _summary_tail(model: Any) -> list[str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        model.summary()
    return [line.strip() for line in buf.getvalue().strip().splitlines()[-3:]]


def test_cnn_tutorial_model() -> None:
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (16, 32, 32, 3), dtype=np.uint8) / 255.0, rng.integers(0, 10, (16, 1))
    layers = tf.keras.layers
    model = tf.keras.models.Sequential()
    model.add(tf.keras.Input((32, 32, 3)))
    model.add(layers.Conv2D(32, (3, 3), activation="relu"))
    model.add(layers.MaxPooling2D((2, 2)))
    model.add(layers.Conv2D(64, (3, 3), activation="relu"))
    model.add(layers.MaxPooling2D((2, 2)))
    model.add(layers.Conv2D(64, (3, 3), activation="relu"))
    assert model.output_shape == (None, 4, 4, 64)
    model.add(layers.Flatten())
    model.add(layers.Dense(64, activation="relu"))
    model.add(layers.Dense(10))
    assert _summary_tail(model) == [  # observed in TF 2.21, Keras 3.15
        "Total params: 122,570 (478.79 KB)", "Trainable params: 122,570 (478.79 KB)",
        "Non-trainable params: 0 (0.00 B)"]
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(images, labels, epochs=1, batch_size=16, validation_data=(images, labels), verbose=0)
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    test_loss, test_acc = model.evaluate(images, labels, verbose=0)
    assert type(test_loss) is float and type(test_acc) is float  # observed: Python floats


def test_autoencoder_tutorial_values() -> None:
    # observed in TF 2.21: reduce_prod of a shape is an int32 scalar (Keras 3.15's Dense refuses its .numpy(),
    # an np.int32, as `units`: "expected a positive integer. Received: units=784", in TF as here)
    prod = tf.math.reduce_prod((28, 28))
    assert prod.dtype == tf.int32 and int(prod) == 784
    with pytest.raises(ValueError, match="expected a positive integer"):
        tf.keras.layers.Dense(prod.numpy())
    rng = np.random.default_rng(4)
    train = rng.random((8, 140))
    low: Any = tf.reduce_min(train)
    high: Any = tf.reduce_max(train)
    assert low.dtype == tf.float64  # observed: float64, as the numpy data
    scaled: Any = tf.cast((train - low) / (high - low), tf.float32)
    assert scaled.dtype == tf.float32
    mask = (np.arange(8) % 2).astype(bool)
    assert tuple(scaled[mask].shape) == (4, 140) and tuple(scaled[~mask].shape) == (4, 140)
    noisy = tf.clip_by_value(scaled + 0.2 * tf.random.normal(shape=scaled.shape), clip_value_min=0.,
                             clip_value_max=1.)
    assert noisy.dtype == tf.float32 and float(np.min(noisy)) >= 0 and float(np.max(noisy)) <= 1
