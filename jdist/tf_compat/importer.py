"""TF's submodules import as TF's do: `from jdist.tf_compat.keras.layers import Dense`, `import
jdist.tf_compat.compat.v1 as tf1`, `from jdist.tf_compat.io.gfile import exists`.

TF scripts import submodules by their dotted path (`from tensorflow.keras.layers import Dense` in TF's
quickstart), not only as attributes of `tf`. jdist's `tf.` names are attributes (namespaces, Keras's
modules), so a finder ahead of Python's own answers `jdist.tf_compat.<path>` with the object that walking
those attributes reaches: `import` binds the same object as `tf.keras.layers`, and Keras's modules keep their
own `__spec__`. The package's own files (`ops.py`, ...) are found as usual; their names are none of TF's.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import pkgutil
import sys
import types
from typing import Any, Iterable

from jdist.tf_compat.namespace import Namespace
from jdist.tf_compat.unsupported import Unsupported

PACKAGE = "jdist.tf_compat"
_IMPORT_ATTRIBUTES = ("__spec__", "__loader__", "__package__", "__path__")  # what importlib sets on a module
_MISSING = object()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `jdist.tf_compat.<path>` among the attributes of `jdist.tf_compat`, when no file has that name."""

    def __init__(self, files: frozenset[str]):
        self._files = files
        self._saved: dict[int, dict[str, Any]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PACKAGE + "."):
            return None
        if fullname[len(PACKAGE) + 1:].split(".")[0] in self._files:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        parent, _, child = spec.name.rpartition(".")
        try:
            value = getattr(sys.modules[parent], child)
        except AttributeError as err:  # the tf_compat namespaces' own message: what jdist offers instead. No
            # `name`: with it, `from <namespace> import <missing>` would drop this message for a bare "cannot import"
            raise ModuleNotFoundError(f"No module named {spec.name!r}: {err}") from None
        if not isinstance(value, (types.ModuleType, Namespace, Unsupported)):
            raise ModuleNotFoundError(
                f"No module named {spec.name!r}: tf.{spec.name[len(PACKAGE) + 1:]} is a "
                f"{type(value).__name__}, not a module; import it with `from {parent} import {child}`",
                name=spec.name)
        if isinstance(value, (Namespace, Unsupported)):  # jdist's own keep what importing sets: modules now,
            value.__name__ = spec.name  # named as imported, so that `from` finds the names below them here
        else:
            self._saved[id(value)] = {name: vars(value).get(name, _MISSING) for name in _IMPORT_ATTRIBUTES}
        return value  # pyright: ignore[reportReturnType]  (a Namespace serves as a module; an Unsupported one
        # imports, so that `from tensorflow.experimental import dtensor` raises dtensor's own way forward)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run; a module gets back the attributes that importing set on it (Keras's modules their
        own `__spec__`)."""
        for name, value in self._saved.pop(id(module), {}).items():
            if value is not _MISSING:
                setattr(module, name, value)
            elif name in vars(module):
                delattr(module, name)


def install(package_path: Iterable[str]) -> None:
    """Puts the finder ahead of Python's own (once), so that Keras's files are never loaded a second time
    under a `jdist.tf_compat` name."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    files = frozenset(module.name for module in pkgutil.iter_modules(package_path))
    sys.meta_path.insert(0, _Finder(files))
