"""Keras variables made in a multi-worker jdist scope start from the chief's values.

Keras (JAX backend) places a new variable by `jax.device_put` of the value
each process computed, or by a jitted initializer run on each process's own
seed: on a mesh spanning several processes the replicas then hold different
numbers (two workers seeded differently: weight sums 23141.28 vs 23142.91)
and nothing reports it. While a jdist strategy's Keras distribution is
installed, each new variable's value goes through
`jdist.strategy.initial_values.from_first_replica`, as TF broadcasts initial
values from the chief: model weights, optimizer slots, metric and seed-generator
state alike. Later `assign`s are left alone (as in TF).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from jdist.strategy.initial_values import from_first_replica, spans_processes


def install(is_strategy_distribution: Callable[[Any], bool]) -> None:
    """Wraps Keras's JAX variable initialisation once per process."""
    from keras.src.backend.jax.core import JaxVariable

    if getattr(JaxVariable._initialize, "_jdist", False):
        return
    for name in ("_initialize", "_initialize_with_initializer"):
        setattr(JaxVariable, name, _synced(getattr(JaxVariable, name), is_strategy_distribution))


def _synced(original: Callable, is_strategy_distribution: Callable[[Any], bool]) -> Callable:
    @functools.wraps(original)
    def initialize(variable: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(variable, "_jdist_initializing", False):  # the inner call of the pair
            return original(variable, *args, **kwargs)
        variable._jdist_initializing = True
        try:
            result = original(variable, *args, **kwargs)
        finally:
            variable._jdist_initializing = False
        value = getattr(variable, "_value", None)
        sharding = getattr(value, "sharding", None)
        if spans_processes(sharding) and is_strategy_distribution(_current_distribution()):
            variable._value = from_first_replica(value, sharding)
        return result

    initialize._jdist = True  # pyright: ignore[reportFunctionMemberAccess]
    return initialize


def _current_distribution() -> Any:
    from keras.src.distribution import distribution_lib

    return distribution_lib.distribution()
