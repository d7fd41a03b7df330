"""Which Keras objects a function uses: what `strategy.run` hands to its compiled function as state.

`run` finds the models, layers, optimizers, metrics and variables a replica function uses, and the objects that
keep their state in such variables (`tf.random.Generator`), by following what the function names: its globals
and closure cells, the functions it calls, a method's instance and what it holds, a decorated function's
`__wrapped__`, and the `__call__` of a callable object given as the function (`run(module)`).
`jdist.interop.keras_run` threads their variables.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import types
from typing import Any, Callable

_MAX_DEPTH = 8


def jax_keras() -> Any:
    """Keras, when it is imported and runs on JAX; else None."""
    if "keras" not in sys.modules:
        return None
    import keras

    return keras if keras.backend.backend() == "jax" else None


_HOLDERS_MADE = [False]


def holder_made() -> None:
    """Called when an object holding variables (`_jdist_holds_variables`) is made: from then on `run` looks for
    such objects also before Keras is imported."""
    _HOLDERS_MADE[0] = True


def holds_variables(obj: Any) -> bool:
    """An object that keeps its state in variables it lists as `variables` (`tf.random.Generator`: its class sets
    `_jdist_holds_variables`), which run threads, checkpoints save and `tf.Module` collects."""
    return bool(getattr(type(obj), "_jdist_holds_variables", False))


def is_stateful(obj: Any, keras: Any) -> bool:
    """Keras models, layers, optimizers, metrics, bare variables (`tf.Variable` of `jdist.tf_compat`) and objects
    that keep their state in such variables (`tf.random.Generator`: its class sets `_jdist_holds_variables`)."""
    if holds_variables(obj):
        return True
    return keras is not None and isinstance(
        obj, (keras.layers.Layer, keras.optimizers.Optimizer, keras.metrics.Metric, keras.Variable))


def _referenced(fn: Any) -> list:
    """Objects `fn` names: its globals and closure cells, and those of code nested in it."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    globals_ = getattr(fn, "__globals__", {})
    found = []
    codes = [code]
    while codes:
        c = codes.pop()
        found.extend(globals_[name] for name in c.co_names if name in globals_)
        codes.extend(const for const in c.co_consts if isinstance(const, types.CodeType))
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            found.append(cell.cell_contents)
    return found


def keras_objects(fn: Callable) -> list:
    """The Keras models, layers, optimizers and metrics `fn` uses, directly or through the functions it calls."""
    keras = jax_keras()  # None before Keras is imported: then only objects holding variables are looked for
    if getattr(fn, "_jdist_stateful", False) or (keras is None and not _HOLDERS_MADE[0]):
        return []
    objects: dict[int, Any] = {}
    seen: set[int] = set()

    def visit(value: Any, depth: int) -> None:
        if id(value) in seen or depth > _MAX_DEPTH:
            return
        seen.add(id(value))
        if is_stateful(value, keras):
            objects.setdefault(id(value), value)
        elif isinstance(value, (list, tuple)) and len(value) < 64:
            for item in value:
                visit(item, depth + 1)
        elif isinstance(value, dict) and len(value) < 64:
            for item in value.values():
                visit(item, depth + 1)
        elif getattr(type(value), "_jdist_module", False):  # a tf.Module, passed or referenced: the variables
            for item in (*getattr(value, "variables", ()), *vars(value).values()):  # TF finds in it, its Keras objects
                if is_stateful(item, keras):
                    visit(item, depth + 1)
        elif isinstance(value, functools.partial):
            for item in (value.func, *value.args, *value.keywords.values()):
                visit(item, depth + 1)
        elif not inspect.isfunction(value) and inspect.isroutine(wrapped := getattr(value, "__wrapped__", None)):
            visit(wrapped, depth + 1)  # a decorated function or method (`tf.function`): what it wraps
        elif depth == 0 and callable(value) and not isinstance(value, type) and not inspect.isroutine(value) and not (
                type(value).__module__.startswith(("jdist.", "keras.", "jax"))):
            visit(value.__call__, depth + 1)  # `run(obj)` of a callable object (`run(module)`): its call method
        elif inspect.isfunction(value) or inspect.ismethod(value):
            if inspect.ismethod(value):  # a method: its instance, and what the instance holds (`self.model`)
                owner = value.__self__
                visit(owner, depth + 1)
                if not is_stateful(owner, keras) and isinstance(getattr(owner, "__dict__", None), dict):
                    visit(dict(vars(owner)), depth + 1)
                elif keras is not None and isinstance(owner, keras.Model):  # a model's method (TF's train_step):
                    visit(list(getattr(owner, "metrics", ())), depth + 1)  # its metrics and the optimizers it
                    for item in vars(owner).values():  # holds (`self.optimizer`, a GAN's `self.d_optimizer`)
                        if keras is not None and isinstance(item, keras.optimizers.Optimizer):  # have variables
                            visit(item, depth + 1)  # that its weights do not include
                value = value.__func__
            if (getattr(value, "__module__", None) or "").startswith(("jdist.", "keras.", "jax.")):
                return
            for item in _referenced(value):
                visit(item, depth + 1)

    visit(fn, 0)
    return list(objects.values())
