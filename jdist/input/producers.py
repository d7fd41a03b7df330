"""Producers: what makes this process's rows of each step of a distributed dataset, and its resumable position.

One class per way a step's rows are found (`jdist.input.dataset`'s module docstring): every process reads
the same global batches (`GlobalProducer`), each process its own stream of global-size batches
(`StreamProducer`), or each process per-replica batches from `distribute_datasets_from_function`
(`FunctionProducer`). The last two agree across workers before every step (`AgreeingProducer`).
"""
from __future__ import annotations

import base64
import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from jdist.input.sources import open_cursor
from jdist.input.split import (
    ElementSpec,
    as_numpy_leaves,
    check_capacity,
    chunk_sizes,
    chunk_starts,
    gather_slots,
    rows_of,
    stack_slots,
)

if TYPE_CHECKING:
    from jdist.input.dataset import DistributedDataset

GLOBAL, LOCAL, FUNCTION = "global", "per_process", "function"
_UNREAD = object()


class EmptyDatasetError(ValueError):
    """The dataset produced no batches in an epoch."""


class Producer:
    """Makes this process's rows of each step (numpy), and knows its resumable position."""

    def __init__(self, dataset: DistributedDataset, epoch: int, state: dict, tag: str):
        self._ds = dataset
        self._plan = dataset._plan
        self._layout = dataset._layout
        self._epoch = epoch
        self._step = int(state.get("step", 0))
        self._start_step = self._step
        self._tag = tag
        if state.get("global_batch_size") is not None:
            dataset._declare(int(state["global_batch_size"]))

    def _observe(self, leaves: list, treedef: Any) -> None:
        if self._layout.spec is None:
            self._layout.spec = ElementSpec.of(leaves, treedef)
        else:
            self._layout.spec.check(leaves, treedef)

    def _empty(self) -> EmptyDatasetError:
        return EmptyDatasetError(
            f"The dataset produced no batches in epoch {self._epoch}. Check that it is not empty (and that any "
            "filter keeps some examples); a distributed dataset needs at least one batch per epoch."
        )

    def _base_state(self) -> dict:
        return {"mode": self._ds._mode, "epoch": self._epoch, "step": self._step,
                "global_batch_size": self._layout.global_batch_size}

    def next_step(self) -> tuple[list, Any, np.ndarray]:
        """This process's (leaves, treedef, mask) of the next step; `StopIteration` at the end."""
        raise NotImplementedError

    def state(self) -> dict:
        """The position after the last step taken, to resume from."""
        raise NotImplementedError


def _next_rows(cursor: Any) -> tuple[list, Any, int, Any]:
    """The next batch with at least one row: (leaves, treedef, rows, position before it)."""
    while True:
        before = cursor.state()
        leaves, treedef = as_numpy_leaves(cursor.next())
        rows = rows_of(leaves, treedef)
        if rows:
            return leaves, treedef, rows, before


class GlobalProducer(Producer):
    """Every process reads the same global batches and keeps its replicas' chunks."""

    def __init__(self, dataset, epoch, state, tag):
        super().__init__(dataset, epoch, state, tag)
        self._cursor = open_cursor(dataset._datasets[0], epoch, state.get("source"))

    def next_step(self):
        try:
            leaves, treedef, rows, _ = _next_rows(self._cursor)
        except StopIteration:
            if self._step == 0:
                raise self._empty() from None
            raise
        self._observe(leaves, treedef)
        if self._layout.global_batch_size is None:
            self._ds._declare(rows)
        global_batch_size, per_replica = self._layout.sizes()
        check_capacity(rows, global_batch_size, "global batch")
        n = self._plan.num_replicas
        sizes, starts = chunk_sizes(rows, n), chunk_starts(rows, n)
        slots = [(starts[k], sizes[k]) for k in self._plan.chunk_of]
        local, mask = gather_slots(leaves, slots, per_replica)
        self._step += 1
        return local, treedef, mask

    def state(self) -> dict:
        return {**self._base_state(), "source": self._cursor.state()}


class AgreeingProducer(Producer):
    """Shared by the per-process modes: workers agree on the batch size, the element spec,
    and before every step whether anyone still has data."""

    def _init_round(self, local_rows: int, local_spec: ElementSpec | None) -> None:
        channel = self._ds._channel
        rows = channel.gather(f"{self._tag}/init", 0, local_rows)
        if max(rows) <= 0 and self._layout.spec is None:
            raise self._empty()
        if local_rows > 0:
            channel.publish(f"{self._tag}/spec", base64.b64encode(pickle.dumps(local_spec)).decode())
        if self._layout.spec is None and local_spec is not None:
            self._layout.spec = local_spec
        elif self._layout.spec is None:
            donor = self._plan.processes[int(np.argmax(rows))]
            self._layout.spec = pickle.loads(base64.b64decode(channel.read(f"{self._tag}/spec", donor)))
        if self._layout.global_batch_size is None:
            declared = max(rows)
            self._ds._declare(declared * self._rows_to_global())

    def _rows_to_global(self) -> int:
        raise NotImplementedError

    def _anyone_has_data(self, has_data: bool) -> bool:
        flags = self._ds._channel.gather(f"{self._tag}/more", self._step, int(has_data))
        if not any(flags):
            if self._step == 0:
                raise self._empty()
            return False
        return True


class StreamProducer(AgreeingProducer):
    """FILE / OFF with several workers: each worker's own stream of global-size batches; each
    batch feeds `num_workers` steps, a `1 / num_workers` piece per step (TF's per-worker rebatch)."""

    def __init__(self, dataset, epoch, state, tag):
        super().__init__(dataset, epoch, state, tag)
        self._cursor = open_cursor(dataset._datasets[0], epoch, state.get("source"))
        self._piece = int(state.get("piece", 0))
        self._current = self._fetch()
        self._ahead: Any = _UNREAD  # the batch after the current one, read only when needed
        self._ready = False

    def _fetch(self):
        try:
            return _next_rows(self._cursor)
        except StopIteration:
            return None

    def _rows_to_global(self) -> int:
        return 1  # each worker's batches already have the global batch size

    def _piece_rows(self, rows: int) -> tuple[int, int]:
        """(start, count) of this step's piece of the current batch of `rows` rows."""
        size = -(-rows // self._plan.num_workers)
        start = min(rows, self._piece * size)
        return start, min(size, rows - start)

    def _has_data(self) -> bool:
        """Whether this worker has rows for this step or any later one."""
        if self._current is None:
            return False
        start, _ = self._piece_rows(self._current[2])
        if start < self._current[2]:
            return True
        if self._ahead is _UNREAD:
            self._ahead = self._fetch()
        return self._ahead is not None

    def next_step(self):
        if not self._ready:
            spec = None
            if self._current is not None:
                self._observe(self._current[0], self._current[1])
                spec = self._layout.spec
            self._init_round(self._current[2] if self._current else 0, spec)
            self._ready = True
        if not self._anyone_has_data(self._has_data()):
            raise StopIteration
        (global_batch_size, p), r = self._layout.sizes(), self._plan.num_local
        if self._current is None:
            spec = self._layout.known_spec()
            local, mask = spec.zeros(r * p), np.zeros(r * p, bool)
            treedef = spec.treedef
        else:
            leaves, treedef, rows, _ = self._current
            self._observe(leaves, treedef)
            check_capacity(rows, global_batch_size, "global batch")
            start, count = self._piece_rows(rows)
            slots = [(start + s, c) for s, c in zip(chunk_starts(count, r), chunk_sizes(count, r))]
            local, mask = gather_slots(leaves, slots, p)
            self._piece += 1
            if self._piece == self._plan.num_workers:
                self._current = self._fetch() if self._ahead is _UNREAD else self._ahead
                self._ahead, self._piece = _UNREAD, 0
        self._step += 1
        return local, treedef, mask

    def state(self) -> dict:
        source = self._current[3] if self._current is not None else self._cursor.state()
        return {**self._base_state(), "source": source, "piece": self._piece}


class FunctionProducer(AgreeingProducer):
    """`distribute_datasets_from_function`: the local replicas take consecutive per-replica batches
    (one stream per worker), or one batch each from their own stream (`PER_REPLICA`)."""

    def __init__(self, dataset, epoch, state, tag):
        super().__init__(dataset, epoch, state, tag)
        sources = state.get("sources") or [None] * len(dataset._datasets)
        self._cursors = [open_cursor(ds, epoch, s) for ds, s in zip(dataset._datasets, sources)]
        self._ready = False

    def _rows_to_global(self) -> int:
        return self._plan.num_replicas  # per-replica batches: the declared size is per replica

    def _take(self) -> list:
        r = self._plan.num_local
        pulls = [self._cursors[0]] * r if len(self._cursors) == 1 else self._cursors
        out = []
        for cursor in pulls:
            try:
                leaves, treedef = as_numpy_leaves(cursor.next())
            except StopIteration:
                out.append(None)
                continue
            rows_of(leaves, treedef)
            out.append((leaves, treedef))
        return out

    def next_step(self):
        elements = self._take()
        present = [e for e in elements if e is not None]
        for leaves, treedef in present:
            self._observe(leaves, treedef)
        if not self._ready:
            first = max((e[0][0].shape[0] for e in present), default=0)
            self._init_round(max(first, 1) if present else 0, self._layout.spec)
            self._ready = True
        if not self._anyone_has_data(bool(present)):
            raise StopIteration
        p, spec = self._layout.sizes()[1], self._layout.known_spec()
        for leaves, _ in present:
            check_capacity(leaves[0].shape[0], p, "per-replica batch")
        local, mask = stack_slots([None if e is None else e[0] for e in elements], p, spec)
        self._step += 1
        return local, spec.treedef, mask

    def state(self) -> dict:
        return {**self._base_state(), "sources": [c.state() for c in self._cursors]}


PRODUCERS: dict[str, type[Producer]] = {GLOBAL: GlobalProducer, LOCAL: StreamProducer, FUNCTION: FunctionProducer}
