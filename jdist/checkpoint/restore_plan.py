"""How a checkpoint is read back: each leaf's target sharding (the strategy's layout), what orbax is
asked to produce for it, and one verdict on the checkpoint shared by every process."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jdist.checkpoint import tree
from jdist.checkpoint.tree import LeafSpec
from jdist.layout import abstract_tree
from jdist.strategy import context

if TYPE_CHECKING:
    from jdist.strategy.base import Strategy


def target_shardings(target: Any, leaves: list, treedef: Any, strategy: Strategy | None) -> list:
    """Each target leaf's sharding: the strategy's layout, or the leaf's own outside any scope."""
    explicit = strategy is not None or context.has_strategy()
    strategy = strategy if strategy is not None else context.get_strategy()
    abstract = abstract_tree(jax.tree_util.tree_unflatten(treedef, leaves))
    planned = jax.tree_util.tree_leaves(
        strategy.parameter_shardings(abstract), is_leaf=lambda x: isinstance(x, jax.sharding.Sharding)
    )
    if len(planned) != len(leaves):
        raise ValueError(
            f"{strategy!r}.parameter_shardings() returned {len(planned)} shardings for {len(leaves)} leaves."
        )
    if explicit:
        return planned
    return [getattr(x, "sharding", None) or s for x, s in zip(leaves, planned)]


def leaf_dtype(x: Any) -> Any:
    return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def abstract_leaf(spec: LeafSpec, target_leaf: Any, sharding: Any) -> Any:
    """What orbax is asked to produce for one leaf."""
    if spec.kind == "key":
        return jax.ShapeDtypeStruct(tree.key_data_shape(spec), np.uint32, sharding=sharding)
    if spec.kind == "array":
        return jax.ShapeDtypeStruct(spec.shape, np.dtype(spec.dtype), sharding=sharding)
    if spec.kind == "host":
        return np.zeros(spec.shape, np.dtype(spec.dtype)) if not isinstance(target_leaf, np.ndarray) else target_leaf
    return target_leaf


def agree_across_processes(problem: str | None) -> str | None:
    """Makes every process take the same decision about a checkpoint (each reads only its shards)."""
    if jax.process_count() == 1:
        return problem
    from jax.experimental import multihost_utils

    flags = multihost_utils.process_allgather(np.array([problem is not None], np.int32))
    if problem is None and np.any(flags):
        bad = [int(i) for i in np.nonzero(np.ravel(flags))[0]]
        return f"another process (index {bad}) could not read it"
    return problem
