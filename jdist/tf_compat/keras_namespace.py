"""`tf.keras`, `tf.metrics`, `tf.losses`, `tf.optimizers`: TF 2.21's `tf.keras` namespace, over Keras 3 on JAX.

TF 2.21's `tf.keras` is Keras 3's `keras._tf_keras.keras` (observed: `tf.keras.__name__`), which adds
TF's names to Keras 3's: `tf.keras.losses.Reduction.NONE` is "none" (also AUTO, SUM,
SUM_OVER_BATCH_SIZE), and layers, models, optimizers and metrics are Keras 3's own classes. jdist
binds the same module, with the one requirement that Keras runs on JAX: `import jdist.tf_compat` sets
KERAS_BACKEND=jax unless the variable is set or Keras is already imported, and another backend is an error.
"""
from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any


def keras_module() -> types.ModuleType:
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


@functools.cache
def tf_keras() -> types.ModuleType:
    """TF's `tf.keras`: Keras 3's TF-compatible namespace (`keras._tf_keras.keras`), with the names that
    need TensorFlow in Keras 3 served by jdist (`keras_extras`)."""
    keras_module()
    from keras._tf_keras import keras as namespace

    from jdist.interop import keras_epochs, keras_labels, keras_tf_steps
    from jdist.tf_compat import (
        hashed_crossing,
        integer_lookup,
        keras_extras,
        keras_hashing,
        keras_saving,
        keras_strings,
        loss_scale_apply,
        sigmoid_logits,
        text_vectorization,
    )

    keras_extras.add_reset_states()
    loss_scale_apply.install()  # LossScaleOptimizer.apply without assignments in traced branches
    sigmoid_logits.install()  # binary crossentropy of a sigmoid's output from its logits, as TF's Keras
    keras_labels.expand_compiled_labels()
    keras_strings.install_model_dispatch()
    keras_saving.install()
    keras_epochs.install()  # an epoch ends at steps_per_epoch, whatever steps_per_execution is (tf_keras's)
    keras_tf_steps.install()  # a model's TF-style train_step(self, data) runs as TF's fit runs it
    from jdist.tf_compat import keras_sparse

    keras_sparse.install()  # a tf.SparseTensor into a model is Keras JAX's sparse BCOO (TF's Input(sparse=True))
    from jdist.tf_compat import keras_iterations, keras_shims

    keras_shims.install()  # TF's Keras 3 `compiled_loss` / `compiled_metrics` shims for a TF-style train_step
    keras_iterations.install()  # `optimizer.iterations` reads as TF's int64 counter
    from jdist.tf_compat import keras_int_weights

    keras_int_weights.install()  # a layer's `dtype="int"` weight (Normalization's count) reads as TF's int64
    from jdist.tf_compat import keras_adapt

    keras_adapt.install()  # Normalization/Discretization.adapt take a jdist tf.data.Dataset, as TF's take TF's
    from jdist.tf_compat import keras_tf_variables

    keras_tf_variables.install()  # before any layer is made: a tf.Variable attribute is none of its weights
    from jdist.tf_compat import feature_space
    from jdist.tf_compat.sidecar import SidecarEvaluator
    from jdist.tf_compat.timeseries_dataset import timeseries_dataset_from_array
    from jdist.tf_compat.unsupported import Unsupported

    return _Overlay(namespace, {
        "Input": keras_strings.keras_input(namespace.Input),
        "dtensor": Unsupported("tf.keras.dtensor"),  # tf_keras's DTensor optimizers; jdist's layouts instead
        "callbacks": _Overlay(namespace.callbacks, {"TensorBoard": keras_extras.tensorboard_class(),
                                                    "ModelCheckpoint": keras_extras.model_checkpoint_class()}),
        "models": _Overlay(namespace.models, {"load_model": keras_saving.load_model}),
        "utils": _Overlay(namespace.utils, {"SidecarEvaluator": SidecarEvaluator,  # tf_keras's
                                            "FeatureSpace": feature_space.feature_space_class(),
                                            "timeseries_dataset_from_array": timeseries_dataset_from_array}),
        "optimizers": _Overlay(namespace.optimizers, {"legacy": keras_extras.legacy_optimizers()}),
        "layers": _Overlay(namespace.layers, {"StringLookup": keras_extras.string_lookup_class(),
                                              "TextVectorization": text_vectorization.text_vectorization_class(),
                                              "IntegerLookup": integer_lookup.integer_lookup_class(),
                                              "Hashing": keras_hashing.hashing_class(),
                                              "HashedCrossing": hashed_crossing.hashed_crossing_class(),
                                              "Input": keras_strings.keras_input(namespace.layers.Input)}),
        **{name: value for extend in EXTENSIONS for name, value in extend(namespace, _Overlay).items()},
    })


# Providers of more `tf.keras` names, given the namespace and the overlay class (added by `jdist.tf_compat`, so
# this module needs none of theirs): `dtensor_keras_names.legacy_keras_names`, tf_keras's under TF_USE_LEGACY_KERAS
EXTENSIONS: list[Any] = []


class _Overlay(types.ModuleType):
    """A module that is `base` except for `overrides` (Keras's own module objects are left untouched)."""

    def __init__(self, base: types.ModuleType, overrides: dict[str, Any]):
        super().__init__(base.__name__, base.__doc__)
        self.__dict__.update(overrides)
        self._base = base

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._base)) | set(self.__dict__) - {"_base"})


ALIASES = {"metrics": "metrics", "losses": "losses", "optimizers": "optimizers", "initializers": "initializers"}


def alias(name: str) -> types.ModuleType:
    """`tf.metrics` and the like: the `tf.keras` submodule of that name (TF 2.21's aliases)."""
    return getattr(tf_keras(), ALIASES[name])
