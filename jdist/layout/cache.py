"""Shardings resolved once per tree signature, and the abstract trees (shapes with shardings) a restore asks for."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Hashable

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jdist.layout import data_axis
from jdist.layout.specs import RuleValue, _shape_dtype

if TYPE_CHECKING:  # annotations only: a module of the same layer
    from jdist.typing import PyTree


# ------------------------------------------------------------------- caching
def tree_signature(tree: PyTree) -> Hashable | None:
    """What a tree's placement depends on: its structure and each leaf's shape and dtype
    (None when that cannot be a dictionary key, e.g. a pytree node with unhashable static data)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    key = (treedef, tuple(_shape_dtype(leaf) for leaf in leaves))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class ShardingCache:
    """A strategy's placement answers, computed once per tree signature (structure, shapes,
    dtypes) and kind ("stored", "update"), so a train state's layout is resolved once however
    often it is asked for (placing, creating, compiling, restoring)."""

    def __init__(self) -> None:
        self._answers: dict[Any, tuple[Any, list]] = {}

    def get(self, kind: str, tree: PyTree, compute: Callable[[PyTree], PyTree]) -> PyTree:
        """`compute(tree)`, or the answer given for a tree with the same signature (fresh containers)."""
        signature = tree_signature(tree)
        if signature is None:
            return compute(tree)
        key = (kind, data_axis.WEIGHT_UPDATE_MIN_BYTES, signature)  # the threshold is a module setting tests change
        if key not in self._answers:
            leaves, treedef = jax.tree_util.tree_flatten(compute(tree))
            self._answers[key] = (treedef, leaves)
        treedef, leaves = self._answers[key]
        return treedef.unflatten(leaves)


def replicated_shardings(mesh: Mesh, tree: PyTree) -> PyTree:
    """Every leaf of `tree` whole on every device of `mesh`."""
    replicated = NamedSharding(mesh, P())
    return jax.tree.map(lambda _: replicated, tree)


def abstract_tree(tree: PyTree, shardings: PyTree = None) -> PyTree:
    """`tree` as `jax.ShapeDtypeStruct`s, each with its sharding from `shardings` (a tree of
    shardings shaped like `tree`) when given: what a restore asks for before any array exists."""
    def leaf(x: Any, sharding: Any = None) -> jax.ShapeDtypeStruct:
        shape, dtype = _shape_dtype(x)
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

    if shardings is None:
        return jax.tree.map(leaf, tree)
    return jax.tree.map(leaf, tree, shardings)


def describe(value: RuleValue) -> str:
    """A rule value for messages: the spec, or the tactic's name."""
    if callable(value) and not isinstance(value, P):
        return getattr(value, "__name__", repr(value))
    return str(value)
