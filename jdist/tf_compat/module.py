"""`tf.Module`: TF's base class for objects that hold variables, with TF's variable discovery.

TF finds a module's variables by walking its attributes (sorted by name), into nested modules,
lists, tuples and dicts, each variable once. TF scripts subclass it for hand-written models
(`self.w = tf.Variable(...)`) and read `trainable_variables` for the tape's sources.

TF 2.21's name scopes (observed): a module's `name_scope` is the `tf.name_scope` it was made in plus its name
("seq/", "outer/nn/" for one made in `tf.name_scope("outer")`), absolute, so entering it later from any scope
gives the same scope; variables made in it are named "nn/w:0"; `@tf.Module.with_name_scope` runs a method in
it. The default name is the class name in snake case as TF's ("MyHTTPModule2" -> "my_http_module2").
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterator

from jdist.interop.keras_objects import holds_variables
from jdist.tf_compat.name_scopes import name_scope as _name_scope

# TF's rule: an upper-case letter after a lower-case one or a digit, or one that starts a capitalized word
_CAMEL = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")


def _snake_case(name: str) -> str:
    return _CAMEL.sub(r"_\1", name).lower()


def _leaves(value: Any) -> Iterator[Any]:
    """`value` and what its lists, tuples and dicts hold, and the state variables of a `tf.random.Generator`; a
    module is a leaf (walked after its parent)."""
    yield value
    if holds_variables(value):
        yield from value.variables
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _leaves(value[key])
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)


def _attributes(module: "Module") -> list:
    return [value for key, value in sorted(vars(module).items()) if not key.startswith("_Module__")]


def _flatten(module: "Module", visit: Callable[[Any], bool], seen: set[int], recursive: bool = True) -> Iterator[Any]:
    """TF's order: a module's own attributes (sorted by name) first, then each submodule found there."""
    submodules = []
    for attribute in _attributes(module):
        for leaf in _leaves(attribute):
            if id(leaf) in seen:
                continue
            seen.add(id(leaf))
            if visit(leaf):
                yield leaf
            if isinstance(leaf, Module):
                submodules.append(leaf)
    if recursive:
        for submodule in submodules:
            yield from _flatten(submodule, visit, seen)


def _is_variable(value: Any) -> bool:
    import keras

    return isinstance(value, keras.Variable)


class Module:
    """`tf.Module(name=None)`: `name` (the class name in snake case by default), `name_scope`,
    `variables`, `trainable_variables`, `non_trainable_variables` and `submodules`, found as TF finds them."""

    _jdist_module = True  # what strategy.run and tf.function look into for the variables a step uses

    def __init__(self, name: str | None = None):
        if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", name):
            raise ValueError(f"'{name}' is not a valid module name. Module names must be valid Python "
                             "identifiers (e.g. a valid class name).")
        self.__name = name if name is not None else _snake_case(type(self).__name__)
        with _name_scope(self.__name) as scope:  # the scope it is made in, kept absolute ("outer/nn/")
            self.__scope = _name_scope(scope)

    @property
    def name(self) -> str:
        return self.__name

    @property
    def name_scope(self) -> _name_scope:
        """TF's: the `tf.name_scope` of this module ("outer/nn/"), the same scope wherever it is entered."""
        return self.__scope

    def _flatten(self, visit: Callable[[Any], bool] | None = None, recursive: bool = True,
                 predicate: Callable[[Any], bool] | None = None) -> tuple:
        """What the module holds that `predicate` (TF's keyword; `visit` positionally) accepts, in TF's order;
        everything when neither is given; `recursive=False`: its own attributes only."""
        test = predicate or visit or (lambda value: True)
        return tuple(_flatten(self, test, {id(self)}, recursive))

    @property
    def variables(self) -> tuple:
        return self._flatten(_is_variable)

    @property
    def trainable_variables(self) -> tuple:
        return self._flatten(lambda v: _is_variable(v) and v.trainable)

    @property
    def non_trainable_variables(self) -> tuple:
        return self._flatten(lambda v: _is_variable(v) and not v.trainable)

    @property
    def submodules(self) -> tuple:
        return self._flatten(lambda v: isinstance(v, Module))

    @classmethod
    def with_name_scope(cls, method: Callable) -> Callable:
        """TF's decorator: `method` runs in the module's `name_scope`."""
        @functools.wraps(method)
        def method_with_name_scope(self: "Module", *args: Any, **kwargs: Any) -> Any:
            with self.name_scope:
                return method(self, *args, **kwargs)

        return method_with_name_scope

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} object at {hex(id(self))}>"
