"""`PlotHistory`: a PNG of the training curves, written when `fit` ends."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping, Sequence, cast

from jdist.callbacks.base import Callback, Logs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from jdist.callbacks.history import History


def plot_history(history: History | Mapping[str, Sequence[float]], path: str | os.PathLike | None = None,
                 title: str | None = None, *, epochs: Mapping[str, Sequence[int]] | None = None) -> Figure:
    """One panel per metric (loss, accuracy, ...), training and validation curves together.

    `history` is a `History` (what `fit` returns) or its `.history` dict of per-epoch lists.
    `epochs` maps a metric to the 0-based epochs its values belong to; it is needed when
    validation ran only on some epochs (`validation_freq`), so each point sits at its own
    epoch. Returns a `matplotlib.figure.Figure` (a notebook shows it with `display(fig)`)
    and, with `path`, also writes it as a PNG. matplotlib's global backend is left alone:
    the figure is drawn on its own Agg canvas. Needs matplotlib (a jdist dependency).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("Plotting needs matplotlib: pip install matplotlib.") from err
    epochs = dict(epochs or {})
    if hasattr(history, "history"):  # a History callback: its per-key epochs come with it
        epochs = {**getattr(history, "epochs_of", {}), **epochs}
        curves: Mapping[str, Sequence[float]] = cast("History", history).history
    else:
        curves = cast("Mapping[str, Sequence[float]]", history)
    names = [k for k in curves if not k.startswith("val_")]
    if not names:
        raise ValueError("Nothing to plot: the history has no metrics.")
    fig = Figure(figsize=(4.5 * len(names), 3.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(names), squeeze=False)
    train_epochs = max(len(curves[name]) for name in names)
    for ax, name in zip(axes[0], names):
        for key, label in ((name, "train"), (f"val_{name}", "validation")):
            if key in curves:
                ax.plot([e + 1 for e in _epochs_of(key, curves[key], epochs, train_epochs)], curves[key],
                        marker="o", label=label)
        ax.set_xlabel("epoch")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        path = os.fspath(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=100)
    return fig


def _epochs_of(key: str, values: Sequence[float], epochs: Mapping[str, Sequence[int]], train_epochs: int) -> list:
    if key in epochs:
        if len(epochs[key]) != len(values):
            raise ValueError(f"plot_history: {len(values)} values of {key!r} but {len(epochs[key])} epochs for it.")
        return list(epochs[key])
    if len(values) != train_epochs:
        raise ValueError(
            f"plot_history: {key!r} has {len(values)} values for {train_epochs} epochs (validation_freq?), so "
            f"its epochs are unknown; pass the History itself or epochs={{{key!r}: [...]}} (0-based).")
    return list(range(len(values)))


class PlotHistory(Callback):
    """Saves `plot_history` of this fit's epochs to `path` at the end of training (process 0)."""

    def __init__(self, path: str | os.PathLike = "training_curves.png", title: str | None = None):
        super().__init__()
        self.path = os.fspath(path)
        self.title = title
        self._history: dict[str, list[float]] = {}
        self._epochs: dict[str, list[int]] = {}

    def on_train_begin(self, logs: Logs | None = None) -> None:
        self._history, self._epochs = {}, {}

    def on_epoch_end(self, epoch: int, logs: Logs | None = None) -> None:
        for key, value in (logs or {}).items():
            self._history.setdefault(key, []).append(float(value))
            self._epochs.setdefault(key, []).append(epoch)

    def on_train_end(self, logs: Logs | None = None) -> None:
        import jax

        if self._history and jax.process_index() == 0:
            plot_history(self._history, self.path, self.title, epochs=self._epochs)
