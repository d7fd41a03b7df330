"""scripts/port_tf_tutorial.py (TF's custom-training tutorial ported to jdist) trains as one device does.

The reference is the tutorial's step computed on one device over the whole global batch:
mean cross-entropy over the batch's examples plus the L2 regularisation losses, Keras's Adam.
Same data (unshuffled digits), same initial weights, three steps (two full batches of 512
and the short last one of 413, split unevenly over the 8 replicas).
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import port_tf_tutorial  # noqa: E402

from jdist.datasets import load_digits  # noqa: E402

STEPS, GLOBAL_BATCH = 3, 512


def _initial_weights(model):
    rng = np.random.default_rng(0)
    return [rng.uniform(-0.1, 0.1, w.shape).astype(np.float32) for w in model.get_weights()]


def _one_device_losses(weights):
    x, y = load_digits("train")
    model = port_tf_tutorial.create_model()
    model.set_weights(weights)
    optimizer = keras.optimizers.Adam(learning_rate=0.001)
    optimizer.build(model.trainable_variables)
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    opt_vars = [v.value for v in optimizer.variables]

    @jax.jit
    def step(trainable, opt_vars, images, labels):
        def loss_fn(trainable):
            predictions, _, losses = model.stateless_call(trainable, non_trainable, images, training=True,
                                                          return_losses=True)
            return loss_object(labels, predictions) + sum(losses)

        loss, grads = jax.value_and_grad(loss_fn)(trainable)
        trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
        return trainable, opt_vars, loss

    losses = []
    for i in range(STEPS):
        rows = slice(i * GLOBAL_BATCH, (i + 1) * GLOBAL_BATCH)
        trainable, opt_vars, loss = step(trainable, opt_vars, x[rows], y[rows])
        losses.append(float(loss))
    return losses


def test_ported_tutorial_equals_one_device():
    assert os.environ.get("KERAS_BACKEND") == "jax"
    weights = _initial_weights(port_tf_tutorial.create_model())
    ported = port_tf_tutorial.main(epochs=1, shuffle=False, initial_weights=weights, max_steps=STEPS)
    np.testing.assert_allclose(ported["step_losses"], _one_device_losses(weights), rtol=2e-5)
