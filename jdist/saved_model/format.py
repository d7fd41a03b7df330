"""The files of jdist's SavedModel directory, and reading the weights back."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

FORMAT = "jdist.saved_model"
VERSION = 1
DESCRIPTION = "saved_model.json"   # signatures: input names and specs, output names and specs
FUNCTIONS = "functions"            # one jax.export program per signature
VARIABLES = os.path.join("variables", "variables.npz")
ARCHIVE = "model.keras"            # the Keras 3 archive, for keras.models.load_model


def write_variables(directory: str, model: Any) -> None:
    arrays = {f"trainable/{i}": np.asarray(v.value) for i, v in enumerate(model.trainable_variables)}
    arrays.update({f"non_trainable/{i}": np.asarray(v.value) for i, v in enumerate(model.non_trainable_variables)})
    os.makedirs(os.path.join(directory, "variables"), exist_ok=True)
    np.savez(os.path.join(directory, VARIABLES), **arrays)  # pyright: ignore[reportArgumentType]


def read_variables(directory: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    with np.load(os.path.join(directory, VARIABLES)) as data:
        groups: dict[str, list[np.ndarray]] = {"trainable": [], "non_trainable": []}
        for group in groups:
            i = 0
            while f"{group}/{i}" in data.files:
                groups[group].append(data[f"{group}/{i}"])
                i += 1
    return groups["trainable"], groups["non_trainable"]


def tf_keras_name(variable: Any) -> str:
    """tf_keras's name of a Keras 3 variable: its layer's name and its own, `dense/kernel:0` (observed in
    TF 2.21 with tf_keras: the loaded SavedModel's `trainable_variables` of a Sequential are `conv2d/kernel:0`,
    ..., `batch_normalization/moving_mean:0`); Keras 3's path is `sequential/dense/kernel`."""
    return "/".join(str(getattr(variable, "path", variable.name)).split("/")[-2:]) + ":0"


class SavedArray(np.ndarray):
    """A loaded weight: its array, with the `name` and `trainable` a TF variable has (the guide prints them)."""

    name: str
    trainable: bool

    @classmethod
    def of(cls, array: np.ndarray, name: str, trainable: bool) -> "SavedArray":
        out = np.asarray(array).view(cls)
        out.name, out.trainable = name, trainable
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self.name = getattr(obj, "name", "")
        self.trainable = getattr(obj, "trainable", False)

    def numpy(self) -> np.ndarray:
        return np.asarray(self).view(np.ndarray)
