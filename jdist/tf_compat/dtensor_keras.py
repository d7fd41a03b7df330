"""`tf.keras.dtensor.experimental` and the `*_layout=` arguments of tf_keras's layers, on jdist's DTensor.

TF 2.21's Keras 3 has neither (observed: `tf.keras.dtensor` is an AttributeError, `Dense(kernel_layout=...)` a
ValueError), and so has jdist's then. TF 2.21's tf_keras (TF_USE_LEGACY_KERAS=1) has both, and TF's tutorial
"Using DTensors with Keras" runs there, so with that variable set jdist serves tf_keras's rules (observed there;
tests/test_tf_parity_dtensor_keras.py; the names: dtensor_keras_names.py):
- `Dense(kernel_layout=, bias_layout=)`, `Conv*(kernel_layout=, bias_layout=)`, `Embedding(embeddings_layout=)`:
  the weight is made with that layout (a DVariable with `.layout`); a weight given none stays a regular variable.
- `LayoutMap(mesh)`: keys are regexes `re.match`-ed against a weight's path, `"<layer name>.<weight>"` in a
  Functional or Sequential model and the attribute path (`"feature.kernel"`) in a subclassed one; a weight no key
  matches is replicated on the map's mesh. A key is set once (ValueError), and its value must be a Layout.
- `LayoutMap.scope()`: a model made in it lays out its weights when they are made (a subclassed model's at its
  first call, which may come after the scope).
jdist places the weight made as Keras makes it (its values are Keras's, not TF's draws).
"""
from __future__ import annotations

import collections.abc
import contextlib
import functools
import inspect
import re
from collections.abc import Iterator
from typing import Any

import jax

from jdist.tf_compat.dtensor import guard_assign, is_dtensor
from jdist.tf_compat.dtensor_mesh import Layout, Mesh

# tf_keras's layers and the weights their `<weight>_layout=` arguments lay out (observed for Dense, Conv2D,
# Embedding in TF 2.21's tf_keras)
LAYOUT_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "Dense": ("kernel", "bias"), "Conv1D": ("kernel", "bias"), "Conv2D": ("kernel", "bias"),
    "Conv3D": ("kernel", "bias"), "Embedding": ("embeddings",),
}


def lay_out(variable: Any, layout: Layout) -> None:
    """Makes a Keras variable a DVariable laid out by `layout` (its value moved there, its assignments kept
    there)."""
    if not isinstance(layout, Layout):
        raise ValueError(f"{layout!r} should be a dtensor.Layout type, got {type(layout)}")
    if len(variable.shape) != layout.rank:
        raise ValueError(f"The layout {layout.sharding_specs} has rank {layout.rank} but the weight "
                         f"{getattr(variable, 'path', variable.name)!r} has shape {tuple(variable.shape)}; give "
                         "one sharding spec per axis of the weight")
    for axis, (size, pieces) in enumerate(zip(variable.shape, layout.shape)):
        if size % pieces:
            raise ValueError(f"Axis {axis} of the weight {getattr(variable, 'path', variable.name)!r} (size {size}) "
                             f"is split over mesh dimension {layout.sharding_specs[axis]!r} of size {pieces}, "
                             "which does not divide it: choose a dimension whose size divides it")
    variable._layout = layout.sharding()  # Keras's JAX variable places every value it is given by it
    variable._dtensor_layout = variable.layout = layout
    variable._jdist_check_assign = functools.partial(guard_assign, variable)
    if getattr(variable, "_value", None) is None:
        return  # made inside a trace (Keras's symbolic build): Keras places it by `_layout` when it makes it
    with jax.ensure_compile_time_eval():  # built inside a traced call: place the concrete value
        variable._value = layout.place(variable._value)  # (`_direct_assign` would constrain a traced one)


def replicate_unplaced(variables: Any, mesh: Mesh) -> None:
    """Lays every variable not yet on a DTensor mesh out replicated on `mesh` (tf_keras's default)."""
    for variable in variables:
        if getattr(variable, "_dtensor_layout", None) is None and not is_dtensor(variable):
            lay_out(variable, Layout.replicated(mesh, len(variable.shape)))


class LayoutMap(collections.abc.MutableMapping):
    """tf_keras's `tf.keras.dtensor.experimental.LayoutMap(mesh=None)`: regex -> `dtensor.Layout`."""

    def __init__(self, mesh: Mesh | None = None):
        self._layout_map: dict[str, Layout] = {}
        self._default_mesh = mesh

    def __getitem__(self, key: str) -> Layout | None:
        """The layout of the first key (in insertion order) that `re.match`es `key`; None when none does."""
        if key in self._layout_map:
            return self._layout_map[key]
        for pattern, layout in self._layout_map.items():
            if re.match(pattern, key):
                return layout
        return None

    def __setitem__(self, key: str, layout: Layout) -> None:
        if key in self._layout_map:
            raise ValueError(f"{key} already exist in the LayoutMap with value {self._layout_map[key]}. Please "
                             "make sure to not use duplicated keys.")
        if not isinstance(layout, Layout):
            raise ValueError(f"{layout} should be a dtensor.Layout type, got {type(layout)}")
        self._layout_map[key] = layout

    def __delitem__(self, key: str) -> None:
        del self._layout_map[key]

    def __len__(self) -> int:
        return len(self._layout_map)

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout_map)

    def get_default_mesh(self) -> Mesh | None:
        return self._default_mesh

    def scope(self) -> contextlib.AbstractContextManager[None]:
        return layout_map_scope(self)

    def apply(self, model: Any) -> None:
        """Lays out `model`'s weights by this map."""
        for path, variable in weight_paths(model):
            self.place(path, variable)

    def place(self, path: str, variable: Any) -> None:
        """Lays out the weight at `path` by this map (unmatched: replicated on its mesh) unless it has a layout."""
        if getattr(variable, "_dtensor_layout", None) is not None:
            return
        layout = self[path]
        if layout is None and self._default_mesh is not None:
            layout = Layout.replicated(self._default_mesh, len(variable.shape))
        if layout is not None:
            lay_out(variable, layout)


def weight_paths(model: Any) -> list[tuple[str, Any]]:
    """(path, variable) for `model`'s weights, named as tf_keras's LayoutMap names them (observed): a Functional
    or Sequential model's as `<layer name>.<weight name>`, a subclassed model's by attribute (`feature.kernel`)."""
    if _by_layer_name(model):
        return [(f"{layer.name}.{v.name}", v) for layer in model.layers for v in layer.weights]
    import keras

    return [(f"{path}.{v.name}", v) for path, layer in _walk(model, "", set())
            if isinstance(layer, keras.Layer) and layer is not model for v in own_weights(layer)]


def own_weights(layer: Any) -> list:
    """The variables `layer` made itself (not its sublayers')."""
    return [*layer._trainable_variables, *layer._non_trainable_variables]


def _by_layer_name(model: Any) -> bool:
    import keras
    from keras.src.models.functional import Functional

    return isinstance(model, (Functional, keras.Sequential))


def _walk(obj: Any, prefix: str, seen: set) -> Iterator[tuple[str, Any]]:
    """(attribute path, object) for the layers and variables reachable from `obj` by public attributes."""
    import keras

    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (keras.Variable, keras.Layer)):
        yield prefix, obj
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _walk(item, f"{prefix}.{i}" if prefix else str(i), seen)
    elif isinstance(obj, keras.Layer):
        for name, value in vars(obj).items():
            if not name.startswith("_") and isinstance(value, (keras.Layer, keras.Variable, list, tuple)):
                yield from _walk(value, f"{prefix}.{name}" if prefix else name, seen)


def _mark_sublayers(model: Any, layout_map: LayoutMap) -> None:
    """Each layer of a subclassed model learns its attribute path, so its weights are laid out when made."""
    import keras

    for path, layer in _walk(model, "", set()):
        if isinstance(layer, keras.Layer) and layer is not model:
            object.__setattr__(layer, "_jdist_layout_prefix", (layout_map, path))


_SCOPES: list[tuple[LayoutMap, list]] = []


@contextlib.contextmanager
def layout_map_scope(layout_map: LayoutMap) -> Iterator[None]:
    """Models made in the block lay out their weights by `layout_map` (at once when built, else when built)."""
    install()
    made: list = []
    _SCOPES.append((layout_map, made))
    try:
        yield
    finally:
        _SCOPES.pop()
        for model in reversed(made):  # an outer model, made first, has the last word
            if not _by_layer_name(model):
                _mark_sublayers(model, layout_map)
            layout_map.apply(model)


def _record(init: Any) -> Any:
    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        import keras

        if _SCOPES and isinstance(self, keras.Model) and not hasattr(self, "_jdist_recorded"):
            object.__setattr__(self, "_jdist_recorded", True)
            _SCOPES[-1][1].append(self)
        init(self, *args, **kwargs)

    __init__.__signature__ = inspect.signature(init)  # type: ignore[attr-defined]
    return __init__


def _accepting_layouts(init: Any, names: tuple[str, ...]) -> Any:
    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        layouts = {n: kwargs.pop(f"{n}_layout") for n in names if f"{n}_layout" in kwargs}
        init(self, *args, **kwargs)
        if layouts:
            for layout in layouts.values():
                if not isinstance(layout, Layout):
                    raise ValueError(f"{layout!r} should be a dtensor.Layout type, got {type(layout)}")
            object.__setattr__(self, "_jdist_weight_layouts", {**getattr(self, "_jdist_weight_layouts", {}),
                                                               **layouts})

    __init__.__signature__ = with_keywords(init, [f"{n}_layout" for n in names])  # type: ignore[attr-defined]
    return __init__


def with_keywords(function: Any, names: list[str]) -> inspect.Signature:
    """`function`'s signature with keyword arguments `names` (default None) added: Keras reads a layer's
    arguments from its `__init__`'s signature."""
    signature = inspect.signature(function)
    params = list(signature.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))
    added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in names
             if n not in signature.parameters]
    return signature.replace(parameters=params[:at] + added + params[at:])


def _placing(post_build: Any) -> Any:
    @functools.wraps(post_build)
    def _post_build(self: Any) -> None:
        post_build(self)
        for name, layout in getattr(self, "_jdist_weight_layouts", {}).items():
            variable = getattr(self, name, None)
            if variable is not None and getattr(variable, "_dtensor_layout", None) is None:
                lay_out(variable, layout)
        layout_map, prefix = getattr(self, "_jdist_layout_prefix", (None, ""))
        if layout_map is not None:
            for variable in own_weights(self):
                layout_map.place(f"{prefix}.{variable.name}", variable)

    return _post_build


_INSTALLED: list[bool] = []


def install() -> None:
    """Keras 3's layers take tf_keras's `*_layout=` arguments and models record the LayoutMap scope; once."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    import keras

    keras.Layer.__init__ = _record(keras.Layer.__init__)  # type: ignore[method-assign]
    keras.Layer._post_build = _placing(keras.Layer._post_build)  # type: ignore[attr-defined]
    for name, weights in LAYOUT_ARGUMENTS.items():
        cls = getattr(keras.layers, name)
        cls.__init__ = _accepting_layouts(cls.__init__, weights)
