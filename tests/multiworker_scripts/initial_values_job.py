"""Every worker seeds everything with its own seed; what the strategy places must still be one set of values.

Writes `digests_<worker>.json`: for each value (flax parameters and Adam state, PRNG keys, a Keras
model's weights, optimizer and metric variables), after creation and after every step, a hash of the
bytes of this process's copy. Each process's own device copies are checked equal here.
Run it under `python -m jdist.launch --num-workers 2 --devices-per-worker 2`.
"""
import argparse
import hashlib
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import mlp_job  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jdist  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=2)
args = parser.parse_args()

resolver = jdist.cluster.resolve_cluster()
seed = 1 + 1000 * resolver.process_id  # a different seed on every worker
strategy = jdist.MultiWorkerMirroredStrategy()
index = strategy.worker_index
digests: dict[str, str] = {}


def local_bytes(leaf) -> bytes:
    """This process's copy of a replicated value (after checking its devices agree)."""
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    copies = [np.asarray(shard.data).tobytes() for shard in leaf.addressable_shards]
    assert all(c == copies[0] for c in copies), "the devices of one process disagree"
    return copies[0]


def record(name: str, tree) -> None:
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        h.update(local_bytes(leaf))
    digests[name] = h.hexdigest()


# ------------------------------------------------------------------ flax / optax, jdist's own step
host_params = mlp_job.init_params(seed)  # numpy: differs per worker
replicated = strategy.replicated_sharding()
inconsistent = jax.tree.map(  # global arrays whose copies differ (jax.device_put would refuse the host values)
    lambda a: jax.make_array_from_callback(a.shape, replicated, lambda i: a[i]), host_params)
with strategy.scope():
    state = jdist.TrainState.create(apply_fn=mlp_job.MODEL.apply, params=inconsistent, tx=optax.adam(0.05))
    typed_key = strategy.place(jax.random.key(seed))
    raw_key = strategy.place(jax.random.PRNGKey(seed))
    host_state = strategy.place({"params": host_params, "step": np.int32(seed)})
digests["flax/own"] = hashlib.sha256(b"".join(a.tobytes() for a in jax.tree.leaves(host_params))).hexdigest()
record("flax/params", state.params)
record("flax/created", state)
record("typed_key", typed_key)
record("raw_key", raw_key)
record("host_tree", host_state)
step_fn = jdist.make_train_step(mlp_job.loss_fn, strategy)
x, y = mlp_job.dataset()
share = strategy.local_batch_slice(mlp_job.GLOBAL_BATCH)
for s in range(args.steps):
    lo, hi = s * mlp_job.GLOBAL_BATCH + share.start, s * mlp_job.GLOBAL_BATCH + share.stop
    batch = strategy.distribute_batch({"x": x[lo:hi], "y": y[lo:hi]})
    state, _ = step_fn(state, batch)
    record(f"flax/step{s}", state)

# ------------------------------------------------------------------ Keras 3, its own fit in the scope
import keras  # noqa: E402

keras.utils.set_random_seed(seed)
with strategy.scope():
    model = keras.Sequential([keras.Input((mlp_job.FEATURES,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dropout(0.25), keras.layers.Dense(mlp_job.CLASSES)])
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    record("keras/created", [v.value for v in model.weights])

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            self.model.jax_state_sync()
            record(f"keras/step{batch}", [v.value for v in self.model.variables])
            record(f"keras/optimizer{batch}", [v.value for v in self.model.optimizer.variables])
            digests[f"keras/loss{batch}"] = repr(float(logs["loss"]))

    per_worker = mlp_job.GLOBAL_BATCH // strategy.num_workers
    rows = slice(index * per_worker * args.steps, (index + 1) * per_worker * args.steps)
    model.fit(x[rows], y[rows], batch_size=per_worker, epochs=1, shuffle=False, verbose=0, callbacks=[Record()])

with open(os.path.join(args.out, f"digests_{index}.json"), "w") as f:
    json.dump(digests, f, indent=1)
print(f"recorded {len(digests)} digests", flush=True)
