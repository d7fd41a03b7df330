"""`Batch`: one global batch as every step of jdist receives it, and the three rules about its rows.

A step needs the examples, which rows of them are real (short batches are padded to equal shards,
JAX needs equal shapes) and, for Keras's `sample_weight`, a weight per example. `Batch` carries
these three, is a pytree (so it passes through `jax.jit`, `lax.scan` and device transfers whole) and
is what the Trainer, `make_train_step` and the distributed datasets hand a step. The rules every path
shares live here once:

- `leading_size`: the common leading dimension of a batch's arrays, or an error naming the leaves
  that disagree;
- `place_rows`: host rows onto the data axis (the whole global batch on every process, or each
  process's own share of it);
- `per_replica`: a `(batch, ...)` array seen as `(replicas, batch / replicas, ...)`, each replica's
  rows on its own devices.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax
import numpy as np
from jax.sharding import NamedSharding

from jdist.strategy.leaf_checks import named_leaves
from jdist.strategy.process_local import row_blocks
from jdist.typing import PyTree


@dataclasses.dataclass(eq=False)
class Batch:
    """`examples`: any pytree of arrays, rows on dim 0 (the Trainer's is Keras's `(x, y)` pair);
    `mask`: `(rows,)`, nonzero for real rows (None: every row is real); `weight`: `(rows,)`
    per-example weights or None."""

    examples: Any
    mask: Any = None
    weight: Any = None
    # `(block, i)` when this batch is row i of a stacked `(k, batch, ...)` block taken in one gather:
    # the block is then placed whole instead of stacked again. Not part of the pytree.
    row_of: tuple | None = dataclasses.field(default=None, repr=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "row_of": None}  # a copy sent elsewhere carries its own rows only

    @property
    def on_host(self) -> bool:
        """True while the rows are numpy in host memory (not yet placed on the mesh)."""
        leaves = jax.tree.leaves((self.mask, self.examples))
        return not (leaves and isinstance(leaves[0], jax.Array))

    @property
    def x(self) -> Any:
        """The inputs of an `(x, y)` element (Keras's convention for `fit`)."""
        return self._pair()[0]

    @property
    def y(self) -> Any:
        """The targets of an `(x, y)` element (None where there are none)."""
        return self._pair()[1]

    def _pair(self) -> tuple:
        if isinstance(self.examples, tuple) and len(self.examples) == 2:
            return self.examples
        raise TypeError(f"This batch holds a {type(self.examples).__name__}, not an (x, y) pair: "
                        "read batch.examples.")

    def arrays(self) -> tuple:
        """`(x, y, mask, weight)` of an `(x, y)` batch: its leaves' order in the pytree."""
        x, y = self._pair()
        return x, y, self.mask, self.weight

    def replace(self, **changes: object) -> Batch:
        return dataclasses.replace(self, **changes)


def _flatten(batch: Batch) -> tuple:
    children = ((jax.tree_util.GetAttrKey("examples"), batch.examples), (jax.tree_util.GetAttrKey("mask"), batch.mask),
                (jax.tree_util.GetAttrKey("weight"), batch.weight))
    return children, None


jax.tree_util.register_pytree_with_keys(
    Batch, _flatten, lambda _, children: Batch(*children),
    flatten_func=lambda b: ((b.examples, b.mask, b.weight), None))


def as_batch(batch: PyTree) -> Batch:
    """What a step receives, read as a `Batch`: a `Batch` itself, a dict with a `"mask"` entry
    (the dict stays the examples, so a loss can read its mask too), or any pytree of arrays
    (every row real)."""
    if isinstance(batch, Batch):
        return batch
    if isinstance(batch, dict) and "mask" in batch:
        return Batch(batch, batch["mask"])
    return Batch(batch)


def leading_size(tree: PyTree, what: str) -> int:
    """The leading dimension every array of `tree` shares; an error naming the leaves otherwise.

    Works on numpy, placed and traced arrays (shapes only); the leaves are named only for an error."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError(f"{what} is empty: pass arrays with a leading batch dimension.")
    if any(np.ndim(leaf) == 0 for leaf in leaves):
        scalars = [path for path, leaf in named_leaves(tree, what) if leaf is not None and np.ndim(leaf) == 0]
        raise ValueError(f"Every array in {what} needs a leading batch dimension (rank >= 1); "
                         f"{', '.join(scalars)} {'is a scalar' if len(scalars) == 1 else 'are scalars'}.")
    sizes = {np.shape(leaf)[0] for leaf in leaves}
    if len(sizes) > 1:
        rows = ", ".join(f"{path}: {np.shape(leaf)[0]}" for path, leaf in named_leaves(tree, what) if leaf is not None)
        raise ValueError(f"The leaves of {what} disagree on the batch size (their leading dimension): {rows}. "
                         "Every array in one batch must have the same leading dimension.")
    return sizes.pop()


def place_rows(tree: PyTree, sharding: NamedSharding, *, rows: Literal["global", "local"] = "global",
               global_rows: int | None = None) -> Any:
    """Host rows onto the mesh as `sharding` says (dim 0, or dim 1 of a stacked block, on the data axis).

    `rows="global"`: every process holds the whole global batch and places only its own shards.
    `rows="local"`: each process holds only its share (`Strategy.local_batch_slice`) and JAX joins
    the shares into global arrays of `global_rows` rows (default: the share's rows times the
    processes' blocks). In one process both are one `jax.device_put`."""
    if sharding.is_fully_addressable:
        return jax.device_put(tree, sharding)
    leaves, treedef = jax.tree.flatten(tree)
    if rows == "global":
        placed = [jax.make_array_from_callback(np.shape(a), sharding, lambda i, a=a: np.asarray(a)[i])
                  for a in leaves]
    else:
        local = [np.asarray(a) for a in leaves]
        total = global_rows if global_rows is not None else _global_rows(sharding, leading_size(local, "a batch"))
        placed = jax.make_array_from_process_local_data(sharding, local, [(total,) + a.shape[1:] for a in local])
    return jax.tree.unflatten(treedef, placed)


def _global_rows(sharding: NamedSharding, local_rows: int) -> int:
    blocks, local = row_blocks(sharding)
    if local_rows % len(local):
        raise ValueError(
            f"This process feeds {len(local)} replica(s) but its share of the batch has {local_rows} rows, "
            f"which does not split evenly among them; pass a multiple of {len(local)} rows."
        )
    return local_rows // len(local) * blocks


def per_replica(a: jax.Array, replicas: int, sharding: NamedSharding) -> jax.Array:
    """`(batch, ...)` -> `(replicas, batch / replicas, ...)` inside a global-view program, each
    replica's rows on its own devices (`sharding` splits dim 0 over the data axis)."""
    a = a.reshape((replicas, a.shape[0] // replicas) + a.shape[1:])
    return jax.lax.with_sharding_constraint(a, sharding)
