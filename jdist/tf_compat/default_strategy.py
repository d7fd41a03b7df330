"""`tf.distribute.get_strategy()` outside any scope: jdist's default strategy, with TF's `reduce` results.

TF 2.21's default strategy gives `reduce(MEAN, <integer tensor>, axis=...)` as float64, as its MirroredStrategy
does (observed: `reduce(MEAN, tf.constant([1, 2]), axis=0)` is float64 1.5; `axis=None` hands the int32 tensor
back; SUM keeps int32). That rule lives in `run_results.TFRunResults`, above the strategy runtime, so the
runtime's own default strategy (`jdist.get_strategy()`) cannot apply it without importing this package. Here a
TF-flavoured default strategy (one per process) stands in for it wherever `tf.distribute.get_strategy()` would
return the runtime's: same devices, same `run`, TF's `reduce`.
"""
from __future__ import annotations

import functools
from typing import Any

import jdist
from jdist.strategy.default import DefaultStrategy, default_strategy
from jdist.strategy.extended import StrategyExtended
from jdist.tf_compat.run_results import TFRunResults


class TFDefaultStrategy(TFRunResults, DefaultStrategy):
    """The default strategy as `jdist.tf_compat` gives it: MEAN of integers is float64 (TF 2.21, observed)."""

    @property
    def extended(self) -> StrategyExtended:
        return self.__dict__.setdefault("_extended_view", _extended_class()(self))


@functools.cache
def _extended_class() -> type:
    """The runtime default strategy's `extended` class, where the runtime's default strategy and this one are one
    default strategy to a variable: one made outside every scope records the runtime's (TF 2.21, observed: the
    default strategy's `variable_created_in_scope` is True for it)."""
    base: Any = type(default_strategy().extended)

    class TFDefaultExtended(base):
        def variable_created_in_scope(self, v: Any) -> bool:
            owner = getattr(v, "_jdist_strategy", None)
            if callable(owner) and owner() is default_strategy():
                return True
            return super().variable_created_in_scope(v)

    return TFDefaultExtended


@functools.cache
def tf_default_strategy() -> TFDefaultStrategy:
    """The one TF-flavoured default strategy of this process."""
    return TFDefaultStrategy()


def get_strategy() -> jdist.Strategy:
    """`tf.distribute.get_strategy()`: the innermost open scope's strategy, else the default strategy (the
    TF-flavoured one, see the module docstring)."""
    strategy = jdist.get_strategy()
    return tf_default_strategy() if strategy is default_strategy() else strategy
