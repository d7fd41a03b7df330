"""A Keras optimizer's update applied on the parameter servers, to their current values, as TF's is.

TF's `optimizer.apply_gradients` in a scheduled function sends the worker's gradients
to the servers; each variable's update runs on its server, reading the variable's and
its slots' current values there (its slots are colocated with it), and `iterations`,
kept on one server, advances once per `apply_gradients`. Here the coordinator
describes each optimizer the scheduled functions use (`OptimizerSpec`): its class and
config, which server key holds each model variable it updates, each of that variable's
slots (moved to the variable's server) and its other variables (`iterations`, the
learning rate). A server rebuilds the optimizer from its class and config for the model
variables it holds (`ServerOptimizer`) and applies it with Keras's `stateless_apply`
to the values it holds; Ray runs one method of a server at a time, so each update is
atomic on its server (from the worker's loaded values instead where `OptimizerSpec.from_reads`:
tf_keras's RMSprop without momentum reads, computes and assigns, so TF loses the updates that land
in between). Any Keras 3 optimizer whose update is per variable works (SGD,
momentum, Adam, RMSprop, Adagrad, ...); `global_clipnorm`, which spans every gradient,
is applied on the worker before the gradients are sent (TF clips on the worker too).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
    """How one coordinator optimizer's variables are laid out on the servers (keys of the Keras variable store)."""

    name: str
    cls: type
    config: dict  # without `global_clipnorm`: the worker clips
    global_clipnorm: float | None
    variable_keys: tuple[int, ...]  # `optimizer.variables`, in order: finds the worker's copy
    iterations_key: int
    shared_keys: tuple[int, ...]  # its variables tied to no model variable, `iterations` excluded (learning rate)
    trainable_keys: tuple[int, ...]  # the model variables it updates, in its build order
    names: tuple[str, ...]  # their names (weight-decay exclusion by name)
    constraints: tuple[Any, ...]  # their constraints, applied after each update as Keras does
    slot_keys: tuple[tuple[int, ...], ...]  # per model variable, its slots in creation order
    from_reads: bool = False  # update from the worker's loaded values, written over the servers' (TF's composite rule)


def build_with_references(cls: type, config: dict, standins: Sequence[Any]) -> tuple[Any, list[int | None]]:
    """`cls.from_config(config)` built for `standins`; per variable of it, the stand-in it is a slot of (None:
    a variable of the optimizer as a whole, such as `iterations`)."""
    optimizer = cls.from_config(config)
    made: dict[int, int] = {}
    by_reference = optimizer.add_variable_from_reference
    index_of = {id(v): i for i, v in enumerate(standins)}

    def add_variable_from_reference(reference_variable: Any, *args: Any, **kwargs: Any) -> Any:
        variable = by_reference(reference_variable, *args, **kwargs)
        if id(reference_variable) in index_of:
            made[id(variable)] = index_of[id(reference_variable)]
        return variable

    optimizer.add_variable_from_reference = add_variable_from_reference
    try:
        optimizer.build(list(standins))
    finally:
        del optimizer.add_variable_from_reference
    return optimizer, [made.get(id(v)) for v in optimizer.variables]


def standin(shape: Sequence[int], dtype: Any, name: str, constraint: Any = None) -> Any:
    """A Keras variable of this shape, dtype and name that an optimizer is built for in place of a model's."""
    import keras

    variable = keras.Variable(np.zeros(tuple(shape), dtype=np.dtype(dtype)), dtype=str(np.dtype(dtype)),
                              name=name.replace("/", "_"))
    variable._name = name  # a partitioned weight's piece is "kernel/part_0", which Keras's constructor refuses
    variable.constraint = constraint
    return variable


class ServerOptimizer:
    """The optimizer of `spec` built on one server for the model variables `keys` it holds there."""

    def __init__(self, spec: OptimizerSpec, keys: Sequence[int], entries: dict):
        os.environ.setdefault("KERAS_BACKEND", "jax")
        import jax
        import keras

        if keras.backend.backend() != "jax":
            raise RuntimeError("The parameter servers apply Keras optimizers with Keras's JAX backend; set "
                               "KERAS_BACKEND=jax for the cluster's processes.")
        position = {key: i for i, key in enumerate(spec.trainable_keys)}
        self.keys = list(keys)
        standins = [standin(entries[k][1].shape, entries[k][1].dtype, spec.names[position[k]],
                            spec.constraints[position[k]]) for k in self.keys]
        self.optimizer, references = build_with_references(spec.cls, spec.config, standins)
        slots: list[list[int]] = [[] for _ in self.keys]
        self.shared: list[int] = []  # positions of the optimizer's own variables, `iterations` first
        for i, reference in enumerate(references):
            (self.shared if reference is None else slots[reference]).append(i)
        self.slot_of: dict[int, int] = {}  # position in optimizer.variables -> server key
        for key, positions in zip(self.keys, slots):
            wanted = spec.slot_keys[position[key]]
            if len(positions) != len(wanted):
                raise RuntimeError(f"{spec.name}: the server's optimizer made {len(positions)} slots for a variable "
                                   f"where the coordinator's has {len(wanted)}.")
            self.slot_of.update(zip(positions, wanted))
        if len(self.shared) != 1 + len(spec.shared_keys):
            raise RuntimeError(f"{spec.name}: the server's optimizer has {len(self.shared)} variables of its own "
                               f"where the coordinator's has {1 + len(spec.shared_keys)}.")
        self._apply = jax.jit(self.optimizer.stateless_apply)

    def apply(self, entries: dict, iteration: Any, shared: Sequence[Any], grads: dict) -> None:
        """One update of the held variables from their current values and slots; each entry's version advances."""
        values: list[Any] = [None] * len(self.optimizer.variables)
        for position, value in zip(self.shared, [iteration, *shared]):
            values[position] = value
        for position, key in self.slot_of.items():
            values[position] = entries[key][1]
        trainable = [entries[key][1] for key in self.keys]
        new_trainable, new_values = self._apply(values, [grads[key] for key in self.keys], trainable)
        for key, value in zip(self.keys, new_trainable):
            _write(entries, key, value)
        for position, key in self.slot_of.items():
            _write(entries, key, new_values[position])


def _write(entries: dict, key: int, value: Any) -> None:
    entry = entries[key]
    entry[0] += 1
    entry[1] = np.asarray(value).astype(entry[1].dtype)
