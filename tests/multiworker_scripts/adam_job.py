"""Adam on the shared MLP job across worker processes: reports the compiled step's collectives and saves the
trained parameters. Run it under `python -m jdist.launch`; `train` is also its single-process reference.

Every leaf is large enough for weight-update sharding here (`WEIGHT_UPDATE_MIN_BYTES = 0`), so a step that
split the update would show its all-gathers. `--loss centered` subtracts the batch's mean input first: rows
then depend on each other, so replicas cannot differentiate their own rows alone.
"""
import argparse
import json
from pathlib import Path

import jax
import mlp_job
import numpy as np
import optax

import jdist
from jdist.diagnostics.hlo import collectives

STEPS = 4


def centered_loss(params, batch):
    return mlp_job.loss_fn(params, {"x": batch["x"] - batch["x"].mean(axis=0), "y": batch["y"]})


LOSSES = {"plain": mlp_job.loss_fn, "centered": centered_loss}


def train(strategy, loss: str = "plain", steps: int = STEPS):
    """Adam steps over consecutive global batches; returns the state and the compiled step's collectives."""
    x, y = mlp_job.dataset()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=mlp_job.MODEL.apply, params=mlp_job.init_params(0),
                                        tx=optax.adam(0.01))
    step = jdist.make_train_step(LOSSES[loss], strategy)
    share = strategy.local_batch_slice(mlp_job.GLOBAL_BATCH)
    found = None
    for s in range(steps):
        first = (s % mlp_job.NUM_BATCHES) * mlp_job.GLOBAL_BATCH
        batch = strategy.distribute_batch({"x": x[first + share.start:first + share.stop],
                                           "y": y[first + share.start:first + share.stop]})
        if found is None:
            found = collectives(step.lower(state, batch).compile().as_text(), strategy.num_replicas_in_sync)
        state, _ = step(state, batch)
        jax.block_until_ready(state)
    return state, found


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--loss", choices=sorted(LOSSES), default="plain")
    parser.add_argument("--shard-optimizer-state", action="store_true")
    args = parser.parse_args()
    jdist.layout.WEIGHT_UPDATE_MIN_BYTES = 0
    strategy = jdist.MultiWorkerMirroredStrategy(shard_optimizer_state=args.shard_optimizer_state)
    state, found = train(strategy, args.loss)
    summary = sorted([c.kind, sorted(int(np.prod(dims)) for _, dims in c.shapes)] for c in found)
    print(f"worker {strategy.worker_index} collectives {json.dumps(summary)}", flush=True)
    np.savez(Path(args.out) / f"params_{strategy.worker_index}.npz", **mlp_job.flat_params(state.params))
