"""A resumable multi-worker job for `python -m jdist.launch --max-restarts N`.

Every step is checkpointed (CheckpointManager in --dir); a restarted job resumes
from the newest checkpoint on however many workers it now has, with the same
global batch, so it continues exactly where the last checkpoint left it. The
chief writes the final parameters to --out.
"""
from __future__ import annotations

import argparse
import os
import time

import jax
import mlp_job
import numpy as np
import optax

import jdist


def initial_state(strategy):
    with strategy.scope():
        return jdist.TrainState.create(apply_fn=mlp_job.MODEL.apply, params=mlp_job.init_params(0), tx=optax.sgd(0.5))


def train_from(strategy, state, start: int, steps: int, manager=None, step_sleep: float = 0.0):
    """Steps `start..steps-1` over the fixed sequence of global batches; saves after each one."""
    x, y = mlp_job.dataset()
    step_fn = jdist.make_train_step(mlp_job.loss_fn, strategy)
    share = strategy.local_batch_slice(mlp_job.GLOBAL_BATCH)
    for s in range(start, steps):
        first = (s % mlp_job.NUM_BATCHES) * mlp_job.GLOBAL_BATCH
        rows = slice(first + share.start, first + share.stop)
        state, _ = step_fn(state, strategy.distribute_batch({"x": x[rows], "y": y[rows]}))
        jax.block_until_ready(state)
        if manager is not None:
            manager.save(s + 1, state)
            print(f"step {s + 1} saved", flush=True)
        time.sleep(step_sleep)
    return state


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    args = parser.parse_args()
    strategy = jdist.MultiWorkerMirroredStrategy()
    state = initial_state(strategy)
    manager = jdist.checkpoint.CheckpointManager(args.dir, async_save=False, checksums=False)
    start = 0
    if manager.latest_step() is not None:
        restored = manager.restore_with_info(target=state, strategy=strategy)
        state, start = restored.state, restored.step
    print(f"attempt {os.environ.get('JDIST_RESTART_COUNT')} resumed at step {start} on "
          f"{strategy.num_workers} worker(s), {strategy.num_replicas_in_sync} replica(s)", flush=True)
    state = train_from(strategy, state, start, args.steps, manager, args.step_sleep)
    manager.close()
    if strategy.is_chief:
        np.savez(args.out, **mlp_job.flat_params(state.params))
    print("done", flush=True)
