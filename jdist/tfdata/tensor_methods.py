"""TF's `EagerTensor` has no numpy methods until `tnp.experimental_enable_numpy_behavior()`; a host tensor has.

A host tensor (`jdist.tfdata.structure.HostTensor`) is an `np.ndarray`, and numpy, JAX, Keras and jdist call its
numpy methods (`np.sum(t)` calls `t.sum`, `np.round(t)` `t.round`). A TF script's own code sees TF's tensor
instead (observed, TF 2.21): `t.T`, `t.sum()`, `t.reshape(...)`, `t.tolist()` are AttributeError, and after
`tf.experimental.numpy.experimental_enable_numpy_behavior()` only `T`, `astype`, `clip`, `data`, `flatten`,
`max`, `mean`, `min`, `ravel`, `reshape`, `size`, `tolist` and `transpose` are there (`t.data` is the tensor
itself, `t.size` a `np.int64`). `install` puts one descriptor per name on the class; the calling frame says whose
code reads it: a library's (`jdist.input.calling_code.LIBRARIES`, or any module installed in site-packages or
Python's standard library: matplotlib, PIL, pandas, ...) gets numpy's attribute, a script's TF's.

`jdist.tf_compat` installs it when it loads (a TF script's `t.numpy().tolist()` is the portable form);
`uninstall` takes it off for a process that wants numpy's methods everywhere.

numpy's functions follow the same split (`array_function`, the host tensor's `__array_function__`): a script's
`np.unique(t)`, `np.concatenate([t, t])`, `np.reshape(t, [4])` give plain `np.ndarray`s, as numpy gives for TF's
tensors (observed, TF 2.21), so `np.unique(t).tolist()` works as in TF; a library's calls keep numpy's subclass
rules (host tensors in, host tensors out).

Kept for every caller: `view`, `base`, `flags`, `strides`, `ctypes` (how an array's memory is reached, which
code that hands tensors to numpy reads), and `ndim`, `shape`, `dtype` (TF's tensors have them).
"""
from __future__ import annotations

import sys
import sysconfig
from typing import Any, Callable

import numpy as np

from jdist.input import calling_code
from jdist.tfdata import tensor_numpy

# numpy's public attributes TF 2.21's EagerTensor lacks (observed: `hasattr(tf.constant(...), name)` is False).
REFUSED = ("T", "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "byteswap", "choose", "clip",
           "compress", "conj", "conjugate", "copy", "cumprod", "cumsum", "data", "diagonal", "dot", "dump", "dumps",
           "fill", "flat", "flatten", "getfield", "imag", "item", "itemsize", "mT", "max", "mean", "min", "nbytes",
           "nonzero", "partition", "prod", "put", "ravel", "real", "repeat", "reshape", "resize", "round",
           "searchsorted", "setfield", "setflags", "size", "sort", "squeeze", "std", "sum", "swapaxes", "take",
           "to_device", "tobytes", "tofile", "tolist", "trace", "transpose", "var")
# Those `experimental_enable_numpy_behavior()` adds (observed, TF 2.21).
WITH_NUMPY_BEHAVIOR = frozenset(("T", "astype", "clip", "data", "flatten", "max", "mean", "min", "ravel", "reshape",
                                 "size", "tolist", "transpose"))
# Those whose error names the switch (observed, TF 2.21); the others' is Python's plain text.
_NAMES_SWITCH = frozenset(("T", "astype", "clip", "data", "ravel", "reshape", "size", "tolist", "transpose"))
# A script's value where TF's differs from numpy's (observed, TF 2.21 with NumPy behavior: `t.size` is
# `np.int64(4)`, `t.data` the tensor itself).
_SCRIPT_FORM: dict[str, Callable[[np.ndarray], Any]] = {"size": lambda a: np.int64(np.ndarray.size.__get__(a)),
                                                        "data": lambda a: a}

_INSTALLED_PREFIXES = tuple({path for key in ("stdlib", "platstdlib", "purelib", "platlib")
                             if (path := sysconfig.get_paths().get(key))})
_BY_FILE: dict[str, bool] = {}
_LIMIT = 4096  # files made on the fly (`exec` with new names) cannot grow the cache without bound


def library_frame(frame: Any) -> bool:
    """Whether `frame` runs a library's code: one of `calling_code.LIBRARIES` by module name, or a module
    installed with Python (its standard library, site-packages). A script, a test, a notebook cell is not."""
    if calling_code.library_code(frame):
        return True
    filename = frame.f_code.co_filename
    installed = _BY_FILE.get(filename)
    if installed is None:
        installed = ("site-packages" in filename or "dist-packages" in filename
                     or filename.startswith(_INSTALLED_PREFIXES) or filename.startswith("<frozen "))
        if len(_BY_FILE) < _LIMIT:
            _BY_FILE[filename] = installed
    return installed


def _plain(value: Any, tensor_type: type) -> Any:
    if isinstance(value, tensor_type):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (tensor_type, list, tuple)) for v in value):
        return type(value)(_plain(v, tensor_type) for v in value)
    return value


def array_function(self: np.ndarray, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """A host tensor's `__array_function__`: a script's numpy function of tensors computes on the plain arrays and
    gives numpy's result (observed, TF 2.21: `np.unique(t)`, `np.stack([t, t])` are `np.ndarray`s); a library's
    call is numpy's own (host tensors stay host tensors)."""
    if library_frame(sys._getframe(1)):
        return np.ndarray.__array_function__(self, func, types, args, kwargs)
    tensor_type = type(self)
    return func(*_plain(args, tensor_type), **{k: _plain(v, tensor_type) for k, v in kwargs.items()})


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
        self.script_form = _SCRIPT_FORM.get(name)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self.numpy
        if not library_frame(sys._getframe(1)):
            if not (self.enabled and tensor_numpy.NUMPY_BEHAVIOR["on"]):
                raise missing(self.name)
            if self.script_form is not None:
                return self.script_form(obj)
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
