"""TF 2.21's remaining small names of `tf.saved_model`, `tf.distribute.experimental` and `tf.config`,
and `tf.io.matching_files` (glob, all matches sorted together, as TF 2.21 sorts them).

The SavedModel constants are TF's strings (observed, TF 2.21); `Asset` records a file path as a string tensor,
as TF's does, for code that reads `asset.asset_path`. `CollectiveHints` is TF's deprecated spelling of
`CommunicationOptions`: in TF 2.21 it returns a `CommunicationOptions` (observed), which strategies' `options=`
take. `experimental_connect_to_host` (remote eager hosts) has no JAX counterpart. `UPDATES` lists what these
and the neighbouring modules (strings_more, data_extras, sparse_serialization) add to existing namespaces.
"""
from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

import jdist
from jdist.tf_compat import data_extras, sparse_serialization, strings_more
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.math_special import approx_max_k, approx_min_k

SAVED_MODEL = dict(
    ASSETS_DIRECTORY="assets", ASSETS_KEY="saved_model_assets", CLASSIFY_INPUTS="inputs",
    CLASSIFY_METHOD_NAME="tensorflow/serving/classify", CLASSIFY_OUTPUT_CLASSES="classes",
    CLASSIFY_OUTPUT_SCORES="scores", DEBUG_DIRECTORY="debug", DEBUG_INFO_FILENAME_PB="saved_model_debug_info.pb",
    GPU="gpu", PREDICT_INPUTS="inputs", PREDICT_METHOD_NAME="tensorflow/serving/predict", PREDICT_OUTPUTS="outputs",
    REGRESS_INPUTS="inputs", REGRESS_METHOD_NAME="tensorflow/serving/regress", REGRESS_OUTPUTS="outputs",
    SAVED_MODEL_FILENAME_PB="saved_model.pb", SAVED_MODEL_FILENAME_PBTXT="saved_model.pbtxt",
    SAVED_MODEL_SCHEMA_VERSION=1, SERVING="serve", TPU="tpu", TRAINING="train", VARIABLES_DIRECTORY="variables",
    VARIABLES_FILENAME="variables",
)


class Asset:
    """`tf.saved_model.Asset(path)`: a file a model uses; `asset_path` is its path as a string tensor. jdist's
    SavedModel keeps the path as given (the file is not copied into `assets/`)."""

    def __init__(self, path: Any) -> None:
        value = path.asset_path if isinstance(path, Asset) else path
        item = np.asarray(value, dtype=object)[()]
        self.asset_path = as_tensors(np.asarray(os.fsencode(item) if isinstance(item, str) else bytes(item),
                                                dtype=object))


def CollectiveHints(bytes_per_pack: int = 0, timeout_seconds: float | None = None  # noqa: N802 (TF's name)
                    ) -> jdist.CommunicationOptions:
    """TF's deprecated `tf.distribute.experimental.CollectiveHints`: a `CommunicationOptions`, as TF 2.21's."""
    if bytes_per_pack < 0:
        raise ValueError(f"Argument `bytes_per_pack` must be >=0, Received {bytes_per_pack}.")
    if timeout_seconds is not None and timeout_seconds <= 0:
        raise ValueError(f"Argument `timeout_seconds` must be >0, Received {timeout_seconds}.")
    return jdist.CommunicationOptions(bytes_per_pack=bytes_per_pack, timeout_seconds=timeout_seconds)


def experimental_connect_to_host(remote_host: Any = None, job_name: str = "worker") -> None:
    """Refused: TF's remote eager hosts have no JAX counterpart."""
    raise NotImplementedError(
        "jdist does not provide `tf.config.experimental_connect_to_host`: JAX runs no remote eager hosts; "
        "multi-process JAX connects through jax.distributed.initialize (jdist.launch does it). "
        "See docs/tf_mapping.md.")


def matching_files(pattern: Any, name: Any = None) -> Any:
    """`tf.io.matching_files`: the files (and folders) a glob pattern, or a vector of them, matches, all
    sorted together as bytes; none is an empty vector."""
    patterns = np.asarray(pattern, dtype=object)
    if patterns.ndim > 1:
        raise InvalidArgumentError(None, None, "Input patterns tensor must be scalar or vector, but had shape: "
                                               f"[{','.join(str(d) for d in patterns.shape)}]")
    found = [p for item in patterns.reshape(-1)
             for p in glob.glob(item.decode() if isinstance(item, bytes) else str(item))]
    return as_tensors(np.array(sorted(p.encode() for p in found), dtype=object))


DISTRIBUTE_EXPERIMENTAL = dict(CollectiveHints=CollectiveHints)
CONFIG = dict(experimental_connect_to_host=experimental_connect_to_host)
SAVED_MODEL_NAMES = dict(SAVED_MODEL, Asset=Asset)
IO = dict(matching_files=matching_files)

# the names each existing namespace gains, by its path under `tf.`
UPDATES: dict[str, dict[str, Any]] = {
    "strings": strings_more.NAMES, "saved_model": SAVED_MODEL_NAMES, "config": CONFIG,
    "io": dict(IO, **sparse_serialization.IO),
    "nn": dict(approx_max_k=approx_max_k, approx_min_k=approx_min_k),  # tf.math's, as in TF
    "data.experimental": data_extras.DATA_EXPERIMENTAL, "distribute.experimental": DISTRIBUTE_EXPERIMENTAL,
}


def namespace(names: dict[str, Any], path: str) -> Any:
    """The namespace at `path` ("data.experimental") among the module names `names`."""
    head, *rest = path.split(".")
    found = names[head]
    for part in rest:
        found = getattr(found, part)
    return found
