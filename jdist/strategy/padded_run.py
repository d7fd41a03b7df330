"""`run` on a short batch: TF's values, computed on each replica's real rows, or an error; never the padding's.

A short last batch reaches the replicas padded to equal shards (XLA needs static
shapes) where TF gives each replica only its real rows. The rule (observed against
TF 2.21, `tests/tf_observed_padding.py`; documented in `docs/input.md#short-batches`),
decided per call before anything is returned:

- A full batch (no padding rows) runs the one compiled program, as always.
- On a padded batch, a replica function *without collectives* (no `all_reduce`,
  `all_gather`, `merge_call`) is run once per replica on that replica's real rows,
  compiled for that row count (TF retraces for the short batch too), so every result,
  `x.shape[0]` included, is what TF computes. Results with one row per example keep
  the batch's mask; results that agree on every replica come back mirrored.
- A padded batch given to a function *with* collectives runs the padded program (as does
  any function on a strategy whose replicas cannot run apart: several processes, several
  devices per replica, parameters laid out over the mesh).
  Each result must then be exact by construction: not computed from the padded
  rows at all, row-aligned with the batch (its mask drops the padding rows, see
  `row_alignment`), or computed from the batch's mask (`get_replica_context().example_mask`,
  which `compute_average_loss` applies). Any other result would count padding rows,
  so `run` raises, naming the fixes, instead of returning it. Unless every replica holds the same number of
  real rows (`even_rows`: compiled on those rows alone) or the replicas can run as threads, each on its own
  rows, meeting at the collectives (`uneven_rows`): then every result is TF's.

This needs the replicas' real row counts: a dataset records them on the host when it
builds the batch, so a full batch costs no device round trip.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from jdist.strategy.replica_taint import _is_literal, _subjaxprs
from jdist.strategy.values import PerReplica, known_row_counts, mark_mirrored, note_row_counts, stack_on_devices

DOCS = "docs/input.md#short-batches"


@dataclasses.dataclass(frozen=True)
class PaddingFacts:
    """What the traced program says about padding, per dynamic input and per result."""

    padded_inputs: tuple[int, ...]  # inputs whose rows may be padding: masked batches, masked PerReplicas
    exposed: tuple[bool, ...]  # per result: computed from padded rows, not row-aligned, not from a mask
    collectives: bool  # the replica function communicates between replicas
    out_shapes: tuple[tuple, ...]  # per result: its per-replica shape in the padded program
    out_dtypes: tuple[Any, ...]  # per result: its dtype
    # per result: computed from a row count read from a shape (row_count_reads); traced again when first asked
    reads_row_count: Callable[[], tuple[bool, ...]] = dataclasses.field(default=lambda: (), compare=False)


def analyse(jaxpr: Any, consts: int, padded: Sequence[bool], masks: Sequence[bool], aligned: Sequence[Any],
            axis: str) -> PaddingFacts:
    """`padded[i]` / `masks[i]`: dynamic input i may hold padding rows / is a mask of real rows."""
    from_padded = depends_on(jaxpr, [False] * consts + list(padded))
    from_mask = depends_on(jaxpr, [False] * consts + list(masks))
    exposed = tuple(p and not isinstance(a, frozenset) and not m
                    for p, m, a in zip(from_padded, from_mask, aligned))
    return PaddingFacts(
        padded_inputs=tuple(i for i, p in enumerate(padded) if p),
        exposed=exposed,
        collectives=has_collectives(jaxpr, axis),
        out_shapes=tuple(tuple(getattr(v.aval, "shape", ())) for v in jaxpr.outvars),
        out_dtypes=tuple(getattr(v.aval, "dtype", None) for v in jaxpr.outvars),
    )


def depends_on(jaxpr: Any, flags: Sequence[bool]) -> list[bool]:
    """For each output of `jaxpr`, whether it is computed from an input flagged in `flags`
    (conservative: a value from a control-flow body depends on all of its operands)."""
    marked = {v for v, f in zip(jaxpr.invars, flags) if f}
    for eqn in jaxpr.eqns:
        if any(not _is_literal(v) and v in marked for v in eqn.invars):
            marked.update(eqn.outvars)
    return [not _is_literal(v) and v in marked for v in jaxpr.outvars]


def has_collectives(jaxpr: Any, axis: str) -> bool:
    """Whether any primitive (bodies included) communicates over `axis` (`axis_index` does not)."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name != "axis_index":
            for key in ("axes", "axis_name"):
                names = eqn.params.get(key)
                names = names if isinstance(names, (tuple, list)) else (names,)
                if axis in names:
                    return True
        if any(has_collectives(sub, axis) for sub in _subjaxprs(eqn)):
            return True
    return False


# ------------------------------------------------------------------ row counts
def row_counts(mask: Any, replicas: int, replicated: NamedSharding) -> np.ndarray:
    """Real rows of each replica of a flat mask split over them: recorded by the input
    pipeline on the host, else counted on the devices once and remembered."""
    counts = known_row_counts(mask)
    if counts is None:
        counts = np.asarray(_count_fn(replicas, replicated)(mask))
        note_row_counts(mask, counts)
    return counts


@functools.cache
def _count_fn(replicas: int, replicated: NamedSharding) -> Callable:
    return jax.jit(lambda m: jnp.sum(m.reshape(replicas, -1), axis=1, dtype=jnp.int32), out_shardings=replicated)


# ------------------------------------------------------------------------ errors
def unexact_error(fn: Callable, paths: Sequence[str], counts: Sequence[int], why: str,
                  row_count: Sequence[str] = ()) -> ValueError:
    name = getattr(fn, "__name__", type(fn).__name__)
    padded = (f"{', '.join(paths)} is computed from the padding rows of a short batch" if paths else "")
    read = (f"{', '.join(row_count)} is computed from the row count of a short batch (x.shape[0], tf.shape, "
            "tf.size, tf.ones_like(x): the padded shard's, not the replica's)" if row_count else "")
    return ValueError(
        f"strategy.run({name}): {'; '.join(t for t in (padded, read) if t)} "
        f"(the replicas hold {list(int(c) for c in counts)} real examples, padded to equal shards), and {why}; "
        "returning it would count padding rows where TensorFlow computes on each replica's real rows. Fix: "
        "use the mask of real examples (get_replica_context().example_mask; compute_average_loss applies "
        "it; its sum counts the real rows), or batch the dataset with drop_remainder=True so no batch is short. "
        "See " + DOCS + "."
    )


def empty_replica_results(fn: Callable, facts: PaddingFacts, aligned: Sequence[Any], replica: int, device: Any,
                          paths: Callable, error: Exception) -> list:
    """A replica without real rows whose function fails on 0 rows (e.g. `x.reshape(x.shape[0], -1)`):
    its per-example results are empty; any other result cannot be had, so a named error."""
    missing = [j for j, a in enumerate(aligned) if not isinstance(a, frozenset)]
    if missing:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise ValueError(
            f"strategy.run({name}): replica {replica} holds no examples of this short batch, and {name} fails on "
            f"an empty batch ({type(error).__name__}: {error}), so {', '.join(paths(missing))} cannot be computed "
            "as TensorFlow computes it (on 0 rows). Make the function accept 0 rows, or batch the dataset with "
            "drop_remainder=True. See " + DOCS + "."
        ) from error
    with alone(device):
        return [jnp.zeros((0,) + facts.out_shapes[j][1:], facts.out_dtypes[j]) for j in range(len(aligned))]


# -------------------------------------------------------------- the exact path
def per_replica_inputs(dynamic: Sequence[Any], kinds: Sequence[str], cuts: Sequence[Any],
                       devices: Sequence[Any]) -> list[list]:
    """Each replica's arguments: split inputs cut to their real rows, on the replica's device.

    `cuts[i]`: per-replica row counts of dynamic input i (None: keep every row)."""
    columns = []
    for value, kind, cut in zip(dynamic, kinds, cuts):
        if kind == "stacked":
            parts = list(_components(value, len(devices)))
        elif kind == "batch":
            parts = list(_row_blocks(value, len(devices)))
        else:
            parts = [_on_device(value, d) for d in devices]
        if cut is not None:
            parts = [_cut(p, int(c), d) for p, c, d in zip(parts, cut, devices)]
        columns.append(parts)
    return [[col[r] for col in columns] for r in range(len(devices))]


def alone(device: Any) -> Any:
    """A context in which code runs on one replica's device by itself (outside the
    strategy's mesh, whose eager ops would expect arrays spread over all of it)."""
    return jax.set_mesh(Mesh(np.array([device]), ("replica",)))


def _cut(x: jax.Array, rows: int, device: Any) -> jax.Array:
    with alone(device):
        return x[:rows]


def _pad(x: jax.Array, rows: int, device: Any) -> jax.Array:
    with alone(device):
        return jnp.pad(x, [(0, rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1))


def _components(stacked: jax.Array, replicas: int) -> list:
    by_start = {(s.index[0].start or 0): s.data for s in stacked.addressable_shards}
    parts = []
    for r in range(replicas):
        with alone(next(iter(by_start[r].devices()))):
            parts.append(by_start[r][0])
    return parts


def _row_blocks(x: jax.Array, replicas: int) -> list:
    rows = x.shape[0] // replicas
    by_start = {(s.index[0].start or 0): s.data for s in x.addressable_shards}
    return [by_start[r * rows] for r in range(replicas)]


def _on_device(value: Any, device: Any) -> Any:
    if isinstance(value, jax.Array):
        for shard in value.addressable_shards:
            if shard.device == device and shard.data.shape == value.shape:
                return shard.data
    return jax.device_put(value, device)


def assemble(parts: list, varying: bool, out_shape: tuple, mask: Any, counts: Any, devices: Sequence[Any],
             strategy: Any) -> Any:
    """One result of `run` from its per-replica values computed on the real rows.

    One row per real example (each replica's value has its real row count, the padded
    program's had the padded one): padded back and masked, like a row-aligned result.
    Equal on every replica and not replica-dependent: mirrored. Else a `PerReplica`
    (ragged when the shapes differ, as TF's)."""
    n = len(parts)
    if n == 1:
        return parts[0] if varying else mark_mirrored(parts[0])
    shapes = [tuple(p.shape) for p in parts]
    if not varying and len(set(shapes)) == 1 and _all_equal(parts, counts):
        sharding = strategy.replicated_sharding()
        return mark_mirrored(jax.make_array_from_single_device_arrays(shapes[0], sharding, list(parts)))
    if mask is not None and out_shape and all(
            s[:1] == (int(c),) and s[1:] == out_shape[1:] for s, c in zip(shapes, counts)):
        rows = out_shape[0]
        padded = [_pad(p, rows, d) for p, d in zip(parts, devices)]
        stacked = stack_on_devices(list(zip(devices, padded)), strategy._replica_mesh(), strategy.data_axis)
        return PerReplica(stacked=stacked.stacked, mask=mask)
    return stack_on_devices(list(zip(devices, parts)), strategy._replica_mesh(), strategy.data_axis)


def _all_equal(parts: list, counts: Any) -> bool:
    """Whether replicas' values agree (only replicas with different row counts can differ)."""
    seen: dict = {}
    for p, c in zip(parts, counts if counts is not None else [0] * len(parts)):
        seen.setdefault(int(c), p)
    values = [np.asarray(v) for v in seen.values()]
    nan_ok = np.issubdtype(values[0].dtype, np.inexact)
    return all(np.array_equal(values[0], v, equal_nan=nan_ok) for v in values[1:])
