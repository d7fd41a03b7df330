"""TF's `EagerTensor` has no numpy methods until `tnp.experimental_enable_numpy_behavior()`; a host tensor has.

A host tensor (`jdist.tfdata.structure.HostTensor`) is an `np.ndarray`, and numpy, JAX, Keras and jdist call its
numpy methods (`np.sum(t)` calls `t.sum`, `np.round(t)` `t.round`). A TF script's own code sees TF's tensor
instead (observed, TF 2.21): `t.T`, `t.sum()`, `t.reshape(...)` are AttributeError, and after
`tf.experimental.numpy.experimental_enable_numpy_behavior()` only `T`, `astype`, `clip`, `flatten`, `max`,
`mean`, `min`, `ravel`, `reshape`, `size`, `tolist` and `transpose` are there. `install` puts one descriptor per
name on the class; the calling frame (`jdist.input.calling_code`) says whose code reads it.

It is not installed by default: much code written against jdist (its own test suite among it) calls numpy's
methods on tensors from outside the libraries, `t.tolist()`, `t.sum()`, and would stop working. `install`
turns TF's rule on for a process, `uninstall` off.

Kept for every caller: `view`, `base`, `flags`, `strides`, `ctypes`, `data` (how an array's memory is reached,
which code that hands tensors to numpy reads), and `ndim`, `shape`, `dtype` (TF's tensors have them).
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from jdist.input import calling_code
from jdist.tfdata import tensor_numpy

# numpy's public attributes TF 2.21's EagerTensor lacks (observed: `hasattr(tf.constant(...), name)` is False).
REFUSED = ("T", "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "byteswap", "choose", "clip",
           "compress", "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot", "dump", "dumps", "fill",
           "flat", "flatten", "getfield", "imag", "item", "itemsize", "mT", "max", "mean", "min", "nbytes",
           "nonzero", "partition", "prod", "put", "ravel", "real", "repeat", "reshape", "resize", "round",
           "searchsorted", "setfield", "setflags", "size", "sort", "squeeze", "std", "sum", "swapaxes", "take",
           "to_device", "tobytes", "tofile", "tolist", "trace", "transpose", "var")
# Those `experimental_enable_numpy_behavior()` adds (observed, TF 2.21).
WITH_NUMPY_BEHAVIOR = frozenset(("T", "astype", "clip", "flatten", "max", "mean", "min", "ravel", "reshape", "size",
                                 "tolist", "transpose"))
# Those whose error names the switch (observed, TF 2.21); the others' is Python's plain text.
_NAMES_SWITCH = frozenset(("T", "astype", "clip", "ravel", "reshape", "size", "tolist", "transpose"))


def missing(name: str) -> AttributeError:
    """TF's AttributeError for a numpy attribute a tensor lacks (its text, observed in TF 2.21)."""
    if name in _NAMES_SWITCH:
        return AttributeError(f"EagerTensor object has no attribute '{name}'. \n        If you are looking for "
                              "numpy-related methods, please run the following:\n        "
                              "tf.experimental.numpy.experimental_enable_numpy_behavior()\n      ")
    return AttributeError(f"'tensorflow.python.framework.ops.EagerTensor' object has no attribute '{name}'")


class _NumpyAttribute:
    """numpy's attribute `name` for library code; TF's AttributeError for a script's, unless NumPy behavior is
    on and TF has it then."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.numpy = getattr(np.ndarray, name)
        self.enabled = name in WITH_NUMPY_BEHAVIOR

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self.numpy
        if not (calling_code.library_code(sys._getframe(1))
                or (self.enabled and tensor_numpy.NUMPY_BEHAVIOR["on"])):
            raise missing(self.name)
        return self.numpy.__get__(obj, owner)

    def __set__(self, obj: Any, value: Any) -> None:  # `a.real = ...` (numpy's settable attributes)
        setter = getattr(self.numpy, "__set__", None)
        if setter is None:
            raise AttributeError(f"attribute '{self.name}' of 'numpy.ndarray' objects is not writable")
        setter(obj, value)


def install(cls: type) -> None:
    """Puts TF's view of numpy's attributes on the host tensor class `cls` (names it defines itself stay)."""
    for name in REFUSED:
        if name not in cls.__dict__:
            setattr(cls, name, _NumpyAttribute(name))


def uninstall(cls: type) -> None:
    """Takes `install`'s descriptors off `cls`: numpy's attributes for every caller again."""
    for name in REFUSED:
        if isinstance(cls.__dict__.get(name), _NumpyAttribute):
            delattr(cls, name)


def installed(cls: type) -> bool:
    """Whether `install` is in effect on `cls`."""
    return isinstance(cls.__dict__.get("sum"), _NumpyAttribute)
