"""`tf.nest`: TF's structure functions over `jax.tree`, with `None` a leaf as in TF (`jax.tree` drops it).

TF's structures are lists, tuples (namedtuples too) and dicts (keys sorted when flattened, but a rebuilt dict keeps
the first structure's key order, as TF's does: observed in TF 2.21); everything else,
arrays and text included, is a leaf. `assert_same_structure` (and `map_structure` over several structures)
raises TF 2.21's errors (observed): ValueError for a different nesting, length or set of keys, TypeError for
different sequence types under `check_types` (any two mappings match).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax

from jdist.strategy.batch_components import PerReplicaComponent
from jdist.strategy.distributed_batch import DistributedBatch
from jdist.strategy.values import PerReplica
from jdist.typing import PyTree


def _is_none(x: object) -> bool:
    """A leaf of TF's nest beyond jax's: None, and a per-replica value (TF 2.21's `tf.nest.flatten({"a": pr})` is
    `[pr]`, observed)."""
    return x is None or isinstance(x, (PerReplica, PerReplicaComponent))


def is_nested(seq: Any) -> bool:
    """`tf.nest.is_nested`: a list, tuple (namedtuple) or mapping; arrays, text and sets are leaves."""
    return isinstance(seq, (list, tuple, Mapping))


class _Dot:
    def __repr__(self) -> str:
        return "."


def _shape_text(structure: Any) -> str:
    """The structure with its leaves shown as '.' (TF's "Entire first structure")."""
    def dots(s: Any) -> Any:
        if isinstance(s, Mapping):
            return {k: dots(v) for k, v in s.items()}
        if isinstance(s, tuple) and hasattr(s, "_fields"):
            return type(s)(*(dots(v) for v in s))
        if isinstance(s, (list, tuple)):
            return type(s)(dots(v) for v in s)
        return _Dot()
    return repr(dots(structure))


def _text(s: Any) -> str:
    return f"type={type(s).__name__} str={s}"


def _difference(a: Any, b: Any, check_types: bool) -> tuple[type[Exception], str] | None:
    """The first difference of nesting between a and b, in TF's words, or None."""
    if is_nested(a) != is_nested(b):
        seq, leaf = (a, b) if is_nested(a) else (b, a)
        return ValueError, f'Substructure "{_text(seq)}" is a sequence, while substructure "{_text(leaf)}" is not'
    if not is_nested(a):
        return None
    if check_types and type(a) is not type(b) and not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        return TypeError, (f"The two namedtuples don't have the same sequence type. First structure {_text(a)} has "
                           f"type {type(a).__name__}, while second structure {_text(b)} has type {type(b).__name__}")
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return ValueError, (f"The two dictionaries don't have the same set of keys. First structure has keys "
                                f"{_text(list(a))}, while second structure has keys {_text(list(b))}")
        pairs = [(a[k], b[k]) for k in sorted(a)]
    else:
        pairs = list(zip(a.values() if isinstance(a, Mapping) else a, b.values() if isinstance(b, Mapping) else b))
    for x, y in pairs:  # TF compares the common elements first, then the lengths (observed)
        found = _difference(x, y, check_types)
        if found is not None:
            return found
    if len(a) != len(b):
        return ValueError, (f"The two structures don't have the same number of elements. First structure: "
                            f"{_text(a)}. Second structure: {_text(b)}")
    return None


def assert_same_structure(nest1: PyTree, nest2: PyTree, check_types: bool = True,
                          expand_composites: bool = False) -> None:
    """`tf.nest.assert_same_structure`: TF's ValueError / TypeError naming the first difference."""
    found = _difference(nest1, nest2, check_types)
    if found is None:
        return None
    error, detail = found
    raise error(f"The two structures don't have the same nested structure.\n\nFirst structure: {_text(nest1)}\n\n"
                f"Second structure: {_text(nest2)}\n\nMore specifically: {detail}\nEntire first structure:\n"
                f"{_shape_text(nest1)}\nEntire second structure:\n{_shape_text(nest2)}")


def map_structure(func: Callable[..., object], *structure: PyTree, check_types: bool = True,
                  expand_composites: bool = False) -> PyTree:
    """`tf.nest.map_structure`: `func` over the leaves of structures that `assert_same_structure` accepts."""
    if not structure:
        raise ValueError("Must provide at least one structure")
    structure = tuple(_elements(s) for s in structure)
    first, others = structure[0], structure[1:]
    for other in others:
        assert_same_structure(first, other, check_types=check_types)
    if others and not check_types:  # same leaves in another container: map over the first's shape
        treedef = jax.tree.structure(first, is_leaf=_is_none)
        leaves = [flatten(s) for s in structure]
        return _in_order_of(first, jax.tree.unflatten(treedef, [func(*args) for args in zip(*leaves)]))
    return _in_order_of(first, jax.tree.map(func, *structure, is_leaf=_leaf_test(expand_composites)))


def _leaf_test(expand_composites: bool) -> Callable[[object], bool]:
    """`_is_none`, and an ExtensionType value a leaf unless `expand_composites` (TF 2.21: `tf.nest.flatten(mt)` is
    `[mt]`, with expand_composites its tensors, observed)."""
    if expand_composites:
        return _is_none
    return lambda x: _is_none(x) or hasattr(type(x), "_tf_extension_type_fields")


def flatten(structure: PyTree, expand_composites: bool = False) -> list:
    return jax.tree.leaves(_elements(structure), is_leaf=_leaf_test(expand_composites))


def _elements(structure: PyTree) -> PyTree:
    """`structure` with each distributed dataset element as TF's nest sees it: its components, not its mask (TF 2.21:
    `tf.nest.flatten(batch)` of an `(x, y)` element is `[PerReplica, PerReplica]`, observed)."""
    def is_leaf(x: object) -> bool:
        return x is None or isinstance(x, (DistributedBatch, PerReplica, PerReplicaComponent))

    if not any(isinstance(x, DistributedBatch) for x in jax.tree.leaves(structure, is_leaf=is_leaf)):
        return structure  # as it is: a rebuilt dict would lose its key order
    return jax.tree.map(lambda b: b.element() if isinstance(b, DistributedBatch) else b, structure, is_leaf=is_leaf)


def pack_sequence_as(structure: PyTree, flat_sequence: Iterable[object], expand_composites: bool = False) -> PyTree:
    rebuilt = jax.tree.unflatten(jax.tree.structure(structure, is_leaf=_is_none), list(flat_sequence))
    return _in_order_of(structure, rebuilt)


def _in_order_of(template: Any, rebuilt: Any) -> Any:
    """`rebuilt` with each dict's keys in `template`'s order (`jax.tree` rebuilds a dict with its keys sorted)."""
    if isinstance(template, dict) and isinstance(rebuilt, dict) and set(template) == set(rebuilt):
        items = [(key, _in_order_of(template[key], rebuilt[key])) for key in template]
        if isinstance(rebuilt, defaultdict):
            return type(rebuilt)(rebuilt.default_factory, items)
        return type(rebuilt)(items)
    if type(template) in (list, tuple) and type(rebuilt) is type(template) and len(template) == len(rebuilt):
        return type(rebuilt)(_in_order_of(t, r) for t, r in zip(template, rebuilt))
    if isinstance(template, tuple) and hasattr(template, "_fields") and type(rebuilt) is type(template):
        return type(rebuilt)(*(_in_order_of(t, r) for t, r in zip(template, rebuilt)))
    return rebuilt


NEST = dict(assert_same_structure=assert_same_structure, is_nested=is_nested)
