"""`tf.nest`: TF's structure functions over `jax.tree`, with `None` a leaf as in TF (`jax.tree` drops it)."""
from __future__ import annotations

from collections.abc import Callable, Iterable

import jax

from jdist.typing import PyTree


def _is_none(x: object) -> bool:
    return x is None


def map_structure(func: Callable[..., object], *structure: PyTree, check_types: bool = True,
                  expand_composites: bool = False) -> PyTree:
    return jax.tree.map(func, *structure, is_leaf=_is_none)


def flatten(structure: PyTree, expand_composites: bool = False) -> list:
    return jax.tree.leaves(structure, is_leaf=_is_none)


def pack_sequence_as(structure: PyTree, flat_sequence: Iterable[object], expand_composites: bool = False) -> PyTree:
    return jax.tree.unflatten(jax.tree.structure(structure, is_leaf=_is_none), list(flat_sequence))
