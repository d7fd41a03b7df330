"""A `tf.Variable` set as an attribute of a Keras 3 layer or model is none of its weights.

Observed in TF 2.21 with Keras 3.15: `self.v = tf.Variable(1.)` in a layer's `__init__` or `build` is not
tracked by Keras 3 (which tracks only its own variables): `layer.weights`, `variables`, `trainable_weights`,
`get_weights()` and `count_params()` leave it out, `model.fit` does not train it (it keeps its value),
`model.save` / `save_weights` do not save it; a `tf.GradientTape` still differentiates it when asked for it
(`tape.gradient(loss, layer.v)`), `tf.train.Checkpoint(model=m)` saves it (as `model/v`), and a value assigned
to it between `fit` calls is what the next `fit` / `evaluate` step reads. tf_keras (TF's Keras 2,
`TF_USE_LEGACY_KERAS=1`) tracks it as a weight instead.

jdist's `tf.Variable` is a `keras.Variable` subclass, which Keras's attribute tracking made a trainable weight.
Here a layer keeps such variables apart (`attribute_variables`), out of its weights. Keras's compiled JAX steps
read only the variables in their state, baking any other in as a constant when they compile, so the layer's
`non_trainable_variables` (the steps' state: not trained, read at their current value, written back when
assigned) lists them after its own, where TF's Keras 3 leaves them out; `strategy.run` threads them too.
Keras metrics and optimizers track them as before (their variables are their compiled state).
"""
from __future__ import annotations

from typing import Any

_INSTALLED: list[bool] = []
_CLASSES: list[type] = []  # jdist's tf.Variable class, once made (`register`)
_STORE = "_jdist_attribute_variables"


def attribute_variables(layer: Any) -> list:
    """The `tf.Variable`s set as attributes of `layer` and its sublayers (none of their weights)."""
    layers = layer._flatten_layers(include_self=True) if hasattr(layer, "_flatten_layers") else [layer]
    found: dict[int, Any] = {}
    for each in layers:
        for variable in vars(each).get(_STORE, ()):
            found.setdefault(id(variable), variable)
    return list(found.values())


def register(tf_variable_class: type) -> None:
    """`tf_variable_class` (jdist's `tf.Variable`) is the class whose instances a layer keeps apart."""
    if tf_variable_class not in _CLASSES:
        _CLASSES.append(tf_variable_class)


def install() -> None:
    """A Keras layer keeps instances of the registered class set as its attributes apart; before any layer is
    made (with `tf.keras`'s first use), as a layer's tracker is patched when the layer is made."""
    if _INSTALLED:
        return
    from keras.src.layers.layer import Layer
    from keras.src.utils import tracking

    original = tracking.Tracker.track

    def track(self: Any, attr: Any) -> Any:
        owner = getattr(self, "_jdist_layer", None)
        if owner is None or not isinstance(attr, tuple(_CLASSES)) or not tracking.is_tracking_enabled():
            return original(self, attr)
        kept = vars(owner).setdefault(_STORE, [])
        if all(attr is not v for v in kept):
            kept.append(attr)
        return attr

    initialize = Layer._initialize_tracker

    def _initialize_tracker(self: Any) -> None:
        initialize(self)
        vars(self)["_tracker"]._jdist_layer = self  # a layer's tracker (not a metric's or an optimizer's)

    own: Any = Layer.non_trainable_variables.fget

    def non_trainable_variables(self: Any) -> list:
        listed = own(self)
        ids = {id(v) for v in listed}
        return listed + [v for v in attribute_variables(self) if id(v) not in ids]

    track.__wrapped__ = original  # type: ignore[attr-defined]
    tracking.Tracker.track = track
    Layer._initialize_tracker = _initialize_tracker
    Layer.non_trainable_variables = property(non_trainable_variables, doc=own.__doc__)  # type: ignore[misc]
    _INSTALLED.append(True)
