"""A `tf.` submodule object: the names jdist implements, and an error naming the rest."""
from __future__ import annotations

from typing import Any

from jdist.tf_compat.unsupported import alternative, not_provided


class Namespace:
    """A `tf.` submodule: the listed names, and an AttributeError naming any other."""

    def __init__(self, path: str, **names: Any):
        self.__name__ = self._tf_path = path  # importing it renames __name__ (importer.py); messages keep TF's
        self.__dict__.update(names)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        message = alternative(f"{self._tf_path}.{name}")
        if message is not None:
            raise AttributeError(message)
        raise not_provided(f"{self._tf_path}.{name}")

    def __dir__(self) -> list[str]:
        return sorted(k for k in self.__dict__ if not k.startswith("_"))  # not what importing it sets

    def __repr__(self) -> str:
        return f"<jdist.tf_compat namespace {self._tf_path}>"
