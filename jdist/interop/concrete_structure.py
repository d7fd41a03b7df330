"""A concrete function's structured signature as TF 2.21 shows it: `structured_input_signature` (every parameter
bound, defaults included, a tensor as a TensorSpec named by its parameter) and `structured_outputs` /
`outputs` (the output structure with a TensorSpec per tensor; a Python number returned is a tensor, as TF's
graph outputs are).

Observed in TF 2.21 for `f(x, y=2)` returning `{"a": x * 2, "b": (x, y)}` and
`get_concrete_function(TensorSpec([None, 3]))`: `structured_input_signature` is
`((TensorSpec(shape=(None, 3), dtype=tf.float32, name='x'), 2), {})`; `structured_outputs` is a dict of
tensors with shapes (None, 3), (None, 3) and () int32; `outputs` the flat list of the three. The output
shapes come from tracing the body's shapes twice (`jax.eval_shape`, no program compiled, variables untouched
under a `StatelessScope`): a dimension that follows an unknown input dimension is None, and an output whose rank
follows an input of unknown rank (traced as a scalar, then a vector) has an unknown shape (observed, TF 2.21:
`a ** 2` for `TensorSpec(None)` gives `TensorSpec(shape=<unknown>, dtype=tf.float32)`).
"""
from __future__ import annotations

import inspect
from typing import Any

import jax
import numpy as np

from jdist import thread_stdout
from jdist.input.tensor_spec import TensorSpec

_PY = {bool: np.dtype(bool), int: np.dtype(np.int32), float: np.dtype(np.float32)}


def input_signature(signature: inspect.Signature, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """TF's `structured_input_signature` for a concrete function made with `args`, `kwargs`."""
    bound = signature.bind_partial(*args, **kwargs)
    bound.apply_defaults()
    positional: list = []
    keywords: dict = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        spec = _named(value, name)
        if kind is inspect.Parameter.VAR_POSITIONAL:
            positional.extend(_named(v, f"{name}_{i}") for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            keywords.update({k: _named(v, k) for k, v in value.items()})
        elif kind is inspect.Parameter.KEYWORD_ONLY:
            keywords[name] = spec
        else:
            positional.append(spec)
    return tuple(positional), keywords


def _named(value: Any, name: str) -> Any:
    if isinstance(value, TensorSpec):
        return value if value.name is not None else TensorSpec(value.shape, value.dtype, name)
    if hasattr(value, "shape") and hasattr(value, "dtype") and not hasattr(value, "assign"):
        return TensorSpec(tuple(np.shape(value)), np.dtype(value.dtype), name)
    return value


def output_specs(body: Any, signature: inspect.Signature, template: dict) -> Any:
    """The body's output structure for the arguments `template` (by parameter name), as TensorSpecs."""
    first, second = (_shapes(body, signature, template, size) for size in (1, 2))

    def spec(a: Any, b: Any) -> Any:
        if isinstance(a, jax.ShapeDtypeStruct):
            if len(a.shape) != len(b.shape):  # its rank follows an input of unknown rank: unknown too
                return TensorSpec(None, np.dtype(a.dtype))
            return TensorSpec(tuple(x if x == y else None for x, y in zip(a.shape, b.shape)), np.dtype(a.dtype))
        if type(a) in _PY:
            return TensorSpec((), _PY[type(a)])
        return a
    return jax.tree.map(spec, first, second)


def _shapes(body: Any, signature: inspect.Signature, template: dict, size: int) -> Any:
    import keras

    values = {name: _sized(value, size) for name, value in template.items()}
    bound = signature.bind_partial()
    bound.arguments.update(values)
    leaves, treedef = jax.tree.flatten((bound.args, bound.kwargs), is_leaf=lambda x: hasattr(x, "assign"))
    arrays = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.ShapeDtypeStruct)]

    def run(*traced: Any) -> Any:
        full = list(leaves)
        for i, value in zip(arrays, traced):
            full[i] = value
        args, kwargs = jax.tree.unflatten(treedef, full)
        with keras.StatelessScope():
            return body(*args, **kwargs)
    with thread_stdout.captured():
        return jax.eval_shape(run, *[leaves[i] for i in arrays])


def _sized(value: Any, size: int) -> Any:
    if isinstance(value, TensorSpec):
        if np.dtype(value.dtype).kind in "OSU":
            raise ValueError(f"structured_outputs needs a numeric spec; got {value!r}")
        if value.shape is None:  # unknown rank: traced as a scalar, then as a vector (see `output_specs`)
            return jax.ShapeDtypeStruct(() if size == 1 else (2,), value.dtype)
        return jax.ShapeDtypeStruct(tuple(size if d is None else d for d in value.shape), value.dtype)
    if hasattr(value, "shape") and hasattr(value, "dtype") and not hasattr(value, "assign"):
        return jax.ShapeDtypeStruct(tuple(np.shape(value)), np.dtype(value.dtype))
    return value
