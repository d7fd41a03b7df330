"""What each built-in loss expects of its labels, checked on the host before a step.

A loss given by name (`Trainer(loss="sparse_categorical_crossentropy")`) knows
what its targets must look like; labels that do not fit would otherwise train
silently on a wrong target (one-hot rows read as class ids) or give `loss = nan`
(an out-of-range class id). One entry per loss name in `LABEL_CHECKS`:

    check(y, output_shape, where) -> None    # raises InputError

`y` is a numpy batch of labels, `output_shape` the model's output shape for that
batch (from `jax.eval_shape`, so the class count is known without running the
model). The checks cost a min/max over the labels, no device round trip.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jdist.errors import InputError

LabelCheck = Callable[[np.ndarray, tuple, str], None]


def _first_bad(bad: np.ndarray) -> tuple:
    """The index of the first True of `bad` (row first)."""
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad.reshape(-1))[0]), bad.shape))


def _at(index: tuple) -> str:
    return f"row {index[0]} of the batch" if len(index) == 1 else f"index {index} of the batch"


def _integral(y: np.ndarray, where: str, loss: str) -> None:
    if y.dtype.kind == "f" and not np.array_equal(y, np.floor(y)):
        index = _first_bad(y != np.floor(y))
        raise InputError(
            f"{where}: {loss} expects integer class ids, found the non-integer label {y[index].item()} at "
            f"{_at(index)} (dtype {y.dtype}). Fix: pass integer labels (e.g. y.astype(int)), or "
            "loss='categorical_crossentropy' for soft targets.")


def sparse_categorical(y: np.ndarray, output_shape: tuple, where: str) -> None:
    """Integer class ids in `[0, classes)`, shaped like the output without its class axis
    (or with a trailing 1, as Keras allows)."""
    loss = "'sparse_categorical_crossentropy'"
    expected = tuple(output_shape[:-1])
    if y.shape != expected and y.shape != expected + (1,):
        if y.shape == tuple(output_shape):
            # Keras 3.15 raises here too: "Argument `output` must have rank (ndim) `target.ndim - 1`."
            raise InputError(
                f"{where}: {loss} expects integer class ids of shape {expected}, but the labels have shape "
                f"{y.shape}, the shape of the model's output: one-hot (or probability) rows. Fix: pass integer "
                "labels (y.argmax(-1)), or use loss='categorical_crossentropy' for one-hot labels.")
        raise InputError(
            f"{where}: {loss} expects labels of shape {expected} (or {expected + (1,)}) for a model output of "
            f"shape {tuple(output_shape)}, found {y.shape}. Fix: give one integer class id per example.")
    if y.dtype.kind not in "iuf":
        raise InputError(f"{where}: {loss} expects integer class ids, found dtype {y.dtype}. Fix: pass integer "
                         "labels.")
    _integral(y, where, loss)
    classes = int(output_shape[-1])
    if y.size and (y.min() < 0 or y.max() >= classes):
        index = _first_bad((y < 0) | (y >= classes))
        value = y[index]
        # Keras 3.15 / TF 2.21 (at the step, on the device): "Received a label value of 19 which is outside
        # the valid range of [0, 10)."
        raise InputError(
            f"{where}: received a label value of {value.item()} at {_at(index)}, which is outside the valid "
            f"range of [0, {classes}): the model outputs {classes} classes. Fix: map the labels to 0..{classes - 1}, "
            f"or give the model's last layer as many units as there are classes.")


def categorical(y: np.ndarray, output_shape: tuple, where: str) -> None:
    """One-hot (or probability) rows shaped like the output."""
    loss = "'categorical_crossentropy'"
    if y.shape != tuple(output_shape):
        if y.shape in (tuple(output_shape[:-1]), tuple(output_shape[:-1]) + (1,)):
            # Keras 3.15: "Arguments `target` and `output` must have the same rank (ndim)."
            raise InputError(
                f"{where}: {loss} expects one-hot labels of shape {tuple(output_shape)}, but the labels have "
                f"shape {y.shape}: integer class ids. Fix: use loss='sparse_categorical_crossentropy', or one-hot "
                "encode the labels (np.eye(classes)[y]).")
        raise InputError(f"{where}: {loss} expects labels shaped like the model's output {tuple(output_shape)}, "
                         f"found {y.shape}. Fix: one row of class probabilities per example.")
    if y.size and y.min() < 0:
        index = _first_bad(y < 0)
        raise InputError(f"{where}: {loss} expects probabilities, found {y[index].item()} at "
                         f"{_at(index)}. Fix: one-hot labels or rows of probabilities in [0, 1].")


def _matches(y_shape: tuple, out: tuple) -> bool:
    """Equal shapes, or equal but for a trailing 1 on either side (Keras squeezes or expands
    it to the same rank)."""
    return y_shape == out or y_shape == out + (1,) or y_shape + (1,) == out


def binary(y: np.ndarray, output_shape: tuple, where: str) -> None:
    """Targets in [0, 1] shaped like the output (or without a trailing 1)."""
    loss = "'binary_crossentropy'"
    out = tuple(output_shape)
    if not _matches(y.shape, out):
        raise InputError(f"{where}: {loss} expects labels shaped like the model's output {out}, found {y.shape}. "
                         "Fix: one 0/1 target per output unit.")
    if y.size and (y.min() < 0 or y.max() > 1):
        index = _first_bad((y < 0) | (y > 1))
        raise InputError(f"{where}: {loss} expects targets in [0, 1], found {y[index].item()} at "
                         f"{_at(index)}. Fix: 0/1 labels (or probabilities).")


def regression(y: np.ndarray, output_shape: tuple, where: str) -> None:
    """Targets shaped like the output (or without a trailing 1): a broadcast would
    silently compare every example with every other."""
    out = tuple(output_shape)
    if not _matches(y.shape, out):
        raise InputError(f"{where}: a regression loss expects targets shaped like the model's output {out}, "
                         f"found {y.shape}; they would broadcast into a wrong loss. Fix: reshape the targets to "
                         f"{out}.")


LABEL_CHECKS: dict[str, LabelCheck] = {
    "sparse_categorical_crossentropy": sparse_categorical,
    "categorical_crossentropy": categorical,
    "binary_crossentropy": binary,
    "bce": binary,
    "mse": regression,
    "mean_squared_error": regression,
    "mae": regression,
    "mean_absolute_error": regression,
    "huber": regression,
    "huber_loss": regression,
}


def _key(name: str) -> str:
    """Keras's spellings of one loss ("mean_squared_error", "MeanSquaredError") as one key."""
    return name.lower().replace("_", "")


_BY_KEY = {_key(name): check for name, check in LABEL_CHECKS.items()}


def label_check_for(loss: Any) -> LabelCheck | None:
    """The check of a built-in loss: a name, a loss object with a `name` (`jdist.losses.X`, a Keras
    loss) or a built-in loss function; None for other functions."""
    name = loss if isinstance(loss, str) else getattr(loss, "name", None) or getattr(loss, "__name__", None)
    return _BY_KEY.get(_key(name)) if isinstance(name, str) else None
