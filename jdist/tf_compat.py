"""TensorFlow's names for what jdist implements, so a port changes its import, not every `tf.` name.

    import jdist.tf_compat as tf      # was: import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([...])        # Keras 3 on the JAX backend

Each name is the jdist object with TensorFlow's semantics (docs/tf_mapping.md), not a
reimplementation; a TensorFlow name jdist does not provide raises AttributeError naming it,
instead of running something with other semantics. `tf.keras` is Keras 3, imported on first
use, and must run on the JAX backend (set `KERAS_BACKEND=jax` before importing Keras).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import jax.numpy as jnp

import jdist
from jdist import data, train
from jdist.interop.gradient_tape import GradientTape
from jdist.interop.tf_function import function

_DOCS = "docs/tf_mapping.md"


class _Namespace:
    """A `tf.` submodule: the listed names, and an AttributeError naming any other."""

    def __init__(self, path: str, **names: Any):
        self.__name__ = path
        self.__dict__.update(names)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"jdist does not provide `{self.__name__}.{name}`; {_DOCS} lists the TensorFlow "
                             f"names it implements")

    def __dir__(self) -> list[str]:
        return sorted(k for k in self.__dict__ if k != "__name__")

    def __repr__(self) -> str:
        return f"<jdist.tf_compat namespace {self.__name__}>"


distribute = _Namespace(
    "tf.distribute",
    MirroredStrategy=jdist.MirroredStrategy,
    OneDeviceStrategy=jdist.OneDeviceStrategy,
    MultiWorkerMirroredStrategy=jdist.MultiWorkerMirroredStrategy,
    TPUStrategy=jdist.TPUStrategy,
    ParameterServerStrategy=jdist.ParameterServerStrategy,
    Strategy=jdist.Strategy,
    ReduceOp=jdist.ReduceOp,
    ReplicaContext=jdist.ReplicaContext,
    InputContext=jdist.InputContext,
    InputOptions=jdist.InputOptions,
    InputReplicationMode=jdist.InputReplicationMode,
    DistributedDataset=jdist.DistributedDataset,
    DistributedIterator=jdist.DistributedIterator,
    get_strategy=jdist.get_strategy,
    has_strategy=jdist.has_strategy,
    get_replica_context=jdist.get_replica_context,
    in_cross_replica_context=jdist.in_cross_replica_context,
    experimental_set_strategy=jdist.experimental_set_strategy,
    experimental=_Namespace(
        "tf.distribute.experimental",
        CentralStorageStrategy=jdist.CentralStorageStrategy,
        MultiWorkerMirroredStrategy=jdist.MultiWorkerMirroredStrategy,
        ParameterServerStrategy=jdist.ParameterServerStrategy,
        TPUStrategy=jdist.TPUStrategy,
        CommunicationImplementation=jdist.CommunicationImplementation,
        CollectiveCommunication=jdist.CollectiveCommunication,
        CommunicationOptions=jdist.CommunicationOptions,
        ValueContext=jdist.ValueContext,
        partitioners=_Namespace(
            "tf.distribute.experimental.partitioners",
            Partitioner=jdist.partitioners.Partitioner,
            FixedShardsPartitioner=jdist.partitioners.FixedShardsPartitioner,
            MinSizePartitioner=jdist.partitioners.MinSizePartitioner,
            MaxSizePartitioner=jdist.partitioners.MaxSizePartitioner,
        ),
        coordinator=_Namespace(
            "tf.distribute.experimental.coordinator",
            ClusterCoordinator=jdist.ClusterCoordinator,
            RemoteValue=jdist.RemoteValue,
            PerWorkerValues=jdist.PerWorkerValues,
        ),
    ),
)

nn = _Namespace(
    "tf.nn",
    compute_average_loss=jdist.compute_average_loss,
    scale_regularization_loss=jdist.scale_regularization_loss,
)


def add_n(inputs: Sequence[Any], name: str | None = None) -> Any:
    """`tf.add_n`: the element-wise sum of a non-empty list of same-shaped arrays, added in order."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("tf.add_n: `inputs` must hold at least one array (got an empty list)")
    total = jnp.asarray(inputs[0])
    for value in inputs[1:]:
        if jnp.shape(value) != total.shape:
            raise ValueError(f"tf.add_n: every input must have the same shape; got {total.shape} and "
                             f"{jnp.shape(value)}")
        total = total + value
    return total


def _keras() -> Any:
    """Keras 3, checked to run on JAX: jdist's `strategy.run` traces Keras objects as JAX arrays."""
    backend = os.environ.get("KERAS_BACKEND")
    if "keras" in sys.modules:
        backend = sys.modules["keras"].backend.backend()
    if backend != "jax":
        raise RuntimeError(f"tf.keras under jdist is Keras 3 on the JAX backend, but the backend is "
                           f"{backend or 'unset (Keras would pick TensorFlow)'}: set the environment variable "
                           f"KERAS_BACKEND=jax before Keras is first imported")
    import keras

    return keras


def __getattr__(name: str) -> Any:
    if name == "keras":
        return _keras()
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"jdist does not provide `tf.{name}`; {_DOCS} lists the TensorFlow names it implements")


def __dir__() -> list[str]:
    return sorted(__all__ + ["keras"])


__all__ = ["GradientTape", "add_n", "data", "distribute", "function", "nn", "train"]
