"""TF's results of `strategy.run` for the strategies under `tf.distribute`: a `PerReplica`, also when the
replicas agree.

TF 2.21's `strategy.run` with 2+ replicas returns a `PerReplica` for every result that is not a variable, even
when every replica computed the same value (broadcast inputs, or after an all-reduce): `print(z)` shows one line
per replica and `z.values` holds one tensor per replica (observed: MirroredStrategy on 8 logical CPUs, TF's TPU
guide's `matmul_fn`). jdist's own `run` gives such results as one replicated array, so that updated parameters
flow into the next step without a copy; a port written for TF reads `.values` and prints them, so the strategies
a port gets from `jdist.tf_compat` turn those arrays into TF's `PerReplica`. With one replica TF returns the
tensor itself, and so does this.

Cost: one compiled broadcast per call over all such results (compiled once per set of shapes), dispatched like
`run`'s own program, without reading any value; each device keeps one copy of each value, as before. Measured on
a 2-core host with 8 simulated CPU devices: +~0.19 ms per step of a tiny step (0.58 -> 0.77 ms), the launch of an
8-device program; while a long step still runs, XLA:CPU's launch of any further program (this one, or a user's
`jax.jit(lambda v: v + 1)` of the result alike) can hold the host until the step's threads free up.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence, cast

import jax
import jax.core
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import jdist
from jdist.strategy import dispatch
from jdist.strategy.aggregation import MirroredState
from jdist.strategy.batch_components import PerReplicaComponent
from jdist.strategy.distributed_batch import DistributedBatch
from jdist.strategy.reduce_op import ReduceOp
from jdist.strategy.run_options import RunOptions
from jdist.strategy.values import (
    PerReplica,
    as_per_replica_class,
    as_plain,
    is_single,
    register_per_replica_class,
    split_mark,
)
from jdist.tfdata import tensor_text
from jdist.tfdata.structure import HostTensor
from jdist.typing import PyTree

_ACTIVE = threading.local()  # set while a TF-port strategy's run runs: its inner runs keep jdist's results


class TFPerReplica(PerReplica):
    """jdist's `PerReplica`, printed as TF 2.21 prints one (observed): `PerReplica:{` and a line per replica,
    each component a `tf.Tensor` (`0: tf.Tensor(-0.88, shape=(), dtype=float32),`)."""

    __slots__ = ()

    def __str__(self) -> str:
        return self._show(tensor_text.tensor_str)

    def __repr__(self) -> str:
        return self._show(tensor_text.tensor_repr)


TFPerReplica.__name__ = TFPerReplica.__qualname__ = "PerReplica"  # TF's type name, in messages too
register_per_replica_class(TFPerReplica)


def _is_distributed(x: Any) -> bool:
    """Whether `x` holds one value per replica of a strategy with 2+ replicas: a `PerReplica`, a distributed
    batch (or one of its components) on the mesh, a variable made in such a strategy's scope."""
    if isinstance(x, (PerReplica, PerReplicaComponent)):
        return True
    if isinstance(x, DistributedBatch):
        x = x.mask
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and split_mark(x) is not None:
        return not x.is_deleted() and len({s.index[0].start for s in x.addressable_shards}) > 1
    distribution = getattr(x, "_jdist_replication", None)
    return distribution is not None and distribution.strategy.num_replicas_in_sync > 1


class _DistributedValuesType(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return _is_distributed(instance)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, PerReplica) or type.__subclasscheck__(cls, subclass)


class DistributedValues(metaclass=_DistributedValuesType):
    """`tf.distribute.DistributedValues`, for `isinstance`: TF's distributed values are instances (observed,
    TF 2.21, MirroredStrategy over 2 logical CPUs: a `run` result, a distributed dataset's element and each of
    its components, a variable made in the scope; not a tensor, nor anything of a one-replica strategy)."""


class TFRunResults:
    """Mixin for `jdist.Strategy` subclasses: `run` returns TF's results (see the module docstring).

    Only the outermost `run` converts: a Keras function's `run` calls `run` again for its variables'
    new values (`jdist.interop.keras_run`), and those must stay replicated arrays. Its distributed datasets'
    batches print as TF's too (`per_replica_display`)."""

    per_replica_display = TFPerReplica
    plain_values_per_replica = False  # `run` returns PerReplica: a plain value given to `reduce` is TF's plain one

    def run(self, fn: Callable[..., PyTree], args: Sequence[PyTree] = (),
            kwargs: Mapping[str, PyTree] | None = None, options: RunOptions | None = None) -> PyTree:
        """`jdist.Strategy.run`, with every result TF returns per replica as a `PerReplica`."""
        runner: Any = super()
        if getattr(_ACTIVE, "on", False):
            return runner.run(fn, args, kwargs, options)
        _ACTIVE.on = True
        try:
            out = runner.run(fn, args, kwargs, options)
        finally:
            _ACTIVE.on = False
        return per_replica_results(cast(jdist.Strategy, self), out)

    def reduce(self, reduce_op: Any, value: PyTree, axis: Any = None) -> PyTree:
        """`jdist.Strategy.reduce`; MEAN of integers is float64, as TF 2.21's (observed, 2 and 4 logical CPUs:
        `reduce(MEAN, <int32 replica ids>, axis=None)` is `float64` 0.5 / 1.5; SUM keeps int32)."""
        runner: Any = super()
        out = runner.reduce(reduce_op, value, axis)
        if ReduceOp.from_value(reduce_op) is not ReduceOp.MEAN:
            return out
        inputs = jax.tree.leaves(runner._batch_values(value), is_leaf=lambda x: isinstance(x, PerReplica))
        outputs, treedef = jax.tree.flatten(out)
        if len(inputs) != len(outputs):
            return out
        return jax.tree.unflatten(treedef, [_float64_mean(i, o) if axis is not None or _distributed(i) else o
                                            for i, o in zip(inputs, outputs)])


def _distributed(value: Any) -> bool:
    """A per-replica value (a plain one is TF's to hand back as it is from `reduce(MEAN, axis=None)`)."""
    return isinstance(value, PerReplica) or split_mark(value) is not None


def _float64_mean(given: Any, mean: Any) -> Any:
    """`mean` as a float64 tensor where the reduced value `given` held integers (a host value: JAX computes in
    32 bits); unchanged otherwise and while tracing."""
    part = (given.stacked if given.is_stacked else given.values[0]) if isinstance(given, PerReplica) else given
    dtype = getattr(part, "dtype", None)
    if dtype is None or not np.issubdtype(np.dtype(dtype), np.integer) or isinstance(mean, jax.core.Tracer):
        return mean
    return HostTensor.of(np.asarray(mean, dtype=np.float64))


def per_replica_results(strategy: jdist.Strategy, out: PyTree) -> PyTree:
    """`out` with each replicated array leaf as a stacked `PerReplica` of `num_replicas_in_sync` equal parts;
    unchanged with one replica. `PerReplica` leaves, `jdist.MirroredState` (jdist's variable: TF returns a
    variable itself) and anything that is not a `jax.Array` are left as they are."""
    n = strategy.num_replicas_in_sync
    if n < 2:
        return out
    leaves, treedef = jax.tree.flatten(out, is_leaf=lambda x: isinstance(x, (PerReplica, MirroredState)))
    leaves = [as_per_replica_class(leaf, TFPerReplica) if type(leaf) is PerReplica else leaf for leaf in leaves]
    for i, leaf in enumerate(leaves):
        if is_single(leaf):  # every replica returned this one object: TF hands it back as it is
            leaves[i] = as_plain(leaf)
    picks = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.Array) and not is_single(leaf)]
    if not picks:
        return jax.tree.unflatten(treedef, leaves)
    replicated = strategy.replicated_sharding()
    inputs = tuple(_on_mesh(cast(jax.Array, leaves[i]), replicated) for i in picks)
    stacked = dispatch.dispatched(_broadcaster(strategy)(inputs))
    for i, value in zip(picks, stacked):
        leaves[i] = TFPerReplica(stacked=value)
    return jax.tree.unflatten(treedef, leaves)


def _on_mesh(x: jax.Array, replicated: NamedSharding) -> jax.Array:
    """`x` replicated on the strategy's mesh (where `run`'s results already are: then `x` itself)."""
    if isinstance(x, jax.core.Tracer):
        return x
    sharding = x.sharding
    if sharding is replicated or sharding == replicated:
        return x
    return jax.device_put(x, replicated)


def _broadcaster(strategy: jdist.Strategy) -> Callable[[tuple], tuple]:
    """One jitted program per strategy: each value to `(num_replicas, *shape)`, split over the data axis
    (each device writes its own copy; no communication)."""
    cache = strategy.__dict__
    if "_tf_run_broadcast" not in cache:
        n = strategy.num_replicas_in_sync
        split = NamedSharding(strategy.mesh, P(strategy.data_axis))

        def broadcast(values: tuple) -> tuple:
            return tuple(jnp.broadcast_to(v[None], (n,) + v.shape) for v in values)

        cache["_tf_run_broadcast"] = jax.jit(broadcast, out_shardings=split)
    return cache["_tf_run_broadcast"]


class MirroredStrategy(TFRunResults, jdist.MirroredStrategy):
    """`tf.distribute.MirroredStrategy`'s `run` results (the namespace's class adds TF's device handling)."""


class TPUStrategy(TFRunResults, jdist.TPUStrategy):
    """`tf.distribute.TPUStrategy`: jdist's, with TF's `run` results."""


class MultiWorkerMirroredStrategy(TFRunResults, jdist.MultiWorkerMirroredStrategy):
    """`tf.distribute.MultiWorkerMirroredStrategy`: jdist's, with TF's `run` results."""


class CentralStorageStrategy(TFRunResults, jdist.CentralStorageStrategy):
    """`tf.distribute.experimental.CentralStorageStrategy`: jdist's, with TF's `run` results."""
