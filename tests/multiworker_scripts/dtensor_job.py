"""TF's DTensor across two clients; run it under `python -m jdist.launch --num-workers 2 --devices-per-worker 4`.

Each client joins with `dtensor.initialize_accelerator_system()`, makes the same 4 x 2 mesh over both
processes' devices with `create_distributed_mesh`, packs only its own pieces (the tutorial's
`repack_local_tensor`), and trains tests/test_tf_compat_dtensor.py's MLP from the same weights on the same
rows. tests/test_multiworker_dtensor.py compares what each client prints with TF's single-process numbers.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.tf_compat.experimental import dtensor  # noqa: E402

U = dtensor.UNSHARDED


def repack(x, layout):
    """This client's pieces of `x`, one per local device of the layout's mesh."""
    pieces = []
    for where in layout.mesh.local_device_locations():
        piece = np.asarray(x)
        for axis, dim in enumerate(layout.sharding_specs):
            if dim != U:
                size = piece.shape[axis] // layout.shape[axis]
                piece = np.take(piece, range(where[dim] * size, (where[dim] + 1) * size), axis=axis)
        pieces.append(piece)
    return dtensor.pack(pieces, layout)


def place(value, layout):
    return dtensor.relayout(dtensor.copy_to_mesh(tf.constant(value), dtensor.Layout.replicated(
        layout.mesh, layout.rank)), layout)


class Dense(tf.Module):
    def __init__(self, w, layout, activation=None):
        super().__init__()
        self.weight = dtensor.DVariable(place(w, layout))
        self.bias = dtensor.DVariable(dtensor.call_with_layout(tf.zeros, layout.delete([0]), [w.shape[1]]))
        self.activation = activation or (lambda x: x)

    def __call__(self, x):
        return self.activation(tf.matmul(x, self.weight) + self.bias)


class MLP(tf.Module):
    def __init__(self, w1, w2, layouts):
        super().__init__()
        self.dense1, self.dense2 = Dense(w1, layouts[0], tf.nn.relu), Dense(w2, layouts[1])

    def __call__(self, x):
        y = self.dense1(x)
        mean, variance = tf.nn.moments(y, axes=[0])
        return self.dense2(tf.nn.batch_normalization(y, mean, variance, 0.0, 1.0, 1e-5))


@tf.function
def train_step(model, x, y, learning_rate):
    with tf.GradientTape() as tape:
        logits = model(x)
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=y))
    parameters = model.trainable_variables
    for parameter, gradient in zip(parameters, tape.gradient(loss, parameters)):
        parameter.assign_sub(learning_rate * gradient)
    return {"loss": loss / len(x)}


if __name__ == "__main__":
    device_type = dtensor.initialize_accelerator_system()
    mesh = dtensor.create_distributed_mesh([("batch", 4), ("model", 2)], device_type="CPU")
    me = dtensor.client_id()
    print(f"client {me} of {dtensor.num_clients()}: {device_type}, {mesh.num_local_devices()} local devices, "
          f"ids {mesh.local_device_ids()}", flush=True)
    rows = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    x = repack(rows, dtensor.Layout(["batch", U], mesh))
    print(f"client {me} sum {float(tf.reduce_sum(x))} replicated {dtensor.relayout(x, dtensor.Layout.replicated(mesh, 2)).numpy()[:, 0].tolist()} "
          f"pieces {[p.numpy()[:, 0].tolist() for p in dtensor.unpack(x)]}", flush=True)
    rng = np.random.default_rng(0)  # tests/test_tf_compat_dtensor.py's weights and rows
    w1 = (rng.normal(size=(16, 8)) * 0.3).astype(np.float32)
    w2 = (rng.normal(size=(8, 2)) * 0.3).astype(np.float32)
    xs = rng.normal(size=(4, 16, 16)).astype(np.float32)
    ys = rng.integers(0, 2, size=(4, 16)).astype(np.int64)
    model = MLP(w1, w2, [dtensor.Layout([U, "model"], mesh), dtensor.Layout(["model", U], mesh)])
    losses = []
    for x, y in zip(xs, ys):
        out = train_step(model, repack(x, dtensor.Layout(["batch", U], mesh)), repack(y, dtensor.Layout(["batch"], mesh)),
                         0.05)
        losses.append(round(float(out["loss"]), 7))
    print(f"client {me} losses {losses} kernel {dtensor.fetch_layout(model.dense1.weight).sharding_specs}", flush=True)
    dtensor.barrier(mesh)
