"""`.numpy()` on JAX arrays, and TF's text when they print, as TF scripts read every tensor and distributed
value's parts.

TF 2.x scripts read results with `t.numpy()` (`for a in strategy.experimental_local_results(r):
rindices.extend(a.numpy())`). JAX arrays have no such method; importing `jdist.tf_compat` adds one to
JAX's concrete array type: `np.asarray(self)`, a numpy scalar for a 0-d array (TF's `EagerTensor.numpy`).
It only adds a name JAX does not define, and only once `jdist.tf_compat` is imported (a TF port opted in).
Inside compiled code (tracers) there is no value to read, as in TF's graph mode.

A TF script also prints what it gets back: a model's output, `strategy.experimental_local_results(r)`, a
signature's dict. TF prints an eager tensor as `tf.Tensor([1. 2.], shape=(2,), dtype=float32)` (`str`) and
`<tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>` (`repr`, inside a list or dict);
once `jdist.tf_compat` is imported a JAX array prints so too (jdist.tfdata.tensor_text, TF 2.21's text as
observed). An array with parts in other processes keeps JAX's text (this process cannot read it), and a DTensor
prints as TF's DTensor (jdist.tf_compat.dtensor wraps these printers).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from jdist.strategy.values import split_components
from jdist.tfdata import tensor_text


def _numpy(self: Any) -> Any:
    """The value as numpy (TF's `.numpy()`): a numpy scalar for a 0-d array, else an ndarray."""
    value = np.asarray(self)
    return value[()] if value.ndim == 0 else value


def give_arrays_numpy() -> None:
    """Adds `numpy` to JAX's array implementation types, found without making an array (which would start
    JAX's backend before `tf.config.set_logical_device_configuration` can split the CPU)."""
    for array_type in jax.Array.__subclasses__():
        if array_type.__name__ == "ArrayImpl" and not hasattr(array_type, "numpy"):
            array_type.numpy = _numpy  # type: ignore[attr-defined]


def _split_values(self: Any) -> tuple:
    """TF's `PerReplica.values` of a distributed batch's component (`for x, y in dist_dataset`)."""
    parts = split_components(self)
    if parts is None:
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'values'")
    return parts


def give_split_arrays_values() -> None:
    """A distributed batch's components answer `.values` as TF's PerReplica does (others: AttributeError)."""
    for array_type in jax.Array.__subclasses__():
        if array_type.__name__ == "ArrayImpl" and not hasattr(array_type, "values"):
            array_type.values = property(_split_values)  # type: ignore[attr-defined]


def _tf_text(original: Callable[[Any], str], text: Callable[[Any], str]) -> Callable[[Any], str]:
    def printed(self: Any) -> str:
        if not self.is_fully_addressable or self.is_deleted():
            return original(self)
        parts = split_components(self)  # a distributed batch's component prints as TF's PerReplica
        if parts is not None:
            body = ",\n  ".join(f"{i}: {text(np.asarray(p))}" for i, p in enumerate(parts))
            return f"PerReplica:{{\n  {body}\n}}"
        return text(np.asarray(self))

    printed._jdist_tf_text = True  # pyright: ignore[reportFunctionMemberAccess]
    return printed


def give_arrays_tf_text() -> None:
    """JAX's concrete arrays print as TF's eager tensors (once; found as `give_arrays_numpy` finds them)."""
    for array_type in jax.Array.__subclasses__():
        if array_type.__name__ == "ArrayImpl" and not getattr(array_type.__str__, "_jdist_tf_text", False):
            array_type.__str__ = _tf_text(array_type.__str__, tensor_text.tensor_str)  # type: ignore[method-assign]
            array_type.__repr__ = _tf_text(array_type.__repr__, tensor_text.tensor_repr)  # type: ignore[method-assign]
