"""A small MLP training job shared by the multi-worker worker script and its single-process references."""
from __future__ import annotations

import jax
import numpy as np
import optax

import jdist
from jdist.datasets import make_classification
from jdist.models import MLP, classification_loss

GLOBAL_BATCH = 32
FEATURES = 16
CLASSES = 4
MODEL = MLP(features=(32,), num_classes=CLASSES)


NUM_BATCHES = 8  # the data set; longer runs cycle over it


def dataset() -> tuple[np.ndarray, np.ndarray]:
    return make_classification(GLOBAL_BATCH * NUM_BATCHES, image_shape=(FEATURES,), num_classes=CLASSES, seed=0)


def init_params(seed: int):
    """Drawn with numpy in the model's structure: compiling flax's initialisers takes seconds per process."""
    shapes = jax.eval_shape(MODEL.init, jax.random.key(seed), np.zeros((1, FEATURES), np.float32))
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda s: (rng.standard_normal(s.shape) / np.sqrt(s.shape[0])).astype(s.dtype), shapes)


def loss_fn(params, batch):
    return classification_loss(MODEL.apply(params, batch["x"]), batch["y"])


def train(strategy, params, steps: int, on_step=None):
    """`steps` SGD steps over consecutive global batches; returns (state, rows this process read)."""
    x, y = dataset()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=MODEL.apply, params=params, tx=optax.sgd(0.5))
    step_fn = jdist.make_train_step(loss_fn, strategy)
    share = strategy.local_batch_slice(GLOBAL_BATCH)
    rows = []
    for s in range(steps):
        first = (s % NUM_BATCHES) * GLOBAL_BATCH
        lo, hi = first + share.start, first + share.stop
        rows.append((lo, hi))
        batch = strategy.distribute_batch({"x": x[lo:hi], "y": y[lo:hi]})
        state, sums = step_fn(state, batch)
        jax.block_until_ready(state)  # one step in flight: see InFlightLimiter's note
        if on_step is not None:
            on_step(s, float(sums["loss"]) / float(sums["count"]))
    return state, rows


def flat_params(params) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves}
