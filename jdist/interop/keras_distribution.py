"""Keras 3's own `fit` under a jdist strategy: `strategy.scope()` installs a Keras distribution.

    strategy = jdist.MirroredStrategy()
    with strategy.scope():                       # as with tf.distribute.MirroredStrategy
        model = keras.Sequential([...])          # variables created on the strategy's mesh
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=64)           # data parallel: each batch split over the replicas

While the scope is open (and Keras, on the JAX backend, is imported), Keras's
global distribution (`keras.distribution.set_distribution`) is a
`StrategyDistribution` over the strategy's mesh: Keras variables follow the
strategy's layout (replicated without one) and each batch is split over the
data axis, so Keras's jitted train step is the same global-view program as on
one device, run SPMD. A batch the replicas do not divide (the short last batch
of an epoch) is placed whole on every device: that one step is computed
replicated, its logged loss and metrics over its real examples, and its
gradient TF's mean of the replicas' means (`keras_replica_means`).
Strategies that keep their parameters apart from the compute devices
(central storage, parameter servers) install nothing; Keras then runs as
without a strategy. A model made in the scope keeps it: its `fit`, `evaluate`
and `predict` called after the scope is closed run under the same distribution
(`keras_variables`), as TF's models keep their strategy.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from jdist.interop import (
    keras_backup,
    keras_dispatch,
    keras_epochs,
    keras_optimizer_scope,
    keras_replica_batch_norm,
    keras_replica_gradients,
    keras_replica_losses,
    keras_replica_means,
    keras_tf_steps,
    keras_variables,
)
from jdist.strategy import extensions

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


def _keras_on_jax() -> Any:
    """The keras module if it runs on JAX, else None. Keras is imported here only where the environment
    asks for it on JAX (KERAS_BACKEND=jax) and it is installed: a script that first touches Keras inside
    the scope (`tf.keras.Sequential(...)` after `with strategy.scope():`) must still get the scope's
    distribution, or each worker would keep its own initial weights."""
    keras = sys.modules.get("keras")
    if keras is None and os.environ.get("KERAS_BACKEND") == "jax" and importlib.util.find_spec("keras"):
        import keras
    if keras is None:
        return None
    try:
        return keras if keras.backend.backend() == "jax" else None
    except AttributeError:  # a partially imported module
        return None


@contextlib.contextmanager
def scope(strategy: Strategy) -> Iterator[None]:
    """Keras's distribution for `strategy` while the block runs (nothing without Keras)."""
    keras = _keras_on_jax()
    if keras is not None and strategy.keras_variable_store() is not None:
        keras_variables.install_remote_hooks()  # variables made here are kept where the strategy says
    if keras is None or not _installs(strategy):
        yield
        return
    with strategy_distribution(strategy).scope():
        yield


def _installs(strategy: Strategy) -> bool:
    """Keras's distribution runs one program over the mesh: not where a step is several programs
    (parameters kept apart from the compute devices, as on parameter servers)."""
    return strategy.single_program_step


def strategy_distribution(strategy: Strategy) -> Any:
    """A `keras.distribution.Distribution` over `strategy`'s mesh (made once per strategy)."""
    cached = getattr(strategy, "_keras_distribution", None)
    if cached is None:
        cached = _distribution_class()(strategy)
        strategy._keras_distribution = cached
        _place_short_batches_whole()
        keras_variables.install(lambda d: isinstance(d, _distribution_class()))
        keras_backup.install()
        keras_epochs.install()
        keras_dispatch.install()  # Keras's steps count against jdist's bound on programs in flight
        keras_tf_steps.install()  # a model's TF-style train_step(self, data) runs as TF's fit runs it
        keras_replica_means.install(lambda d: isinstance(d, _distribution_class()))  # TF's gradient of such a batch
        keras_replica_batch_norm.install(lambda d: isinstance(d, _distribution_class()))  # each replica's statistics
        keras_replica_losses.install(lambda d: isinstance(d, _distribution_class()))  # add_loss once per replica
        keras_replica_gradients.install(lambda d: isinstance(d, _distribution_class()))  # each replica's gradients
        keras_optimizer_scope.install()  # an optimizer made in the scope makes its slots there (TF's error)
    return cached


def _place_short_batches_whole() -> None:
    """Keras's JAX trainer computes the data sharding once, from an epoch's first batch, and
    reuses it for every batch, so a short last batch the replicas do not divide fails to
    place. Under a jdist strategy's distribution such a batch is placed whole on every
    device instead (one replicated step, averaging over its real examples)."""
    from keras.src.backend.jax import distribution_lib as backend_lib

    original = backend_lib.distribute_data_input
    if getattr(original, "_jdist", False):
        return

    def distribute_data_input(per_process_batch, layout, batch_dim_name):
        import jax
        from jax.sharding import NamedSharding, PartitionSpec as P
        from keras.src.distribution import distribution_lib

        current = distribution_lib.distribution()
        sharding = getattr(layout, "backend_layout", layout)
        if (isinstance(current, _distribution_class()) and jax.process_count() == 1
                and isinstance(sharding, NamedSharding) and len(sharding.spec) and sharding.spec[0] is not None):
            axes = sharding.spec[0] if isinstance(sharding.spec[0], tuple) else (sharding.spec[0],)
            parts = int(np.prod([sharding.mesh.shape[a] for a in axes]))
            if np.shape(per_process_batch)[0] % parts:
                return jax.device_put(per_process_batch, NamedSharding(sharding.mesh, P()))
        return original(per_process_batch, layout, batch_dim_name)

    distribute_data_input._jdist = True
    backend_lib.distribute_data_input = distribute_data_input


_CLASS: Any = None


def _distribution_class() -> type:
    """Defined on first use, so importing jdist never imports Keras."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from keras.src.distribution.distribution_lib import DeviceMesh, Distribution, TensorLayout

    class StrategyDistribution(Distribution):
        """Keras's view of a jdist strategy: its mesh, its data axis and its layout."""

        def __init__(self, strategy: Strategy):
            mesh = strategy.mesh
            device_mesh = DeviceMesh(shape=tuple(mesh.devices.shape), axis_names=list(mesh.axis_names),
                                     devices=np.asarray(mesh.devices))
            super().__init__(device_mesh, strategy.data_axis, auto_shard_dataset=False)
            self.strategy = strategy

        def get_data_layout(self, data_shape):
            spec = [None] * len(data_shape)
            if data_shape and data_shape[0] is not None and data_shape[0] % self.strategy.num_replicas_in_sync == 0:
                spec[0] = self.batch_dim_name  # else replicated: the step averages over what it gets
            return TensorLayout(spec, self.device_mesh)

        def get_variable_layout(self, variable):
            if getattr(variable, "_layout", None) is not None:
                return variable._layout
            spec = variable_spec(self.strategy, variable.path, tuple(variable.shape), variable.dtype)
            return TensorLayout(list(spec) + [None] * (len(variable.shape) - len(spec)), self.device_mesh)

        def get_tensor_layout(self, path):
            return None

        def distribute_dataset(self, dataset):
            return dataset

        def __repr__(self) -> str:
            return f"StrategyDistribution({self.strategy!r})"

    _CLASS = StrategyDistribution
    return _CLASS


def variable_spec(strategy: Strategy, path: str, shape: tuple, dtype: Any) -> Any:
    """The `PartitionSpec` the strategy's layout gives one Keras variable (by its path)."""
    from jax.sharding import PartitionSpec as P

    from jdist.layout import LayoutError, check_spec

    layout = strategy.layout
    if layout is None or not shape:
        return P()
    matches = [rule for rule in layout.rules if rule.regex.fullmatch(path)]
    if len(matches) > 1:
        raise LayoutError(f"Variable {path!r} with shape {shape} matches {len(matches)} rules: "
                          f"{', '.join(map(str, matches))}. Make the regexes disjoint.")
    if matches:
        spec = matches[0].spec_for(shape, dtype, strategy.mesh)
        check_spec(spec, shape, strategy.mesh, path, str(matches[0]))
        return spec
    return layout._default_spec(shape, dtype, strategy.mesh)


extensions.register_scope(scope)
