"""Package attributes imported on first use (PEP 562), so a package's face costs nothing until it is read.

Used where importing eagerly would pull in heavy dependencies: orbax for checkpointing, grain for `jdist.data`.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, names: Mapping[str, tuple[str, str | None]]) -> Callable[[str], Any]:
    """A module `__getattr__` serving `names[attr] = (module, attribute or None for the module itself)`."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attr = names[name]
        module = importlib.import_module(module_name)
        value = module if attr is None else getattr(module, attr)
        namespace[name] = value
        return value

    return __getattr__
