"""TF's object graph of a checkpoint: which path names each saved value (`net/l1/kernel/.ATTRIBUTES/...`).

TF names a value by the attribute path from the root `Checkpoint` to it, each object named once, by the
first path a breadth-first walk finds (observed, TF 2.21 with tf_keras: the guide's keys
`net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE`, `optimizer/_iterations/...`, `optimizer/_variables/1/...`,
`iterator/.ATTRIBUTES/ITERATOR_STATE`, `save_counter/...`, `_CHECKPOINTABLE_OBJECT_GRAPH`). jdist walks:
a `Checkpoint`'s attributes in the order they were set; lists and dicts by index and key; a Keras layer's own
variables by their names, then its sublayers by attribute name, then the layers of a Sequential or functional
model as `layer_with_weights-<j>` (tf_keras's names), then any variable still unnamed as `_variables/<i>`
(random-seed states excepted: TF saves none);
an optimizer's `_iterations`, `_learning_rate`, then `_variables/<i>`; a `tf.Module`'s attributes by name,
in the order they were set (`net/layers/0/w/...`, as TF's); other objects with `variables` as `_variables/<i>`.
Keras's instance-numbered names (`sequential_1/...`) never enter a key, so a checkpoint
restores into a freshly made model.
"""
from __future__ import annotations

import collections
from typing import Any, Iterator

from jdist.errors import InputTypeError

VARIABLE = ".ATTRIBUTES/VARIABLE_VALUE"
ITERATOR = ".ATTRIBUTES/ITERATOR_STATE"
GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def is_variable(obj: object) -> bool:
    return hasattr(obj, "assign") and hasattr(obj, "value") and hasattr(obj, "shape")


def is_tf_variable(obj: object) -> bool:
    """A `tf.Variable` of jdist.tf_compat (a Keras variable that a TF script made, not a layer's weight)."""
    return hasattr(type(obj), "_jdist_replication") and is_variable(obj)


def is_iterator(obj: object) -> bool:
    return hasattr(obj, "get_state") and hasattr(obj, "set_state") and hasattr(obj, "__next__")


class Trackable:
    """An object whose named dependencies are its own attributes (`tf.train.Checkpoint`), walked by name."""

    def _dependencies(self) -> dict[str, Any]:
        raise NotImplementedError


def join(path: str, name: str) -> str:
    return f"{path}/{name}" if path and name else path or name


def leaf_key(path: str, obj: Any) -> str:
    return join(path, ITERATOR if is_iterator(obj) else VARIABLE)


def _keras_children(obj: Any) -> list[tuple[str, Any]]:
    import keras

    children: list[tuple[str, Any]] = []
    own: list = []
    if isinstance(obj, keras.layers.Layer):  # an optimizer's `_trainable_variables` are the model's, not its own
        own = list(getattr(obj, "_trainable_variables", [])) + list(getattr(obj, "_non_trainable_variables", []))
    # a tf.Variable set as an attribute is named by the attribute (TF's), a Keras weight by its own name
    attributes = {id(value): attr for attr, value in vars(obj).items() if is_tf_variable(value)}
    own_names: list[str] = [attributes.get(id(v), str(v.name)) for v in own]
    names = collections.Counter(own_names)
    seen: dict[str, int] = collections.Counter()
    for v, own_name in zip(own, own_names):
        name = own_name if names[own_name] == 1 else f"{own_name}_{seen[own_name]}"
        seen[own_name] += 1
        children.append((name, v))
    kept = {id(v) for v in own}  # a tf.Variable attribute is no Keras weight (TF's Keras 3), yet TF saves it
    children += [(attr, v) for attr, v in vars(obj).items() if is_tf_variable(v) and id(v) not in kept]
    for attr, value in vars(obj).items():
        if not attr.startswith("_") and isinstance(value, keras.layers.Layer) and value is not obj:
            children.append((attr, value))
    weighted = [layer for layer in getattr(obj, "_layers", []) if layer.weights]
    children += [(f"layer_with_weights-{j}", layer) for j, layer in enumerate(weighted)]
    if isinstance(obj, keras.optimizers.Optimizer):
        if getattr(obj, "_iterations", None) is not None:
            children.insert(0, ("_iterations", obj._iterations))
        if is_variable(getattr(obj, "_learning_rate", None)):
            children.insert(1, ("_learning_rate", obj._learning_rate))
    seeds = _seed_states(obj)
    children.append(("_variables", [v for v in getattr(obj, "variables", []) if id(v) not in seeds]))
    return children


def _seed_states(obj: Any) -> set[int]:
    """The ids of the random-seed states (Keras `SeedGenerator`s: Dropout, GaussianNoise, ...) in `obj`'s layers.
    They are no checkpoint values: neither TF's Keras 3 nor tf_keras saves them in a `tf.train.Checkpoint`
    (observed, TF 2.21: a model with Dropout saves only its kernels and biases), so a checkpoint restores into
    the same model with or without its random layers."""
    layers: Any = obj._flatten_layers(include_self=True) if hasattr(obj, "_flatten_layers") else []
    return {id(generator.state) for layer in layers for generator in getattr(layer, "_seed_generators", [])}


def escape(name: str) -> str:
    """TF's escaping of one name in a key: `.` becomes `..` and `/` becomes `.S`, so a dict key "scoped/c"
    saves as `var_list/scoped.Sc/.ATTRIBUTES/VARIABLE_VALUE` (observed, TF 2.21)."""
    return name.replace(".", "..").replace("/", ".S")


def unescape(key: str) -> str:
    """`key` with `escape` undone (`..` to `.`, `.S` to `/`): the key jdist wrote before it escaped names."""
    out, i = [], 0
    while i < len(key):
        if key[i] == "." and key[i + 1:i + 2] in (".", "S"):
            out.append("." if key[i + 1] == "." else "/")
            i += 2
        else:
            out.append(key[i])
            i += 1
    return "".join(out)


def rekey_unescaped(root: Any, saved: dict[str, Any]) -> None:
    """Moves the values of a checkpoint written before names were escaped (its dict keys holding `.` or `/` as
    they were) to the keys `root`'s walk gives now, so they are restored rather than silently left out."""
    for path, obj in walk(root):
        if is_variable(obj) or is_iterator(obj):
            key = leaf_key(path, obj)
            old = unescape(key)
            if key not in saved and old != key and old in saved:
                saved[key] = saved.pop(old)


def children(obj: Any) -> list[tuple[str, Any]]:
    """The named dependencies of `obj`, in TF's walk order, each name escaped as in TF's keys (a `Trackable`'s
    are key names already: a `Checkpoint(root)` gives its root's escaped names)."""
    if isinstance(obj, Trackable):
        return list(obj._dependencies().items())
    return [(escape(name), child) for name, child in _children(obj)]


def _children(obj: Any) -> list[tuple[str, Any]]:
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return [(str(k), v) for k, v in obj.items()]
    if is_variable(obj) or is_iterator(obj):
        return []
    if getattr(type(obj), "_jdist_module", False):  # a tf.Module: its attributes by name, private ones too
        return [(name, value) for name, value in vars(obj).items() if not name.startswith("_Module__")]
    import keras

    if isinstance(obj, (keras.layers.Layer, keras.optimizers.Optimizer, keras.metrics.Metric)):
        return _keras_children(obj)
    if hasattr(obj, "variables"):
        return [("_variables", list(obj.variables))]
    return []


def check_trackable(obj: Any, name: str) -> None:
    """Refuses, naming the fix, what a checkpoint cannot hold."""
    if isinstance(obj, (Trackable, list, tuple, dict)) or is_variable(obj) or is_iterator(obj) \
            or hasattr(obj, "variables"):
        return
    # TF's ValueError, its text first (also a TypeError)
    raise InputTypeError(f"`Checkpoint` was expecting {name} to be a trackable object (an object derived from "
                         f"`Trackable`), got {obj!r}. A {type(obj).__name__} is not one, which a checkpoint cannot "
                         "hold; pass Keras models, layers, optimizers, metrics, tf.Variables, tf.Modules, tf.data "
                         "iterators, tf.train.Checkpoint objects, or lists / dicts of them.")


def walk(root: Any, aliases: dict[str, str] | None = None) -> Iterator[tuple[str, Any]]:
    """(path, object) for every object reachable from `root`, each once, breadth first (TF's naming). Other
    paths to an object already named go to `aliases` (path -> its name), as TF's object graph keeps every edge."""
    named = {id(root): ""}
    queue = collections.deque([("", root)])
    while queue:
        path, obj = queue.popleft()
        yield path, obj
        for name, child in children(obj):
            if child is None or isinstance(child, (str, int, float, bool)):
                continue
            if id(child) in named:
                if aliases is not None and named[id(child)] != join(path, name):
                    aliases[join(path, name)] = named[id(child)]
                continue
            named[id(child)] = join(path, name)
            queue.append((join(path, name), child))


def expand_aliases(saved: dict[str, Any], aliases: dict[str, str]) -> dict[str, str]:
    """Adds to `saved` the keys under each alias path; returns alias key -> the key it stands for."""
    canonical: dict[str, str] = {}
    for alias, target in aliases.items():
        for key in [k for k in saved if k.startswith(target + "/")]:
            canonical[alias + key[len(target):]] = canonical.get(key, key)
            saved[alias + key[len(target):]] = saved[key]
    return canonical


def subtree(saved: dict[str, Any], path: str) -> dict[str, Any]:
    """The saved values under `path`, with keys relative to it."""
    prefix = path + "/"
    return {k[len(prefix):]: v for k, v in saved.items() if k.startswith(prefix)}
