"""Adam on the shared MLP job across worker processes: reports the compiled step's collectives and saves the
trained parameters. Run it under `python -m jdist.launch`; `train` is also its single-process reference.

Every leaf is large enough for weight-update sharding here (`WEIGHT_UPDATE_MIN_BYTES = 0`), so a step that
split the update would show its all-gathers.
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


def train(strategy, steps: int = STEPS):
    """Adam steps over consecutive global batches; returns the state and the compiled step's collectives."""
    x, y = mlp_job.dataset()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=mlp_job.MODEL.apply, params=mlp_job.init_params(0),
                                        tx=optax.adam(0.01))
    step = jdist.make_train_step(mlp_job.loss_fn, strategy)
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
    parser.add_argument("--shard-optimizer-state", action="store_true")
    args = parser.parse_args()
    jdist.layout.WEIGHT_UPDATE_MIN_BYTES = 0
    strategy = jdist.MultiWorkerMirroredStrategy(shard_optimizer_state=args.shard_optimizer_state)
    state, found = train(strategy)
    kinds = sorted(c.kind for c in found)
    print(f"worker {strategy.worker_index} collectives {json.dumps(kinds)}", flush=True)
    np.savez(Path(args.out) / f"params_{strategy.worker_index}.npz", **mlp_job.flat_params(state.params))
