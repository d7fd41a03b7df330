"""`tf.data.Options` and the module constants: what a TF script sets on its pipelines.

Options are plain records here. The one jdist acts on is
`experimental_distribute.auto_shard_policy`: `experimental_distribute_dataset` takes it
when `InputOptions` leave the policy at AUTO, as TF takes it from the dataset. The
others are kept and returned by `Dataset.options()`, so scripts that set them run.
"""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from jdist.input.options import AutoShardPolicy

AUTOTUNE = -1
INFINITE = -1
UNKNOWN = -2


class _OptionsRecord:
    """Fixed fields; setting an unknown one is an error, as in TF ("Cannot set the property ...")."""

    _fields: dict[str, Any] = {}

    if TYPE_CHECKING:  # the fields, for type checkers
        def __getattr__(self, name: str) -> Any: ...

    def __init__(self):
        for name, default in self._fields.items():
            object.__setattr__(self, name, default() if callable(default) else default)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._fields:
            raise AttributeError(f"Cannot set the property {name} on {type(self).__name__}; it has "
                                 f"{sorted(self._fields)}")
        object.__setattr__(self, name, value)

    def _merged(self, other: _OptionsRecord) -> Any:
        out = type(self)()
        for name, default in self._fields.items():
            mine, theirs = getattr(self, name), getattr(other, name)
            if isinstance(mine, _OptionsRecord):
                object.__setattr__(out, name, mine._merged(theirs))
            else:
                fresh = default() if callable(default) else default
                object.__setattr__(out, name, theirs if theirs != fresh else mine)
        return out

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self._fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._fields)})"


class DistributeOptions(_OptionsRecord):
    _fields = {"auto_shard_policy": AutoShardPolicy.AUTO, "num_devices": None}

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, AutoShardPolicy(value) if name == "auto_shard_policy" else value)


class OptimizationOptions(_OptionsRecord):
    """`tf.data.experimental.OptimizationOptions`: TF's graph rewrites (kept; grain has none to switch)."""

    _fields = {"apply_default_optimizations": None, "map_and_batch_fusion": None, "map_parallelization": None,
               "noop_elimination": None, "parallel_batch": None, "shuffle_and_repeat_fusion": None,
               "filter_fusion": None, "map_fusion": None, "inject_prefetch": None, "filter_parallelization": None,
               "map_and_filter_fusion": None, "seq_interleave_prefetch": None}


class ThreadingOptions(_OptionsRecord):
    """`tf.data.ThreadingOptions`: `private_threadpool_size`, `max_intra_op_parallelism` (kept)."""

    _fields = {"max_intra_op_parallelism": None, "private_threadpool_size": None}


class AutotuneAlgorithm(enum.IntEnum):
    """`tf.data.experimental.AutotuneAlgorithm` (TF 2.21's values)."""

    DEFAULT = 0
    HILL_CLIMB = 1
    GRADIENT_DESCENT = 2
    MAX_PARALLELISM = 3
    STAGE_BASED = 4


class AutotuneOptions(_OptionsRecord):
    """`tf.data.experimental.AutotuneOptions`: `options.autotune.enabled = False` and the budgets (kept)."""

    _fields = {"enabled": None, "cpu_budget": None, "ram_budget": None, "autotune_algorithm": None,
               "initial_parallelism": None, "min_parallelism": None}


class ExternalStatePolicy(enum.IntEnum):
    """`tf.data.experimental.ExternalStatePolicy`: what saving a pipeline with external state does (kept)."""

    WARN = 0
    IGNORE = 1
    FAIL = 2


class Options(_OptionsRecord):
    """`tf.data.Options`."""

    _fields = {"deterministic": None, "experimental_deterministic": None, "experimental_slack": False,
               "experimental_external_state_policy": None, "experimental_symbolic_checkpoint": None,
               "experimental_warm_start": None, "autotune": AutotuneOptions,
               "experimental_distribute": DistributeOptions, "experimental_optimization": OptimizationOptions,
               "threading": ThreadingOptions}

    def __setattr__(self, name: str, value: Any) -> None:
        name = "threading" if name == "experimental_threading" else name  # one record under two names, as TF's
        kind = self._fields.get(name)
        if isinstance(kind, type) and not isinstance(value, kind):
            raise TypeError(f'Property "{name}" must be of type {kind}, got: {value} (type: {type(value)})')
        if name == "experimental_external_state_policy" and value is not None \
                and not isinstance(value, ExternalStatePolicy):
            raise TypeError(f'Property "{name}" must be of type {ExternalStatePolicy}, got: {value} '
                            f'(type: {type(value)})')
        super().__setattr__(name, value)

    @property
    def experimental_threading(self) -> ThreadingOptions:
        """The `threading` record (TF's older name for it)."""
        return self.threading

    def merge(self, options: Options) -> Options:
        """These options with every field that `options` sets taken from it (TF's `Options.merge`)."""
        return self._merged(options)
