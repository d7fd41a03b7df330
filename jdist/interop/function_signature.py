"""Binding a call to a `tf.function`'s `input_signature`, as TF binds it (observed, TF 2.21).

A tensor must have the spec's dtype and a shape the spec allows (None dimensions take any size); a Python list,
number or numpy array is converted to the spec's dtype first (TF accepted `np.array([1.0, 2.0])`, float64, for a
float32 spec). Anything else is TF's TypeError "Binding inputs to tf.function failed due to `Can not cast ...`".
"""
from __future__ import annotations

import inspect
from typing import Any

import jax
import numpy as np
from jax.core import Tracer

from jdist.input.tensor_spec import TensorSpec


def canonical(python_function: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call as TF keys its traces: parameters passed by name or left to their defaults are bound to their
    positions (observed, TF 2.21: `g(x)`, `g(x, 3)`, `g(x, k=3)` and `g(x=x)` of `def g(x, k=3)` trace once).
    A call that does not bind is left as it is, for Python's own TypeError."""
    try:
        bound = inspect.signature(python_function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    bound.apply_defaults()
    return tuple(bound.args), dict(bound.kwargs)


def bind(function: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` and `kwargs` checked against `function`'s input_signature and converted to its dtypes."""
    specs = list(function.options["input_signature"])
    python_function = function.python_function
    parameters = list(inspect.signature(python_function).parameters)
    try:
        bound = inspect.signature(python_function).bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"Binding inputs to tf.function failed due to `{error}`. Received args: "
                        f"{argument_text(args)} and kwargs: {argument_text(kwargs)} for signature: "
                        f"{_signature_text(parameters, specs)}.") from None
    values = dict(bound.arguments)
    for name, spec in zip(parameters, specs):
        if name not in values:
            continue
        try:
            values[name] = _cast(values[name], spec)
        except _CannotCast as error:
            raise TypeError(f"Binding inputs to tf.function failed due to `Can not cast {error} to {spec!r}`. "
                            f"Received args: {argument_text(args)} and kwargs: {argument_text(kwargs)} for signature: "
                            f"{_signature_text(parameters, specs)}.") from None
    bound.arguments.update(values)
    return tuple(bound.args), dict(bound.kwargs)


class _CannotCast(Exception):
    pass


def _cast(value: Any, spec: Any) -> Any:
    """`value` checked against `spec` where both are plain: tensors, numbers, lists, tuples, dicts. Other values
    (distributed values for a `PerReplicaSpec`, say) go to the function as they are."""
    if isinstance(spec, (list, tuple)) and isinstance(value, (list, tuple)):
        if len(value) != len(spec):
            raise _CannotCast(argument_text(value))
        return type(value)(_cast(v, s) for v, s in zip(value, spec))
    if isinstance(spec, dict) and isinstance(value, dict):
        if value.keys() != spec.keys():
            raise _CannotCast(argument_text(value))
        return {k: _cast(value[k], s) for k, s in spec.items()}
    if not isinstance(spec, TensorSpec) or not _is_plain(value):
        return value
    if hasattr(value, "numpy") or isinstance(value, Tracer):
        # a tensor (or one being traced: a GradientTape replaying its call): its dtype must be the spec's (TF
        # converts only Python and numpy values)
        tensor = value
    else:
        try:
            tensor = np.asarray(value, dtype=spec.dtype)
        except (TypeError, ValueError):
            raise _CannotCast(repr(value)) from None
    if not spec.is_compatible_with(tensor):
        raise _CannotCast(repr(TensorSpec(tuple(np.shape(tensor)), np.dtype(tensor.dtype))))
    return tensor


def _is_plain(value: Any) -> bool:
    return isinstance(value, (jax.Array, np.ndarray, np.generic, int, float, bool, list, tuple))


def argument_text(value: Any) -> str:
    if isinstance(value, tuple):
        inner = ", ".join(argument_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(argument_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {argument_text(v)}" for k, v in value.items()) + "}"
    return repr(value)  # a tensor's repr is TF's (`<tf.Tensor: shape=(), dtype=int32, numpy=1>`)


def _signature_text(parameters: list[str], specs: list) -> str:
    return "(" + ", ".join(f"{name}: {spec!r}" for name, spec in zip(parameters, specs)) + ")"
