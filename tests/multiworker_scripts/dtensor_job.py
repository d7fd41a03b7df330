"""TF's DTensor across two clients; run it under `python -m jdist.launch --num-workers 2 --devices-per-worker 4`.

Each client joins with `dtensor.initialize_accelerator_system()`, makes the same 4 x 2 mesh over both
processes' devices with `create_distributed_mesh`, packs only its own pieces (the tutorial's
`repack_local_tensor`), and trains tests/test_tf_compat_dtensor.py's MLP from the same weights on the same
rows. tests/test_multiworker_dtensor.py compares what each client prints with TF's single-process numbers.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the MLP the one-process test trains
from dtensor_mlp import MLP, U, mlp_data, repack, train_step  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402
from jdist.tf_compat.experimental import dtensor  # noqa: E402

if __name__ == "__main__":
    device_type = dtensor.initialize_accelerator_system()
    mesh = dtensor.create_distributed_mesh([("batch", 4), ("model", 2)], device_type="CPU")
    me = dtensor.client_id()
    print(f"client {me} of {dtensor.num_clients()}: {device_type}, {mesh.num_local_devices()} local devices, "
          f"ids {mesh.local_device_ids()}", flush=True)
    rows = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    x = repack(rows, dtensor.Layout(["batch", U], mesh))
    whole = dtensor.relayout(x, dtensor.Layout.replicated(mesh, 2)).numpy()[:, 0].tolist()
    pieces = [p.numpy()[:, 0].tolist() for p in dtensor.unpack(x)]
    print(f"client {me} sum {float(tf.reduce_sum(x))} replicated {whole} pieces {pieces}", flush=True)
    w1, w2, xs, ys = mlp_data()
    model = MLP(w1, w2, [dtensor.Layout([U, "model"], mesh), dtensor.Layout(["model", U], mesh)])
    losses = []
    for x, y in zip(xs, ys):
        x, y = repack(x, dtensor.Layout(["batch", U], mesh)), repack(y, dtensor.Layout(["batch"], mesh))
        out = train_step(model, x, y, 0.05)
        losses.append(round(float(out["loss"]), 7))
    print(f"client {me} losses {losses} kernel {dtensor.fetch_layout(model.dense1.weight).sharding_specs}", flush=True)
    dtensor.barrier(mesh)
