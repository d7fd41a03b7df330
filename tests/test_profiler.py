"""Profiling: trace files, the trainer callback, the step breakdown and the HLO collective reader."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.diagnostics import hlo
from jdist.models import MLP, classification_loss

MODEL = MLP(features=(64,))


def _setup(strategy):
    with strategy.scope():
        params = MODEL.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))
        state = jdist.TrainState.create(apply_fn=MODEL.apply, params=params, tx=optax.adam(1e-3))
    step = jdist.make_train_step(lambda p, b: classification_loss(MODEL.apply(p, b["image"]), b["label"]), strategy)
    rng = np.random.default_rng(0)
    batch = strategy.distribute_batch({"image": rng.normal(size=(32, 8, 8, 1)).astype(np.float32),
                                       "label": rng.integers(0, 10, 32).astype(np.int32)})
    return state, step, batch


def test_profile_writes_a_trace_and_stops_after_the_requested_steps(tmp_path):
    strategy = jdist.MirroredStrategy()
    state, step, batch = _setup(strategy)
    with jdist.profile(tmp_path, steps=2, perfetto=True) as prof:
        for i in range(3):
            with prof.step() as number:
                state, sums = step(state, batch)
                jax.block_until_ready(sums)
            assert prof.active == (i < 1)  # stopped by itself after 2 steps
            if i == 0:
                assert number == 0
    names = [os.path.basename(f) for f in prof.trace_files]
    assert any(n.endswith(".xplane.pb") for n in names), names  # TensorBoard's profile plugin
    assert "perfetto_trace.json.gz" in names
    assert all(os.path.getsize(f) > 0 and f.startswith(str(tmp_path)) for f in prof.trace_files)


def test_breakdown_counts_the_gradient_reduction_under_mirrored_and_nothing_on_one_device():
    mirrored = jdist.step_breakdown(*_args(jdist.MirroredStrategy()), iterations=3, warmup=1)
    param_bytes = sum(x.size * 4 for x in jax.tree.leaves(MODEL.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))))
    kinds = {c.kind for c in mirrored.collectives}
    assert "all-reduce" in kinds or "reduce-scatter" in kinds
    reduced = sum(c.buffer_bytes * c.count for c in mirrored.collectives
                  if c.kind in ("all-reduce", "reduce-scatter"))
    assert reduced >= param_bytes  # every gradient is reduced across the 8 replicas
    assert mirrored.sent_bytes_per_device == pytest.approx(sum(
        (2 if c.kind == "all-reduce" else 1) * 7 / 8 * c.buffer_bytes * c.count for c in mirrored.collectives))
    assert mirrored.collective_time_estimate > 0 and mirrored.step_time > 0
    text = str(mirrored)
    assert "all-reduce" in text and "(estimate)" in text and "(measured)" in text

    single = jdist.step_breakdown(*_args(jdist.OneDeviceStrategy("cpu:0")), iterations=3, warmup=1)
    assert single.collectives == () and single.collective_bytes == 0 and single.sent_bytes_per_device == 0
    assert single.compute_time_estimate == single.step_time
    assert single.flops > 0 and single.memory["peak"] > 0


def _args(strategy):
    state, step, batch = _setup(strategy)
    return step, state, batch


def test_breakdown_leaves_donated_arguments_usable():
    step, state, batch = _args(jdist.MirroredStrategy())
    jdist.step_breakdown(step, state, batch, iterations=2, warmup=0, time_collectives=False)
    state, sums = step(state, batch)  # the original state was not donated away
    assert np.isfinite(float(sums["loss"]))


HLO = """HloModule test

%body (p: (s32[], f32[1024])) -> (s32[], f32[1024]) {
  %p = (s32[], f32[1024]{0}) parameter(0)
  %x = f32[1024]{0} get-tuple-element(%p), index=1
  %all-reduce.1 = f32[1024]{0} all-reduce(%x), channel_id=1, replica_groups=[2,4]<=[8], to_apply=%add
  ROOT %t = (s32[], f32[1024]{0}) tuple(%i, %all-reduce.1)
}

%cond (p: (s32[], f32[1024])) -> pred[] {
  ROOT %c = pred[] constant(true)
}

ENTRY %main (a: f32[1024], b: bf16[8,16]) -> f32[1024] {
  %a = f32[1024]{0} parameter(0)
  %w = (s32[], f32[1024]{0}) while(%t0), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}
  %ag = bf16[64,16]{1,0} all-gather(%b), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  %rs = f32[128]{0} reduce-scatter(%a), channel_id=3, replica_groups=mesh['x'=2,'y'=4] {'y'}, dimensions={0}
  %ags = (f32[16]{0}, f32[128]{0}) all-gather-start(%a), channel_id=4, replica_groups=[1,8]<=[8]
  %agd = f32[128]{0} all-gather-done(%ags)
  ROOT %cp = f32[1024]{0} collective-permute(%a), channel_id=5, source_target_pairs={{0,1},{1,0}}
}
"""


def test_hlo_reader_handles_group_formats_loops_and_async_pairs():
    found = {c.name: c for c in hlo.collectives(HLO, 8)}
    assert set(found) == {"all-reduce.1", "ag", "rs", "ags", "cp"}
    ar = found["all-reduce.1"]
    assert (ar.count, ar.group_size, ar.buffer_bytes) == (5, 4, 4096)  # inside a 5-trip loop, groups of 4
    assert ar.sent_bytes_per_device == pytest.approx(2 * 3 / 4 * 4096)
    assert (found["ag"].group_size, found["ag"].buffer_bytes) == (8, 64 * 16 * 2)
    assert (found["rs"].group_size, found["rs"].buffer_bytes) == (4, 128 * 4 * 4)  # input is 4x the output
    assert (found["ags"].kind, found["ags"].buffer_bytes) == ("all-gather", 128 * 4)  # done is not counted twice
    assert (found["cp"].group_size, found["cp"].sent_bytes_per_device) == (2, 4096)
