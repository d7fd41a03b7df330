"""`jdist.Trainer.fit` on every worker of a multi-worker job; run it under `python -m jdist.launch`.

Both workers hold the same arrays (the Trainer places each process's share of every
global batch). The chief writes the trained parameters, the history, the evaluation
and the predictions to --out.
"""
import argparse
import json
from pathlib import Path

import mlp_job
import numpy as np
import optax

import jdist

EPOCHS, BATCH = 2, 24  # 256 examples: 11 batches, the last one short (16 real of 24)


def fit(strategy, steps_per_execution=2, seed=0):
    """The same Trainer run for the workers and the single-process reference."""
    x, y = mlp_job.dataset()
    trainer = jdist.Trainer(mlp_job.MODEL, optax.adam(1e-2), metrics=["accuracy"],
                            params=mlp_job.init_params(seed)["params"], strategy=strategy,
                            steps_per_execution=steps_per_execution, seed=seed)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=True, verbose=0)
    evaluation = trainer.evaluate(x, y, batch_size=BATCH, verbose=0, return_dict=True)
    predictions = trainer.predict(x[:50], batch_size=BATCH, verbose=0)
    return trainer, history.history, evaluation, predictions


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--shard-optimizer-state", action="store_true")
    parser.add_argument("--seed-by-worker", action="store_true",
                        help="worker i seeds its parameters and the Trainer (shuffling) with 7 * i: the chief's win")
    args = parser.parse_args()
    jdist.layout.WEIGHT_UPDATE_MIN_BYTES = 0  # shard this small model's optimizer state too
    strategy = jdist.MultiWorkerMirroredStrategy(shard_optimizer_state=args.shard_optimizer_state)
    seed = 7 * strategy.worker_index if args.seed_by_worker else 0
    trainer, history, evaluation, predictions = fit(strategy, seed=seed)
    params = mlp_job.flat_params(trainer.state_on_host().params)
    print(f"worker {strategy.worker_index}: loss {history['loss']}", flush=True)
    if strategy.is_chief:
        out = Path(args.out)
        np.savez(out / "params.npz", **params)
        np.save(out / "predictions.npy", predictions)
        (out / "logs.json").write_text(json.dumps({"history": history, "evaluation": evaluation}))
