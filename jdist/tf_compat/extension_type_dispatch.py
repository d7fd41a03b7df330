"""TF's dispatch decorators for extension types: `tf.experimental.dispatch_for_api`,
`dispatch_for_unary_elementwise_apis`, `dispatch_for_binary_elementwise_apis`, `unregister_dispatch_for`.

A handler registered for an API runs instead of it when a call's arguments match the handler's type annotations
(`values: List[MaskedTensor]`, `Union[MaskedTensor, tf.Tensor]`) and at least one of them is an ExtensionType
value; other calls run the API as before (TF 2.21's guide, observed: `tf.stack([mt1, mt2])`, `tf.abs(mt)`,
`tf.ones_like(mt, dtype=tf.float32)`, `tf.math.add(mt1, mt2)`). To dispatch, the API's name in each `tf.`
namespace that holds it is replaced by a dispatcher (once per API); the elementwise handlers get the API with its
other arguments bound (`api_func(x.values)`), as TF's do. The elementwise APIs are the bounded lists below.
"""
from __future__ import annotations

import collections.abc
import functools
import inspect
import sys
import typing
from typing import Any, Callable

UNARY = ("abs", "negative", "sign", "square", "sqrt", "exp", "log", "tanh", "sigmoid", "ones_like", "zeros_like",
         "logical_not", "floor", "ceil", "round", "sin", "cos", "cast", "identity", "reciprocal", "rsqrt")
BINARY = ("add", "subtract", "multiply", "divide", "truediv", "maximum", "minimum", "pow", "equal", "not_equal",
          "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "floordiv", "floormod",
          "squared_difference")
_HANDLERS: dict[Any, list] = {}  # original API -> [(handler, kind, checks)]


def _namespaces() -> list[dict]:
    tf = sys.modules["jdist.tf_compat"]
    spaces = [vars(tf)]
    for value in list(vars(tf).values()):
        if type(value).__name__ == "Namespace":
            spaces.append(vars(value))
    return spaces


def _original(api: Any) -> Any:
    return getattr(api, "_jdist_dispatch_original", api)


def _install(api: Any) -> Any:
    """The dispatcher of `api`, put in place of `api` in every `tf.` namespace holding it."""
    original = _original(api)
    if original in _HANDLERS:
        return original
    _HANDLERS[original] = []
    signature = inspect.signature(original)

    @functools.wraps(original)
    def dispatcher(*args: Any, **kwargs: Any) -> Any:
        for handler, kind, checks in reversed(_HANDLERS.get(original, [])):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                break
            result = _run(original, bound, handler, kind, checks)
            if result is not NotImplemented:
                return result
        return original(*args, **kwargs)

    dispatcher._jdist_dispatch_original = original  # pyright: ignore[reportAttributeAccessIssue]
    for space in _namespaces():
        for name, value in list(space.items()):
            if value is original or _original(value) is original:
                space[name] = dispatcher
    return original


def _run(original: Any, bound: inspect.BoundArguments, handler: Any, kind: str, checks: dict) -> Any:
    values = bound.arguments
    if kind == "api":
        if not all(name in values and _matches(values[name], annotation) for name, annotation in checks.items()):
            return NotImplemented
        if not any(_has_extension(values[name]) for name in checks):
            return NotImplemented
        return handler(*bound.args, **bound.kwargs)
    names = list(values)
    operands = names[:1] if kind == "unary" else names[:2]
    if len(operands) < len(checks) or not all(_matches(values[n], a) for n, a in zip(operands, checks.values())):
        return NotImplemented
    if not any(_has_extension(values[n]) for n in operands):
        return NotImplemented
    rest = {name: value for name, value in values.items() if name not in operands}
    return handler(functools.partial(original, **rest), *(values[n] for n in operands))


def _has_extension(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_has_extension(v) for v in value)
    return hasattr(type(value), "_tf_extension_type_fields")


def _matches(value: Any, annotation: Any) -> bool:
    """Whether `value` fits a dispatch annotation (a type, `List[...]`, `Union[...]`, `Optional[...]`)."""
    origin = typing.get_origin(annotation)
    if annotation is inspect.Parameter.empty or annotation is typing.Any:
        return True
    if origin is typing.Union or str(origin) == "types.UnionType":
        return any(_matches(value, a) for a in typing.get_args(annotation))
    if origin in (list, collections.abc.Sequence, tuple):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return isinstance(value, (list, tuple)) and all(_matches(v, args[0] if args else typing.Any) for v in value)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return False


def _checks(handler: Callable) -> dict:
    module = sys.modules.get(handler.__module__)
    hints = typing.get_type_hints(handler, globalns=dict(vars(module)) if module else None)
    return {name: hint for name, hint in hints.items() if name != "return"}


def dispatch_for_api(api: Callable, *signatures: dict) -> Callable[[Callable], Callable]:
    """`tf.experimental.dispatch_for_api(api)`: `handler` runs for calls whose arguments match its annotations."""
    def decorator(handler: Callable) -> Callable:
        original = _install(api)
        checks = dict(signatures[0]) if signatures else _checks(handler)
        _HANDLERS[original].append((handler, "api", checks))
        return handler
    return decorator


def _elementwise(names: tuple, kind: str, types: tuple) -> Callable[[Callable], Callable]:
    def decorator(handler: Callable) -> Callable:
        tf = sys.modules["jdist.tf_compat"]
        checks = {f"x{i}": t for i, t in enumerate(types)}
        for name in names:
            for space in (vars(tf), vars(tf.math)):
                if name in space and callable(space[name]):
                    original = _install(space[name])
                    _HANDLERS[original].append((handler, kind, checks))
                    break
        return handler
    return decorator


def dispatch_for_unary_elementwise_apis(x_type: Any) -> Callable[[Callable], Callable]:
    """`tf.experimental.dispatch_for_unary_elementwise_apis(T)`: `handler(api_func, x)` for each unary op."""
    return _elementwise(UNARY, "unary", (x_type,))


def dispatch_for_binary_elementwise_apis(x_type: Any, y_type: Any) -> Callable[[Callable], Callable]:
    """`tf.experimental.dispatch_for_binary_elementwise_apis(X, Y)`: `handler(api_func, x, y)` for each binary op."""
    return _elementwise(BINARY, "binary", (x_type, y_type))


def unregister_dispatch_for(handler: Callable) -> None:
    """`tf.experimental.unregister_dispatch_for(handler)`: the handler no longer runs (ValueError if never added)."""
    found = False
    for entries in _HANDLERS.values():
        kept = [entry for entry in entries if entry[0] is not handler]
        found |= len(kept) != len(entries)
        entries[:] = kept
    if not found:
        raise ValueError(f"Function {handler} was not registered using a `@dispatch_for_*` decorator.")


NAMES = dict(dispatch_for_api=dispatch_for_api, dispatch_for_unary_elementwise_apis=dispatch_for_unary_elementwise_apis,
             dispatch_for_binary_elementwise_apis=dispatch_for_binary_elementwise_apis,
             unregister_dispatch_for=unregister_dispatch_for)
