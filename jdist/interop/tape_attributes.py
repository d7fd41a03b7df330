"""Sources an eager tape's block reads through an object's attribute, as TF's tf_numpy guide writes them.

    with tf.GradientTape() as tape:
        tape.watch(model.weights)           # a tuple of arrays the model holds as an attribute
        loss = tnp.sum(model.predict(x))    # `predict` reads `self.weights`
    grads = tape.gradient(loss, model.weights)

TF's tape records the watched tensors wherever the code reads them. jdist's eager tape replays the block
(`jdist.interop.eager_tape`), so a watched array is differentiated where the replay reads it: a name the
block binds, or here an attribute of an object one of the block's names holds (directly, or as an item of a
tuple or list there). For the replay the attribute holds the differentiated values, and afterwards its
own value again.
"""
from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator

_NOT_OWNERS = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


@dataclass(frozen=True)
class Slot:
    """Where an object holds a source: `owner.attribute`, or item `index` of the tuple or list there."""

    owner: Any
    attribute: str
    index: int | None


def find(namespace: dict[str, Any], sources: list) -> dict[int, list[Slot]]:
    """The attributes of the objects `namespace`'s names hold that hold one of `sources` (by identity)."""
    wanted = {id(s) for s in sources}
    found: dict[int, list[Slot]] = {}
    owners: dict[int, Any] = {}
    for value in namespace.values():
        if not isinstance(value, _NOT_OWNERS) and isinstance(getattr(value, "__dict__", None), dict):
            owners.setdefault(id(value), value)
    for owner in owners.values():
        for attribute, held in list(vars(owner).items()):
            if id(held) in wanted:
                found.setdefault(id(held), []).append(Slot(owner, attribute, None))
            elif isinstance(held, (tuple, list)):
                for index, item in enumerate(held):
                    if id(item) in wanted:
                        found.setdefault(id(item), []).append(Slot(owner, attribute, index))
    return found


def _with_items(held: Any, replaced: dict[int, Any]) -> Any:
    items = [replaced.get(i, item) for i, item in enumerate(held)]
    if isinstance(held, tuple) and hasattr(held, "_fields"):  # a namedtuple
        return type(held)(*items)
    return type(held)(items) if type(held) in (tuple, list) else items


def rebind(found: dict[int, list[Slot]], values: dict[int, Any]) -> Callable[[], None]:
    """The attributes in `found` hold `values` (by the source's id) from now on, written into the object's
    `__dict__` (past a Keras layer's attribute tracking); the function returned gives them their own values
    back."""
    changes: dict[tuple[int, str], tuple[Any, str, Any, dict[int, Any]]] = {}
    for source_id, slots in found.items():
        for slot in slots:
            key = (id(slot.owner), slot.attribute)
            entry = changes.setdefault(key, (slot.owner, slot.attribute, vars(slot.owner)[slot.attribute], {}))
            entry[3][-1 if slot.index is None else slot.index] = values[source_id]
    for owner, attribute, held, replaced in changes.values():
        vars(owner)[attribute] = replaced[-1] if -1 in replaced else _with_items(held, replaced)

    def restore() -> None:
        for owner, attribute, held, _ in changes.values():
            vars(owner)[attribute] = held

    return restore


@contextlib.contextmanager
def rebound(found: dict[int, list[Slot]], values: dict[int, Any]) -> Iterator[None]:
    """`rebind` while the block runs (an eager tape's replay)."""
    restore = rebind(found, values)
    try:
        yield
    finally:
        restore()
