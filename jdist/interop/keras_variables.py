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

A model also remembers the distribution it was made under (or, for a model made
elsewhere, the one its variables were made under): `compile`, `fit`, `evaluate`
and `predict` called after the scope closed (as TF's Keras and multi-worker
tutorials and the migration guides do) run under it again, as TF's models keep
their strategy. So the compiled metrics' variables (the loss tracker) and the
weights of a model first built in `fit` are the strategy's, as in TF. Without
it the batch would enter the step unsplit: every replica computed the whole
batch (8 replicas: 8 times the work, 4.9 s a step of the Keras tutorial's CNN
against 0.7 s), and with several processes each worker's
batch would be a replicated value that differs per process, so the workers
would drift apart.

For a strategy that keeps Keras variables in other processes (`Strategy.keras_variable_store()`:
the parameter servers), `install_remote_hooks` registers each variable made in its scope with
that store, writes this process's assignments through to it and refreshes reads from it, splits
layer weights as the strategy's `variable_partitioner` says (`keras_sharded`), and turns Keras's `fit`
of such a model into one that schedules its steps on the workers (`keras_ps_fit`).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable

from jdist.interop import keras_sharded
from jdist.strategy.initial_values import from_first_replica, spans_processes

_is_strategy_distribution: Callable[[Any], bool] | None = None  # set by install()


def install(is_strategy_distribution: Callable[[Any], bool]) -> None:
    """Wraps Keras's JAX variable initialisation and its trainer's entry points once per process."""
    from keras.src.backend.jax.core import JaxVariable
    from keras.src.backend.jax.trainer import JAXTrainer

    global _is_strategy_distribution
    if getattr(JaxVariable._initialize, "_jdist", False):
        return
    _is_strategy_distribution = is_strategy_distribution
    for name in ("_initialize", "_initialize_with_initializer"):
        setattr(JaxVariable, name, _synced(getattr(JaxVariable, name), is_strategy_distribution))
    from keras.src.trainers.trainer import Trainer

    for name in ("fit", "evaluate", "predict"):
        setattr(JAXTrainer, name, _under_remembered_distribution(getattr(JAXTrainer, name)))
    # `compile` and `__init__` are Keras's base Trainer's: wrapped there (Keras's loading compares a model's
    # `compile` with `Trainer.compile`; see _fit_through_the_workers).
    Trainer.compile = _under_remembered_distribution(Trainer.compile)  # pyright: ignore[reportAttributeAccessIssue]
    Trainer.__init__ = _remembering(Trainer.__init__)  # pyright: ignore[reportAttributeAccessIssue]


def _remembering(original: Callable) -> Callable:
    """A model made in a jdist scope keeps that distribution, as TF's models keep the strategy they were made
    in (tf_keras's `Model._distribution_strategy`), even before it has variables."""
    @functools.wraps(original)
    def init(model: Any, *args: Any, **kwargs: Any) -> None:
        original(model, *args, **kwargs)
        distribution = _current_distribution()
        if _is_strategy_distribution is not None and _is_strategy_distribution(distribution):
            object.__setattr__(model, "_jdist_model_distribution", distribution)

    return init


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
        distribution = _current_distribution()
        if not is_strategy_distribution(distribution):
            return result
        variable._jdist_distribution = distribution
        value = getattr(variable, "_value", None)
        sharding = getattr(value, "sharding", None)
        if spans_processes(sharding):
            variable._value = from_first_replica(value, sharding)
        return result

    initialize._jdist = True  # pyright: ignore[reportAttributeAccessIssue]
    return initialize


def _under_remembered_distribution(original: Callable) -> Callable:
    @functools.wraps(original)
    def run(model: Any, *args: Any, **kwargs: Any) -> Any:
        remembered = _remembered(model)
        if remembered is None:
            return original(model, *args, **kwargs)
        with remembered.scope():
            return original(model, *args, **kwargs)

    return run


def remembered_scope(model: Any) -> Any:
    """The scope of the distribution `model` was made under, where none is current (else a null context): its
    `train_on_batch` and `test_on_batch` run under its strategy outside the scope too, as TF's do."""
    remembered = _remembered(model)
    return contextlib.nullcontext() if remembered is None else remembered.scope()


def _remembered(model: Any) -> Any:
    """The jdist distribution `model`'s variables were made under, where none is current; else None."""
    if _current_distribution() is not None:
        return None
    made_under = getattr(model, "_jdist_model_distribution", None)
    if made_under is not None:
        return made_under
    for variable in getattr(model, "variables", ()):
        remembered = getattr(variable, "_jdist_distribution", None)
        if remembered is not None:
            return remembered
    return None


def _current_distribution() -> Any:
    from keras.src.distribution import distribution_lib

    return distribution_lib.distribution()


def install_remote_hooks() -> None:
    """For strategies that keep Keras variables in other processes (`Strategy.keras_variable_store()`, the
    parameter servers): a variable created in such a scope is registered with the store; an assignment
    in this process is handed to it (written through); a read first lets it bring in newer values."""
    from keras.src.backend.jax.core import JaxVariable

    if getattr(JaxVariable._direct_assign, "_jdist_remote", False):
        return
    for name in ("_initialize", "_initialize_with_initializer"):
        setattr(JaxVariable, name, _registered(getattr(JaxVariable, name)))
    direct_assign = JaxVariable._direct_assign

    def assign_through(self: Any, value: Any) -> None:
        direct_assign(self, value)
        store = self.__dict__.get("_jdist_ps_store")
        if store is not None:
            store.assigned(self)

    assign_through._jdist_remote = True  # pyright: ignore[reportFunctionMemberAccess]
    JaxVariable._direct_assign = assign_through
    read = JaxVariable.value.fget
    assert read is not None, "Keras variables have a value property"

    def value(variable: Any) -> Any:
        store = variable.__dict__.get("_jdist_ps_store")
        if store is not None:
            store.refresh_if_stale()
        return read(variable)

    JaxVariable.value = property(value)  # pyright: ignore[reportAttributeAccessIssue]
    JaxVariable.device = property(_device)  # pyright: ignore[reportAttributeAccessIssue]
    keras_sharded.install()  # a `variable_partitioner` splits layer weights into pieces, as TF's does
    _fit_through_the_workers()


def _fit_through_the_workers() -> None:
    """Keras's own `fit` runs its steps in this process. For a model made or compiled in a scope whose variables
    live elsewhere (the parameter servers) that would train on the coordinator alone: such a fit schedules its
    steps on the workers instead (`keras_ps_fit`), as TF's does."""
    from keras.src.backend.jax.trainer import JAXTrainer
    from keras.src.trainers.trainer import Trainer

    # `compile` is wrapped on Keras's base Trainer, where it is defined: Keras's loading compares a model's
    # `compile` with `Trainer.compile` and, if they differ, loads the model uncompiled as a custom one.
    compile_, fit = Trainer.compile, JAXTrainer.fit

    @functools.wraps(compile_)
    def compile(model: Any, *args: Any, **kwargs: Any) -> Any:
        from jdist.strategy import context

        strategy = context.get_strategy()
        if strategy.keras_variable_store() is not None:
            model._jdist_remote_variables = True
            model._jdist_coordinated_strategy = strategy
        return compile_(model, *args, **kwargs)

    @functools.wraps(fit)
    def fit_through_workers(model: Any, *args: Any, **kwargs: Any) -> Any:
        remote = getattr(model, "_jdist_remote_variables", False) or any(
            "_jdist_ps_store" in v.__dict__ for v in getattr(model, "variables", ()))
        if not remote:
            return fit(model, *args, **kwargs)
        strategy = getattr(model, "_jdist_coordinated_strategy", None)
        if strategy is None:
            raise ValueError(
                "model.fit: this Keras model's variables live on parameter servers, but it was compiled outside "
                "the ParameterServerStrategy's scope, so fit does not know the strategy whose workers train it. "
                "Call model.compile(...) inside `with strategy.scope():`.")
        from jdist.interop import keras_ps_fit

        return keras_ps_fit.fit(model, strategy, *args, **kwargs)

    Trainer.compile, JAXTrainer.fit = compile, fit_through_workers  # pyright: ignore[reportAttributeAccessIssue]


def _device(variable: Any) -> str:
    """TF's `variable.device`: the parameter server's task for a variable kept there, else the array's device."""
    remote = variable.__dict__.get("_jdist_ps_device")
    if remote is not None:
        return remote
    devices = getattr(variable._value, "devices", lambda: set())()
    return str(next(iter(devices))) if len(devices) == 1 else ""


def _registered(original: Callable) -> Callable:
    @functools.wraps(original)
    def initialize(variable: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(variable, *args, **kwargs)
        if "_jdist_ps_store" not in variable.__dict__ and getattr(variable, "_value", None) is not None:
            from jdist.strategy import context

            store = context.get_strategy().keras_variable_store()
            if store is not None:
                store.register(variable)
        return result

    return initialize
