"""One worker of a multi-worker MLP job; run it under `python -m jdist.launch`.

--steps 0 trains until stopped (for failure tests); --crash-process P --crash-at S
makes process P raise at step S; --exit-process P --exit-at S makes it call
sys.exit(--exit-code) there.
"""
import argparse
import json
import os
import sys
import time

import mlp_job
import numpy as np

import jdist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--out", default=None)
parser.add_argument("--init-before-strategy", action="store_true",
                    help="use JAX (create the parameters) before the strategy joins the cluster")
parser.add_argument("--self-initialize", action="store_true",
                    help="start jax.distributed from TF_CONFIG by hand and hide TF_CONFIG, as on a TPU pod")
parser.add_argument("--seed-by-worker", action="store_true", help="each worker initialises with its own seed")
parser.add_argument("--crash-process", type=int, default=-1)
parser.add_argument("--crash-at", type=int, default=-1)
parser.add_argument("--exit-process", type=int, default=-1)
parser.add_argument("--exit-at", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=2)
parser.add_argument("--sleep-process", type=int, default=-1, help="this process sleeps for good at --sleep-at")
parser.add_argument("--sleep-at", type=int, default=-1)
parser.add_argument("--step-sleep", type=float, default=0.0)
args = parser.parse_args()

if args.self_initialize:
    import jax

    config = json.loads(os.environ.pop("TF_CONFIG"))
    jax.distributed.initialize(config["cluster"]["worker"][0], len(config["cluster"]["worker"]),
                               config["task"]["index"])
resolver = jdist.cluster.resolve_cluster()  # pure Python: JAX is not started by this
seed = resolver.process_id if args.seed_by_worker else 0
params = mlp_job.init_params(seed) if args.init_before_strategy else None
strategy = jdist.MultiWorkerMirroredStrategy()
if params is None:
    params = mlp_job.init_params(seed)
index = strategy.worker_index
print(f"joined as {resolver.task_name(index)}: worker {index} of {strategy.num_workers}, "
      f"{strategy.num_replicas_in_sync} replicas, chief={strategy.is_chief}", flush=True)


# Per-replica view across processes: TF's global replica numbering and cross-worker reductions.
ids = strategy.experimental_distribute_values_from_function(
    lambda ctx: np.float32(ctx.replica_id_in_sync_group))
local_ids = [int(v) for v in strategy.experimental_local_results(ids)]
total = strategy.reduce("sum", strategy.run(lambda v: v * 2, args=(ids,)), axis=None)
print(f"replica ids {local_ids} sum of doubled ids {float(total):g}", flush=True)
extended = strategy.extended
print(f"extended {extended.worker_devices[0]} x{len(extended.worker_devices)} "
      f"multi-worker {extended._in_multi_worker_mode()}", flush=True)


def on_step(step, loss):
    print(f"step {step} loss {loss:.6f}", flush=True)
    if index == args.crash_process and step == args.crash_at:
        raise RuntimeError(f"deliberate failure at step {step}")
    if index == args.exit_process and step == args.exit_at:
        sys.exit(args.exit_code)
    if index == args.sleep_process and step == args.sleep_at:
        print("sleeping for good", flush=True)
        time.sleep(10**6)  # alive (its heartbeat goes on) but never joins the next collective
    time.sleep(args.step_sleep)


steps = args.steps if args.steps > 0 else 10**9
state, rows = mlp_job.train(strategy, params, steps, on_step=on_step)
if args.out:
    np.savez(os.path.join(args.out, f"params_{index}.npz"), **mlp_job.flat_params(state.params))
    with open(os.path.join(args.out, f"rows_{index}.json"), "w") as f:
        json.dump(rows, f)
    if strategy.should_checkpoint:
        with open(os.path.join(args.out, "chief.txt"), "w") as f:
            f.write(str(index))
print("done", flush=True)
