"""ZeRO-1 (`MirroredStrategy(shard_optimizer_state=True)`): the optimizer state stays stored split
over the replicas between steps, the compiled step all-gathers only the new parameters, training
equals one device (`make_train_step` and `Trainer.fit`), and checkpoints move to and from any strategy.

The model's leaves are tiny, so the size threshold is lowered to 256 bytes: the biases stay below it
(replicated), the kernels split on their first dimension the 8 replicas divide.
"""
from __future__ import annotations

import collections
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import jdist
from jdist.checkpoint import CheckpointManager
from jdist.diagnostics import hlo
from jdist.diagnostics.summary import format_bytes

IN, HIDDEN, CLASSES, BATCH, LR = 12, 32, 6, 32, 0.01
# Where each Adam moment lives under ZeRO-1 on 8 replicas (12 % 8 != 0, so dense/kernel splits dim 1).
ZERO1_SPECS = {"dense/kernel": P(None, "data"), "dense/bias": P(), "head/kernel": P("data", None), "head/bias": P()}
SPLIT_SHAPES = {(IN, HIDDEN), (HIDDEN, CLASSES)}  # the kernels: the only leaves whose update is split


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    monkeypatch.setattr(jdist.layout, "WEIGHT_UPDATE_MIN_BYTES", 256)


def init_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"dense": {"kernel": rng.standard_normal((IN, HIDDEN)).astype(np.float32) / 3,
                      "bias": rng.standard_normal((HIDDEN,)).astype(np.float32) / 3},
            "head": {"kernel": rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32) / 3,
                     "bias": rng.standard_normal((CLASSES,)).astype(np.float32) / 3}}


def apply_fn(params, x):
    h = jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"])
    return h @ params["head"]["kernel"] + params["head"]["bias"]


def per_example_loss(y_true, logits):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y_true)


def step_loss(params, batch):
    return per_example_loss(batch["y"], apply_fn(params, batch["x"]))


def data(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, IN)).astype(np.float32), rng.integers(0, CLASSES, n).astype(np.int32)


def zero1() -> jdist.MirroredStrategy:
    return jdist.MirroredStrategy(shard_optimizer_state=True)


def moments(state) -> dict:
    """`{"mu/dense/kernel": array, ...}` for Adam's two moments."""
    adam = state.opt_state[0]
    return {f"{name}/{layer}/{leaf}": getattr(adam, name)[layer][leaf]
            for name in ("mu", "nu") for layer in ("dense", "head") for leaf in ("kernel", "bias")}


def assert_stored_split(state, strategy) -> None:
    """Each moment has ZeRO-1's spec, and each device holds only its 1/8 of every split one."""
    n = strategy.num_replicas_in_sync
    for path, leaf in moments(state).items():
        spec = ZERO1_SPECS[path.split("/", 1)[1]]
        assert leaf.sharding.spec == spec, (path, leaf.sharding)
        shard_bytes = {s.data.nbytes for s in leaf.addressable_shards}
        assert shard_bytes == {leaf.nbytes // n if spec != P() else leaf.nbytes}, (path, shard_bytes)
    assert all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(state.params))


def gathered_shapes(hlo_text: str) -> collections.Counter:
    """How many arrays of each shape the program all-gathers."""
    return collections.Counter(dims for c in hlo.collectives(hlo_text, 8) if c.kind == "all-gather"
                               for _, dims in c.shapes)


def gathered_elements(hlo_text: str) -> int:
    return sum(int(np.prod(shape)) * count for shape, count in gathered_shapes(hlo_text).items())


SPLIT_ELEMENTS = sum(int(np.prod(shape)) for shape in SPLIT_SHAPES)


def assert_gathers_parameters_only(hlo_text: str) -> None:
    """One all-gather (the split kernels' new values packed together, `jdist.training.gather`); none of the
    moments, which are as large."""
    gathered = gathered_shapes(hlo_text)
    assert gathered == {(8, SPLIT_ELEMENTS // 8): 1}, gathered


def train_steps(strategy, batches):
    """`(state after the batches, step)`; a ZeRO-1 state is checked as created, before the step donates it."""
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=apply_fn, params=init_params(), tx=optax.adam(LR))
    if strategy.shard_optimizer_state:
        assert_stored_split(state, strategy)
    step = jdist.make_train_step(step_loss, strategy)
    for x, y in batches:
        state, _ = step(state, strategy.distribute_batch({"x": x, "y": y}))
    return jax.block_until_ready(state), step


def assert_trees_close(a, b) -> None:
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-4, atol=1e-5)  # Adam after a few steps: summation order


# ------------------------------------------------------------------ make_train_step
def test_optimizer_state_stays_split_and_trains_as_one_device():
    batches = [data(BATCH, seed) for seed in range(3)]
    strategy = zero1()
    state, step = train_steps(strategy, batches)  # checks the created state too
    assert_stored_split(state, strategy)
    assert int(state.step) == 3
    reference, _ = train_steps(jdist.OneDeviceStrategy("cpu:0"), batches)
    assert_trees_close(state.params, reference.params)
    assert_trees_close(state.opt_state, reference.opt_state)

    # The compiled program keeps the moments split on the way out and all-gathers only parameters.
    batch = strategy.distribute_batch({"x": batches[0][0], "y": batches[0][1]})
    compiled = step.lower(state, batch).compile()
    out_state, _ = compiled.output_shardings
    assert jax.tree.map(lambda s: s.spec, moments(out_state)) == {
        path: ZERO1_SPECS[path.split("/", 1)[1]] for path in moments(out_state)}
    assert_gathers_parameters_only(compiled.as_text())

    # The check can fail: plain Mirrored splits the same updates (weight-update sharding) but stores
    # the moments whole, so its step all-gathers each kernel's two new moments as well.
    mirrored = jdist.MirroredStrategy()
    with mirrored.scope():
        plain = jdist.TrainState.create(apply_fn=apply_fn, params=init_params(), tx=optax.adam(LR))
    text = jdist.make_train_step(step_loss, mirrored).lower(plain, batch).compile().as_text()
    assert gathered_elements(text) == 3 * SPLIT_ELEMENTS, gathered_shapes(text)
    with pytest.raises(AssertionError):
        assert_gathers_parameters_only(text)


def test_summary_shows_the_stored_optimizer_bytes():
    strategy = zero1()
    with strategy.scope():
        state = jdist.TrainState.create(apply_fn=apply_fn, params=init_params(), tx=optax.adam(LR))
    n = strategy.num_replicas_in_sync

    def opt_column(report: str, path: str) -> str:
        (row,) = [line for line in report.splitlines() if line.startswith(path + " ")]
        return re.split(r"\s{2,}", row)[5]

    report, plain = strategy.summary(state), jdist.MirroredStrategy().summary(state)
    kernel = IN * HIDDEN * 4
    assert opt_column(report, "dense/kernel") == format_bytes(2 * kernel // n)  # mu + nu, 1/8 each
    assert opt_column(plain, "dense/kernel") == format_bytes(2 * kernel)
    assert opt_column(report, "dense/bias") == opt_column(plain, "dense/bias") == format_bytes(2 * HIDDEN * 4)
    # The reported total is what the devices really hold.
    stored = sum(leaf.addressable_shards[0].data.nbytes for leaf in jax.tree.leaves(state))
    total = int(re.search(r"Total per device: .* = ([\d,]+) bytes", report).group(1).replace(",", ""))
    assert total == stored - state.step.nbytes


# --------------------------------------------------------------------------- Trainer
class RecordingZeRO1(jdist.MirroredStrategy):
    """ZeRO-1 that keeps each compiled train program and the (abstract) arguments it ran with."""

    def __init__(self):
        super().__init__(shard_optimizer_state=True)
        self.programs: list = []

    def compile_step(self, *args, **kwargs):
        fn = super().compile_step(*args, **kwargs)

        def call(*inputs):
            self.programs.append((fn, jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), inputs)))
            return fn(*inputs)

        return call


def test_trainer_fit_keeps_optimizer_state_split_and_equals_one_device():
    x, y = data(100)  # 100 = 3 x 32 + 4: the last batch is padded over the replicas
    trainers = {}
    for name, strategy in (("one", jdist.OneDeviceStrategy("cpu:0")), ("zero1", RecordingZeRO1())):
        trainers[name] = jdist.Trainer(apply_fn, optax.adam(LR), loss=per_example_loss, params=init_params(),
                                       strategy=strategy)
    strategy = trainers["zero1"].strategy
    assert_stored_split(trainers["zero1"].state, strategy)
    histories = {name: t.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
                 for name, t in trainers.items()}
    assert_stored_split(trainers["zero1"].state, strategy)
    assert_trees_close(trainers["zero1"].state.params, trainers["one"].state.params)
    assert_trees_close(trainers["zero1"].state.opt_state, trainers["one"].state.opt_state)
    np.testing.assert_allclose(histories["zero1"].history["loss"], histories["one"].history["loss"], rtol=1e-5)
    fn, inputs = strategy.programs[-1]
    assert_gathers_parameters_only(fn.lower(*inputs).compile().as_text())


# ------------------------------------------------------------------------ checkpoints
def other_strategies() -> dict:
    return {
        "one_device": jdist.OneDeviceStrategy("cpu:3"),
        "mirrored": jdist.MirroredStrategy(),
        "fsdp": jdist.FSDPStrategy(min_size_bytes=0),
        "data2_model4": jdist.Strategy(mesh_shape={"data": 2, "model": 4},
                                       layout=jdist.Layout([("dense/kernel", P(None, "model"))], default=P())),
    }


def test_checkpoint_moves_between_zero1_and_every_strategy(tmp_path):
    strategy = zero1()
    state, step = train_steps(strategy, [data(BATCH, 0)])  # Adam moments that are not zeros
    saved = {"train": state, "epoch": 1}  # a train state inside a dict, as training loops save it
    CheckpointManager(tmp_path / "zero1", async_save=False).save(1, saved)
    for name, other in other_strategies().items():
        with other.scope():
            target = {"train": jdist.TrainState.create(apply_fn=apply_fn, params=init_params(1),
                                                       tx=optax.adam(LR)), "epoch": 0}
        restored = CheckpointManager(tmp_path / "zero1").restore(target=target, strategy=other)
        for got, want, placed in zip(jax.tree.leaves(restored), jax.tree.leaves(saved), jax.tree.leaves(target)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
            if isinstance(placed, jax.Array):
                assert got.sharding.is_equivalent_to(placed.sharding, got.ndim), (name, got.sharding)
        # ... and back onto ZeRO-1 from a checkpoint this strategy wrote.
        CheckpointManager(tmp_path / name, async_save=False).save(2, restored)
        back = CheckpointManager(tmp_path / name).restore(target=saved, strategy=strategy)
        assert_stored_split(back["train"], strategy)
        for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(saved)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
    # The restored state trains on: its layout is the one the compiled step expects.
    batch = strategy.distribute_batch(dict(zip("xy", data(BATCH, 5))))
    resumed, _ = step(back["train"], batch)
    original, _ = step(state, batch)
    assert_stored_split(resumed, strategy)
    for a, b in zip(jax.tree.leaves(resumed), jax.tree.leaves(original)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Optimizer state placed on its own cannot know it is one: a clear error, and the fix works.
    stray = resumed.replace(opt_state=strategy.place(resumed.opt_state))
    with pytest.raises(ValueError, match=r"strategy\.place\(state\)"):
        step(stray, batch)
    assert_stored_split(step(strategy.place(stray), batch)[0], strategy)


def test_gather_split_packs_every_split_leaf_into_one_all_gather():
    """`jdist.training.gather.gather_split`: leaves split over the data axis on any dimension come back whole,
    bitwise, in one all-gather per dtype; a leaf stored as it is split only keeps its layout."""
    from jax.sharding import NamedSharding

    from jdist.training.gather import gather_split

    strategy = jdist.MirroredStrategy()
    mesh = strategy.mesh
    rng = np.random.default_rng(0)
    tree = {"a": rng.standard_normal((16, 3)).astype(np.float32), "b": rng.standard_normal((3, 8, 2)).astype(np.float32),
            "c": rng.standard_normal((8, 4)).astype(np.float32), "n": np.arange(8 * 5, dtype=np.int32).reshape(8, 5)}
    split = {"a": P("data", None), "b": P(None, "data"), "c": P("data"), "n": P("data")}
    stored = {"a": P(), "b": P(), "c": P("data"), "n": P()}
    split_s = {k: NamedSharding(mesh, v) for k, v in split.items()}
    stored_s = {k: NamedSharding(mesh, v) for k, v in stored.items()}
    fn = jax.jit(lambda t: gather_split(t, split_s, stored_s, mesh, "data"), in_shardings=(split_s,),
                 out_shardings=stored_s)
    out = fn(jax.device_put(tree, split_s))
    for key in tree:
        np.testing.assert_array_equal(np.asarray(out[key]), tree[key])
        assert out[key].sharding.spec == stored[key]
    gathers = [c for c in hlo.collectives(fn.lower(tree).compile().as_text(), 8) if c.kind == "all-gather"]
    assert len(gathers) == 2, gathers  # float32 (a and b packed) and int32 (n)


def collective_bytes(hlo_text: str) -> dict:
    """`{kind: (instructions, result bytes)}` of a compiled program's collectives."""
    totals: dict = {}
    for c in hlo.collectives(hlo_text, 8):
        count, nbytes = totals.get(c.kind, (0, 0))
        totals[c.kind] = (count + c.count, nbytes + c.count * c.result_bytes)
    return totals


@pytest.mark.parametrize("threshold", [256, 4096])
def test_zero1_adds_no_collective_to_the_mirrored_step(monkeypatch, threshold):
    """ZeRO-1 stores split the optimizer state of the leaves whose update Mirrored already splits (the same
    `WEIGHT_UPDATE_MIN_BYTES`), so its step is Mirrored's less the moments' all-gathers: the same all-reduce,
    no all-gather Mirrored lacks. At 4096 bytes no leaf here reaches the threshold and the two compile to the
    same program; at 256 the kernels split and Mirrored gathers three times ZeRO-1's bytes
    (docs/benchmarks.md: a lower threshold for ZeRO-1 alone adds an all-gather Mirrored does not have)."""
    monkeypatch.setattr(jdist.layout, "WEIGHT_UPDATE_MIN_BYTES", threshold)
    x, y = data(BATCH)
    programs, lowered = {}, {}
    for name, strategy in (("mirrored", jdist.MirroredStrategy()), ("zero1", zero1())):
        with strategy.scope():
            state = jdist.TrainState.create(apply_fn=apply_fn, params=init_params(), tx=optax.adam(LR))
        step = jdist.make_train_step(step_loss, strategy)
        program = step.lower(state, strategy.distribute_batch({"x": x, "y": y}))
        lowered[name] = program.as_text()  # what XLA compiles (a compiled text read back from a cache differs)
        programs[name] = re.sub(r"metadata=\{[^}]*\}", "", program.compile().as_text())
    mirrored, zero = collective_bytes(programs["mirrored"]), collective_bytes(programs["zero1"])
    assert zero["all-reduce"] == mirrored["all-reduce"]
    if threshold > IN * HIDDEN * 4:  # nothing split: the very same program
        assert lowered["zero1"] == lowered["mirrored"] and "all-gather" not in zero
    else:
        assert zero["all-gather"][0] == 1 and mirrored["all-gather"][1] == 3 * zero["all-gather"][1], (mirrored, zero)
