"""tf_keras's DTensor names in `tf.keras` when TF_USE_LEGACY_KERAS asks for tf_keras: `tf.keras.dtensor`,
`tf.keras.backend.experimental`, and `mesh=` on optimizers and metrics (`tf.keras.dtensor.experimental.optimizers
.Adam(lr, mesh=mesh)`, `tf.keras.metrics.SparseCategoricalAccuracy(mesh=mesh)`), on Keras 3's classes.

Observed in TF 2.21's tf_keras (TF_USE_LEGACY_KERAS=1): `tf.keras.dtensor.experimental.optimizers` holds Adadelta,
Adagrad, Adam, AdamW, RMSprop and SGD; `mesh=` is optional, and one that is not a `dtensor.Mesh` is a TypeError.
A metric made with `mesh=` keeps its variables replicated on that mesh (DVariables, layout `[]` for a scalar), so
its `result()` is a DTensor; without `mesh=` it is a regular tensor. An optimizer's slots take their variable's
layout (Keras 3 does that from the variable's sharding) and its scalars are replicated on the mesh.
"""
from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable
from typing import Any

from jdist.tf_compat.dtensor_keras import with_keywords
from jdist.tf_compat.dtensor_mesh import Mesh

OPTIMIZERS = ("Adadelta", "Adagrad", "Adam", "AdamW", "RMSprop", "SGD")


def _check_mesh(mesh: Any) -> Mesh | None:
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"mesh= takes a dtensor.Mesh (dtensor.create_mesh), got {type(mesh).__name__}")
    return mesh


@functools.cache
def optimizer_class(name: str) -> type:
    """Keras 3's optimizer `name`, taking tf_keras's `mesh=`."""
    import keras

    from jdist.tf_compat.dtensor_keras import replicate_unplaced

    base = getattr(keras.optimizers, name)

    def __init__(self: Any, *args: Any, mesh: Mesh | None = None, **kwargs: Any) -> None:  # noqa: N807
        _check_mesh(mesh)
        base.__init__(self, *args, **kwargs)
        self._mesh = mesh

    def build(self: Any, var_list: Any) -> None:
        base.build(self, var_list)
        if self._mesh is not None:
            replicate_unplaced(self.variables, self._mesh)

    return type(name, (base,), {"__init__": __init__, "build": build, "__module__": base.__module__,
                                "__doc__": base.__doc__})


def _taking_mesh(init: Any) -> Any:
    @functools.wraps(init)
    def __init__(self: Any, *args: Any, mesh: Mesh | None = None, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        checked = _check_mesh(mesh)
        if checked is not None:
            from jdist.tf_compat.dtensor_keras import replicate_unplaced

            replicate_unplaced(self.variables, checked)

    __init__._jdist_mesh = True  # type: ignore[attr-defined]
    __init__.__signature__ = with_keywords(init, ["mesh"])  # type: ignore[attr-defined]
    return __init__


_INSTALLED: list[bool] = []


def install_metric_meshes() -> None:
    """Every Keras 3 metric class takes `mesh=` (tf_keras's); once."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    import keras

    for value in vars(keras.metrics).values():
        if isinstance(value, type) and issubclass(value, keras.metrics.Metric):
            init = value.__dict__.get("__init__")
            if init is not None and not getattr(init, "_jdist_mesh", False):
                value.__init__ = _taking_mesh(init)  # type: ignore[misc]


def legacy_keras() -> bool:
    """Whether TF would serve tf_keras as `tf.keras` (TF_USE_LEGACY_KERAS is 1, true or True; observed: TRUE,
    yes and 0 keep Keras 3)."""
    return os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True")


def legacy_keras_names(keras_namespace: Any, overlay: Callable[[Any, dict], Any]) -> dict[str, Any]:
    """`tf.keras`'s tf_keras DTensor names when TF_USE_LEGACY_KERAS asks for tf_keras (TF 2.21's Keras 3 has
    none: `tf.keras.dtensor` is then jdist's pointer to its layouts); installs the layers' `*_layout=` and the
    metrics' `mesh=` with them."""
    if not legacy_keras():
        return {}
    from jdist.tf_compat import dtensor_keras

    dtensor_keras.install()
    install_metric_meshes()
    return {"dtensor": namespace(),
            "backend": overlay(keras_namespace.backend, {"experimental": backend_experimental()})}


def namespace() -> types.SimpleNamespace:
    """`tf.keras.dtensor`, tf_keras's: `experimental.LayoutMap` and `experimental.optimizers`."""
    from jdist.tf_compat import dtensor_keras

    dtensor_keras.install()
    optimizers = types.SimpleNamespace(**{name: optimizer_class(name) for name in OPTIMIZERS})
    return types.SimpleNamespace(experimental=types.SimpleNamespace(LayoutMap=dtensor_keras.LayoutMap,
                                                                    optimizers=optimizers))


_TF_RANDOM_GENERATOR = [False]  # tf_keras 2.21 starts disabled (observed)


def backend_experimental() -> types.SimpleNamespace:
    """`tf.keras.backend.experimental` (tf_keras's): whether initializers draw from `tf.random.Generator`; Keras 3
    on JAX always draws from its seeded JAX keys, so the switch is recorded and changes nothing."""
    return types.SimpleNamespace(
        enable_tf_random_generator=lambda: _TF_RANDOM_GENERATOR.__setitem__(0, True),
        disable_tf_random_generator=lambda: _TF_RANDOM_GENERATOR.__setitem__(0, False),
        is_tf_random_generator_enabled=lambda: _TF_RANDOM_GENERATOR[0])
