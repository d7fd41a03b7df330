"""Packed all-reduces (`jdist.strategy.packing`) and the proof that lets a step differentiate per replica
(`jdist.training.row_local`). Across processes both are exercised by tests/test_multiworker.py
(`test_cpu_workers_update_whole_leaves_after_one_all_reduce`); here on one process's 8 CPU devices."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import jdist
from jdist.models import CNN, MLP, TransformerConfig, TransformerLM, classification_loss
from jdist.strategy import packing, replica_context
from jdist.training.row_local import is_row_local


def test_packs_group_by_dtype_in_order_and_split_by_bytes():
    leaves = [np.zeros(4, np.float32), np.zeros(2, np.int32), np.zeros(3, np.float32), np.zeros((), np.float32)]
    assert packing.packs(leaves) == [[0, 2, 3], [1]]
    # 16 + 12 bytes exceed 20: the third float32 leaf starts a new pack, the scalar joins it.
    assert packing.packs(leaves, bytes_per_pack=20) == [[0], [2, 3], [1]]


def psum_operands(jaxpr, out):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name.startswith("psum"):
            out.append([tuple(v.aval.shape) for v in eqn.invars])
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            psum_operands(sub, out)
    return out


def test_packed_psum_sums_each_dtype_in_one_buffer():
    mesh = jdist.MirroredStrategy().mesh
    tree = {"w": jnp.arange(8 * 6, dtype=jnp.float32).reshape(8, 2, 3), "b": jnp.arange(8, dtype=jnp.float32),
            "n": jnp.arange(8 * 2, dtype=jnp.int32).reshape(8, 2)}

    def run(fn):
        return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("data"), out_specs=P()))

    packed, plain = run(lambda t: packing.packed_psum(t, "data")), run(lambda t: jax.lax.psum(t, "data"))
    assert psum_operands(jax.make_jaxpr(packed)(tree).jaxpr, []) == [[(7,)], [(1, 2)]]  # f32 1+6 packed, i32 alone
    jax.tree.map(np.testing.assert_array_equal, packed(tree), plain(tree))


def test_replica_all_reduce_packs_across_cpu_processes_only(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy = jdist.MultiWorkerMirroredStrategy(communication_options=jdist.CommunicationOptions(bytes_per_pack=64))
    calls = []
    real = packing.packed_psum
    monkeypatch.setattr(replica_context, "packed_psum", lambda *a: calls.append(a[2]) or real(*a))
    x = strategy.distribute_batch(jnp.arange(8 * 5, dtype=jnp.float32).reshape(8, 5))

    def fn(v):
        return jdist.get_replica_context().all_reduce("mean", {"a": v * 2.0, "s": jnp.sum(v)})

    one_process = strategy.experimental_local_results(strategy.run(fn, args=(x,)))
    assert calls == []
    monkeypatch.setattr(replica_context, "spans_cpu_processes", lambda mesh, axis: True)
    strategy._run_cache.clear()
    packed = strategy.experimental_local_results(strategy.run(fn, args=(x,)))
    assert calls and set(calls) == {64}  # traced more than once; packs of the strategy's bytes_per_pack
    for a, b in zip(one_process, packed):
        jax.tree.map(np.testing.assert_allclose, a, b)


B = 8
X, Y = jnp.ones((B, 5)), jnp.zeros((B,), jnp.int32)
_MLP = MLP(features=(8,), num_classes=3)
_MLP_PARAMS = _MLP.init(jax.random.key(0), X[:1])


def mlp_case(transform):
    def fn(p, b):
        return transform(lambda x: _MLP.apply(p, x), b["x"], b["y"])

    return fn, _MLP_PARAMS, {"x": X, "y": Y}


def cnn_case():
    model = CNN()
    x = jnp.ones((B, 28, 28, 1))
    return (lambda p, b: classification_loss(model.apply(p, b["x"]), b["y"]), model.init(jax.random.key(0), x[:1]),
            {"x": x, "y": Y})


def transformer_case():
    model = TransformerLM(TransformerConfig(max_len=16))
    tokens = jnp.zeros((B, 16), jnp.int32)
    return (lambda p, b: model.apply(p, b["t"]).sum(axis=(1, 2)), model.init(jax.random.key(0), tokens[:1]),
            {"t": tokens})


ROW_LOCAL = {
    "cross-entropy": lambda: mlp_case(lambda f, x, y: classification_loss(f(x), y)),
    "squared error": lambda: mlp_case(lambda f, x, y: jnp.mean((f(x) - 1.0) ** 2, axis=-1)),
    "cnn (convolution, pooling)": cnn_case,
    "transformer (embedding, attention within a sequence)": transformer_case,
}
ROWS_MIX = {
    "batch mean (batch normalization)": lambda f, x, y: classification_loss(f(x - x.mean(axis=0)), y),
    "divided by the batch size": lambda f, x, y: classification_loss(f(x), y) / x.shape[0],
    "weighted by position": lambda f, x, y: classification_loss(f(x), y) * jnp.arange(x.shape[0]),
    "in-batch negatives": lambda f, x, y: jax.nn.logsumexp(f(x) @ f(x).T, axis=1),
    "dropout drawn for the batch": lambda f, x, y: classification_loss(
        f(x) * jax.random.bernoulli(jax.random.key(0), 0.5, (x.shape[0], 3)), y),
    "rows reversed": lambda f, x, y: classification_loss(f(x[::-1]), y),
    "row 0 subtracted": lambda f, x, y: classification_loss(f(x - x[0]), y),
    "a total, not per example": lambda f, x, y: jnp.broadcast_to(classification_loss(f(x), y).sum(), (x.shape[0],)),
}


@pytest.mark.parametrize("name", ROW_LOCAL)
def test_row_local_forwards_are_proven(name):
    fn, params, batch = ROW_LOCAL[name]()
    assert is_row_local(fn, [params, batch], [1], B // 2)


@pytest.mark.parametrize("name", ROWS_MIX)
def test_forwards_whose_rows_mix_are_not(name):
    fn, params, batch = mlp_case(ROWS_MIX[name])
    assert not is_row_local(fn, [params, batch], [1], B // 2)


def test_per_replica_gradients_equal_the_global_view(monkeypatch):
    """The step's per-replica path (taken across CPU processes; here forced on one process whose update is not
    split) trains as the global view: make_train_step, and Trainer.fit over 100 examples in batches of 32 (the
    last one short, padded and masked), metrics included. Its compiled step all-reduces one packed buffer."""
    from jdist.diagnostics.hlo import collectives
    from jdist.training import replica_grads

    monkeypatch.setattr(jdist.layout, "WEIGHT_UPDATE_MIN_BYTES", 1 << 62)  # updates whole, as across processes
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((100, 5)).astype(np.float32), rng.integers(0, 3, 100).astype(np.int32)

    def loss_fn(params, batch):
        return classification_loss(_MLP.apply(params, batch["x"]), batch["y"])

    taken = []

    def train():
        strategy = jdist.MirroredStrategy()
        with strategy.scope():
            state = jdist.TrainState.create(apply_fn=_MLP.apply, params=_MLP_PARAMS, tx=optax.adam(0.01))
        step = jdist.make_train_step(loss_fn, strategy)
        losses = []
        for i in range(3):
            batch = strategy.distribute_batch({"x": x[i * 32:(i + 1) * 32], "y": y[i * 32:(i + 1) * 32]})
            hlo = step.lower(state, batch).compile().as_text()
            state, sums = step(state, batch)
            losses.append(float(sums["loss"]))
        taken.append("trainer")
        trainer = jdist.Trainer(_MLP, optax.adam(0.01), loss=jdist.losses.SparseCategoricalCrossentropy(
            from_logits=True), metrics=["accuracy"], strategy=jdist.MirroredStrategy(), seed=0)
        history = trainer.fit(x, y, batch_size=32, epochs=2, verbose=0)
        return state.params, losses, hlo, trainer.params, history.history

    global_view = train()
    monkeypatch.setattr(replica_grads, "spans_cpu_processes", lambda mesh, axis: True)
    taken.clear()
    real = replica_grads.per_replica_grad
    monkeypatch.setattr(replica_grads, "per_replica_grad", lambda *a, **k: taken.append("step") or real(*a, **k))
    per_replica = train()
    assert taken[0] == "step" and taken[-1] == "step" and "trainer" in taken  # make_train_step's and the Trainer's
    reduced = [c.shapes for c in collectives(per_replica[2], 8) if c.kind == "all-reduce"]
    assert [("f32", (sum(v.size for v in jax.tree.leaves(_MLP_PARAMS)),))] in [list(s[:1]) for s in reduced]
    assert not any(len(s) > 1 and s[0][1] == (5, 8) for s in reduced)  # no per-leaf gradient all-reduce
    for got, want in zip(jax.tree.leaves(per_replica[0]), jax.tree.leaves(global_view[0])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per_replica[1], global_view[1], rtol=1e-6)
    for got, want in zip(jax.tree.leaves(per_replica[3]), jax.tree.leaves(global_view[3])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for key in ("loss", "accuracy"):
        np.testing.assert_allclose(per_replica[4][key], global_view[4][key], rtol=1e-6)


def test_low_precision_steps_keep_the_global_view(monkeypatch):
    """Under a float16 policy where the sum is rounded decides whether a loss-scaled gradient overflows: the
    per-replica path is not taken, and the step is the global view's."""
    from jdist.training import replica_grads

    monkeypatch.setattr(jdist.layout, "WEIGHT_UPDATE_MIN_BYTES", 1 << 62)
    monkeypatch.setattr(replica_grads, "spans_cpu_processes", lambda mesh, axis: True)
    taken = []
    real = replica_grads.per_replica_grad
    monkeypatch.setattr(replica_grads, "per_replica_grad", lambda *a, **k: taken.append(1) or real(*a, **k))
    strategy = jdist.MirroredStrategy()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=_MLP.apply, params=_MLP_PARAMS,
                                        tx=jdist.mixed_precision.LossScaleOptimizer(optax.adam(0.01)))
    step = jdist.make_train_step(lambda p, b: classification_loss(_MLP.apply(p, b["x"]), b["y"]), strategy,
                                 policy="mixed_float16")
    step(state, strategy.distribute_batch({"x": np.ones((16, 5), np.float32), "y": np.zeros(16, np.int32)}))
    assert taken == []
