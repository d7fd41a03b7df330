"""Which parameter server holds which rows of which parameter.

TF's placement rules: each new parameter goes to server `count % num_ps` and the
count advances (round robin); with a partitioner, a parameter of rank >= 1 that
gets more than one axis-0 shard is split "div" style and each shard takes the
next round-robin server. Every server holds a tree of the parameters' full
structure in which each leaf is the concatenation of its own shards of that
parameter (empty rows where it holds none), so per-leaf optimizers (`optax`)
run unchanged on each server and checkpoints reassemble exactly.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import jax
import numpy as np

from jdist.layout import path_str
from jdist.partitioners import div_partition, num_axis0_shards


@dataclasses.dataclass(frozen=True)
class Shard:
    """Rows `[start, stop)` of a parameter, kept on `server` at rows `[local_start, local_stop)`."""

    server: int
    start: int
    stop: int
    local_start: int
    local_stop: int


@dataclasses.dataclass(frozen=True)
class LeafLayout:
    path: str
    shape: tuple
    dtype: np.dtype
    shards: tuple  # of Shard, in row order

    @property
    def is_scalar(self) -> bool:
        return len(self.shape) == 0


class ParameterLayout:
    """The placement of one pytree over `num_servers` parameter servers."""

    def __init__(self, treedef: Any, leaves: Sequence[LeafLayout], num_servers: int):
        self.treedef = treedef
        self.leaves = tuple(leaves)
        self.num_servers = num_servers

    @classmethod
    def plan(cls, tree: Any, num_servers: int, partitioner: Callable | None = None,
             first_index: int = 0) -> tuple["ParameterLayout", int]:
        """Places `tree`'s leaves round robin from `first_index`; returns the layout and the next index."""
        paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
        count = first_index
        leaves = []
        for path, leaf in paths_leaves:
            shape = tuple(int(s) for s in np.shape(leaf))
            dtype = np.dtype(leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype)
            num_shards = 1 if partitioner is None else num_axis0_shards(partitioner, shape, dtype)
            rows = shape[0] if shape else 0
            sizes = div_partition(rows, num_shards) if shape else [0]
            local_rows = [0] * num_servers
            shards, start = [], 0
            for size in sizes:
                server = count % num_servers
                count += 1
                shards.append(Shard(server, start, start + size, local_rows[server], local_rows[server] + size))
                local_rows[server] += size
                start += size
            leaves.append(LeafLayout(path_str(path), shape, dtype, tuple(shards)))
        return cls(treedef, leaves, num_servers), count

    # ----------------------------------------------------------------- queries
    def placement(self) -> dict[str, list[tuple[int, int, int]]]:
        """`{path: [(server, start_row, stop_row), ...]}`; scalars show rows (0, 0)."""
        return {leaf.path: [(s.server, s.start, s.stop) for s in leaf.shards] for leaf in self.leaves}

    # -------------------------------------------------------- splitting / joining
    def local_leaves(self, full_leaves: Sequence[Any], server: int) -> list[np.ndarray]:
        """What `server` stores of each full leaf: its shards' rows, concatenated; empty rows if none."""
        out = []
        for leaf, value in zip(self.leaves, full_leaves):
            value = np.asarray(value)
            mine = [s for s in leaf.shards if s.server == server]
            if leaf.is_scalar:
                out.append(value if mine else np.zeros((0,), value.dtype))
            elif len(mine) == 1 and len(leaf.shards) == 1:
                out.append(value)
            elif mine:
                out.append(np.concatenate([value[s.start:s.stop] for s in mine], axis=0))
            else:
                out.append(np.zeros((0,) + value.shape[1:], value.dtype))
        return out

    def local_tree(self, full_leaves: Sequence[Any], server: int) -> Any:
        return jax.tree.unflatten(self.treedef, self.local_leaves(full_leaves, server))

    def assemble(self, per_server_leaves: Sequence[Sequence[Any]]) -> list[np.ndarray]:
        """Full leaves from every server's local leaves (the inverse of `local_leaves`)."""
        full = []
        for i, leaf in enumerate(self.leaves):
            pieces = [np.asarray(per_server_leaves[s.server][i]) for s in leaf.shards]
            if leaf.is_scalar or len(leaf.shards) == 1:
                local = pieces[0]
                full.append(local if leaf.is_scalar else local[leaf.shards[0].local_start:leaf.shards[0].local_stop])
            else:
                full.append(np.concatenate(
                    [p[s.local_start:s.local_stop] for p, s in zip(pieces, leaf.shards)], axis=0))
        return full

    def check_matches(self, full_leaves: Sequence[Any], what: str) -> None:
        """A clear error when `full_leaves` cannot be stored in this layout."""
        if len(full_leaves) != len(self.leaves):
            raise ValueError(f"{what} has {len(full_leaves)} leaves but the stored tree has {len(self.leaves)}.")
        for leaf, value in zip(self.leaves, full_leaves):
            shape = tuple(np.shape(value))
            if shape != leaf.shape:
                raise ValueError(
                    f"{what}: {leaf.path or 'the value'} has shape {shape}, but the parameter servers store "
                    f"shape {leaf.shape}. Restore a checkpoint of the same model."
                )
