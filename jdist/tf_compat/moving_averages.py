"""`tf.train.ExponentialMovingAverage`: shadow copies of variables that follow them by an exponential average,
the weights TF scripts evaluate or export with (Polyak averaging).

TF 2.21's rules (observed): `apply(var_list)` makes each variable's shadow on its first call, holding the
variable's value then (a non-trainable `tf.Variable`; mirrored when the variable is), and on every call sets
`shadow -= (1 - decay) * (shadow - variable)` in the variable's dtype, `1 - decay` computed in float32. With
`num_updates` the decay is `min(decay, (1 + num_updates) / (10 + num_updates))`, read at each call (the
counter is the caller's to increase). `zero_debias` changes nothing for variables (TF debiases tensors only,
which eager TF refuses). `apply` returns None; `average(var)` is None for a variable never applied.
"""
from __future__ import annotations

import contextlib
from typing import Any

import jax.numpy as jnp

from jdist.interop.keras_objects import holder_made
from jdist.strategy.context import in_replica_context
from jdist.tf_compat.keras_namespace import keras_module
from jdist.tf_compat.variables import Variable

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _name(var: Any) -> str:
    """A variable's name as TF's `average_name` uses it (its path, without TF's `:0`)."""
    name = str(getattr(var, "path", None) or var.name)
    return name[:-2] if name.endswith(":0") else name


class ExponentialMovingAverage:
    """`tf.train.ExponentialMovingAverage(decay, num_updates=None, zero_debias=False, name=...)`."""

    _jdist_holds_variables = True  # strategy.run threads the shadows (`variables`) as it does a model's

    def __init__(self, decay: float, num_updates: Any = None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage"):
        self._decay, self._num_updates, self._zero_debias, self._name = decay, num_updates, zero_debias, name
        self._averages: dict[int, tuple[Any, Any]] = {}
        holder_made()

    @property
    def name(self) -> str:
        return self._name

    def _decay_now(self) -> Any:
        decay = jnp.float32(self._decay)
        if self._num_updates is None:
            return decay
        count = self._num_updates
        count = jnp.asarray(count.value if hasattr(count, "value") else count).astype(jnp.float32)
        return jnp.minimum(decay, (1.0 + count) / (10.0 + count))

    def _shadow(self, var: Any) -> Any:
        """A new shadow variable holding `var`'s value, in `var`'s strategy if it is a distributed one."""
        replication = getattr(var, "_jdist_replication", None)
        if in_replica_context():
            raise RuntimeError(f"ExponentialMovingAverage.apply makes the shadow of {_name(var)!r} inside "
                               "strategy.run, where variables cannot be made: call ema.apply(var_list) once in the "
                               "strategy's scope (or outside run) first; later applies inside run update them.")
        with contextlib.ExitStack() as scopes:
            if replication is not None:
                scopes.enter_context(replication.strategy.scope())
            for part in _name(var).split("/"):  # the shadow's path: '<variable path>/<name>'
                scopes.enter_context(keras_module().name_scope(part))
            return Variable(jnp.asarray(var.value), trainable=False, name=self._name, dtype=str(var.dtype))

    def apply(self, var_list: Any = None) -> None:
        """Makes the shadows of new variables in `var_list` and moves every shadow towards its variable."""
        if var_list is None:  # eager TF averages its (empty) graph collection
            return None
        var_list = list(var_list)
        keras_variable = keras_module().Variable
        for var in var_list:
            if not isinstance(var, keras_variable):
                raise TypeError("tf.train.ExponentialMovingAverage does not support non-Variable tensors when "
                                "eager execution is enabled.")
            if str(var.dtype) not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {_name(var)}:0")
        for var in var_list:
            if id(var) not in self._averages:
                self._averages[id(var)] = (var, self._shadow(var))
        one_minus = 1.0 - self._decay_now()  # float32, as TF's
        for var in var_list:
            shadow = self._averages[id(var)][1]
            rate = one_minus.astype(var.value.dtype)
            shadow.assign(shadow.value - (shadow.value - var.value) * rate)
        return None

    def average(self, var: Any) -> Any:
        """The shadow variable of `var`, or None if `apply` never saw it."""
        entry = self._averages.get(id(var))
        return None if entry is None else entry[1]

    def average_name(self, var: Any) -> str:
        """`'<variable name>/<this average's name>'` (TF's name for the shadow in checkpoints)."""
        return f"{_name(var)}/{self._name}"

    def variables_to_restore(self, moving_avg_variables: Any = None) -> dict[str, Any]:
        """`{average_name(var): var}` for the averaged variables (or those given): the map that restores the
        averages into the variables."""
        variables = [v for v, _ in self._averages.values()] if moving_avg_variables is None else moving_avg_variables
        return {self.average_name(v): v for v in variables}


    @property
    def variables(self) -> list[Any]:
        """The shadow variables (what `strategy.run` and `tf.train.Checkpoint` find in this object)."""
        return [shadow for _, shadow in self._averages.values()]


NAMES = dict(ExponentialMovingAverage=ExponentialMovingAverage)
