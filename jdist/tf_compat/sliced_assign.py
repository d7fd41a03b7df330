"""TF's sliced assignment: `v[1].assign(5.0)`, `v[1:3].assign([7.0, 8.0])` on a `tf.Variable`.

In TF 2.21 (observed) a slice of a variable is a tensor that remembers its variable: its `assign(value)` writes
`value` into those elements of the variable and returns the variable (shown as `UnreadVariable`, the whole
variable's shape). A JAX array carries no such link, so indexing a `tf.Variable` outside a traced function
notes (by the array's identity, dropped with the array) which variable and index it came from, and JAX's
concrete array type gets an `assign` attribute that exists only on such slices: any other array has none
(`hasattr(x, "assign")` stays False, as for TF's other tensors, whose `assign` is AttributeError).

Traced (in `tf.function`, in the replicas of `strategy.run`) a slice is a JAX tracer, noted the same way, and
JAX's tracer type gets the same `assign`. TF 2.21 (observed, MirroredStrategy over 2 logical CPUs, eagerly and
in `tf.function`): in a replica, `v[i].assign(x)` writes each replica's copy of a MirroredVariable with its
own `x`, unaggregated, whatever the variable's aggregation (NONE, MEAN, ONLY_FIRST_REPLICA): replicas that
assign different values leave copies that differ (`experimental_local_results(v)`); a variable made outside
the strategy's scope is left with the last replica's value, as `assign` leaves it (`replica_updates`).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import jax

from jdist.strategy.values import IdentityMarks

_SLICES = IdentityMarks()  # array -> (weak reference to the variable, index)


def slice_of(variable: Any, index: Any, out: Any) -> Any:
    """`out`, the value of `variable[index]`, noted as that slice (a concrete array or a tracer)."""
    if isinstance(out, jax.Array):
        _SLICES.set(out, (weakref.ref(variable), index))
    return out


def _assign(self: Any) -> Callable[..., Any]:
    note = _SLICES.get(self)
    variable = None if note is None else note[0]()
    if note is None or variable is None:
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'assign'")
    index = note[1]

    def assign(value: Any, use_locking: Any = None, name: Any = None, read_value: bool = True) -> Any:
        """Writes `value` into the slice's elements of its variable (TF's `v[i].assign(value)`)."""
        whole = variable.value
        if isinstance(whole, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
            return variable._jdist_assign_traced_slice(whole.at[index].set(value), read_value)
        return variable.assign(whole.at[index].set(value), read_value=read_value)

    return assign


def install() -> None:
    """Gives JAX's concrete array type and its tracer type the `assign` that only slices of a `tf.Variable`
    answer (once)."""
    types = [t for t in jax.Array.__subclasses__() if t.__name__ == "ArrayImpl"]
    for array_type in [*types, jax.core.Tracer]:  # pyright: ignore[reportAttributeAccessIssue]
        if not isinstance(array_type.__dict__.get("assign"), property):
            array_type.assign = property(_assign)  # type: ignore[attr-defined]
