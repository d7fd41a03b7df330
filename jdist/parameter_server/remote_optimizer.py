"""The coordinator's and the workers' side of Keras optimizer updates applied on the servers.

The coordinator describes each optimizer a scheduled function uses (`describe`, once per
optimizer): which store key holds each of its variables, and it moves each slot to the
server of the model variable it belongs to (TF colocates slots with their variable; here
they were placed round robin when the optimizer was built). A worker runs the function with
the optimizer's `apply_gradients` deferred (`interop.keras_deferred`) and then, per call,
`send`s the gradients: `iterations` is read and advanced on its server first (each apply
gets its own step number, as TF's `iterations.assign_add` counts every worker's apply), then
each server holding some of the variables applies the update to them
(`server_optimizer.ServerOptimizer`). An optimizer whose `applied_from_step_reads` is true
(tf_keras's RMSprop without momentum, `tf_compat.legacy_optimizers`) has its update computed
from the values the worker loaded for the step and written over the servers' values, as
TF's read, compute and assign is: a concurrent worker's update in between is overwritten.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jdist.parameter_server.remote_state import call_servers
from jdist.parameter_server.server_optimizer import OptimizerSpec, build_with_references, standin


def describe(optimizer: Any, key_of: Callable[[Any], int | None],
             colocate: Callable[[int, int], None]) -> OptimizerSpec:
    """`optimizer`'s layout on the servers; `colocate(key, with_key)` moves `key` to `with_key`'s server.
    Refuses what a per-server update cannot do."""
    import keras

    name = optimizer.name
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        raise ValueError(
            f"The optimizer {name!r} is a LossScaleOptimizer: its loss scale depends on whether every gradient is "
            "finite, which no single parameter server sees, so the servers cannot apply its updates. Train with "
            "float32 gradients (no loss scaling) under ParameterServerStrategy.")
    trainable = list(getattr(optimizer, "_trainable_variables", []))
    config = dict(optimizer.get_config())
    clipnorm = config.pop("global_clipnorm", None)
    config["global_clipnorm"] = None
    from jdist.strategy import context
    from jdist.strategy.default import default_strategy

    with context.push(default_strategy(), None):  # stand-ins and probe: not variables of the servers
        standins = [standin(v.shape, v.dtype, v.name, v.constraint) for v in trainable]
        probe, references = build_with_references(type(optimizer), config, standins)
    real = optimizer.variables
    if [tuple(v.shape) for v in probe.variables] != [tuple(v.shape) for v in real]:
        raise ValueError(
            f"The optimizer {name!r} rebuilt from its get_config() makes variables of shapes "
            f"{[tuple(v.shape) for v in probe.variables]}, the original {[tuple(v.shape) for v in real]}; the "
            "parameter servers rebuild it that way to apply its updates. Make get_config() return every argument "
            "of its constructor.")
    found = [key_of(v) for v in real]
    found_trainable = [key_of(v) for v in trainable]
    if any(k is None for k in found + found_trainable):
        raise ValueError(f"The optimizer {name!r} or the variables it updates were created outside the "
                         "ParameterServerStrategy's scope; create the model and the optimizer inside it.")
    keys = [k for k in found if k is not None]
    trainable_keys = [k for k in found_trainable if k is not None]
    iterations = getattr(optimizer, "_iterations", None)
    shared = [i for i, r in enumerate(references) if r is None]
    if iterations is None or not shared or real[shared[0]] is not iterations:
        raise ValueError(f"The optimizer {name!r} has no `iterations` variable of its own first; the parameter "
                         "servers apply Keras 3 optimizers (keras.optimizers.Optimizer subclasses) only.")
    slots: list[list[int]] = [[] for _ in trainable]
    for key, reference in zip(keys, references):
        if reference is not None:
            slots[reference].append(key)
            colocate(key, trainable_keys[reference])
    return OptimizerSpec(
        name=name, cls=type(optimizer), config=config, global_clipnorm=clipnorm,
        variable_keys=tuple(keys), iterations_key=keys[shared[0]], shared_keys=tuple(keys[i] for i in shared[1:]),
        trainable_keys=tuple(trainable_keys),
        names=tuple(v.name for v in trainable), constraints=tuple(v.constraint for v in trainable),
        slot_keys=tuple(tuple(s) for s in slots),
        from_reads=bool(getattr(optimizer, "applied_from_step_reads", False)))


def send(spec: OptimizerSpec, store_id: str, servers: Sequence[Any], server_of: dict[int, int],
         pulled: dict[int, np.ndarray], grads: dict[int, np.ndarray], timeout_s: float) -> None:
    """One `apply_gradients` of `spec`'s optimizer, `grads` by store key, applied on the servers."""
    unknown = sorted(set(grads) - set(spec.trainable_keys))
    if unknown:
        raise ValueError(f"optimizer.apply_gradients got gradients for variables the optimizer {spec.name!r} was "
                         f"not built for (store keys {unknown}); build it for all of them first, in the scope.")
    if spec.global_clipnorm:
        from keras.src.optimizers.base_optimizer import clip_by_global_norm

        keys = list(grads)
        clipped = clip_by_global_norm([grads[k] for k in keys], spec.global_clipnorm)
        grads = {k: np.asarray(g) for k, g in zip(keys, clipped)}
    (iteration,) = call_servers([servers[server_of[spec.iterations_key]]], "fetch_add_variable",
                                [(store_id, spec.iterations_key)], timeout_s)
    shared = [pulled[k] for k in spec.shared_keys]
    per_server: dict[int, dict] = {}
    for key, grad in grads.items():
        per_server.setdefault(server_of[key], {})[key] = grad
    asked = sorted(per_server)
    reads: dict[int, dict | None] = {s: None for s in asked}
    if spec.from_reads:  # each updated variable and its slots, as the worker loaded them
        slots_of = dict(zip(spec.trainable_keys, spec.slot_keys))
        reads = {s: {k: pulled[k] for key in per_server[s] for k in (key, *slots_of[key])} for s in asked}
    call_servers([servers[s] for s in asked], "apply_optimizer",
                 [(store_id, spec, iteration, shared, per_server[s], reads[s]) for s in asked], timeout_s)
