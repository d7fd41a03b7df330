"""Keras copies made to share their variables again, as the originals do.

Keras pickles each model, layer and metric on its own (its config and weights). A function
that names a layer and the model holding it, or two models holding one layer, reaches a
process that unpickles it as separate copies with separate variables: the layer's kernel
there is not the model's, so a gradient of the model's variables misses the layer's use
of it, and the two copies drift apart. TF's variables stay one variable whoever refers to
it. `sharing(objects)` describes, where the originals are, which of their variables are the
same (`None` when none are); `share(copies, sharing)` makes the copies' references to a
repeated variable point at its first copy, and checks that every listed variable now does.
"""
from __future__ import annotations

from typing import Any, Sequence

Sharing = list[list[int]]  # per object, per variable in `object.variables`: the variable's slot (first seen)


def sharing(objects: Sequence[Any]) -> Sharing | None:
    """Each object's variables as slots numbered by first appearance; None when no variable repeats."""
    slots: dict[int, int] = {}
    layout = []
    for obj in objects:
        layout.append([slots.setdefault(id(v), len(slots)) for v in obj.variables])
    if sum(len(part) for part in layout) == len(slots):
        return None
    return layout


def share(copies: Sequence[Any], layout: Sharing) -> None:
    """Points the copies' references to a repeated variable at the first copy of it (see the module docstring)."""
    _check_matches(copies, layout)
    first: dict[int, Any] = {}
    replace: dict[int, Any] = {}
    for obj, slots in zip(copies, layout):
        for variable, slot in zip(obj.variables, slots):
            kept = first.setdefault(slot, variable)
            if kept is not variable:
                replace[id(variable)] = kept
    if not replace:
        return
    seen: set[int] = set()
    for obj in copies:
        for owner in _owners(obj):
            _rewire(owner, replace, seen, depth=0)
    for obj, slots in zip(copies, layout):
        if any(v is not first[slot] for v, slot in zip(obj.variables, slots)):
            raise RuntimeError(
                f"The copy of the Keras object {getattr(obj, 'name', obj)!r} still holds its own variables where the "
                "original shares them with another object the function uses. Use the shared layer through one "
                "model (or name only the model), or build the models from the layer inside the function.")


def _check_matches(copies: Sequence[Any], layout: Sharing) -> None:
    counts = [len(obj.variables) for obj in copies]
    if counts != [len(slots) for slots in layout]:
        raise RuntimeError(
            f"The copies of the function's Keras objects have {counts} variables each, the originals "
            f"{[len(slots) for slots in layout]}. Refer to the same Keras objects by name (globals or closures) so "
            "both sides find the same objects.")


def _owners(obj: Any) -> list:
    """The layers whose attributes may hold `obj`'s variables: itself and, for a model, its layers."""
    if not hasattr(obj, "_flatten_layers"):
        return [obj]
    layers: Any = obj._flatten_layers(include_self=True, recursive=True)
    return list(layers)


def _rewire(holder: Any, replace: dict[int, Any], seen: set[int], depth: int) -> None:
    """Swaps repeated variables in `holder`'s attributes, in its lists and dicts, and in plain objects it keeps
    (a `SeedGenerator`, a `ShardedVariable`), in place so Keras's trackers, which share those lists, see it."""
    if id(holder) in seen or depth > 3:
        return
    seen.add(id(holder))
    attributes = getattr(holder, "__dict__", None)
    if not isinstance(attributes, dict):
        return
    for name, value in list(attributes.items()):
        if id(value) in replace:
            object.__setattr__(holder, name, replace[id(value)])  # past Keras's tracking: already tracked
        else:
            _rewire_value(value, replace, seen, depth)


def _rewire_value(value: Any, replace: dict[int, Any], seen: set[int], depth: int) -> None:
    import keras

    if isinstance(value, list):
        for i, item in enumerate(value):
            if id(item) in replace:
                value[i] = replace[id(item)]
            else:
                _rewire_value(item, replace, seen, depth + 1)
    elif isinstance(value, dict):
        for key, item in list(value.items()):
            if id(item) in replace:
                value[key] = replace[id(item)]
            else:
                _rewire_value(item, replace, seen, depth + 1)
    elif isinstance(value, (keras.layers.Layer, keras.Variable)):
        return  # layers are walked as owners; a variable's own attributes hold no other variable
    elif hasattr(value, "__dict__") and not isinstance(value, type) and not callable(value):
        _rewire(value, replace, seen, depth + 1)
