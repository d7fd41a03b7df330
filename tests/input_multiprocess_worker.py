"""One worker process of tests/test_input_multiprocess.py.

Usage: python input_multiprocess_worker.py PROCESS_ID NUM_PROCESSES PORT DEVICES_PER_PROCESS OUT_DIR
Runs every scenario, records what this process's replicas received, and writes
OUT_DIR/result_<PROCESS_ID>.json for the parent to check.
"""
import json
import logging
import os
import sys
import traceback

pid, nproc, port, ndev, out_dir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={ndev}"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", ndev)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", nproc, pid, initialization_timeout=60)

import grain  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

import jdist  # noqa: E402

strategy = jdist.MultiWorkerMirroredStrategy()  # joins the runtime started above
log_lines = []


class _Capture(logging.Handler):
    def emit(self, record):
        log_lines.append(record.getMessage())


logging.getLogger("jdist.input.dataset").addHandler(_Capture())
logging.getLogger("jdist.input.dataset").setLevel(logging.INFO)


def local(batch):
    return [np.asarray(v).tolist() for v in strategy.experimental_local_results(batch)]


def global_count(batch):
    """Real examples in the whole global batch: a cross-process reduction, so both workers must be in step."""
    return int(jax.jit(lambda m: jnp.sum(m.astype(jnp.int32)))(batch.mask))


def epoch(dist_ds):
    steps = []
    for batch in dist_ds:
        steps.append({"local": local(batch), "count": global_count(batch)})
    return steps


def write_files():
    """Four .npy files of example ids, of uneven sizes (16, 4, 12, 8 examples)."""
    sizes, paths, start = [16, 4, 12, 8], [], 0
    for i, size in enumerate(sizes):
        path = os.path.join(out_dir, f"part-{i}.npy")
        if pid == 0:
            np.save(path, np.arange(start, start + size))
        paths.append(path)
        start += size
    return paths


def from_files(paths):
    ids = np.concatenate([np.load(p) for p in paths])
    return jdist.ArrayDataset(ids, 8)


def scenario_data():
    # TF input_lib_test testUnevenDatasetBatchesMultiWorker*: range(15).batch(4) (AUTO falls back to DATA).
    out = {"uneven": epoch(strategy.experimental_distribute_dataset(grain.MapDataset.range(15).batch(4))),
           "uneven_drop": epoch(strategy.experimental_distribute_dataset(
               grain.MapDataset.range(15).batch(4, drop_remainder=True))),
           "big": epoch(strategy.experimental_distribute_dataset(jdist.ArrayDataset(np.arange(45), 16))),
           # tf.data (jdist.data): the same split; a seeded windowed shuffle is the same on every worker.
           "tfdata": epoch(strategy.experimental_distribute_dataset(jdist.data.Dataset.range(15).batch(4))),
           "tfdata_shuffled": epoch(strategy.experimental_distribute_dataset(
               jdist.data.Dataset.range(45).shuffle(10, seed=3).batch(16)))}
    return out


def scenario_file(paths):
    multihost_utils.sync_global_devices("files written")
    source = jdist.FileSource(paths, from_files)
    out = {"auto": epoch(strategy.experimental_distribute_dataset(source))}
    opts = jdist.InputOptions(auto_shard_policy=jdist.AutoShardPolicy.DATA)
    out["data"] = epoch(strategy.experimental_distribute_dataset(source, opts))
    # Resume in the middle of the FILE epoch: the rest is the same.
    dist_ds = strategy.experimental_distribute_dataset(source)
    it = iter(dist_ds)
    first = [local(next(it)) for _ in range(3)]
    state = json.loads(json.dumps(it.get_state()))
    rest = [local(b) for b in it]
    resumed = iter(strategy.experimental_distribute_dataset(source))
    resumed.set_state(state)
    out["resume"] = {"first": first, "rest": rest, "resumed": [local(b) for b in resumed]}
    try:
        strategy.experimental_distribute_dataset(
            jdist.FileSource(paths[:1], from_files), jdist.InputOptions(auto_shard_policy=jdist.AutoShardPolicy.FILE))
        out["too_few_files"] = "no error"
    except ValueError as err:
        out["too_few_files"] = str(err)
    return out


def scenario_function():
    def dataset_fn(ctx):
        # TF's input_fn variant: shard by pipeline, per-replica batches of 1.
        return grain.MapDataset.range(15)[ctx.input_pipeline_id::ctx.num_input_pipelines].batch(1)

    contexts = []

    def recording_fn(ctx):
        contexts.append([ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync])
        return dataset_fn(ctx)

    def tfdata_fn(ctx):  # TF's distributed-input tutorial: shard, then batch per replica
        return jdist.data.Dataset.range(15).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(
            ctx.get_per_replica_batch_size(ctx.num_replicas_in_sync))

    return {"steps": epoch(strategy.distribute_datasets_from_function(recording_fn)), "contexts": contexts,
            "tfdata": epoch(strategy.distribute_datasets_from_function(tfdata_fn))}


def scenario_training():
    """make_train_step over 37 examples (global batch 8, DATA sharding) against one device."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(37, 5)).astype(np.float32)
    y = (x @ rng.normal(size=(5, 3))).argmax(-1).astype(np.int32)
    params = {"w": np.zeros((5, 3), np.float32), "b": np.zeros(3, np.float32)}

    def per_example(p, xb, yb):
        return optax.softmax_cross_entropy_with_integer_labels(xb @ p["w"] + p["b"], yb)

    device = jax.local_devices()[0]
    ref_step = jax.jit(lambda p, xb, yb: jax.tree.map(
        lambda w, g: w - 0.5 * g, p, jax.grad(lambda q: jnp.mean(per_example(q, xb, yb)))(p)))
    ref = jax.device_put(params, device)
    for i in range(0, 37, 8):
        ref = ref_step(ref, jax.device_put(x[i:i + 8], device), jax.device_put(y[i:i + 8], device))

    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(0.5))
    step = jdist.make_train_step(lambda p, b: per_example(p, b[0], b[1]), strategy)
    counts = []
    for batch in strategy.experimental_distribute_dataset(jdist.ArrayDataset((x, y), 8)):
        state, sums = step(state, batch)
        counts.append(int(sums["count"]))
    diff = max(float(np.max(np.abs(np.asarray(state.params[k]) - np.asarray(ref[k])))) for k in ("w", "b"))
    scale = max(float(np.max(np.abs(np.asarray(ref[k])))) for k in ("w", "b"))
    return {"counts": counts, "max_abs_diff": diff, "scale": scale}


result = {"process": pid, "replicas": strategy.num_replicas_in_sync}
try:
    paths = write_files()
    result["data"] = scenario_data()
    result["file"] = scenario_file(paths)
    result["function"] = scenario_function()
    result["training"] = scenario_training()
    result["files"] = {"mine": [os.path.basename(p) for p in paths[pid::nproc]]}
except Exception:
    result["error"] = traceback.format_exc()
result["log"] = log_lines
with open(os.path.join(out_dir, f"result_{pid}.json"), "w") as f:
    json.dump(result, f)
jax.distributed.shutdown()
