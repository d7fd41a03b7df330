"""Checkpoints: cross-strategy restores, integrity checks, backups and preemption, in-process.

Values are compared exactly (tolerance 0): a checkpoint must give back the very
bits that were saved, whatever mesh they are restored onto.
"""
from __future__ import annotations

import logging
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import jdist
from jdist.callbacks import BackupAndRestore
from jdist.checkpoint import (
    CheckpointCorruptedError,
    CheckpointManager,
    CheckpointMismatchError,
    backup_and_restore,
    integrity,
)
from jdist.checkpoint.preemption import PreemptionCheckpointHandler, TerminationConfig

FEATURES, CLASSES = 8, 8
TX = optax.adam(0.1)


def two_device_mirrored() -> jdist.MirroredStrategy:
    """Training-loop tests run data-parallel on 2 devices: fewer threads to rendezvous per step."""
    return jdist.MirroredStrategy(["cpu:0", "cpu:1"])


# ----------------------------------------------------------------- test models
def mlp_params(hidden: int = 16, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "dense": {"kernel": rng.standard_normal((FEATURES, hidden)).astype(np.float32),
                  "bias": rng.standard_normal((hidden,)).astype(np.float32)},
        "head": {"kernel": rng.standard_normal((hidden, CLASSES)).astype(np.float32),
                 "bias": rng.standard_normal((CLASSES,)).astype(np.float32)},
    }


def mlp_apply(params, x):
    h = jax.nn.relu(x @ params["dense"]["kernel"] + params["dense"]["bias"])
    return h @ params["head"]["kernel"] + params["head"]["bias"]


def make_state(strategy: jdist.Strategy, hidden: int = 16, seed: int = 0) -> dict:
    """A full training state: parameters, Adam moments (random), RNG key, metrics, epoch.

    Built on the host and placed once, so no per-strategy eager computation runs.
    """
    rng = np.random.default_rng(seed + 1000)
    params = mlp_params(hidden, seed)
    tx = TX  # one optimizer object: it is static pytree metadata, a new one would recompile every step
    opt_state = jax.tree.map(lambda x: rng.standard_normal(np.shape(x)).astype(np.float32)
                             if np.ndim(x) else np.int32(3), tx.init(params))
    with strategy.scope():
        train = jdist.TrainState.create(apply_fn=mlp_apply, params=params, tx=tx)
        train = train.replace(step=strategy.place(np.int32(3)), opt_state=strategy.place(opt_state))
        return {
            "train": train,
            "rng": strategy.place(jax.random.key(seed + 100)),
            "metrics": strategy.place({"loss_sum": jnp.float32(3.25), "count": jnp.int32(7)}),
            "epoch": 2,
        }


def host_leaves(state) -> list:
    out = []
    for leaf in jax.tree.leaves(state):
        if jnp.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out.append(np.asarray(leaf))
    return out


def assert_same_values(a, b) -> None:
    la, lb = host_leaves(a), host_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(x, y)


class FSDPStrategy(jdist.Strategy):
    """8-way data axis; every leaf whose first axis divides by 8 is split over it (ZeRO-3 style)."""

    def __init__(self):
        super().__init__(mesh_shape={"data": 8})

    def parameter_shardings(self, tree):
        def shard(leaf):
            shape = np.shape(leaf)
            if len(shape) >= 1 and shape[0] % 8 == 0:
                return NamedSharding(self.mesh, P("data"))
            return self.replicated_sharding()

        return jax.tree.map(shard, tree)


@pytest.fixture(scope="module")
def mirrored_checkpoint(tmp_path_factory):
    """A state saved under MirroredStrategy(8), and the manager holding it."""
    directory = tmp_path_factory.mktemp("mirrored")
    state = make_state(jdist.MirroredStrategy())
    manager = CheckpointManager(directory)
    assert manager.save(10, state, metadata={"note": "mirrored"})
    manager.wait_until_finished()
    return state, manager


# ------------------------------------------------------------ save and restore
def test_roundtrip_keeps_every_leaf_kind(mirrored_checkpoint):
    state, manager = mirrored_checkpoint
    restored = manager.restore_with_info(target=state)
    assert restored.step == 10 and restored.metadata == {"note": "mirrored"}
    assert_same_values(restored.state, state)
    r = restored.state
    assert jnp.issubdtype(r["rng"].dtype, jax.dtypes.prng_key)
    assert str(jax.random.key_impl(r["rng"])) == "threefry2x32"
    assert isinstance(r["epoch"], int) and r["epoch"] == 2
    assert r["train"].apply_fn is mlp_apply and int(r["train"].step) == 3
    # The restored RNG key draws what the saved one draws.
    np.testing.assert_array_equal(jax.random.normal(r["rng"], (3,)), jax.random.normal(state["rng"], (3,)))


def test_host_values_keep_their_types(tmp_path):
    state = {"array": np.arange(5.0), "scalar": np.float32(2.5), "float": 1.5, "flag": True, "count": 3,
             "key": jax.random.key(3, impl="rbg")}
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(1, state)
    target = {"array": np.zeros(5), "scalar": np.float32(0), "float": 0.0, "flag": False, "count": 0,
              "key": jax.random.key(0, impl="rbg")}
    restored = manager.restore(target=target)
    assert {k: type(v) for k, v in restored.items() if k != "key"} == \
        {"array": np.ndarray, "scalar": np.float32, "float": float, "flag": bool, "count": int}
    assert_same_values(restored, state)
    assert str(jax.random.key_impl(restored["key"])) == "rbg"
    # A Python number fits an array target of its kind (eval_shape turns ints into int32).
    restored = manager.restore(target={**target, "count": jax.ShapeDtypeStruct((), jnp.int32)})
    assert int(restored["count"]) == 3
    with pytest.raises(CheckpointMismatchError, match="key: saved .*key<rbg>, expected .*key<threefry2x32>"):
        manager.restore(target={**target, "key": jax.random.key(0)})


@pytest.mark.parametrize("abstract", [False, True], ids=["concrete_target", "abstract_target"])
def test_restore_onto_other_strategy(mirrored_checkpoint, every_strategy, abstract):
    """Saved under MirroredStrategy(8), restored onto every preset's mesh and layout."""
    saved, manager = mirrored_checkpoint
    strategy = every_strategy
    target = make_state(strategy, seed=1)  # same model, other values, placed by the new strategy
    if abstract:
        target = jax.eval_shape(lambda: target)
    with strategy.scope():
        restored = manager.restore(target=target)
    assert_same_values(restored, saved)
    arrays = {jax.tree_util.keystr(p, simple=True, separator="/"): x
              for p, x in jax.tree_util.tree_flatten_with_path(restored)[0] if isinstance(x, jax.Array)}
    abstract_state = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)), restored)
    planned = {jax.tree_util.keystr(p, simple=True, separator="/"): s for p, s in
               jax.tree_util.tree_flatten_with_path(strategy.parameter_shardings(abstract_state))[0]}
    sharded = 0
    for path, x in arrays.items():
        want = planned[path]
        assert x.sharding.is_equivalent_to(want, x.ndim), (path, x.sharding, want)
        assert x.sharding.device_set == want.device_set, path
        assert x.sharding.memory_kind == want.memory_kind, path  # central storage: host memory
        for shard in x.addressable_shards:  # each device holds only its own piece
            assert shard.data.shape == want.shard_shape(x.shape), path
        sharded += want.shard_shape(x.shape) != x.shape
    assert (sharded > 0) == (strategy.layout is not None)  # the presets with a layout split something


def test_restore_onto_central_storage_keeps_parameters_in_host_memory(mirrored_checkpoint):
    saved, manager = mirrored_checkpoint
    strategy = jdist.CentralStorageStrategy()
    target = make_state(strategy, seed=1)
    with strategy.scope():
        restored = manager.restore(target=target)
    assert_same_values(restored, saved)
    kernel = restored["train"].params["dense"]["kernel"]
    assert kernel.sharding == target["train"].params["dense"]["kernel"].sharding
    assert kernel.sharding.memory_kind == "pinned_host"


def test_sharded_save_restores_replicated(tmp_path):
    """Saved split over 8 devices (FSDP), restored whole onto one device and onto Mirrored."""
    state = make_state(FSDPStrategy(), seed=3)
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(1, state)
    for strategy in (jdist.OneDeviceStrategy("cpu:0"), jdist.MirroredStrategy()):
        with strategy.scope():
            restored = manager.restore(target=make_state(strategy))
        assert_same_values(restored, state)
        kernel = restored["train"].params["dense"]["kernel"]
        assert kernel.sharding.is_fully_replicated and kernel.sharding.device_set == set(strategy.worker_devices)


def test_replicated_values_are_written_once(tmp_path):
    strategy = jdist.MirroredStrategy()
    value = np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32)  # 1 MiB
    state = {"w": strategy.place(jnp.asarray(value))}
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(1, state)
    written = sum(f.stat().st_size for f in (tmp_path / "1" / "state").rglob("*") if f.is_file())
    assert written < 1.2 * value.nbytes, f"{written} bytes on disk for a {value.nbytes}-byte array on 8 devices"
    np.testing.assert_array_equal(np.asarray(manager.restore(target=state)["w"]), value)


def test_async_save_is_unaffected_by_donating_the_state_afterwards(tmp_path):
    strategy = jdist.MirroredStrategy()
    value = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    state = {"w": strategy.place(jnp.asarray(value)), "b": strategy.place(jnp.ones(16))}
    manager = CheckpointManager(tmp_path, async_save=True)
    assert manager.save(1, state)
    overwrite = jax.jit(lambda s: jax.tree.map(lambda x: x * 0 - 7, s), donate_argnums=0)
    state = jax.block_until_ready(overwrite(state))  # training goes on while the save is written
    manager.wait_until_finished()
    restored = manager.restore(target=state)
    np.testing.assert_array_equal(np.asarray(restored["w"]), value)
    np.testing.assert_array_equal(np.asarray(restored["b"]), np.ones(16))


def test_save_interval_max_to_keep_and_best(tmp_path):
    state = {"w": jnp.ones(3)}
    interval = CheckpointManager(tmp_path / "interval", save_interval_steps=2, async_save=False)
    saved = [step for step in range(1, 7) if interval.save(step, state)]
    assert saved == [1, 2, 4, 6] == interval.all_steps()  # orbax also keeps the first save
    assert interval.save(7, state, force=True) and interval.latest_step() == 7
    assert not interval.save(6, state)  # not newer than the latest

    keep = CheckpointManager(tmp_path / "keep", max_to_keep=2, async_save=False)
    for step in range(1, 5):
        keep.save(step, state)
    assert keep.all_steps() == [3, 4]

    best = CheckpointManager(tmp_path / "best", max_to_keep=2, best_fn=lambda m: m["acc"], async_save=False)
    for step, acc in [(1, 0.5), (2, 0.9), (3, 0.1), (4, 0.7)]:
        best.save(step, state, metrics={"acc": acc})
    assert best.all_steps() == [2, 4] and best.best_step() == 2


class ListIterator:
    """A stand-in input iterator: position-addressed, with get_state/set_state."""

    def __init__(self, n: int = 100):
        self.position, self.n = 0, n

    def __iter__(self):
        return self

    def __next__(self):
        rng = np.random.default_rng(self.position)
        self.position += 1
        return {"x": rng.standard_normal((8, FEATURES)).astype(np.float32),
                "y": rng.integers(0, CLASSES, 8).astype(np.int32)}

    def get_state(self):
        return {"position": self.position}

    def set_state(self, state):
        self.position = state["position"]


class BytesIterator(ListIterator):
    """grain's DataLoader iterators give their state as bytes."""

    def get_state(self):
        return f"pos={self.position}".encode()

    def set_state(self, state):
        self.position = int(state.decode().split("=")[1])


@pytest.mark.parametrize("iterator_cls", [ListIterator, BytesIterator])
def test_iterator_position_is_saved_and_restored(tmp_path, iterator_cls):
    it = iterator_cls()
    for _ in range(5):
        next(it)
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(5, {"w": jnp.ones(2)}, iterator=it)
    expected = next(it)
    fresh = iterator_cls()
    manager.restore(target={"w": jnp.ones(2)}, iterator=fresh)
    assert fresh.position == 5
    np.testing.assert_array_equal(next(fresh)["x"], expected["x"])


def test_distributed_iterator_position_is_saved_and_restored(tmp_path):
    strategy = two_device_mirrored()
    data = {"x": np.arange(80, dtype=np.float32).reshape(40, 2)}
    dataset = jdist.ArrayDataset(data, batch_size=8, shuffle=True, seed=1)
    it = iter(strategy.experimental_distribute_dataset(dataset))  # one epoch: 5 shuffled batches
    for _ in range(2):
        next(it)
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(2, {"w": jnp.ones(2)}, iterator=it)
    expected = [np.asarray(batch.value["x"]) for batch in it]
    fresh = iter(strategy.experimental_distribute_dataset(dataset))
    manager.restore(target={"w": jnp.ones(2)}, iterator=fresh)
    got = [np.asarray(batch.value["x"]) for batch in fresh]
    assert len(got) == len(expected) == 3
    it.close()
    fresh.close()
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def test_bad_inputs_get_clear_errors(tmp_path):
    manager = CheckpointManager(tmp_path, async_save=False)
    with pytest.raises(TypeError, match="'meta/fn'.*function"):
        manager.save(1, {"w": jnp.ones(2), "meta": {"fn": print}})
    with pytest.raises(TypeError, match="get_state"):
        manager.save(1, {"w": jnp.ones(2)}, iterator=iter([1, 2]))
    with pytest.raises(TypeError, match="JSON"):
        manager.save(1, {"w": jnp.ones(2)}, metadata={"x": object()})
    with pytest.raises(FileNotFoundError, match="No checkpoint found"):
        manager.restore(target={"w": jnp.ones(2)})
    manager.save(1, {"w": jnp.ones(2)})
    with pytest.raises(ValueError, match="needs `target=`"):
        manager.restore()
    with pytest.raises(FileNotFoundError, match=r"step 3 .*available steps: \[1\]"):
        manager.restore(3, target={"w": jnp.ones(2)})
    with pytest.raises(CheckpointMismatchError, match="holds no input iterator position"):
        manager.restore(target={"w": jnp.ones(2)}, iterator=ListIterator())


# -------------------------------------------------------------------- integrity
def test_checksums_agree_on_device_and_host_and_see_swaps():
    mesh_sharding = NamedSharding(jdist.Strategy(mesh_shape={"data": 2, "model": 4}).mesh, P("data", "model"))
    rng = np.random.default_rng(0)
    values = [
        rng.standard_normal((8, 12)).astype(np.float32),
        rng.standard_normal((8, 12)).astype(jnp.bfloat16),
        rng.integers(-100, 100, (8, 4)).astype(np.int8),
        rng.integers(0, 2, (8, 4)).astype(bool),
        rng.integers(0, 2**32, (8, 4), dtype=np.uint64).astype(np.uint32),
        (rng.standard_normal((8, 4)) + 1j * rng.standard_normal((8, 4))).astype(np.complex64),
        np.float32(1.5),
    ]
    for value in values:
        sharding = mesh_sharding if np.ndim(value) == 2 and value.shape[1] % 4 == 0 else None
        on_device = jax.device_put(value, sharding) if sharding is not None else jnp.asarray(value)
        (device_sum,) = integrity.fetch_checksums(integrity.checksums_of([on_device], ["array"]))
        assert device_sum == integrity.checksum_numpy(value), value.dtype
        # The elementwise reduction used off CPU gives the same numbers as the matmul form.
        elementwise = integrity._checksum_fn(integrity._replicated_on(on_device), False)(on_device)
        assert [int(v) for v in np.asarray(elementwise)] == device_sum, value.dtype
    swapped = values[0].copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert integrity.checksum_numpy(swapped)[0] == integrity.checksum_numpy(values[0])[0]  # plain sum is blind
    assert integrity.checksum_numpy(swapped)[1] != integrity.checksum_numpy(values[0])[1]  # weighted sum is not


def _largest_data_file(step_dir):
    files = [f for f in (step_dir / "state").rglob("*") if f.is_file() and f.parent.name == "d"]
    return max(files, key=lambda f: f.stat().st_size)


def _truncate(step_dir, other):
    f = _largest_data_file(step_dir)
    with open(f, "r+b") as fh:
        fh.truncate(f.stat().st_size // 2)


def _delete(step_dir, other):
    _largest_data_file(step_dir).unlink()


def _flip_bit(step_dir, other):
    """One bit inside zstd-compressed array data: it still decodes, to wrong numbers."""
    f = _largest_data_file(step_dir)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))


def _drop_manifest(step_dir, other):
    (step_dir / "manifest" / "manifest.json").unlink()


def _swap_in_other_arrays(step_dir, other):
    """The arrays of a different model under this checkpoint's manifest (wrong shapes on disk)."""
    import shutil

    shutil.rmtree(step_dir / "state")
    shutil.copytree(other / "state", step_dir / "state")


# After a failed read orbax leaves its other read coroutines un-awaited; Python reports them when collected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("damage,problem", [
    (_truncate, "reading the arrays failed|differ from what was saved"),
    (_delete, "reading the arrays failed"),
    (_flip_bit, r"differ from what was saved: big: checksum \[\d+, \d+\] differs from the saved"),
    (_drop_manifest, "manifest .* is missing"),
    (_swap_in_other_arrays, r"stored as \(8, 32\).*manifest says \(8, 16\)"),
], ids=["truncated_file", "missing_file", "flipped_bit", "missing_manifest", "wrong_shapes"])
def test_damaged_checkpoint_is_reported_and_skipped(tmp_path, caplog, damage, problem):
    strategy = jdist.MirroredStrategy()

    def state_with_big_array(seed, hidden=16):  # 64 KiB: stored in its own data file, not inlined
        big = np.random.default_rng(seed).standard_normal((128, 128)).astype(np.float32)
        return {**make_state(strategy, hidden, seed), "big": strategy.place(jnp.asarray(big))}

    older, newer = state_with_big_array(1), state_with_big_array(2)
    manager = CheckpointManager(tmp_path / "ckpt", async_save=False)
    manager.save(1, older)
    manager.save(2, newer)
    other = CheckpointManager(tmp_path / "other", async_save=False)
    other.save(1, state_with_big_array(3, hidden=32))
    damage(tmp_path / "ckpt" / "2", tmp_path / "other" / "1")

    with pytest.raises(CheckpointCorruptedError, match=problem) as error:
        manager.restore(step=2, target=older)  # an explicit step is never replaced by another
    assert error.value.step == 2
    with caplog.at_level(logging.WARNING, logger="jdist.checkpoint"):
        restored = manager.restore_with_info(target=older)
    assert restored.step == 1
    assert_same_values(restored.state, older)
    assert any("step 2" in r.getMessage() for r in caplog.records), caplog.text
    # The damaged checkpoint is moved aside (kept, not deleted) so training can save step 2 again.
    assert manager.all_steps() == [1]
    assert [p.name.startswith("corrupted-step-2-") for p in (tmp_path / "ckpt").iterdir()].count(True) == 1
    assert manager.save(2, newer)


def test_all_checkpoints_damaged_raises(tmp_path):
    manager = CheckpointManager(tmp_path, async_save=False)
    state = {"w": jnp.arange(4.0)}
    manager.save(1, state)
    _drop_manifest(tmp_path / "1", None)
    with pytest.raises(CheckpointCorruptedError, match="(?s)no intact checkpoint.*step 1: its manifest"):
        manager.restore(target=state)


def test_checkpoint_of_another_model_names_the_mismatched_leaves(tmp_path):
    strategy = jdist.MirroredStrategy()
    manager = CheckpointManager(tmp_path, async_save=False)
    manager.save(1, make_state(strategy, hidden=16))
    manager.save(2, make_state(strategy, hidden=16))
    with pytest.raises(CheckpointMismatchError) as error:
        manager.restore(target=make_state(strategy, hidden=12))
    message = str(error.value)
    assert "step 2" in message  # reported, not silently replaced by an older step
    assert "train/params/dense/kernel: saved (8, 16) float32, expected (8, 12) float32" in message
    assert "train/opt_state/0/mu/head/kernel: saved (16, 8) float32, expected (12, 8) float32" in message
    target = make_state(strategy)
    target["train"] = target["train"].replace(params={**target["train"].params, "extra": jnp.zeros(2)})
    target["rng"] = jnp.zeros(2, jnp.uint32)
    message = str(pytest.raises(CheckpointMismatchError, manager.restore, target=target).value)
    assert "train/params/extra: in the target but not in the checkpoint" in message
    assert "rng: saved () key<threefry2x32>, expected (2,) uint32" in message
    bf16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16) if getattr(x, "dtype", None) == jnp.float32 else x,
                        make_state(strategy))
    message = str(pytest.raises(CheckpointMismatchError, manager.restore, target=bf16).value)
    assert "saved (8, 16) float32, expected (8, 16) bfloat16" in message


def test_restore_between_states_built_inside_and_outside_any_scope(tmp_path):
    """A TrainState built outside any scope has a Python-int step; one built in a scope an int32
    array. Either restores into the other (a lossless scalar dtype difference), with or without a
    strategy; a lossy 0-d difference is still a mismatch."""
    strategy = two_device_mirrored()
    params = mlp_params()
    with strategy.scope():
        scoped = jdist.TrainState.create(apply_fn=mlp_apply, params=params, tx=TX).replace(step=jnp.int32(7))
    plain = jdist.TrainState.create(apply_fn=mlp_apply, params=mlp_params(seed=1), tx=TX)
    assert isinstance(plain.step, int) and scoped.step.dtype == jnp.int32
    manager = CheckpointManager(tmp_path / "scoped", async_save=False)
    manager.save(1, scoped)
    for restored in (manager.restore(target=plain), manager.restore(target=plain, strategy=strategy)):
        assert type(restored.step) is int and restored.step == 7
        jax.tree.map(np.testing.assert_array_equal, jax.device_get(restored.params), params)
    with strategy.scope():
        back = CheckpointManager(tmp_path / "plain", async_save=False)
        back.save(1, plain.replace(step=9))
        restored = back.restore(target=scoped)
    assert restored.step.dtype == jnp.int32 and int(restored.step) == 9
    assert restored.params["dense"]["kernel"].sharding.is_fully_replicated
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(restored.params), mlp_params(seed=1))
    lossy = CheckpointManager(tmp_path / "lossy", async_save=False)
    lossy.save(1, {"x": jnp.float32(1.5)})
    message = str(pytest.raises(CheckpointMismatchError, lossy.restore, target={"x": jnp.bfloat16(0)}).value)
    assert "x: saved () float32, expected () bfloat16" in message


# --------------------------------------------------------- backup and restore
@jax.jit
def _sgd_arrays(state, batch):
    rng, noise_key = jax.random.split(state["rng"])
    x = batch["x"] + 0.1 * jax.random.normal(noise_key, batch["x"].shape)

    def loss_fn(p):
        logits = mlp_apply(p, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), batch["y"][:, None], axis=1))

    loss, grads = jax.value_and_grad(loss_fn)(state["train"].params)
    return {"train": state["train"].apply_gradients(grads=grads), "rng": rng,
            "metrics": {"loss_sum": state["metrics"]["loss_sum"] + loss, "count": state["metrics"]["count"] + 1}}


def _sgd_step(state, batch):
    """One training step; the Python `epoch` entry stays a Python int."""
    arrays = {k: v for k, v in state.items() if k != "epoch"}
    return {**_sgd_arrays(arrays, batch), "epoch": state["epoch"]}


class Crash(Exception):
    pass


TRAIN_X = np.random.default_rng(5).standard_normal((40, FEATURES)).astype(np.float32)
TRAIN_Y = (np.abs(TRAIN_X[:, 0]) * 3).astype(np.int32) % CLASSES
TRAINER_SGD = optax.sgd(0.1, momentum=0.9)


def fit_trainer(callbacks=(), epochs=3):
    """A Trainer on arrays: 40 examples, global batch 8, so 5 steps per epoch, reshuffled each epoch."""
    trainer = jdist.Trainer(mlp_apply, TRAINER_SGD, params=mlp_params(), strategy=two_device_mirrored())
    history = trainer.fit(TRAIN_X, TRAIN_Y, batch_size=8, epochs=epochs, verbose=0, callbacks=list(callbacks))
    return trainer, history


class CrashAtStep(jdist.callbacks.Callback):
    def __init__(self, step):
        super().__init__()
        self.crash_step = step

    def on_train_batch_end(self, batch, logs=None):
        if self.trainer.step == self.crash_step:
            raise Crash()


@pytest.fixture(scope="module")
def uninterrupted_fit():
    trainer, history = fit_trainer()
    return trainer.state, history.history["loss"]


@pytest.mark.parametrize("save_freq,crash_at,resume_at", [(4, 11, 8), ("epoch", 13, 10)])
def test_trainer_backup_and_restore_resumes_exactly(tmp_path, uninterrupted_fit, save_freq, crash_at, resume_at):
    backup_dir = tmp_path / "backup"
    with pytest.raises(Crash):
        fit_trainer([BackupAndRestore(backup_dir, save_freq=save_freq), CrashAtStep(crash_at)])
    assert backup_dir.exists()
    seen = []

    class Record(jdist.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append((self.trainer.epoch, self.trainer.resume_step, self.trainer.step))

        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    trainer, history = fit_trainer([BackupAndRestore(backup_dir, save_freq=save_freq), Record()])
    assert seen[0] == (*divmod(resume_at, 5), resume_at)  # epoch, step in epoch, steps done
    assert seen[1] == resume_at % 5  # the first batch run is the one after the backup
    assert len(seen) - 1 == 15 - resume_at
    reference_state, reference_losses = uninterrupted_fit
    assert_same_values(trainer.state, reference_state)
    # Keras's contract: the rerun logs only the epochs it ran; a fully rerun epoch logs the same loss.
    assert len(history.history["loss"]) == 3 - resume_at // 5
    np.testing.assert_allclose(history.history["loss"][-1], reference_losses[-1], rtol=1e-6)
    assert not backup_dir.exists()  # deleted once training completed


def test_backup_and_restore_checks_its_arguments():
    with pytest.raises(ValueError, match="save_freq"):
        BackupAndRestore("/tmp/x", save_freq=0)
    with pytest.raises(ValueError, match="save_freq"):
        BackupAndRestore("/tmp/x", save_freq="step")


def _plain_loop(strategy, backup_dir, crash_at=None, save_freq=3):
    it = ListIterator()
    with backup_and_restore(backup_dir, make_state(strategy), iterator=it, save_freq=save_freq) as backup:
        resumed = backup.step
        state = backup.state
        for _ in range(backup.epoch, 3):
            for _ in range(backup.step_in_epoch, 5):
                state = jax.block_until_ready(_sgd_step(state, strategy.distribute_batch(next(it))))
                backup.step_end(state)
                if backup.step == crash_at:
                    raise Crash()
            backup.epoch_end(state)
    return state, it.position, resumed


def test_plain_loop_backup_resumes_exactly(tmp_path):
    strategy = two_device_mirrored()
    reference, reference_position, _ = _plain_loop(strategy, tmp_path / "reference")
    with pytest.raises(Crash):
        _plain_loop(strategy, tmp_path / "backup", crash_at=8)
    state, position, resumed = _plain_loop(strategy, tmp_path / "backup")
    assert resumed == 6  # the last backup before the crash (every 3 steps)
    assert_same_values(state, reference)
    assert position == reference_position == 15
    assert not (tmp_path / "backup").exists()


# ------------------------------------------------------------------ preemption
def test_sigterm_saves_at_the_step_boundary_and_restore_resumes(tmp_path):
    strategy = two_device_mirrored()
    previous = signal.getsignal(signal.SIGTERM)
    manager = CheckpointManager(tmp_path, max_to_keep=2)
    exits = []
    handler = PreemptionCheckpointHandler(
        None, manager, termination_config=TerminationConfig(exit_fn=lambda: exits.append(handler.total_run_calls)),
        iterator=(it := ListIterator()),
    )
    train_fn = lambda state, batch: (_sgd_step(state, batch), "aux")  # noqa: E731
    state = make_state(strategy)
    states = []
    try:
        for i in range(6):
            state, aux = handler.run(train_fn, state, strategy.distribute_batch(next(it)))
            states.append(jax.block_until_ready(state))
            if i == 2:
                os.kill(os.getpid(), signal.SIGTERM)  # handled in this thread before the next bytecode
        # Noticed between runs 3 and 4: run 4 completes, is saved, then exit_fn runs.
        assert exits == [4] and aux == "aux"
        assert manager.all_steps() == [4] and handler.total_run_calls == 6
    finally:
        handler.close()
    assert signal.getsignal(signal.SIGTERM) is previous

    it2 = ListIterator()
    rerun = PreemptionCheckpointHandler(None, CheckpointManager(tmp_path), iterator=it2)
    try:
        restored = rerun.restore(make_state(strategy))
        assert rerun.total_run_calls == 4 and it2.position == 4
        assert_same_values(restored, states[3])
        with pytest.raises(TypeError, match="must return the new state"):
            rerun.run(lambda s, b: ("loss", s), restored, None)
    finally:
        rerun.close()


def test_grace_period_trains_on_then_saves_again_before_it_ends(tmp_path):
    import time

    manager = CheckpointManager(tmp_path, max_to_keep=3)
    exits = []
    handler = PreemptionCheckpointHandler(None, manager, termination_config=TerminationConfig(
        grace_period=2.0, exit_fn=lambda: exits.append((handler.total_run_calls, time.monotonic()))))

    def slow_step(state):
        time.sleep(0.02)
        return {"w": state["w"] + 1}

    state = {"w": jnp.zeros(2)}
    try:
        for i in range(400):
            state = handler.run(slow_step, state)
            if i == 4:
                signalled = time.monotonic()
                os.kill(os.getpid(), signal.SIGTERM)
            if exits:
                break
    finally:
        handler.close()
    first, second = manager.all_steps()  # one save at the notice, one as the grace period runs out
    assert first == 6 and second == exits[0][0] > first + 10, (manager.all_steps(), exits)
    assert exits[0][1] - signalled < 2.0
    np.testing.assert_array_equal(manager.restore(target=state)["w"], np.full(2, second))


def test_termination_watcher_fn_triggers_save_and_default_exit(tmp_path):
    import threading

    notice = threading.Event()
    handler = PreemptionCheckpointHandler(
        None, None, checkpoint_dir=tmp_path, termination_config=TerminationConfig(termination_watcher_fn=notice.is_set)
    )
    state = {"w": jnp.zeros(3)}
    step = lambda s: {"w": s["w"] + 1}  # noqa: E731
    try:
        for _ in range(3):
            state = handler.run(step, state)
        notice.set()
        with pytest.raises(SystemExit) as exit_info:
            for _ in range(200):  # the watcher polls once a second
                state = handler.run(step, state)
                threading.Event().wait(0.02)
        assert exit_info.value.code == 42
        saved = CheckpointManager(tmp_path)
        step_saved = saved.latest_step()
        assert step_saved == handler.total_run_calls > 3
        np.testing.assert_array_equal(saved.restore(target=state)["w"], np.full(3, step_saved))
    finally:
        handler.close()
    with pytest.raises(ValueError, match="checkpoint_dir"):
        PreemptionCheckpointHandler(None, None)
