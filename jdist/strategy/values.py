"""jdist's distributed values: which values are per replica, which are mirrored, how masks travel.

TensorFlow's model, on JAX arrays:

*Per-replica* values hold one component per replica. `strategy.run` hands replica i
its component i; `experimental_local_results` returns the components; `reduce` and
`gather` combine them. They are:
- `PerReplica`: what `experimental_distribute_values_from_function` returns and
  what `run` returns for results that may differ between replicas. Stored *stacked*
  (one `(num_replicas, *shape)` array sharded over the data axis) or *ragged* (one
  array per replica, shapes may differ).
- `jdist.DistributedBatch` (`input/distributed_batch.py`): a dataset element from
  `experimental_distribute_dataset`; its leaves and `mask` are split along dim 0.
- the arrays `strategy.distribute_batch` returns, split along dim 0. They stay plain
  `jax.Array`s (jitted steps take them as they are) and are *marked* as split.

Everything else is broadcast: `run` gives every replica the whole value, whatever
its sharding. So a parameter or optimizer state stored split over the data axis
(FSDP, ZeRO-1) is never mistaken for a batch: only the marks above decide.

*Mirrored* values: results of `run` that a pass over the traced program proves
identical on every replica (`jdist.strategy.replica_taint`: computed only from broadcast
values and collectives such as `all_reduce`). They come back as one replicated
`jax.Array`, so updated parameters flow into the next `run` or any `jax.jit`
without a copy, and are marked so that `experimental_local_results` returns one
component per replica, as TF 2.21's `PerReplica` of such results does. `reduce`
and `gather` count any plain value once per replica.

*Masks*: replicas get equal, padded shards (XLA needs static shapes), so a short
batch carries a boolean mask of its real rows; padding always trails a replica's
real rows. A per-replica value whose dim 0 is one row per example keeps that mask:
a `DistributedBatch` and its leaves, and the results of `run` proven row-aligned
with a masked input (`jdist.strategy.row_alignment`: row i of the result depends only on
row i of the input). `experimental_local_results`, `gather` and `reduce(axis=0)`
then see only the real rows, as TF's dynamically shaped replicas do. Which other results of
`run` on a short batch are exact, and how (each replica run alone on its real rows, or an
error): `jdist.strategy.padded_run`.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import jax
import jax.core
import numpy as np

from jdist.typing import PyTree

if TYPE_CHECKING:
    from jdist.strategy.devices import Device


# ------------------------------------------------------------------- marks
class IdentityMarks:
    """Notes attached to arrays by identity (jax.Arrays are unhashable), dropped with the array."""

    def __init__(self):
        self._notes: dict[int, tuple[weakref.ref, Any]] = {}

    def set(self, x: Any, note: Any) -> None:
        key = id(x)

        def forget(ref, key=key, notes=self._notes):
            if notes.get(key, (None,))[0] is ref:
                del notes[key]

        self._notes[key] = (weakref.ref(x, forget), note)

    def get(self, x: Any) -> Any:
        entry = self._notes.get(id(x))
        return entry[1] if entry is not None and entry[0]() is x else None


_SPLIT = IdentityMarks()  # array -> _Split: split along dim 0 over the replicas
_MIRRORED = IdentityMarks()  # array -> True: a result of run that is the same on every replica
_COUNTS = IdentityMarks()  # mask -> np.ndarray: real rows of each replica, known on the host
_SINGLE = IdentityMarks()  # array -> True: a result of run that every replica returned as one object


class _Split:
    __slots__ = ("mask",)

    def __init__(self, mask: Any):
        self.mask = mask  # flat bool (rows,) array of real rows, or None: every row is real


def _is_concrete(x: Any) -> bool:
    return isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)


def mark_split(tree: PyTree, mask: Any = None) -> PyTree:
    """Marks the arrays of `tree` as split over the replicas along dim 0 (`mask`: real rows)."""
    note = _Split(mask)
    for leaf in jax.tree.leaves(tree):
        if _is_concrete(leaf):
            _SPLIT.set(leaf, note)
    return tree


def split_mark(x: Any) -> Any:
    """The `_Split` note of an array marked by `mark_split`, else None."""
    return _SPLIT.get(x) if _is_concrete(x) else None


def note_row_counts(mask: Any, counts: Any) -> None:
    """Remembers how many real rows each replica of a flat mask holds (all replicas, in order)."""
    if _is_concrete(mask):
        _COUNTS.set(mask, np.asarray(counts, np.int64))


def known_row_counts(mask: Any) -> Any:
    """The counts noted by `note_row_counts` for `mask`, else None."""
    return _COUNTS.get(mask) if _is_concrete(mask) else None


def mark_mirrored(x: Any) -> Any:
    if _is_concrete(x):
        _MIRRORED.set(x, True)
    return x


def is_mirrored(x: object) -> bool:
    """Whether `x` is a result of `run` proven identical on every replica."""
    return _is_concrete(x) and bool(_MIRRORED.get(x))


def mark_single(x: Any) -> Any:
    """Marks a mirrored result of `run` that every replica returned as one object (`jdist.strategy.shared_results`)."""
    if _is_concrete(x):
        _SINGLE.set(x, True)
    return x


def is_single(x: object) -> bool:
    return _is_concrete(x) and bool(_SINGLE.get(x))


def as_plain(x: Any) -> Any:
    """`x` no longer marked mirrored: one value, as TF's non-distributed tensor (`reduce(SUM)` refuses it)."""
    if _is_concrete(x):
        _MIRRORED.set(x, False)
    return x


class _MaskRef:
    """A mask carried as pytree metadata: compared by identity, so mapping over a
    PerReplica never touches its mask."""

    __slots__ = ("mask",)

    def __init__(self, mask: Any):
        self.mask = mask

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _MaskRef) and other.mask is self.mask

    def __hash__(self) -> int:
        return id(self.mask)


# -------------------------------------------------------------- PerReplica
class PerReplica:
    """A value that differs per replica. `.values` is the tuple of local components.

    A stacked PerReplica may carry `mask`: the flat `(num_replicas * rows,)` bool mask of
    real rows when each component has one row per example (`rows` = its dim 0); its
    components are then cut to their real rows.
    """

    __slots__ = ("_stacked", "_ragged", "_mask", "_host")

    def __init__(self, stacked: Any = None, ragged: Sequence[Any] | None = None, mask: Any = None,
                 host: Sequence[Any] | None = None):
        if (stacked is None) == (ragged is None):
            raise ValueError("PerReplica needs exactly one of `stacked` or `ragged`.")
        if mask is not None and stacked is None:
            raise ValueError("Only a stacked PerReplica carries a mask.")
        self._stacked = stacked
        self._ragged = tuple(ragged) if ragged is not None else None
        self._mask = mask
        # The host values (numpy arrays, Python numbers) the components were made from, shown by `.values` as
        # TF keeps them (`experimental_distribute_values_from_function`); maps over the pytree drop them.
        self._host = tuple(host) if host is not None else None

    @property
    def is_stacked(self) -> bool:
        return self._stacked is not None

    @property
    def mask(self) -> jax.Array | None:
        """The flat mask of real rows (see the class docstring), or None: every row is real."""
        return self._mask

    @property
    def stacked(self) -> jax.Array:
        """The `(num_replicas, ...)` array (padding rows included when masked);
        `ValueError` when shapes differ per replica."""
        if self._stacked is None:
            assert self._ragged is not None, "a PerReplica holds exactly one of stacked or ragged"
            shapes = [tuple(np.shape(v)) for v in self._ragged]
            raise ValueError(
                f"Per-replica values have different shapes {shapes}; compiled code needs "
                "equal shapes. Pad them to one shape (and carry a mask), or reduce with "
                "`axis=` so each replica is reduced first."
            )
        return self._stacked

    @property
    def num_replicas(self) -> int:
        return len(self._ragged) if self._ragged is not None else self._stacked.shape[0]

    @property
    def values(self) -> tuple:
        """The components held by this process, in replica order (TF's `.values`)."""
        if self._host is not None:
            return self._host
        if self._ragged is not None:
            return self._ragged
        with outside_mesh(self._stacked):
            parts = local_components(self._stacked)
            if self._mask is None:
                return parts
            return tuple(p[:count] for p, count in zip(parts, local_row_counts(self._mask)))

    def __jax_array__(self) -> Any:
        """TF 2.21's ValueError for a per-replica value given to an op outside `run` (observed, `tf.reduce_sum`)."""
        raise ValueError(
            "It looks like you are using a PerReplica object while not inside a replica context, which is not "
            "supported. Try running your op or function inside a replica context by using `strategy.run`, or "
            "combine its components with `strategy.reduce` / `strategy.experimental_local_results`.")

    def _show(self, show: Any) -> str:
        body = ",\n  ".join(f"{i}: {show(v) if isinstance(v, jax.Array) else repr(v)}"
                             for i, v in enumerate(self.values))
        return f"PerReplica:{{\n  {body}\n}}"

    def __repr__(self) -> str:
        """TF's layout (observed, TF 2.21): one line per replica, `{i}: repr(component)`."""
        return self._show(repr)

    def __str__(self) -> str:
        """What `print` shows: TF's layout with each component's `str` (its values)."""
        return self._show(str)


def outside_mesh(*trees: PyTree) -> PyTree:
    """Leaves `strategy.scope()`'s mesh for host-side reads of concrete arrays: slicing one replica's
    component (on one device) under the scope's mesh would be refused by JAX as a computation over
    devices outside that mesh. A no-op while tracing."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(trees)):
        return contextlib.nullcontext()
    return jax.set_mesh(None)


def local_components(stacked: PyTree) -> tuple:
    """Splits a stacked array into its local replica values, each left on its device."""
    if not isinstance(stacked, jax.Array) or isinstance(stacked, jax.core.Tracer):
        return tuple(stacked[i] for i in range(stacked.shape[0]))
    shards = sorted(stacked.addressable_shards, key=lambda s: s.index[0].start or 0)
    if any(tuple(s.data.shape[1:]) != tuple(stacked.shape[1:]) for s in shards):
        return _assemble_split_components(stacked, shards)
    seen, parts = set(), []
    for shard in shards:
        start = shard.index[0].start or 0
        if start in seen:  # replicated over another mesh axis: keep one copy
            continue
        seen.add(start)
        parts.extend(shard.data[i] for i in range(shard.data.shape[0]))
    return tuple(parts)


def _assemble_split_components(stacked: Any, shards: list) -> tuple:
    """Replica values that are themselves split over another mesh axis (model-parallel
    results of `run`): each is put together from its pieces, on its replica's first device."""
    rows: dict[int, tuple[np.ndarray, Any]] = {}
    for shard in shards:
        start = shard.index[0].start or 0
        if start not in rows:
            rows[start] = (np.empty(shard.data.shape[:1] + stacked.shape[1:], stacked.dtype), shard.device)
        rows[start][0][(slice(None),) + tuple(shard.index[1:])] = np.asarray(shard.data)
    return tuple(jax.device_put(block[i], device) for _, (block, device) in sorted(rows.items())
                 for i in range(block.shape[0]))


def local_row_counts(mask: Any) -> list[int]:
    """Real rows of each of this process's replicas, from a flat mask split over them."""
    return [int(np.count_nonzero(np.asarray(m))) for m in replica_shards(mask)]


def split_components(x: Any) -> tuple | None:
    """This process's replicas' real rows of an array marked split over two or more replicas (a component of a
    distributed batch, TF's PerReplica), in replica order; None for any other value."""
    mark = split_mark(x)
    if mark is None or x.is_deleted() or not x.is_fully_addressable:
        return None
    with outside_mesh(x):
        parts = replica_shards(x)
        if len(parts) < 2:
            return None
        if mark.mask is None:
            return tuple(parts)
        return tuple(p[:c] for p, c in zip(parts, local_row_counts(mark.mask)))


def replica_shards(x: Any) -> list:
    """This process's shards of a dim-0-split array, one per replica, in replica order."""
    if not isinstance(x, jax.Array):  # host batch: the rows are this process's replicas in order
        raise ValueError("experimental_local_results needs a batch on the mesh; this one is still on the host.")
    seen, parts = set(), []
    for shard in sorted(x.addressable_shards, key=lambda s: s.index[0].start or 0):
        start = shard.index[0].start or 0
        if start not in seen:  # replicated over another mesh axis: keep one copy
            seen.add(start)
            parts.append(shard.data)
    return parts


def _flatten(pr: PerReplica):
    if pr._stacked is not None:
        return (pr._stacked,), ("stacked", None if pr._mask is None else _MaskRef(pr._mask))
    assert pr._ragged is not None, "a PerReplica holds exactly one of stacked or ragged"
    return pr._ragged, ("ragged", len(pr._ragged))


def _unflatten_as(cls: type[PerReplica]) -> Callable[[Any, Any], PerReplica]:
    def unflatten(aux, children):
        kind, extra = aux
        if kind == "stacked":
            return cls(stacked=children[0], mask=None if extra is None else extra.mask)
        return cls(ragged=children)

    return unflatten


def register_per_replica_class(cls: type[PerReplica]) -> None:
    """A `PerReplica` subclass as a pytree whose maps keep the subclass (one that only prints differently)."""
    jax.tree_util.register_pytree_node(cls, _flatten, _unflatten_as(cls))


def as_per_replica_class(value: PerReplica, cls: type[PerReplica]) -> PerReplica:
    """`value` as a `cls` over the same components (no copy)."""
    children, aux = _flatten(value)
    return _unflatten_as(cls)(aux, children)


register_per_replica_class(PerReplica)


def is_per_replica(x: object) -> bool:
    return isinstance(x, PerReplica)


def stack_on_devices(
    local_values: Sequence[tuple[Device, Any]], mesh: jax.sharding.Mesh, axis: str
) -> PerReplica:
    """Builds a PerReplica from this process's (device, value) pairs, each placed on its device. Host values
    (numpy arrays, Python numbers) stay what `.values` shows, as TF 2.21 keeps them."""
    host = [v for _, v in local_values]
    if any(isinstance(v, jax.Array) or not isinstance(v, (np.ndarray, np.generic, int, float, bool, complex))
           for v in host):
        host = None
    arrays = [(d, v if isinstance(v, jax.Array) else np.asarray(v)) for d, v in local_values]
    signatures = {(tuple(a.shape), np.dtype(a.dtype)) for _, a in arrays}
    if len(signatures) != 1:
        return PerReplica(ragged=[jax.device_put(a, d) for d, a in arrays], host=host)
    ((shape, _),) = signatures
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    pieces = [jax.device_put(np.expand_dims(np.asarray(a), 0), d) for d, a in arrays]
    global_shape = (mesh.shape[axis],) + shape
    return PerReplica(stacked=jax.make_array_from_single_device_arrays(global_shape, sharding, pieces), host=host)
