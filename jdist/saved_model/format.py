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
