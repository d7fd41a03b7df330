"""`jdist.Trainer`: distributed fit equals single-device training; steps_per_execution; callbacks.

Reference computations are plain JAX on one CPU device (short last batch unpadded).
Tolerances: float32 weights after a few Adam steps, rtol=2e-5 / atol=2e-6 (only the
summation order differs); losses and metrics rtol=1e-5.
"""
import csv

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.callbacks import Callback, EarlyStopping, MetricsLogger
from jdist.callbacks.event_file import read_scalars
from jdist.models import MLP

N_EXAMPLES, BATCH, LR = 100, 32, 0.01  # 100 is not a multiple of 32: the last batch has 4 examples
RTOL, ATOL = 2e-5, 2e-6


def _data(n=N_EXAMPLES, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + 2 * (x[:, 2] > 0.5).astype(np.int32)
    return x, y


def _model_and_params():
    model = MLP(features=(16,), num_classes=4)
    variables = model.init(jax.random.key(0), jnp.zeros((1, 6)))
    return model, variables["params"]


def _loss(y_true, logits):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y_true)


def _reference_fit(model, params, x, y, epochs):
    """Single device, unpadded batches in order: per-epoch mean loss / accuracy and final params."""
    device = jax.devices("cpu")[0]
    tx = optax.adam(LR)
    params = jax.device_put(params, device)
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, xb, yb):
        def mean_loss(p):
            logits = model.apply({"params": p}, xb)
            return jnp.mean(_loss(yb, logits)), logits

        (_, logits), grads = jax.value_and_grad(mean_loss, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        per_example = _loss(yb, logits)
        return optax.apply_updates(params, updates), opt_state, per_example, jnp.argmax(logits, -1) == yb

    history = {"loss": [], "accuracy": []}
    for _ in range(epochs):
        losses, hits = [], []
        for start in range(0, len(x), BATCH):
            params, opt_state, l, h = step(params, opt_state, x[start:start + BATCH], y[start:start + BATCH])
            losses.append(np.asarray(l))
            hits.append(np.asarray(h))
        history["loss"].append(float(np.concatenate(losses).mean()))
        history["accuracy"].append(float(np.concatenate(hits).mean()))
    return params, history


def _trainer(strategy, params, **kwargs):
    model, _ = _model_and_params()
    return jdist.Trainer(model, optax.adam(LR), loss=_loss, metrics=["accuracy"], params=params,
                         strategy=strategy, **kwargs)


def _assert_trees_close(a, b, rtol=RTOL, atol=ATOL):
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=atol)


def test_fit_under_mirrored_equals_single_device():
    x, y = _data()
    model, params = _model_and_params()
    ref_params, ref_history = _reference_fit(model, params, x, y, epochs=2)
    strategy = jdist.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 8
    trainer = _trainer(strategy, params)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    _assert_trees_close(trainer.params, ref_params)
    # Epoch metrics are exact over all 100 examples: the padding of the 4-example batch is excluded.
    np.testing.assert_allclose(history.history["loss"], ref_history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history.history["accuracy"], ref_history["accuracy"], rtol=1e-6)
    assert ref_history["loss"][1] < ref_history["loss"][0]
    assert trainer.step == 2 * 4 and int(trainer.state.step) == 8
    assert all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(trainer.params))


def test_batch_size_not_divisible_by_replicas_and_iterable_input():
    """Batch 30 over 8 replicas is padded to 32 per step; a list of (x, y) batches trains the same."""
    x, y = _data()
    model, params = _model_and_params()
    one = _trainer(jdist.OneDeviceStrategy("cpu:0"), params)
    one.fit(x, y, batch_size=30, epochs=1, shuffle=False, verbose=0)
    mirrored = _trainer(jdist.MirroredStrategy(), params)
    batches = [(x[i:i + 30], y[i:i + 30]) for i in range(0, len(x), 30)]
    history = mirrored.fit(batches, epochs=1, verbose=0)
    _assert_trees_close(mirrored.params, one.params)
    assert mirrored.step == 4 and len(history.history["loss"]) == 1


def test_default_strategy_and_a_two_axis_mesh_train_the_same():
    x, y = _data()
    _, params = _model_and_params()
    reference = _trainer(jdist.OneDeviceStrategy("cpu:0"), params)
    reference.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    for strategy in (None, jdist.Strategy(mesh_shape={"data": 4, "model": 2})):
        trainer = _trainer(strategy, params)
        trainer.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        _assert_trees_close(trainer.params, reference.params)


def test_steps_per_execution_gives_the_same_weights():
    x, y = _data(200)  # 7 batches of 32 (last has 8): executions of 4 steps end with one empty step
    _, params = _model_and_params()
    strategy = jdist.MirroredStrategy()
    single = _trainer(strategy, params)
    h1 = single.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    scanned = _trainer(strategy, params, steps_per_execution=4)
    h4 = scanned.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    _assert_trees_close(scanned.params, single.params)
    np.testing.assert_allclose(h4.history["loss"], h1.history["loss"], rtol=1e-5)
    assert scanned.step == single.step == 14 and int(scanned.state.step) == 14
    # One program for every execution, the short last one included.
    assert [k for k in scanned._compiled if k[0] == "train"] == [("train", 4)]


def test_evaluate_and_predict_are_exact_over_padded_batches():
    x, y = _data(103)
    model, params = _model_and_params()
    trainer = _trainer(jdist.MirroredStrategy(), params, steps_per_execution=2)
    logs = trainer.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    logits = np.asarray(jax.jit(model.apply)({"params": params}, x))
    expected_loss = float(np.mean(np.asarray(_loss(jnp.asarray(y), jnp.asarray(logits)))))
    np.testing.assert_allclose(logs["loss"], expected_loss, rtol=1e-5)
    np.testing.assert_allclose(logs["accuracy"], np.mean(logits.argmax(-1) == y), rtol=1e-6)
    assert trainer.evaluate(x, y, batch_size=16, verbose=0) == [logs["loss"], logs["accuracy"]]
    predictions = trainer.predict(x, batch_size=16, verbose=0)
    assert predictions.shape == (103, 4)
    np.testing.assert_allclose(predictions, logits, rtol=1e-5, atol=1e-6)


def test_nnx_model_through_train_state():
    from flax import nnx

    x, y = _data()

    def train(strategy):
        model = nnx.Linear(6, 4, rngs=nnx.Rngs(0))
        with strategy.scope():
            state = jdist.TrainState.from_nnx(model, optax.adam(LR))
        trainer = jdist.Trainer(state, loss=_loss, metrics=["accuracy"], strategy=strategy)
        return trainer, trainer.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)

    mirrored, history = train(jdist.MirroredStrategy())
    one, _ = train(jdist.OneDeviceStrategy("cpu:0"))
    _assert_trees_close(mirrored.params, one.params)
    assert history.history["loss"][1] < history.history["loss"][0]


class _Recorder(Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", self.trainer.epoch))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch, round(logs["loss"], 6), self.trainer.step))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, sorted(logs)))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end",))


def test_callback_hooks_order_and_lazy_batch_logs():
    x, y = _data()
    _, params = _model_and_params()
    recorder = _Recorder()
    trainer = _trainer(jdist.MirroredStrategy(), params, steps_per_execution=3)
    trainer.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[recorder],
                validation_data=(x[:40], y[:40]))
    kinds = [c[0] for c in recorder.calls]
    assert kinds == ["train_begin", "epoch_begin", "batch_end", "batch_end", "epoch_end", "train_end"]
    # 4 batches in executions of 3: hooks numbered as Keras 3 does (first step + 2, also for the shorter
    # last execution: see tests/test_callbacks_order.py), with the optimizer step count.
    assert [(c[1], c[3]) for c in recorder.calls if c[0] == "batch_end"] == [(2, 3), (5, 4)]
    assert recorder.calls[4][2] == ["accuracy", "loss", "val_accuracy", "val_loss"]


def test_early_stopping_stops_and_restores_best_weights():
    x, y = _data()
    _, params = _model_and_params()

    class Scripted(Callback):
        """Replaces the epoch loss with a script: best at epoch 1, then no improvement."""
        values = [1.0, 0.5, 0.7, 0.6, 0.9, 0.4]

        def on_epoch_end(self, epoch, logs=None):
            logs["scripted"] = self.values[epoch]
            if epoch == 1:
                self.best_params = jax.device_get(self.trainer.params)

    scripted = Scripted()
    stopper = EarlyStopping(monitor="scripted", patience=2, restore_best_weights=True)
    trainer = _trainer(jdist.MirroredStrategy(), params)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=6, verbose=0, callbacks=[scripted, stopper])
    assert len(history.history["loss"]) == 4 and history.history["scripted"] == [1.0, 0.5, 0.7, 0.6]
    assert trainer.stop_training and stopper.stopped_epoch == 3 and stopper.best_epoch == 1
    _assert_trees_close(trainer.params, scripted.best_params, rtol=0, atol=0)

    with pytest.raises(ValueError, match="val_los.*not among"):
        _trainer(jdist.MirroredStrategy(), params).fit(
            x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[EarlyStopping(monitor="val_los")])


def test_metrics_logger_writes_tensorboard_csv_and_plot(tmp_path):
    x, y = _data()
    _, params = _model_and_params()
    trainer = _trainer(jdist.MirroredStrategy(), params)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, validation_data=(x[:50], y[:50]),
                          callbacks=[MetricsLogger(tmp_path)])
    (train_file,) = (tmp_path / "train").glob("events.out.tfevents.*")
    (val_file,) = (tmp_path / "validation").glob("events.out.tfevents.*")
    scalars = read_scalars(train_file)
    assert [(s, t) for s, t, _ in scalars if t == "epoch_loss"] == [(0, "epoch_loss"), (1, "epoch_loss"), (2, "epoch_loss")]
    np.testing.assert_allclose([v for _, t, v in scalars if t == "epoch_loss"], history.history["loss"], rtol=1e-6)
    val = read_scalars(val_file)
    np.testing.assert_allclose([v for _, t, v in val if t == "epoch_accuracy"], history.history["val_accuracy"],
                               rtol=1e-6)
    _assert_protobuf_parses(train_file, history.history["accuracy"])

    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["epoch", "accuracy", "loss", "val_accuracy", "val_loss"]  # sorted, as Keras 3 writes it
    assert [int(r[0]) for r in rows[1:]] == [0, 1, 2]
    np.testing.assert_allclose([float(r[2]) for r in rows[1:]], history.history["loss"], rtol=1e-7)

    png = tmp_path / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def _assert_protobuf_parses(path, accuracies):
    """Decodes the event file with protobuf's own parser, from a hand-built Event/Summary schema."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from jdist.callbacks.event_file import iter_records

    f = descriptor_pb2.FileDescriptorProto(name="jdist_test_event.proto", package="jdist_test")
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=T.TYPE_MESSAGE, type_name=".jdist_test.Value",
                      label=T.LABEL_REPEATED)
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=T.TYPE_MESSAGE, type_name=".jdist_test.Summary",
                    label=T.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    Event = message_factory.GetMessageClass(pool.FindMessageTypeByName("jdist_test.Event"))
    events = [Event.FromString(record) for record in iter_records(path)]
    assert events[0].file_version == "brain.Event:2" and events[0].wall_time > 1e9
    found = [(e.step, v.simple_value) for e in events[1:] for v in e.summary.value if v.tag == "epoch_accuracy"]
    assert [s for s, _ in found] == [0, 1, 2]
    np.testing.assert_allclose([v for _, v in found], accuracies, rtol=1e-6)


def test_crc32c_known_vectors():
    from jdist.callbacks.event_file import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720, B.4: 32 bytes of zeros


def test_bad_inputs_are_clear_errors():
    x, y = _data()
    _, params = _model_and_params()
    strategy = jdist.MirroredStrategy()
    with pytest.raises(ValueError, match="one value per example"):
        jdist.Trainer(MLP(features=(16,), num_classes=4), optax.sgd(0.1), loss=lambda t, p: jnp.mean(_loss(t, p)),
                      params=params, strategy=strategy).fit(x, y, batch_size=BATCH, verbose=0)
    trainer = _trainer(strategy, params)
    with pytest.raises(ValueError, match="need targets"):
        trainer.fit(x, verbose=0)
    with pytest.raises(ValueError, match="without targets"):
        trainer.fit([x[:32], x[32:64]], verbose=0)
    with pytest.raises(ValueError, match="larger than the batch size 32"):
        trainer.fit([(x[:32], y[:32]), (x[:40], y[:40])], verbose=0)
    with pytest.raises(ValueError, match="ran out of data"):
        trainer.fit(iter([(x[:32], y[:32])]), epochs=2, verbose=0)
    with pytest.raises(ValueError, match="steps_per_execution"):
        _trainer(strategy, params, steps_per_execution=0)


def test_resume_from_a_later_epoch_and_verbose_output(capsys):
    """A callback can move `trainer.epoch` in on_train_begin (what BackupAndRestore does)."""
    x, y = _data()
    _, params = _model_and_params()

    class ResumeAtTwo(Callback):
        def on_train_begin(self, logs=None):
            self.trainer.epoch = 2

    trainer = _trainer(jdist.MirroredStrategy(), params)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=4, verbose=2, callbacks=[ResumeAtTwo()])
    assert history.epoch == [2, 3] and len(history.history["loss"]) == 2
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch")]
    assert [line.split(" - ")[0] for line in lines] == ["epoch 3/4", "epoch 4/4"]
    assert "loss: " in lines[0] and "accuracy: " in lines[0]
    trainer.evaluate(x, y, batch_size=BATCH, verbose=1)
    trainer.predict(x, batch_size=BATCH, verbose=1)
    err = capsys.readouterr()
    assert "evaluate" in err.out + err.err and "predict" in err.out + err.err


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_fit_under_central_storage_equals_single_device(steps_per_execution):
    """Parameters stay in the parameter store between steps; each step (also inside a block of
    steps_per_execution) computes on the 8 compute devices and updates on the parameter device."""
    x, y = _data()
    model, params = _model_and_params()
    ref_params, ref_history = _reference_fit(model, params, x, y, epochs=2)
    strategy = jdist.CentralStorageStrategy()
    trainer = _trainer(strategy, params, steps_per_execution=steps_per_execution)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    _assert_trees_close(trainer.params, ref_params)
    np.testing.assert_allclose(history.history["loss"], ref_history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history.history["accuracy"], ref_history["accuracy"], rtol=1e-6)
    assert trainer.step == 8 and int(trainer.state.step) == 8
    for leaf in jax.tree.leaves((trainer.state.params, trainer.state.opt_state)):
        assert leaf.sharding.device_set == {strategy.parameter_device}
        assert leaf.sharding.memory_kind == strategy.parameter_memory_kind
    evaluated = trainer.evaluate(x, y, batch_size=BATCH, verbose=0, return_dict=True)
    logits = np.asarray(model.apply({"params": ref_params}, x))
    np.testing.assert_allclose(evaluated["loss"], np.mean(np.asarray(_loss(y, logits))), rtol=1e-5)
    np.testing.assert_allclose(trainer.predict(x, batch_size=BATCH, verbose=0), logits, rtol=1e-5, atol=1e-5)


class _StopAfterSecondEpoch(Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt


def test_backup_and_restore_under_central_storage(tmp_path):
    """Backups of a state kept in host memory (checksummed there) restore into the parameter store."""
    x, y = _data()
    model, params = _model_and_params()
    ref_params, _ = _reference_fit(model, params, x, y, epochs=3)
    strategy = jdist.CentralStorageStrategy()
    with pytest.raises(KeyboardInterrupt):
        callbacks = [jdist.callbacks.BackupAndRestore(tmp_path), _StopAfterSecondEpoch()]
        _trainer(strategy, params).fit(x, y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0, callbacks=callbacks)
    resumed = _trainer(strategy, params)
    history = resumed.fit(x, y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0,
                          callbacks=[jdist.callbacks.BackupAndRestore(tmp_path)])
    assert history.epoch == [2] and resumed.step == 12
    _assert_trees_close(resumed.params, ref_params)
    assert all(leaf.sharding.memory_kind == strategy.parameter_memory_kind
               for leaf in jax.tree.leaves(resumed.state.params))


def test_float16_under_central_storage_is_a_clear_error():
    x, y = _data()
    _, params = _model_and_params()
    trainer = _trainer(jdist.CentralStorageStrategy(), params, policy="mixed_float16")
    with pytest.raises(ValueError, match="lives apart from the compute devices.*mixed_bfloat16"):
        trainer.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)


def test_sample_weight_follows_keras():
    """Keras's loss with sample weights: sum(w * loss) over the batch / its example count; as in
    Keras 3, `metrics` ignore w and `weighted_metrics` weigh examples by it. Checked against one
    device, unpadded, after 2 epochs (short last batch)."""
    x, y = _data()
    w = np.random.default_rng(1).uniform(0, 2, size=len(x)).astype(np.float32)
    model, params = _model_and_params()
    tx = optax.adam(LR)
    ref, opt_state = params, tx.init(params)

    @jax.jit
    def step(p, o, xb, yb, wb):
        def loss(p):
            return jnp.sum(wb * _loss(yb, model.apply({"params": p}, xb))) / xb.shape[0]

        g = jax.grad(loss)(p)
        u, o = tx.update(g, o, p)
        return optax.apply_updates(p, u), o

    for _ in range(2):
        for s in range(0, len(x), BATCH):
            ref, opt_state = step(ref, opt_state, x[s:s + BATCH], y[s:s + BATCH], w[s:s + BATCH])
    trainer = _trainer(jdist.MirroredStrategy(), params, weighted_metrics=["accuracy"])
    trainer.fit(x, y, sample_weight=w, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    _assert_trees_close(trainer.params, ref)
    logits = np.asarray(model.apply({"params": ref}, x))
    per_example = np.asarray(_loss(y, logits))
    got = trainer.evaluate(x, y, sample_weight=w, batch_size=BATCH, verbose=0, return_dict=True)
    np.testing.assert_allclose(got["loss"], np.mean(w * per_example), rtol=1e-5)
    hits = (logits.argmax(-1) == y).astype(np.float32)
    np.testing.assert_allclose(got["accuracy"], np.mean(hits), rtol=1e-5)
    np.testing.assert_allclose(got["weighted_accuracy"], np.sum(w * hits) / np.sum(w), rtol=1e-5)
    # The same weights as (x, y, w) batches of an iterable give the same evaluation.
    batches = [(x[s:s + BATCH], y[s:s + BATCH], w[s:s + BATCH]) for s in range(0, len(x), BATCH)]
    again = trainer.evaluate(batches, verbose=0, return_dict=True)
    np.testing.assert_allclose([again[k] for k in got], list(got.values()), rtol=1e-6)
    with pytest.raises(ValueError, match="sample_weight has 99"):
        trainer.fit(x, y, sample_weight=w[:99], batch_size=BATCH, verbose=0)


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_fit_on_a_distributed_dataset(steps_per_execution):
    """Batches of strategy.experimental_distribute_dataset (padded per replica, already on the devices)
    train, evaluate and predict exactly as the same arrays do."""
    x, y = _data()
    model, params = _model_and_params()
    ref_params, ref_history = _reference_fit(model, params, x, y, epochs=2)
    strategy = jdist.MirroredStrategy()
    dataset = strategy.experimental_distribute_dataset(jdist.ArrayDataset((x, y), batch_size=BATCH))
    trainer = _trainer(strategy, params, steps_per_execution=steps_per_execution)
    history = trainer.fit(dataset, epochs=2, verbose=0, validation_data=dataset)
    _assert_trees_close(trainer.params, ref_params)
    np.testing.assert_allclose(history.history["loss"], ref_history["loss"], rtol=1e-5)
    np.testing.assert_allclose(history.history["accuracy"], ref_history["accuracy"], rtol=1e-6)
    logits = np.asarray(model.apply({"params": ref_params}, x))
    np.testing.assert_allclose(history.history["val_loss"][-1], np.mean(np.asarray(_loss(y, logits))), rtol=1e-5)
    # The last batch (4 examples over 8 replicas) has padding inside the rows, not at the end.
    np.testing.assert_allclose(trainer.predict(dataset, verbose=0), logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="leave y and batch_size out"):
        trainer.fit(dataset, batch_size=BATCH, verbose=0)
    other = jdist.MirroredStrategy(["cpu:0", "cpu:1"]).experimental_distribute_dataset(
        jdist.ArrayDataset((x, y), batch_size=BATCH))
    with pytest.raises(ValueError, match="distribute it with the Trainer's strategy"):
        trainer.fit(other, verbose=0)


def test_keras_fit_arguments_class_weight_validation_split_and_freq():
    x, y = _data()
    _, params = _model_and_params()
    strategy = jdist.MirroredStrategy()
    class_weight = {0: 0.5, 2: 3.0}  # class 1 and 3: weight 1
    weighted = _trainer(strategy, params)
    h1 = weighted.fit(x, y, class_weight=class_weight, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    explicit = _trainer(strategy, params)
    w = np.array([class_weight.get(int(c), 1.0) for c in y], np.float32)
    h2 = explicit.fit(x, y, sample_weight=w, batch_size=BATCH, epochs=2, shuffle=False, verbose=0)
    _assert_trees_close(weighted.params, explicit.params, rtol=0, atol=0)
    np.testing.assert_array_equal(h1.history["loss"], h2.history["loss"])
    # One-hot labels give the same weights; batches of an iterable get them too.
    np.testing.assert_array_equal(jdist.trainer._batching.class_weights_for(np.eye(4)[y], class_weight), w)
    batches = [(x[s:s + BATCH], y[s:s + BATCH]) for s in range(0, len(x), BATCH)]
    from_iterable = _trainer(strategy, params)
    from_iterable.fit(batches, class_weight=class_weight, epochs=2, verbose=0)
    _assert_trees_close(from_iterable.params, explicit.params, rtol=0, atol=0)
    with pytest.raises(ValueError, match="class_weight` and `sample_weight"):
        weighted.fit(x, y, class_weight=class_weight, sample_weight=w, verbose=0)

    # validation_split holds out the last 20 examples, before shuffling, validated every 2nd epoch.
    split = _trainer(strategy, params)
    history = split.fit(x, y, validation_split=0.2, validation_freq=2, batch_size=BATCH, epochs=4, verbose=0)
    held_out = _trainer(strategy, params)
    expected = held_out.fit(x[:80], y[:80], validation_data=(x[80:], y[80:]), batch_size=BATCH, epochs=4,
                            verbose=0)
    np.testing.assert_array_equal(history.history["loss"], expected.history["loss"])
    np.testing.assert_array_equal(history.history["val_loss"], np.asarray(expected.history["val_loss"])[[1, 3]])
    with pytest.raises(ValueError, match="not sufficient to split"):
        split.fit(x[:1], y[:1], validation_split=0.5, verbose=0)
    with pytest.raises(ValueError, match="only supported for arrays"):
        split.fit(batches, validation_split=0.2, verbose=0)
    with pytest.raises(ValueError, match="validation_freq"):
        split.fit(x, y, validation_data=(x, y), validation_freq=0, verbose=0)


class _RecordWeights(Callback):
    """Host copies of the parameters and logs at each epoch end."""

    def on_train_begin(self, logs=None):
        self.weights, self.logs = [], []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append(self.trainer.state_on_host().params)
        self.logs.append(dict(logs))


def test_model_checkpoint_and_save_load_across_strategies(tmp_path):
    x, y = _data()
    _, params = _model_and_params()
    mirrored, single = jdist.MirroredStrategy(), jdist.OneDeviceStrategy("cpu:0")
    record = _RecordWeights()
    every_epoch = jdist.callbacks.ModelCheckpoint(tmp_path / "epoch{epoch:02d}-{loss:.3f}", save_weights_only=True)
    best = jdist.callbacks.ModelCheckpoint(tmp_path / "best", monitor="val_loss", save_best_only=True)
    by_steps = jdist.callbacks.ModelCheckpoint(tmp_path / "steps", save_freq=3, max_to_keep=None)
    trainer = _trainer(mirrored, params, steps_per_execution=2)
    trainer.fit(x, y, batch_size=BATCH, epochs=4, validation_data=(x[:40], y[:40]), verbose=0,
                callbacks=[record, every_epoch, best, by_steps])
    # One directory per epoch, named from the epoch and its loss; weights load under another strategy.
    names = sorted(p.name for p in tmp_path.glob("epoch*"))
    assert names == [f"epoch{e + 1:02d}-{record.logs[e]['loss']:.3f}" for e in range(4)]
    reader = _trainer(single, params)
    reader.load_weights(tmp_path / names[1])
    _assert_trees_close(reader.params, record.weights[1], rtol=0, atol=0)
    # save_best_only keeps the weights of the epoch with the lowest val_loss.
    best_epoch = int(np.argmin([logs["val_loss"] for logs in record.logs]))
    info = reader.load(tmp_path / "best")
    assert info["epoch"] == best_epoch + 1 and info["val_loss"] == min(r["val_loss"] for r in record.logs)
    _assert_trees_close(reader.params, record.weights[best_epoch], rtol=0, atol=0)
    # save_freq=3 steps with 2 steps per execution: saved once 3 or more steps passed since the last.
    steps = jdist.checkpoint.CheckpointManager(tmp_path / "steps").all_steps()
    assert steps == [4, 8, 12, 16]

    # A whole-state save resumes training exactly, also on another strategy.
    trainer.save(tmp_path / "state")
    more = trainer.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    resumed = _trainer(single, params)
    assert resumed.load(tmp_path / "state")["step"] == 16 and resumed.step == 16
    again = resumed.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    _assert_trees_close(resumed.params, trainer.params)
    np.testing.assert_allclose(again.history["loss"], more.history["loss"], rtol=1e-5)
    with pytest.raises(FileNotFoundError, match="No checkpoint"):
        resumed.load_weights(tmp_path / "nothing-here")
