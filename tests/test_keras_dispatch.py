"""Keras `fit` / `evaluate` / `predict` under a strategy keep within jdist's bound on programs in flight
(jdist.interop.keras_dispatch).

Without it, Keras's guide "Multi-GPU distributed training" (its MNIST model, batches of 32 from a `tf.data`
dataset, MirroredStrategy on 8 CPU devices of a 2-core host) aborted in its first epoch, near step 90: XLA:CPU's
"Termination timeout for all reduce RendezvousKey ... cross_module". A Keras step was never counted, so the bound
saw nothing pending; now every step is, and the host waits for the oldest beyond the bound."""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import jdist  # noqa: E402
import jdist.tf_compat as tf  # noqa: E402
from jdist.strategy import dispatch  # noqa: E402


class _Pending(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(dispatch.pending())

    on_test_batch_end = on_predict_batch_end = on_train_batch_end


def test_keras_steps_under_a_strategy_are_bounded_like_jdists_own():
    strategy = jdist.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 8
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(640, 4)).astype("float32"), rng.integers(0, 3, size=640)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    pending = _Pending()
    dispatch.wait()
    model.fit(data, epochs=1, verbose=0, callbacks=[pending])
    model.evaluate(data, verbose=0, callbacks=[pending])
    model.predict(x, batch_size=16, verbose=0, callbacks=[pending])
    assert len(pending.seen) == 3 * 40
    assert max(pending.seen) >= 1  # Keras's steps are counted (without the bound: always 0)
    assert max(pending.seen) <= dispatch.max_in_flight()
