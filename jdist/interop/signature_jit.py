"""One `jax.jit` program per call signature, as TF's `tf.function` traces one graph per signature.

Arrays (JAX or NumPy) are the program's inputs; every other value (Python numbers, strings,
objects) is a constant of it, so a new Python value compiles a new program, as TF retraces on one.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from jdist.interop import output_order
from jdist.strategy import host_checks


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def call(fn: Callable[[Any, Any, Any], Any], owner: Any, state: Any, call_args: tuple[tuple, dict]) -> Any:
    """`fn(state, *call_args)` compiled once per signature of `call_args`; the programs are kept on
    `owner` (an object whose lifetime they share, e.g. the function being compiled)."""
    leaves, treedef = jax.tree.flatten(call_args)
    is_array = [isinstance(leaf, (jax.Array, np.ndarray, np.generic)) for leaf in leaves]
    fixed = [leaf for leaf, array in zip(leaves, is_array) if not array]
    key = (treedef, tuple(is_array),
           tuple((type(leaf), leaf) if _hashable(leaf) else (type(leaf), id(leaf)) for leaf in fixed))
    programs = owner.__dict__.setdefault("_jdist_programs", {})
    entry = programs.get(key)
    if entry is None:
        orders: list = [None]

        def program_fn(state: Any, arrays: list) -> Any:
            arrays_in, fixed_in = iter(arrays), iter(fixed)
            args, kwargs = jax.tree.unflatten(treedef, [next(arrays_in) if array else next(fixed_in)
                                                        for array in is_array])
            out = fn(state, args, kwargs)
            orders[0] = output_order.key_orders(out)  # JAX's trees sort dict keys; TF keeps the body's order
            return out

        entry = programs[key] = (host_checks.lazily_checked(jax.jit(program_fn)), orders)  # checks raise after
    program, orders = entry
    return output_order.reordered(program(state, [leaf for leaf, array in zip(leaves, is_array) if array]), orders[0])
