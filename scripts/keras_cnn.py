"""The seed's Keras CNN, trained by Keras's own `fit` under `jdist.MirroredStrategy()`.

    KERAS_BACKEND=jax python scripts/keras_cnn.py                  # 8 simulated CPU devices, 6 epochs
    KERAS_BACKEND=jax python scripts/keras_cnn.py --strategy one_device

The TensorFlow script this ports differs in two lines: `import tensorflow as tf`
became `import jdist`, and `tf.distribute.MirroredStrategy()` became
`jdist.MirroredStrategy()` (the data comes from jdist's bundled digits instead of
a download). The model is `jdist.models.CNN` layer for layer.
"""
from __future__ import annotations

import argparse
import os
import sys


def build_and_fit(strategy, x_train, y_train, *, epochs: int, batch_size: int = 64, seed: int = 0, verbose=2):
    """What the TF script does under `strategy.scope()`: build, compile, fit."""
    import keras

    keras.utils.set_random_seed(seed)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ])
        model.compile(optimizer=keras.optimizers.Adam(2e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=verbose)
    return model


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", default="mirrored", choices=["mirrored", "one_device"])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--devices", type=int, default=8, help="simulated CPU devices (ignored on GPU/TPU)")
    args = parser.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={args.devices}").strip()

    import jax

    import jdist
    from jdist import datasets

    x_train, y_train = datasets.load_digits("train")
    x_test, y_test = datasets.load_digits("test")
    strategy = (jdist.MirroredStrategy() if args.strategy == "mirrored"
                else jdist.OneDeviceStrategy(jax.devices()[0]))
    print(f"{strategy.num_replicas_in_sync} replica(s)")
    model = build_and_fit(strategy, x_train, y_train, epochs=args.epochs)
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"held-out: loss {loss:.4f}  accuracy {accuracy:.4f} ({len(y_test)} examples)")
    return accuracy


if __name__ == "__main__":
    sys.exit(0 if main() >= 0.9 else 1)
