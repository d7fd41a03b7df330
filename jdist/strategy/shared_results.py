"""Which results of a replica function are one object that every replica returned.

TF 2.21 runs the replica function once per replica and regroups the results: a result that is the same
object on every replica comes back as that object, not as a `PerReplica` (observed, MirroredStrategy on 4
logical CPUs, each `strategy.run(...)` printing a plain `tf.Tensor`):
- a tensor made outside `run` and returned unchanged (`c = tf.constant(...)`; `run(lambda: c)`);
- an argument that is not per-replica, returned unchanged (`run(lambda x: x, args=(c,))`);
- what `ReplicaContext.merge_call` returned, where its function returned plain values
  (`merge_call(lambda s, x: s.reduce("SUM", x, axis=None), args=(v,))`).
A value each replica computes itself, even an equal one, is a `PerReplica`. jdist traces the function once,
so the same rule is read from object identity during that trace: `shared_results` says which result leaves
are such objects, `run` marks those results (`values.mark_single`) and TF's `run` hands them back as one
tensor (`jdist.tf_compat.run_results`).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import jax
import numpy as np


def captured_arrays(fn: Callable) -> list:
    """The arrays `fn` (and the functions it wraps) refers to from outside: its closure's and the globals it
    names."""
    found: list = []
    seen: set[int] = set()
    current: Any = fn
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "__code__", None)
        for cell in getattr(current, "__closure__", None) or ():
            try:
                found.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        names = getattr(current, "__globals__", {})
        found.extend(names[name] for name in (code.co_names if code is not None else ()) if name in names)
        current = getattr(current, "__wrapped__", None)
    return [x for x in found if isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "__jax_array__")]


def unwrapped(fn: Callable) -> Callable:
    """`fn` without its `functools.wraps` wrappers (where `run` adds them)."""
    try:
        return inspect.unwrap(fn)
    except ValueError:  # a cycle of __wrapped__
        return fn


def shared_results(out_leaves: Sequence[Any], fn: Callable, replicated_inputs: Sequence[Any],
                   merged: Sequence[Any], own_values: Sequence[Any] = ()) -> tuple[bool, ...]:
    """For each result leaf of one traced replica function, whether it is an object every replica returns as
    it is: an array `fn` captured, one of its broadcast (not per-replica) inputs, or a value `merge_call`
    handed back. `own_values`: broadcast inputs each replica reads as its own copy (a variable's value: TF's
    `v.read_value()` in `run` is a PerReplica), never shared."""
    candidates = [*captured_arrays(unwrapped(fn)), *replicated_inputs, *merged]
    return tuple(any(leaf is c for c in candidates) and all(leaf is not o for o in own_values)
                 for leaf in out_leaves)
