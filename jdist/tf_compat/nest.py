"""`tf.nest`: TF's structure functions over `jax.tree`, with `None` a leaf as in TF (`jax.tree` drops it)."""
from __future__ import annotations

from typing import Any, Callable

import jax


def _is_none(x: Any) -> bool:
    return x is None


def map_structure(func: Callable, *structure: Any, check_types: bool = True, expand_composites: bool = False) -> Any:
    return jax.tree.map(func, *structure, is_leaf=_is_none)


def flatten(structure: Any, expand_composites: bool = False) -> list:
    return jax.tree.leaves(structure, is_leaf=_is_none)


def pack_sequence_as(structure: Any, flat_sequence: Any, expand_composites: bool = False) -> Any:
    return jax.tree.unflatten(jax.tree.structure(structure, is_leaf=_is_none), list(flat_sequence))
