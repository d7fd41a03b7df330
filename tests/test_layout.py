"""Partition rules, model-parallel / mixed / FSDP strategies, jdist.split and summary()."""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util
from jax.sharding import PartitionSpec as P

import jdist
from jdist.layout import Layout, LayoutError, fsdp, path_str
from jdist.models import MEGATRON_RULES, TransformerConfig, TransformerLM, lm_loss

TINY = TransformerConfig(vocab_size=64, d_model=32, num_heads=4, num_layers=1, d_ff=64, max_len=16)
# Adam's step is m / (sqrt(v) + eps): with the default eps=1e-8 the attention key bias, whose
# true gradient is exactly 0 (softmax ignores a per-query constant), turns float32 rounding
# noise of ~1e-9 into full +-lr steps whose sign depends on the reduction order.
TX = optax.adam(1e-2, eps=1e-4)
STEPS = 5
# float32: losses and weights after 5 steps agree to 2e-5 (reduction order differs per layout).
ATOL = 2e-5


def flat(tree) -> dict:
    return traverse_util.flatten_dict(tree, sep="/")


@pytest.fixture(scope="module")
def lm():
    model = TransformerLM(TINY)
    params = model.init(jax.random.key(0), jnp.zeros((2, TINY.max_len), jnp.int32))
    rng = np.random.default_rng(0)
    batches = [
        {"inputs": rng.integers(0, TINY.vocab_size, (8, TINY.max_len)).astype(np.int32),
         "targets": rng.integers(0, TINY.vocab_size, (8, TINY.max_len)).astype(np.int32)}
        for _ in range(STEPS)
    ]

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
    return {"model": model, "params": params, "batches": batches, "loss_fn": loss_fn,
            "ref_params": p, "ref_losses": losses}


def train(strategy, lm):
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=lm["model"].apply, params=lm["params"], tx=TX)
    step = jdist.make_train_step(lm["loss_fn"], strategy)
    losses = []
    for batch in lm["batches"]:
        state, sums = step(state, strategy.distribute_batch(batch))
        losses.append(float(sums["loss"] / sums["count"]))  # blocks every step
    return state, losses


def assert_matches_reference(state, losses, lm):
    np.testing.assert_allclose(losses, lm["ref_losses"], rtol=0, atol=ATOL)
    got, want = flat(jax.device_get(state.params)), flat(lm["ref_params"])
    assert got.keys() == want.keys()
    for path in want:
        np.testing.assert_allclose(got[path], want[path], rtol=0, atol=ATOL, err_msg=path)


# ----------------------------------------------------------------- training
def test_mixed_data_model_training_matches_single_device(lm):
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=Layout(MEGATRON_RULES, default=P()))
    state, losses = train(strategy, lm)
    assert_matches_reference(state, losses, lm)
    kernel = state.params["params"]["block_0"]["mlp"]["wi"]["kernel"]  # (32, 64), P(None, "model")
    assert kernel.sharding.spec == P(None, "model")
    assert {s.data.shape for s in kernel.addressable_shards} == {(32, 16)}


def test_fsdp_training_matches_single_device(lm):
    strategy = jdist.FSDPStrategy(min_size_bytes=0)
    state, losses = train(strategy, lm)
    assert_matches_reference(state, losses, lm)
    kernel = state.params["params"]["block_0"]["mlp"]["wo"]["kernel"]  # (64, 32): dim 0 is largest
    assert kernel.sharding.spec == P("data", None)
    assert {s.data.shape for s in kernel.addressable_shards} == {(8, 32)}
    mu = state.opt_state[0].mu["params"]["block_0"]["mlp"]["wo"]["kernel"]
    assert mu.sharding.spec == P("data", None)


# ------------------------------------------------------------ shard shapes
def test_shard_shapes_and_bytes_follow_the_rules():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4},
                              layout=[(r"dense/kernel", P(None, "model")), (r"dense/bias", P("model"))])
    params = {"params": {"dense": {"kernel": jnp.zeros((512, 2048)), "bias": jnp.zeros((2048,))},
                         "norm": {"scale": jnp.ones((512,))}}}
    with pytest.warns(UserWarning, match="1 parameters match no layout rule"):
        placed = strategy.place(params)
    kernel = placed["params"]["dense"]["kernel"]
    assert len(kernel.addressable_shards) == 8
    assert {s.data.shape for s in kernel.addressable_shards} == {(512, 512)}
    assert {s.data.nbytes for s in kernel.addressable_shards} == {512 * 512 * 4}
    assert {s.data.shape for s in placed["params"]["dense"]["bias"].addressable_shards} == {(512,)}
    assert {s.data.shape for s in placed["params"]["norm"]["scale"].addressable_shards} == {(512,)}
    # The same 4 model shards on both data rows.
    by_device = {s.device: s.index[1].start for s in kernel.addressable_shards}
    grid = strategy.mesh.devices
    assert [by_device[d] for d in grid[0]] == [by_device[d] for d in grid[1]]
    assert [by_device[d] for d in grid[0]] == [0, 512, 1024, 1536]

    report = strategy.summary(placed)
    line = next(l for l in report.splitlines() if l.startswith("params/dense/kernel"))
    assert "(512, 2048)" in line and "P(None, 'model')" in line and "1.00 MiB" in line
    per_device = 512 * 512 * 4 + 512 * 4 + 512 * 4
    assert f"= {per_device:,} bytes" in report
    assert "Unmatched (replicated): 1: params/norm/scale" in report
    assert "Mesh: data=2 x model=4" in report


def test_fsdp_cuts_parameter_and_optimizer_bytes_by_the_data_axis_size():
    # Biases and norms (rank 1) stay replicated; here they are 0.3% of the parameters.
    model = TransformerLM(TransformerConfig(vocab_size=256, d_model=256, num_heads=4, num_layers=2,
                                            d_ff=1024, max_len=64))
    params = model.init(jax.random.key(0), jnp.zeros((1, 64), jnp.int32))

    def bytes_on_device_0(state):
        device = jax.devices()[0]
        return sum(s.data.nbytes for leaf in jax.tree.leaves(state) for s in leaf.addressable_shards
                   if s.device == device)

    per_device = {}
    for name, strategy in [("dp", jdist.MirroredStrategy()), ("fsdp", jdist.FSDPStrategy(min_size_bytes=0))]:
        with strategy.scope():
            state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
        per_device[name] = bytes_on_device_0((state.params, state.opt_state))
        report = strategy.summary(state)
        assert "Total per device: " in report and f"= {per_device[name]:,} bytes" in report
    ratio = per_device["dp"] / per_device["fsdp"]
    print(f"fsdp per-device ratio {ratio:.3f}")
    assert 8 * 0.96 <= ratio <= 8, ratio


# --------------------------------------------------------- optimizer state
def test_optimizer_state_follows_its_parameter():
    strategy = jdist.ModelParallelStrategy([(r"w", P(None, "model"))], model=4)
    params = {"w": jnp.ones((16, 32)), "b": jnp.ones((32,))}
    with pytest.warns(UserWarning):
        with strategy.scope():
            adam = jdist.TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-3))
    adam_state = adam.opt_state[0]
    assert adam_state.mu["w"].sharding.spec == P(None, "model")
    assert adam_state.nu["w"].sharding.spec == P(None, "model")
    assert adam_state.mu["b"].sharding.spec == P()
    assert adam_state.count.sharding.spec == P()
    # Adafactor keeps factored moments of other shapes: they are replicated, not an error.
    with strategy.scope():
        ada = jdist.TrainState.create(apply_fn=None, params=params, tx=optax.adafactor(1e-3, min_dim_size_to_factor=8))
    specs = {path_str(kp): leaf.sharding.spec for kp, leaf in jax.tree_util.tree_flatten_with_path(ada.opt_state)[0]}
    assert specs["0/v_row/w"] == P() and specs["0/v_col/w"] == P()
    # Standalone optimizer state matches through the trailing part of its path.
    placed = strategy.place(optax.sgd(0.1, momentum=0.9).init(params))
    assert placed[0].trace["w"].sharding.spec == P(None, "model")


# --------------------------------------------------------------- bad rules
def test_unknown_axis_fails_at_construction():
    with pytest.raises(LayoutError, match=r"names mesh axis 'modle'.*mesh has axes \{'data': 2, 'model': 4\}"):
        jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=[(r".*/kernel", P(None, "modle"))])


def test_non_dividing_dimension_names_parameter_shape_and_rule():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=[(r".*/kernel", P(None, "model"))])
    params = {"dense": {"kernel": jnp.zeros((8, 10))}}
    with pytest.raises(LayoutError) as err:
        strategy.place(params)
    message = str(err.value)
    for part in ["'dense/kernel'", "(8, 10)", "('.*/kernel', P(None, 'model'))", "dimension 1 of size 10",
                 "model=4"]:
        assert part in message, message


def test_two_matching_rules_is_an_error():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4},
                              layout=[(r".*/kernel", P(None, "model")), (r"dense/.*", P("model"))])
    with pytest.raises(LayoutError, match=r"'dense/kernel' with shape \(8, 8\) matches 2 rules"):
        strategy.place({"dense": {"kernel": jnp.zeros((8, 8))}})


def test_rule_matching_nothing_is_an_error():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4},
                              layout=[(r".*/kernel", P(None, "model")), (r".*/qkv/kernel", P("model"))])
    with pytest.raises(LayoutError, match=r"1 layout rule\(s\) match no parameter: \('\.\*/qkv/kernel'"):
        strategy.place({"dense": {"kernel": jnp.zeros((8, 8))}})


def test_spec_longer_than_rank_and_bad_values():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=[(r"bias", P(None, "model"))])
    with pytest.raises(LayoutError, match=r"'dense/bias' with shape \(8,\).*2 entries but the array has rank 1"):
        strategy.place({"dense": {"bias": jnp.zeros((8,))}})
    with pytest.raises(LayoutError, match="bare string 'model'"):
        Layout([(r"bias", "model")])
    with pytest.raises(LayoutError, match="not a valid regular expression"):
        Layout([(r"(", P())])


def test_tree_no_rule_matches_warns_and_replicates():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4}, layout=[(r".*/kernel", P(None, "model"))])
    with pytest.warns(UserWarning, match="No layout rule matches any of the 1 arrays"):
        key = strategy.place(jnp.zeros((4,)))
    assert key.sharding.spec == P()


def test_layout_accepts_a_mapping_and_tuples_and_nnx_paths():
    layout = Layout({r"kernel": (None, "model"), r"bias": None})
    mesh = jdist.Strategy(mesh_shape={"data": 2, "model": 4}).mesh
    # flax nnx boxes add a trailing `.value`, which paths drop.
    from flax import nnx

    linear = nnx.Linear(8, 16, rngs=nnx.Rngs(0))
    params = nnx.state(linear, nnx.Param)
    specs = {path_str(kp): s for kp, s in jax.tree_util.tree_flatten_with_path(layout.specs(params, mesh))[0]}
    assert specs == {"bias": P(), "kernel": P(None, "model")}


# ------------------------------------------------------------------- split
def test_split_constrains_sharding_in_a_jitted_step():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4})
    x = strategy.distribute_batch(np.arange(8 * 16, dtype=np.float32).reshape(8, 16))

    def f(x):
        return jnp.sin(jdist.split(x * 2, [1, 4], strategy=strategy))

    compiled = jax.jit(f).lower(x).compile()
    # dim 0 was left to the compiler and keeps the batch split; dim 1 is split 4 ways.
    assert compiled.output_shardings.spec == P("data", "model")
    out = jax.jit(f)(x)
    assert {s.data.shape for s in out.addressable_shards} == {(4, 4)}
    np.testing.assert_allclose(out, np.sin(np.asarray(x) * 2), rtol=1e-6)
    # Without split the compiler keeps the input's layout: the constraint made the difference.
    plain = jax.jit(lambda x: jnp.sin(x * 2)).lower(x).compile()
    assert plain.output_shardings.spec == P("data")
    # A PartitionSpec names axes directly; replicate gathers.
    spec_out = jax.jit(lambda x: jdist.split(x, P(None, ("data", "model")), strategy=strategy))(x)
    assert spec_out.sharding.spec == P(None, ("data", "model"))
    assert jax.jit(lambda x: jdist.replicate(x, strategy=strategy))(x).sharding.spec == P()


def test_split_inside_run_uses_the_replica_logical_devices():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "model": 4})
    x = strategy.distribute_batch(np.arange(8 * 16, dtype=np.float32).reshape(8, 16))
    split = strategy.run(lambda x: strategy.experimental_split_to_logical_devices(x * 3, [1, 4]), args=(x,))
    # Per replica (4, 16) split 4 ways on dim 1 over `model`; replicas stacked over `data`.
    assert split.stacked.sharding.spec == P("data", None, "model")
    assert {s.data.shape for s in split.stacked.addressable_shards} == {(1, 4, 4)}
    np.testing.assert_allclose(np.concatenate(split.values), np.asarray(x) * 3)
    plain = strategy.run(lambda x: x * 3, args=(x,))
    assert {s.data.shape for s in plain.stacked.addressable_shards} == {(1, 4, 16)}

    def replicated_sum(x):
        y = strategy.experimental_split_to_logical_devices(x, [1, 4])
        return jnp.sum(strategy.experimental_replicate_to_logical_devices(y), axis=1)

    sums = strategy.run(replicated_sum, args=(x,))
    np.testing.assert_allclose(np.concatenate(sums.values), np.asarray(x).sum(axis=1))


def test_split_eager_places_and_tf_errors():
    strategy = jdist.Strategy(mesh_shape={"data": 2, "x": 2, "y": 2})
    eager = jdist.split(np.zeros((4, 6, 8), np.float32), [1, 2, 2], strategy=strategy)
    assert eager.sharding.spec == P(None, "x", "y")
    assert jdist.split(np.zeros((4, 8)), [1, 4], strategy=strategy).sharding.spec == P(None, ("x", "y"))
    with pytest.raises(ValueError, match="Length of `partition_dimensions` must equal the rank"):
        jdist.split(np.zeros((4, 8)), [4], strategy=strategy)
    with pytest.raises(ValueError, match=r"product of `partition_dimensions` \[1, 2\] is 2, but each replica has 4"):
        jdist.split(np.zeros((4, 8)), [1, 2], strategy=strategy)
    with pytest.raises(ValueError, match=r"partition_dimensions\[1\]` must be divisible by 4"):
        jdist.split(np.zeros((4, 6)), [1, 4], strategy=strategy)
    assert strategy.experimental_assign_to_logical_device(np.ones(4), 3).sharding.spec == P()
    with pytest.raises(ValueError, match="logical_device_id=4 is out of range: each replica has 4"):
        strategy.experimental_assign_to_logical_device(np.zeros(4), 4)


# --------------------------------------------------------------------- run
def test_run_with_model_parallel_params_matches_single_device(lm):
    strategy = jdist.ModelParallelStrategy(Layout(MEGATRON_RULES, default=P()), model=4)
    params = strategy.place(lm["params"])
    batch = lm["batches"][0]

    def replica_loss(params, batch):
        per_example = lm["loss_fn"](params, batch)
        return jdist.get_replica_context().all_reduce("sum", jnp.sum(per_example))

    total = strategy.run(replica_loss, args=(params, strategy.distribute_batch(batch)))
    expected = float(jnp.sum(lm["loss_fn"](lm["params"], batch)))
    np.testing.assert_allclose(float(total), expected, rtol=1e-6)
    assert params["params"]["lm_head"]["kernel"].sharding.spec == P(None, "model")


def test_run_broadcasts_fsdp_params_instead_of_splitting_them():
    strategy = jdist.FSDPStrategy(min_size_bytes=0)
    w = strategy.place({"w": jnp.arange(64.0).reshape(16, 4)})["w"]
    assert w.sharding.spec == P("data", None)
    x = strategy.distribute_batch(np.ones((8, 16), np.float32))
    out = strategy.run(lambda w, x: (x @ w)[:, 0], args=(w, x))
    np.testing.assert_allclose(np.concatenate([np.asarray(v) for v in out.values]),
                               np.ones((8, 16)) @ np.arange(64.0).reshape(16, 4)[:, 0])


# ------------------------------------------------------------- summary etc.
def test_summary_of_abstract_state_and_unmatched_warning_once():
    model = TransformerLM(TINY)
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 16), jnp.int32))
    strategy = jdist.ModelParallelStrategy(MEGATRON_RULES, model=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt_state = jax.eval_shape(TX.init, abstract)
        report = strategy.summary(abstract, opt_state)
        strategy.summary(abstract, opt_state)
    assert len([w for w in caught if "match no layout rule" in str(w.message)]) == 1
    assert "8 parameters match no layout rule" in str(caught[0].message)
    rows = [l for l in report.splitlines() if l.startswith("params/")]
    assert len(rows) == len(jax.tree.leaves(abstract))
    wi = next(l for l in rows if l.startswith("params/block_0/mlp/wi/kernel"))
    # (32, 64) float32 split 4 ways: 2 KiB per device; Adam keeps two such moments: 4 KiB.
    assert re.search(r"\(32, 64\)\s+float32\s+P\(None, 'model'\)\s+2\.00 KiB\s+4\.00 KiB", wi), wi
    assert "Unmatched (replicated): 8:" in report
    assert "Mesh: data=2 x model=4" in report


def test_fsdp_tactic_choice():
    mesh = jdist.Strategy(mesh_shape={"data": 8}).mesh
    tactic = fsdp("data", min_size_bytes=1024)
    assert tactic((64, 512), jnp.float32, mesh) == P(None, "data")
    assert tactic((512, 64), jnp.float32, mesh) == P("data", None)
    assert tactic((12, 20), jnp.float32, mesh) == P()        # no dimension divisible by 8
    assert tactic((8, 8), jnp.float32, mesh) == P()          # 256 bytes: below the threshold
    assert tactic((4096,), jnp.float32, mesh) == P()         # rank 1 stays replicated


def test_strategy_without_layout_still_replicates():
    strategy = jdist.MirroredStrategy()
    placed = strategy.place({"w": jnp.ones((8, 8))})
    assert placed["w"].sharding.spec == P()
    assert "Layout: 0 rule(s)" in strategy.summary(placed)


def test_split_in_a_train_step_uses_the_step_strategy(lm):
    """jdist.split inside the loss of make_train_step finds the step's strategy, no scope needed."""
    strategy = jdist.ModelParallelStrategy(Layout(MEGATRON_RULES, default=P()), model=4)
    model = lm["model"]

    def loss_fn(p, batch):
        logits = jdist.split(model.apply(p, batch["inputs"]), [1, 1, 4])  # vocab split over model
        return lm_loss(logits, batch["targets"])

    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=model.apply, params=lm["params"], tx=TX)
    step = jdist.make_train_step(loss_fn, strategy)
    _, sums = step(state, strategy.distribute_batch(lm["batches"][0]))
    np.testing.assert_allclose(float(sums["loss"] / sums["count"]), lm["ref_losses"][0], atol=ATOL)
