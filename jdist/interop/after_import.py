"""Runs a function once a module is imported, without importing it: `when_imported("keras.src...", hook)`.

A TF port imports `jdist.tf_compat` and often a plain `import keras` after it (Keras's own guides do). What
jdist adds to Keras's JAX trainer for TF's conventions (`keras_tf_steps`) must be in place before the script's
first `fit`, but importing Keras with `jdist.tf_compat` would cost every port Keras's start-up time. So the
addition waits for Keras's trainer module and runs right after it is executed.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Callable

_HOOKS: dict[str, list[Callable[[types.ModuleType], None]]] = {}


def when_imported(name: str, hook: Callable[[types.ModuleType], None]) -> None:
    """`hook(module)` now if `name` is imported, else right after its import runs."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    _HOOKS.setdefault(name, []).append(hook)
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any, name: str):
        self._loader, self._name = loader, name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        for hook in _HOOKS.pop(self._name, []):
            hook(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a watched module it asks the other finders and wraps the loader they give."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in _HOOKS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None
