"""Whose code reads a value: a library's (numpy, JAX, Keras, jdist) or a TF script's.

Some values show TF's form to a script and numpy's or jdist's own form to the libraries that compute on them
(a host tensor's operators and `dtype`, a `tf.Variable`'s `dtype`, `tf.TensorSpec(shape=None).shape`). The
calling frame's module says which.
"""
from __future__ import annotations

from typing import Any, Callable

# Packages whose own code takes host tensors as the numpy arrays they are (`np.testing` compares an int32 tensor
# with an int64 array; jdist's ops compute on them): their operators keep numpy's rules. TF's tensors would have
# been turned into plain arrays there; the operand rule is for the code of a TF script.
LIBRARIES = ("numpy", "jax", "jaxlib", "jdist", "keras", "scipy", "optax", "flax", "sklearn", "pandas", "grain")


def library_code(frame: Any) -> bool:
    """Whether `frame` runs a library's code (one of `LIBRARIES`), not a script's."""
    return str(frame.f_globals.get("__name__", "")).split(".")[0] in LIBRARIES


# `tf.as_dtype`, set by `jdist.tf_compat` when it loads (a lower package does not import it).
_script_dtype: Callable[[Any], Any] | None = None


def set_script_dtype(convert: Callable[[Any], Any]) -> None:
    """Makes a dtype a script reads (`t.dtype`, `spec.dtype`) `convert(numpy dtype)`: TF's `DType`."""
    global _script_dtype
    _script_dtype = convert


def dtype_for(dtype: Any, frame: Any) -> Any:
    """`dtype` (numpy's) as the code in `frame` reads it: numpy's in library code, TF's `DType` in a script's."""
    if _script_dtype is None or library_code(frame):
        return dtype
    try:
        return _script_dtype(dtype)
    except TypeError:  # a dtype TF has no name for
        return dtype
