"""The default strategy: what `get_strategy()` returns outside any scope."""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp

from jdist.strategy import context, extensions, function_trace
from jdist.strategy.base import Strategy
from jdist.strategy.distributed_batch import DistributedBatch, unwrap_batches
from jdist.strategy.extended import StrategyExtended
from jdist.strategy.replica_context import ReplicaContext
from jdist.strategy.run_options import RunOptions, check_run_options
from jdist.typing import PyTree


class DefaultStrategy(Strategy):
    """One replica, no placement and no compilation: `run(fn)` just calls `fn`."""

    def __init__(self):
        super().__init__(devices=[jax.devices()[0]])

    def _mesh_context(self):
        return contextlib.nullcontext()

    @property
    def extended(self) -> StrategyExtended:
        return self.__dict__.setdefault("_extended_view", _DefaultExtended(self))

    def place(self, tree: PyTree) -> PyTree:
        """`tree` where it is, with its own buffers: a train step that donates the state must
        never free the caller's arrays."""
        return jax.tree.map(lambda x: jnp.copy(x) if isinstance(x, jax.Array) else x, tree)

    def distribute_batch(self, batch: PyTree) -> PyTree:
        return batch

    def run(self, fn: Callable[..., PyTree], args: Sequence[PyTree] = (),
            kwargs: Mapping[str, PyTree] | None = None, options: RunOptions | None = None) -> PyTree:
        if isinstance(args, DistributedBatch) and isinstance(args.value, (list, tuple)):
            args = tuple(args)  # TF's `run(fn, args=next(iterator))` of a tuple element: its components
        if not isinstance(args, (list, tuple)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}.")
        check_run_options(options)
        function_trace.refuse("strategy.run")
        claimed = extensions.claimed_run(fn)  # e.g. Keras objects used as TF variables (GradientTape included)
        if claimed is not None:
            extension, claim = claimed
            return extension.run(self, fn, args, kwargs, claim)
        (call_args, call_kwargs), masks = unwrap_batches((tuple(args), dict(kwargs or {})))
        with context.push(self, ReplicaContext(self, None, example_masks=masks)):
            return fn(*call_args, **call_kwargs)

    def experimental_distribute_values_from_function(self, value_fn):
        from jdist.strategy.cross_replica import ValueContext

        return value_fn(ValueContext(0, 1))

    def __repr__(self) -> str:
        return "DefaultStrategy()"


class _DefaultExtended(StrategyExtended):
    """The default strategy has no devices of its own to name (TF 2.21's RuntimeError, observed)."""

    @property
    def worker_devices(self) -> tuple[str, ...]:
        raise RuntimeError("worker_devices() method unsupported by default tf.distribute.Strategy.")

    @property
    def parameter_devices(self) -> tuple[str, ...]:
        raise RuntimeError("parameter_devices() method unsupported by default tf.distribute.Strategy.")


@functools.cache
def default_strategy() -> DefaultStrategy:
    return DefaultStrategy()
