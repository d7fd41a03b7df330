"""Whose code reads a value: a library's (numpy, JAX, Keras, jdist) or a TF script's.

Some values show TF's form to a script and numpy's or jdist's own form to the libraries that compute on them
(a host tensor's operators and `dtype`, a `tf.Variable`'s `dtype`, `tf.TensorSpec(shape=None).shape`). The
calling frame's module says which.

The check runs on every such read (`t.dtype` in a loop, each numpy ufunc on a host tensor), so its two steps are
cached: the decision per module name and TF's `DType` per numpy dtype (scripts/bench_host_tensors.py measures
them). Both caches are bounded by the modules and dtypes a process has.
"""
from __future__ import annotations

from typing import Any, Callable

# Packages whose own code takes host tensors as the numpy arrays they are (`np.testing` compares an int32 tensor
# with an int64 array; jdist's ops compute on them): their operators keep numpy's rules. TF's tensors would have
# been turned into plain arrays there; the operand rule is for the code of a TF script.
LIBRARIES = ("numpy", "jax", "jaxlib", "jdist", "keras", "scipy", "optax", "flax", "sklearn", "pandas", "grain")

# Module name -> whether it is a library's; TF's DType by numpy dtype. `CACHING` off recomputes both each time
# (the benchmark's uncached side).
_BY_MODULE: dict[str, bool] = {}
_BY_DTYPE: dict[Any, Any] = {}
_LIMIT = 4096  # modules made on the fly (`exec` with new names) cannot grow the cache without bound
CACHING = {"on": True}


def module_is_library(name: str) -> bool:
    """Whether the module named `name` (a frame's `f_globals["__name__"]`) is a library's (`LIBRARIES`)."""
    library = _BY_MODULE.get(name)
    if library is None:
        library = str(name).split(".")[0] in LIBRARIES
        if CACHING["on"] and len(_BY_MODULE) < _LIMIT:
            _BY_MODULE[name] = library
    return library


def library_code(frame: Any) -> bool:
    """Whether `frame` runs a library's code (one of `LIBRARIES`), not a script's."""
    return module_is_library(frame.f_globals.get("__name__", ""))


# `tf.as_dtype`, set by `jdist.tf_compat` when it loads (a lower package does not import it).
_script_dtype: Callable[[Any], Any] | None = None


def set_script_dtype(convert: Callable[[Any], Any]) -> None:
    """Makes a dtype a script reads (`t.dtype`, `spec.dtype`) `convert(numpy dtype)`: TF's `DType`."""
    global _script_dtype
    _script_dtype = convert
    _BY_DTYPE.clear()


def dtype_for(dtype: Any, frame: Any) -> Any:
    """`dtype` (numpy's) as the code in `frame` reads it: numpy's in library code, TF's `DType` in a script's."""
    name = frame.f_globals.get("__name__", "")
    library = _BY_MODULE.get(name)  # `module_is_library`, inline: this runs on every `t.dtype`
    if _script_dtype is None or (module_is_library(name) if library is None else library):
        return dtype
    converted = _BY_DTYPE.get(dtype)
    if converted is None:
        try:
            converted = _script_dtype(dtype)
        except TypeError:  # a dtype TF has no name for
            converted = dtype
        if CACHING["on"] and len(_BY_DTYPE) < _LIMIT:
            _BY_DTYPE[dtype] = converted
    return converted
