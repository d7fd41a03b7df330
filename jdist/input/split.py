"""How a batch is cut into per-replica chunks, padded and masked (pure numpy).

TF's rule (observed on TF 2.21): a batch of `b` examples over `n` replicas is cut into
`n` consecutive chunks of `ceil(b / n)` examples, so the last replicas get fewer or
none. JAX shards must be equal, so each replica's chunk is padded to `P` rows (a
fixed per-replica size) with copies of a real example (finite in any model) and
masked out.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import numpy as np

from jdist.input import checks as input_checks
from jdist.strategy.batch import leading_size
from jdist.typing import PyTree


def chunk_sizes(rows: int, parts: int) -> list[int]:
    """TF's split: `parts` consecutive chunks of `ceil(rows / parts)`; the last ones get fewer or none."""
    size = -(-rows // parts)
    return [min(size, max(0, rows - i * size)) for i in range(parts)]


def chunk_starts(rows: int, parts: int) -> list[int]:
    size = -(-rows // parts)
    return [min(rows, i * size) for i in range(parts)]


@dataclasses.dataclass(frozen=True)
class ReplicaPlan:
    """Which replicas (positions on the mesh's data axis) this process feeds.

    `chunk_of[i]` is the chunk of a global batch that local replica `i` receives. With
    several workers owning disjoint, equal sets of replicas this follows TF's
    multi-worker order: chunk `k` goes to worker `k % W`, local replica `k // W`
    (TF's input tests: over 2 workers x 2 replicas, worker 0 gets chunks 0 and 2).
    """

    num_replicas: int
    local_replicas: tuple[int, ...]
    processes: tuple[int, ...]
    worker_index: int
    exclusive: bool
    chunk_of: tuple[int, ...]

    @property
    def num_workers(self) -> int:
        return len(self.processes)

    @property
    def num_local(self) -> int:
        return len(self.local_replicas)


def replica_plan(mesh: Any, data_axis: str) -> ReplicaPlan:
    axis = mesh.axis_names.index(data_axis)
    grid = np.moveaxis(mesh.devices, axis, 0)
    rows = grid.reshape(grid.shape[0], -1)
    owners = [sorted({d.process_index for d in row}) for row in rows]
    me = jax.process_index()
    local = tuple(r for r, o in enumerate(owners) if me in o)
    processes = tuple(sorted({p for o in owners for p in o}))
    counts = {p: sum(p in o for o in owners) for p in processes}
    exclusive = all(len(o) == 1 for o in owners) and len(set(counts.values())) == 1
    worker = processes.index(me) if me in processes else 0
    if exclusive:
        num_workers = len(processes)
        chunk_of = tuple(worker + num_workers * j for j in range(len(local)))
    else:
        chunk_of = local
    return ReplicaPlan(len(owners), local, processes, worker, exclusive, chunk_of)


# ---------------------------------------------------------------- validation
def as_numpy_leaves(batch: PyTree) -> tuple[list[np.ndarray], Any]:
    leaves, treedef = jax.tree.flatten(batch)
    if not leaves:
        raise ValueError(f"A batch needs at least one array; got {batch!r}.")
    arrays = [np.asarray(x) for x in leaves]
    input_checks.check_dataset_element(batch, arrays)
    return arrays, treedef


def rows_of(leaves: Sequence[np.ndarray], treedef: Any) -> int:
    """The batch size of a batch, checking every leaf agrees on it."""
    if any(x.ndim == 0 for x in leaves):
        raise ValueError(
            "Every array of a distributed batch needs a leading batch dimension (rank >= 1), but the element "
            f"{jax.tree.unflatten(treedef, [x.shape for x in leaves])} has a scalar. Batch the dataset "
            "(e.g. .batch(global_batch_size)) before distributing it."
        )
    return leading_size(jax.tree.unflatten(treedef, list(leaves)), "a distributed batch")


def check_capacity(rows: int, capacity: int, what: str) -> None:
    if rows > capacity:
        raise ValueError(
            f"A {what} of {rows} examples is larger than the declared {what} size {capacity} (the first batch's "
            "size unless InputOptions(global_batch_size=...) says otherwise). Batches may shrink (a short last "
            "batch is padded and masked) but never grow: batch the dataset with one size, or declare the "
            "largest one in InputOptions."
        )


@dataclasses.dataclass(frozen=True)
class ElementSpec:
    """Tree structure, per-example shapes and dtypes of a batch: what an empty slot is made of."""

    treedef: Any
    shapes: tuple
    dtypes: tuple

    @classmethod
    def of(cls, leaves: Sequence[np.ndarray], treedef: Any) -> "ElementSpec":
        return cls(treedef, tuple(x.shape[1:] for x in leaves), tuple(x.dtype for x in leaves))

    def check(self, leaves: Sequence[np.ndarray], treedef: Any) -> None:
        if (treedef != self.treedef or tuple(x.shape[1:] for x in leaves) != self.shapes
                or tuple(x.dtype for x in leaves) != self.dtypes):
            raise ValueError(
                "Every batch of a distributed dataset must have the same structure, per-example shapes and "
                f"dtypes: expected {self.describe(self.treedef, self.shapes, self.dtypes)}, got "
                f"{self.describe(treedef, [x.shape[1:] for x in leaves], [x.dtype for x in leaves])}."
            )

    @staticmethod
    def describe(treedef: Any, shapes: Sequence, dtypes: Sequence) -> Any:
        return jax.tree.unflatten(treedef, [f"{np.dtype(d).name}{list(s)}" for s, d in zip(shapes, dtypes)])

    def zeros(self, rows: int) -> list[np.ndarray]:
        return [np.zeros((rows,) + s, d) for s, d in zip(self.shapes, self.dtypes)]


# ---------------------------------------------------------------- assembly
def gather_slots(leaves: Sequence[np.ndarray], slots: Sequence[tuple[int, int]], per_replica: int,
                 ) -> tuple[list[np.ndarray], np.ndarray]:
    """Rows `[start, start + count)` of the batch for each local replica, each padded to
    `per_replica` rows; returns the stacked leaves and the mask. One fancy-index per leaf."""
    index = np.empty(len(slots) * per_replica, np.int64)
    mask = np.zeros(len(slots) * per_replica, bool)
    fallback = next((s for s, c in slots if c), 0)
    for i, (start, count) in enumerate(slots):
        base = i * per_replica
        index[base:base + count] = np.arange(start, start + count)
        index[base + count:base + per_replica] = start + count - 1 if count else fallback
        mask[base:base + count] = True
    if len(index) == len(leaves[0]) and mask.all() and np.array_equal(index, np.arange(len(index))):
        return list(leaves), mask  # an evenly split full batch: no copy
    return [x[index] for x in leaves], mask


def stack_slots(slot_leaves: Sequence[list[np.ndarray] | None], per_replica: int, spec: ElementSpec,
                ) -> tuple[list[np.ndarray], np.ndarray]:
    """One batch (or None: no data) per local replica, each padded to `per_replica` rows."""
    filler = next((s for s in slot_leaves if s is not None and s[0].shape[0]), None)
    columns: list[list[np.ndarray]] = [[] for _ in spec.shapes]
    mask = np.zeros(len(slot_leaves) * per_replica, bool)
    for i, leaves in enumerate(slot_leaves):
        count = 0 if leaves is None else leaves[0].shape[0]
        mask[i * per_replica:i * per_replica + count] = True
        pad = per_replica - count
        for j in range(len(spec.shapes)):
            parts = [] if leaves is None else [leaves[j]]
            if pad:
                if count and leaves is not None:  # count > 0: this replica has rows
                    parts.append(np.repeat(leaves[j][-1:], pad, axis=0))
                elif filler is not None:
                    parts.append(np.repeat(filler[j][:1], pad, axis=0))
                else:
                    parts.append(np.zeros((pad,) + spec.shapes[j], spec.dtypes[j]))
            columns[j].append(np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0])
    return [np.concatenate(c, axis=0) for c in columns], mask
