"""Pipeline parallelism over a `stage` mesh axis: training equals one device, bytes, errors, checkpoints."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util
from jax.sharding import PartitionSpec as P

import jdist
from jdist.layout import LayoutError, fsdp
from jdist.models import MEGATRON_RULES, StackedTransformerLM, TransformerConfig, TransformerLM, lm_loss
from jdist.models.transformer import stack_params, unstack_params

# 8 layers: 2 per stage at stage=4 (GPipe), or 2 chunks of 1 per stage (circular).
TINY = TransformerConfig(vocab_size=32, d_model=16, num_heads=2, num_layers=8, d_ff=32, max_len=8)
# Adam with eps=1e-4, as in test_layout.py: the attention key bias's true gradient is exactly 0,
# and a smaller eps turns its float32 rounding noise into full learning-rate steps.
TX = optax.adam(1e-2, eps=1e-4)
STEPS, BATCH, MICRO = 5, 16, 4
SGD = optax.sgd(0.1)  # checkpoints: no optimizer slots, fewer arrays to write and read
ATOL = 2e-5  # float32: the pipeline sums the same terms in another order
MEGATRON = jdist.Layout(MEGATRON_RULES, default=P())


def flat(tree) -> dict:
    return traverse_util.flatten_dict(tree, sep="/")


def random_params(model, rng):
    """Random values of the model's parameter shapes, made without compiling its initialiser."""
    shapes = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((2, TINY.max_len), jnp.int32))
    return jax.tree.map(lambda s: (rng.normal(size=s.shape) * 0.3).astype(np.float32), shapes)


@pytest.fixture(scope="module")
def lm():
    model = StackedTransformerLM(TINY)
    rng = np.random.default_rng(0)
    params = random_params(model, rng)
    tokens = rng.integers(0, TINY.vocab_size, (STEPS * BATCH, TINY.max_len + 1)).astype(np.int32)
    x, y = tokens[:, :-1], tokens[:, 1:]
    batches = [{"inputs": x[i * BATCH:(i + 1) * BATCH], "targets": y[i * BATCH:(i + 1) * BATCH]}
               for i in range(STEPS)]

    def loss_fn(p, batch):
        return lm_loss(model.apply(p, batch["inputs"]), batch["targets"])

    @jax.jit
    def reference_step(p, opt_state, batch):  # plain single-device JAX, no jdist
        loss, grads = jax.value_and_grad(lambda p: loss_fn(p, batch).mean())(p)
        updates, opt_state = TX.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss

    p, opt_state, losses = params, TX.init(params), []
    for batch in batches:
        p, opt_state, loss = reference_step(p, opt_state, batch)
        losses.append(float(loss))
    return {"model": model, "params": params, "batches": batches, "x": x, "y": y, "loss_fn": loss_fn,
            "ref_params": jax.device_get(p), "ref_losses": losses}


def test_stacked_model_computes_transformer_lm(lm):
    two = TransformerConfig(**{**TINY.__dict__, "num_layers": 2})
    stacked = StackedTransformerLM(two)
    params = random_params(stacked, np.random.default_rng(1))
    tokens = lm["batches"][0]["inputs"]
    want = jax.jit(TransformerLM(two).apply)(unstack_params(params), tokens)
    np.testing.assert_allclose(jax.jit(stacked.apply)(params, tokens), want, atol=1e-5)
    assert jax.tree.structure(stack_params(unstack_params(params), 2)) == jax.tree.structure(params)


MESHES = {
    "stage4": ({"data": 1, "stage": 4}, None, 4),
    "data2_stage4": ({"data": 2, "stage": 4}, None, 8),
    "data2_stage2_model2": ({"data": 2, "stage": 2, "model": 2}, MEGATRON, 8),
}


def pipeline_strategy(mesh: str, schedule: str) -> jdist.Strategy:
    shape, layout, devices = MESHES[mesh]
    return jdist.Strategy(mesh_shape=shape, layout=layout, devices=jax.devices()[:devices],
                          pipeline=jdist.Pipeline(num_microbatches=MICRO, schedule=schedule))


def assert_matches_reference(lm, params, losses):
    np.testing.assert_allclose(losses, lm["ref_losses"], atol=ATOL)
    got, want = flat(jax.device_get(params)), flat(lm["ref_params"])
    for path in want:
        np.testing.assert_allclose(got[path], want[path], atol=ATOL, err_msg=path)


def assert_blocks_split(params, stages):
    """Each device holds 1/S of every stacked leaf's layers: its stage's."""
    for path, leaf in flat(params).items():
        if path.startswith("params/blocks/"):
            assert leaf.sharding.spec[0] == "stage", path
            assert {s.data.shape[0] for s in leaf.addressable_shards} == {TINY.num_layers // stages}, path


# Both schedules on stage=4 and on data x stage x model, GPipe on data x stage; data x stage x FSDP with the
# circular schedule through Trainer.fit below.
@pytest.mark.parametrize("mesh,schedule", [
    ("stage4", "gpipe"), ("stage4", "circular"), ("data2_stage4", "gpipe"),
    ("data2_stage2_model2", "gpipe"), ("data2_stage2_model2", "circular"),
])
def test_make_train_step_trains_like_one_device(lm, mesh, schedule):
    strategy = pipeline_strategy(mesh, schedule)
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=lm["model"].apply, params=lm["params"], tx=TX)
        step = jdist.make_train_step(lm["loss_fn"])
    losses = []
    for batch in lm["batches"]:
        state, sums = step(state, batch)
        losses.append(float(sums["loss"] / sums["count"]))
    assert_matches_reference(lm, state.params, losses)
    assert_blocks_split(state.params, strategy.mesh.shape["stage"])


def test_trainer_fit_trains_like_one_device(lm):
    # data x stage, with FSDP over data inside each stage (every array of any size split over data).
    strategy = jdist.Strategy(mesh_shape={"data": 2, "stage": 4}, layout=jdist.Layout(default=fsdp("data", 0)),
                              pipeline=jdist.Pipeline(num_microbatches=MICRO, schedule="circular"))
    trainer = jdist.Trainer(lm["model"], TX, loss=lambda y, logits: lm_loss(logits, y), params=lm["params"],
                            strategy=strategy, max_in_flight=1)  # few queued programs with collectives on few cores
    history = trainer.fit(lm["x"], lm["y"], batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    params = {"params": trainer.state.params}
    assert_matches_reference(lm, params, lm["ref_losses"])
    np.testing.assert_allclose(history.history["loss"], [np.mean(lm["ref_losses"])], atol=ATOL)
    assert_blocks_split(params, 4)
    assert trainer.state.params["blocks"]["mlp"]["wi"]["kernel"].sharding.spec == P("stage", None, "data")


def test_parameter_bytes_per_device_are_one_stage_share(lm):
    strategy = pipeline_strategy("stage4", "gpipe")
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=lm["model"].apply, params=lm["params"], tx=TX)
    blocks = {k: v for k, v in flat(state.params).items() if k.startswith("params/blocks/")}
    whole = sum(v.nbytes for v in blocks.values())
    for device in strategy.worker_devices:  # the real shards
        held = sum(s.data.nbytes for v in blocks.values() for s in v.addressable_shards if s.device == device)
        assert held * 4 == whole
    text = strategy.summary(state)
    assert "stage 0: layers 0-1; block parameters" in text and "stage 3: layers 6-7" in text
    per_device = sum(s.data.nbytes for v in jax.tree.leaves((state.params, state.opt_state))
                     for s in v.addressable_shards if s.device == strategy.worker_devices[0])
    assert "Total per device: " in text and f"= {per_device:,} bytes" in text
    assert f"{whole // 4 / 1024:.2f} KiB per device (25.0%; the stages split them 1/4)" in text

    circular = jdist.Strategy(mesh_shape={"data": 2, "stage": 2, "model": 2}, layout=MEGATRON,
                              pipeline=jdist.Pipeline(num_microbatches=4, schedule="circular"))
    text = circular.summary(jax.eval_shape(lambda: lm["params"]))
    assert "stage 0: layers 0-1, 4-5" in text and "stage 1: layers 2-3, 6-7" in text
    assert "bubble (S-1)/(V*M+S-1) = 11.1%" in text


def test_errors_name_the_fix(lm):
    abstract = jax.eval_shape(lambda: lm["params"])
    three = jdist.Strategy(mesh_shape={"data": 2, "stage": 3}, devices=jax.devices()[:6],
                           pipeline=jdist.Pipeline(num_microbatches=4))
    with pytest.raises(ValueError, match=r"8 layers do not split over 3 pipeline stages .*multiple of 3"):
        three.parameter_shardings(abstract)
    plain = TransformerLM(TINY)
    listed = jax.eval_shape(plain.init, jax.random.key(0), jnp.zeros((2, 8), jnp.int32))
    four = pipeline_strategy("data2_stage4", "gpipe")
    with pytest.raises(LayoutError, match=r"no parameter is under that name.*StackedTransformerLM"):
        four.parameter_shardings(listed)
    with four.scope(), pytest.raises(ValueError, match=r"4 micro-batches do not divide the per-replica batch of "
                                                         r"3 examples.*multiple of replicas x num_microbatches = 8"):
        jax.eval_shape(lm["model"].apply, abstract, jnp.zeros((6, 8), jnp.int32))
    with pytest.raises(ValueError, match="needs a 'stage' mesh axis"):
        jdist.Strategy(mesh_shape={"data": 8}, pipeline=jdist.Pipeline(num_microbatches=2))
    with pytest.raises(ValueError, match="at least as many micro-batches as stages"):
        jdist.Strategy(mesh_shape={"data": 2, "stage": 4}, pipeline=jdist.Pipeline(2, schedule="circular"))
    with pytest.raises(ValueError, match="Unknown pipeline schedule"):
        jdist.Pipeline(4, schedule="1f1b")


def test_checkpoint_moves_between_stage_counts_and_mirrored(lm, tmp_path):
    stage4 = pipeline_strategy("data2_stage4", "gpipe")
    with stage4.scope():
        saved = jdist.TrainState.create(apply_fn=lm["model"].apply, params=lm["ref_params"], tx=SGD)
    with jdist.checkpoint.CheckpointManager(tmp_path / "pipe") as manager:
        manager.save(3, saved)
        manager.wait_until_finished()
        mirrored = jdist.MirroredStrategy()
        with mirrored.scope():
            target = jdist.TrainState.create(apply_fn=lm["model"].apply, params=lm["params"], tx=SGD)
            on_mirrored = manager.restore(target=target)
    for a, b in zip(jax.tree.leaves(on_mirrored), jax.tree.leaves(saved)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert all(x.sharding.is_fully_replicated for x in jax.tree.leaves(on_mirrored.params))
    with jdist.checkpoint.CheckpointManager(tmp_path / "mirrored") as manager:
        manager.save(4, on_mirrored)
        manager.wait_until_finished()
        stage2 = pipeline_strategy("data2_stage2_model2", "circular")
        with stage2.scope():
            on_stage2 = manager.restore(target=jax.eval_shape(lambda: target))
    for a, b in zip(jax.tree.leaves(on_stage2), jax.tree.leaves(saved)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    kernel = on_stage2.params["params"]["blocks"]["attn"]["query"]["kernel"]
    assert kernel.sharding.spec == P("stage", None, "model", None)
    assert kernel.addressable_shards[0].data.shape == (4, 16, 1, 8)
