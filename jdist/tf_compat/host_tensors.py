"""TF's ops give tensors with `.numpy()`, also where jdist computes them with numpy on the host.

Outside compiled code many `jdist.tf_compat` ops compute on the host (`tf.constant`, `tf.random.uniform`,
`tf.image.resize` in a `tf.data` map), where numpy is exact and starts no JAX backend. A TF script then calls
`.numpy()` on the result (`tf.random.uniform([]).numpy()`, `tf.constant(x).numpy()`), which a numpy array lacks.
Each op is wrapped once, when the namespace is assembled: numpy arrays in its result become `HostTensor` views
(an `np.ndarray` with TF's `.numpy()`, what iterating a `tf.data.Dataset` gives) and numpy scalars 0-d ones,
as TF returns 0-d tensors. No data is copied; JAX arrays and tracers pass through.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import jax
import numpy as np

from jdist.interop import output_order
from jdist.tfdata.structure import HostTensor

_PACKAGE = "jdist.tf_compat"


def _tensor(value: Any) -> Any:
    if type(value) is np.ndarray:
        return value.view(HostTensor)
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        return np.asarray(value).view(HostTensor)
    return value


def as_tensors(result: Any) -> Any:
    """`result` with its numpy arrays and scalars as `HostTensor`s (tuples, namedtuples, lists, dicts kept)."""
    if isinstance(result, (tuple, list, dict)):
        return output_order.reordered(jax.tree.map(_tensor, result, is_leaf=lambda x: isinstance(x, np.ndarray)),
                                      output_order.key_orders(result))
    return _tensor(result)


@functools.cache
def returning_tensors(op: Callable[..., Any]) -> Callable[..., Any]:
    """`op`, its results as `as_tensors` gives them: one wrapper per op, so that TF's aliases stay one object
    (`tf.math.reduce_sum is tf.reduce_sum`)."""
    if getattr(op, "_jdist_tensors", False):
        return op

    @functools.wraps(op)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return as_tensors(op(*args, **kwargs))

    wrapped._jdist_tensors = True  # pyright: ignore[reportAttributeAccessIssue]
    return wrapped


def is_op(value: Any) -> bool:
    """A plain function of jdist.tf_compat's own modules (not a class, not Keras's or jdist's core API)."""
    return isinstance(value, types.FunctionType) and (value.__module__ or "").startswith(_PACKAGE + ".")


def wrap_ops(names: dict[str, Any], keep: frozenset[str] = frozenset()) -> None:
    """Wraps, in place, the ops among `names` (a module's globals or a namespace's `__dict__`)."""
    for name, value in list(names.items()):
        if name not in keep and not name.startswith("_") and is_op(value):
            names[name] = returning_tensors(value)


def _output_tensor(leaf: Any) -> Any:
    if type(leaf) is np.ndarray:  # a traced function's result on the host
        return leaf.view(HostTensor)
    if isinstance(leaf, bool):
        return np.asarray(leaf).view(HostTensor)
    if isinstance(leaf, int):
        return np.asarray(leaf, np.int32 if -2**31 <= leaf < 2**31 else np.int64).view(HostTensor)
    if isinstance(leaf, float):
        return np.asarray(leaf, np.float32).view(HostTensor)
    if isinstance(leaf, (str, bytes)):  # a string tensor (observed, TF 2.21: `f(x, "a")` returning "a" gives b'a')
        return np.asarray(leaf.encode() if isinstance(leaf, str) else leaf, dtype=object).view(HostTensor)
    return leaf


def function_outputs(out: Any) -> Any:
    """What TF's `tf.function` returns: Python numbers and bools among the results become tensors (int32,
    float32, bool; observed, TF 2.21: `tf.function(lambda: (1, None, True))()` gives two tensors and None), Python
    strings string tensors, as
    do numpy arrays (a compiled function's results for host inputs)."""
    return output_order.reordered(jax.tree.map(_output_tensor, out), output_order.key_orders(out))
