"""Callbacks under `fit(validation_freq=...)`: epochs without validation have no `val_*` logs.

The CSV layout and EarlyStopping's skipping were observed from Keras 3.15.1 (TF 2.21 venv):
`CSVLogger` writes the first epoch's metric names sorted, adds a `val_` column for each when
that epoch had none, and writes `NA` where an epoch lacks a value; `EarlyStopping` skips an
epoch whose monitor is missing. TensorBoard's tags follow Keras 3.15's `callbacks/tensorboard.py`.
"""
import csv

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.callbacks import Callback, EarlyStopping, MetricsLogger, plot_history
from jdist.callbacks.event_file import read_scalars
from jdist.models import MLP

N, BATCH, LR = 100, 32, 0.01  # 4 steps per epoch
STEPS_PER_EPOCH = 4


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 6)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int32)


def _trainer(optimizer=None):
    model = MLP(features=(8,), num_classes=2)
    params = model.init(jax.random.key(0), jnp.zeros((1, 6)))["params"]
    return jdist.Trainer(model, optimizer or optax.adam(LR), metrics=["accuracy"], params=params,
                         strategy=jdist.MirroredStrategy(["cpu:0", "cpu:1"]))


@pytest.mark.parametrize("freq, validated", [(2, [1, 3]), ([1, 3], [0, 2])])
def test_loggers_and_early_stopping_follow_validation_freq(tmp_path, freq, validated):
    x, y = _data()
    trainer = _trainer(optax.inject_hyperparams(optax.adam)(learning_rate=LR))
    stopper = EarlyStopping("val_loss", patience=10)
    history = trainer.fit(x, y, batch_size=BATCH, epochs=4, verbose=0, validation_data=(x[:50], y[:50]),
                          validation_freq=freq, callbacks=[MetricsLogger(tmp_path), stopper])
    h = history.history
    assert len(h["loss"]) == 4 and len(h["val_loss"]) == 2 and history.epochs_of["val_loss"] == validated

    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["epoch", "accuracy", "loss", "val_accuracy", "val_loss"]
    assert [r[0] for r in rows[1:]] == ["0", "1", "2", "3"]
    np.testing.assert_allclose([float(r[2]) for r in rows[1:]], h["loss"], rtol=1e-7)
    assert [r[3:] == ["NA", "NA"] for r in rows[1:]] == [e not in validated for e in range(4)]
    np.testing.assert_allclose([float(rows[1 + e][4]) for e in validated], h["val_loss"], rtol=1e-7)

    assert stopper.best == min(h["val_loss"]) and stopper.best_epoch == validated[int(np.argmin(h["val_loss"]))]
    assert not trainer.stop_training

    (train_file,) = (tmp_path / "train").glob("events.out.tfevents.*")
    (val_file,) = (tmp_path / "validation").glob("events.out.tfevents.*")
    val = read_scalars(val_file)
    assert [s for s, t, _ in val if t == "epoch_loss"] == validated
    np.testing.assert_allclose([v for _, t, v in val if t == "epoch_loss"], h["val_loss"], rtol=1e-6)
    assert [s for s, t, _ in val if t == "evaluation_loss_vs_iterations"] == [
        (e + 1) * STEPS_PER_EPOCH for e in validated]
    np.testing.assert_allclose([v for _, t, v in val if t == "evaluation_accuracy_vs_iterations"],
                               h["val_accuracy"], rtol=1e-6)
    rates = [(s, v) for s, t, v in read_scalars(train_file) if t == "epoch_learning_rate"]
    assert [s for s, _ in rates] == [0, 1, 2, 3]
    np.testing.assert_allclose([v for _, v in rates], LR, rtol=1e-6)

    fig = plot_history(history)
    loss_panel = fig.axes[0]
    assert loss_panel.get_title() == "loss"
    train_line, val_line = loss_panel.get_lines()
    assert list(train_line.get_xdata()) == [1, 2, 3, 4] and list(val_line.get_xdata()) == [e + 1 for e in validated]
    np.testing.assert_allclose(val_line.get_ydata(), h["val_loss"])
    with pytest.raises(ValueError, match="validation_freq"):
        plot_history(history.history)  # a bare dict cannot tell which epochs were validated
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class _Scripted(Callback):
    """Replaces val_loss, where validation ran, with a script: best at epoch 2 (1-based), then worse."""
    values = {1: 1.0, 3: 1.5, 5: 2.0}

    def on_epoch_end(self, epoch, logs=None):
        if "val_loss" in logs:
            logs["val_loss"] = self.values[epoch]


def test_early_stopping_counts_only_validated_epochs():
    x, y = _data()
    stopper = EarlyStopping("val_loss", patience=1)
    trainer = _trainer()
    history = trainer.fit(x, y, batch_size=BATCH, epochs=6, verbose=0, validation_data=(x[:50], y[:50]),
                          validation_freq=2, callbacks=[_Scripted(), stopper])
    # Keras's rule: epochs 0 and 2 have no val_loss and are skipped; epoch 3 is the first without improvement.
    assert stopper.best == 1.0 and stopper.best_epoch == 1 and stopper.stopped_epoch == 3
    assert len(history.history["loss"]) == 4
    with pytest.raises(ValueError, match="val_los.*not among"):  # a misspelt monitor is still an error
        trainer.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, validation_data=(x[:50], y[:50]),
                    validation_freq=2, callbacks=[EarlyStopping("val_los")])


def test_plotting_leaves_matplotlib_backend_alone(tmp_path):
    import matplotlib

    previous = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        fig = plot_history({"loss": [1.0, 0.5], "val_loss": [1.1, 0.7]}, tmp_path / "c.png", title="t")
        assert matplotlib.get_backend() == "svg"
        assert type(fig).__name__ == "Figure" and (tmp_path / "c.png").stat().st_size > 0
    finally:
        matplotlib.use(previous)
