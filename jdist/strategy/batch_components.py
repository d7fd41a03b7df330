"""A component of a distributed batch taken apart outside `run`, as TF's per-replica value.

TF 2.21's `x, y = next(iter(dist_dataset))` gives `x` as a `PerReplica` (observed, MirroredStrategy on 2
logical CPUs): `x + 1` is a `TypeError` ("unsupported operand type(s) for +: 'PerReplica' and 'int'") and
`tf.reduce_sum(x)` a `ValueError` ("It looks like you are using a PerReplica object while not inside a replica
context, ..."). jdist's component is one array split over the replicas, padding rows included; computing on it
outside `run` would silently count the padding. For TF's strategies (`jdist.tf_compat`), the components of a
batch are therefore `PerReplicaComponent`s: the marked array inside a pytree node that every jdist entry point
looks through (`run`, `reduce`, `gather`, `experimental_local_results`), that maps back to the bare array
(`jax.tree.unflatten` gives the child itself, so `run`'s function receives plain arrays), and that refuses to
be computed on with TF's error types and a message naming the fix.
"""
from __future__ import annotations

from typing import Any, cast

import jax
import jax.core

from jdist.strategy.values import PerReplica, split_components, split_mark

_FIX = ("It looks like you are using a PerReplica object while not inside a replica context, which is not "
        "supported. Try running your op or function inside a replica context by using `strategy.run` "
        "(or take its components with `strategy.experimental_local_results`).")


class PerReplicaComponent:
    """One leaf of a distributed batch's component outside `run` (TF's `PerReplica`): `array` is the global,
    split and marked array; `.values` each replica's real rows."""

    __slots__ = ("array", "_shown_as")

    def __init__(self, array: jax.Array, shown_as: type[PerReplica]):
        self.array = array
        self._shown_as = shown_as

    @property
    def values(self) -> tuple:
        """Each local replica's real rows, in replica order (TF's `PerReplica.values`)."""
        parts = split_components(self.array)
        return (self.array,) if parts is None else parts

    def _as_per_replica(self) -> PerReplica:
        return self._shown_as(ragged=self.values)

    def __repr__(self) -> str:
        return repr(self._as_per_replica())

    def __str__(self) -> str:
        return str(self._as_per_replica())

    def __jax_array__(self) -> Any:
        raise ValueError(_FIX)

    def __bool__(self) -> bool:
        raise ValueError(_FIX)

    def __iter__(self):
        raise TypeError("'PerReplica' object is not iterable. " + _FIX)

    def __getitem__(self, key: Any) -> Any:
        raise TypeError("'PerReplica' object is not subscriptable. " + _FIX)

    def __len__(self) -> int:
        raise TypeError("object of type 'PerReplica' has no len(). " + _FIX)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"'PerReplica' object has no attribute '{name}'. " + _FIX)


PerReplicaComponent.__name__ = PerReplicaComponent.__qualname__ = "PerReplica"  # TF's name, in TypeErrors too

jax.tree_util.register_pytree_node(
    PerReplicaComponent,
    lambda c: ((c.array,), None),
    lambda _, children: cast(Any, children[0]),  # maps and `run`'s function see the array itself
)


def as_components(component: Any, shown_as: type[PerReplica]) -> Any:
    """`component` (a batch's part: an array or a nest of them) with each leaf split over two or more replicas
    as a `PerReplicaComponent`; one replica's leaves stay arrays (TF's `OneDeviceStrategy` gives tensors)."""
    def wrap(leaf: Any) -> Any:
        if _over_replicas(leaf):
            return PerReplicaComponent(leaf, shown_as)
        return leaf

    return jax.tree.map(wrap, component)


def _over_replicas(leaf: Any) -> bool:
    """Whether `leaf` is a concrete array marked split over two or more replicas (read from its sharding only)."""
    if not isinstance(leaf, jax.Array) or isinstance(leaf, jax.core.Tracer) or split_mark(leaf) is None:
        return False
    return not leaf.is_deleted() and len({s.index[0].start for s in leaf.addressable_shards}) > 1
