"""The DTensor tutorial's MLP (dtensor_ml_tutorial.ipynb: Dense, BatchNorm with tf.nn.moments, the @tf.function
train_step with a GradientTape and assign_sub), its repacking of a batch, and the fixed weights and rows TF 2.21
ran it from: shared by tests/test_tf_compat_dtensor.py and the two-client job (multiworker_scripts/dtensor_job.py).
"""
import numpy as np

import jdist.tf_compat as tf
from jdist.tf_compat.experimental import dtensor

U = dtensor.UNSHARDED

# Four steps of 16 rows at learning rate 0.05 from `mlp_data()`'s weights: TF 2.21 printed these (loss, accuracy)
# per step, the same under all four layouts of tests/test_tf_compat_dtensor.py (to 1e-7).
TF_MLP_STEPS = [(0.9935719, 0.375), (0.7564721, 0.4375), (0.8674841, 0.375), (0.5843521, 0.6875)]


def placed(value, layout):
    """`value` replicated onto the layout's mesh, then laid out (the guide's `dtensor_from_array`)."""
    return dtensor.relayout(dtensor.copy_to_mesh(tf.constant(value), dtensor.Layout.replicated(layout.mesh,
                                                                                                layout.rank)), layout)


class Dense(tf.Module):
    def __init__(self, w, layout, activation=None):
        super().__init__()
        self.weight = dtensor.DVariable(placed(w, layout))
        self.bias = dtensor.DVariable(dtensor.call_with_layout(tf.zeros, layout.delete([0]), [w.shape[1]]))
        self.activation = activation or (lambda x: x)

    def __call__(self, x):
        return self.activation(tf.matmul(x, self.weight) + self.bias)


class MLP(tf.Module):
    def __init__(self, w1, w2, layouts):
        super().__init__()
        self.dense1 = Dense(w1, layouts[0], tf.nn.relu)
        self.dense2 = Dense(w2, layouts[1])

    def __call__(self, x):
        y = self.dense1(x)
        mean, variance = tf.nn.moments(y, axes=[0])
        return self.dense2(tf.nn.batch_normalization(y, mean, variance, 0.0, 1.0, 1e-5))


def repack(x, layout):
    """The tutorial's `repack_local_tensor`: split along the sharded axes, one piece per local device (this
    client's devices only, by `local_device_locations`)."""
    queue = [tf.convert_to_tensor(x)]
    sharded = []
    for axis, dim in enumerate(layout.sharding_specs):
        if dim != U:
            queue = tf.nest.map_structure(lambda t, n=layout.shape[axis], a=axis: tf.split(t, n, axis=a), queue)
            sharded.append(dim)
    pieces = []
    for where in layout.mesh.local_device_locations():
        t = queue[0]
        for dim in sharded:
            t = t[where[dim]]
        pieces.append(t)
    return dtensor.pack(pieces, layout)


@tf.function
def train_step(model, x, y, learning_rate):
    with tf.GradientTape() as tape:
        logits = model(x)
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=y))
    parameters = model.trainable_variables
    for parameter, gradient in zip(parameters, tape.gradient(loss, parameters)):
        parameter.assign_sub(learning_rate * gradient)
    wrong = tf.cast(tf.argmax(logits, axis=-1, output_type=tf.int64) != y, tf.float32)
    accuracy = 1.0 - tf.reduce_sum(wrong) / x.shape[0]
    return {"loss": loss / len(x), "accuracy": accuracy}


def mlp_data():
    """The starting weights and the four steps' rows and labels TF ran with."""
    rng = np.random.default_rng(0)
    w1 = (rng.normal(size=(16, 8)) * 0.3).astype(np.float32)
    w2 = (rng.normal(size=(8, 2)) * 0.3).astype(np.float32)
    return w1, w2, rng.normal(size=(4, 16, 16)).astype(np.float32), rng.integers(0, 2, size=(4, 16)).astype(np.int64)
