"""A traced `tf.data` function's jaxpr, read and evaluated: which primitives it holds, and its value on an
element with each float division computed as TF's. Shared by the compiled paths (`compiled`, `traced_draws`).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.extend
import numpy as np

from jdist.tfdata import structure

# primitives whose per-element result TF computes afresh, or that call back into Python: never compiled here
UNCOMPILED = {"pure_callback", "io_callback", "random_bits", "random_seed", "random_wrap", "random_unwrap",
               "random_fold_in", "random_split", "threefry2x32", "rng_bit_generator", "rng_uniform"}


def sub_jaxprs(params: dict) -> list:
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def pure(jaxpr: Any) -> bool:
    """Whether `jaxpr` (and every jaxpr inside it) holds no primitive of `UNCOMPILED`."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in UNCOMPILED or any(not pure(inner) for inner in sub_jaxprs(eqn.params)):
            return False
    return True


def evaluate(jaxpr: Any, consts: Any, values: Any) -> list:
    """`jaxpr` on `values`, nested jit calls inlined, each float division's divisor behind an optimization
    barrier: XLA turns a division by a constant into a multiplication by its reciprocal, which rounds
    differently (`3 / 255` in float32: 0.011764707, where TF 2.21 and numpy give 0.011764706, observed)."""
    env: dict = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, values))

    def read(var: Any) -> Any:
        return var.val if isinstance(var, jax.extend.core.Literal) else env[var]

    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        if name in ("pjit", "jit") and "jaxpr" in eqn.params:
            inner = eqn.params["jaxpr"]
            out = evaluate(inner.jaxpr, inner.consts, args)
        else:
            if name == "div" and np.dtype(eqn.outvars[0].aval.dtype).kind in "fc":
                args[1] = jax.lax.optimization_barrier(args[1])
            out = eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(eqn.params))
            out = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, out))
    return [read(v) for v in jaxpr.outvars]


def runnable(trace: Any, input_spec: Any, output: Any) -> bool:
    """Whether `trace` may run per element in place of its Python function: a trace with no host-side part
    (random numbers drawn on the host, host calls), an output, and every input dimension known."""
    if trace is None or trace.host_random or trace.host_calls or output is None:
        return False
    return all(isinstance(s, structure.TensorSpec) and s.shape is not None and all(d is not None for d in s.shape)
               for s in structure.leaves(input_spec))
