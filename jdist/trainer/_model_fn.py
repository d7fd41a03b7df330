"""How the Trainer calls a model: flax linen modules, or `apply_fn(params, x)` functions.

A linen module's non-parameter collections (e.g. `batch_stats`) are kept in
`TrainerState.model_state` and updated in training steps. If the module's
`__call__` takes `train`, the Trainer passes `train=True` in `fit` and `False`
elsewhere; if it takes `mask`, it passes the real-example mask of the padded
batch (so `jdist.SyncBatchNorm` can leave padding out of its statistics).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import flax.linen as nn
import jax

from jdist.training.train_state import TrainState


class TrainerState(TrainState):
    """A `TrainState` plus the model's mutable collections and a dropout key."""

    model_state: Any = None
    rng: Any = None


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class LinenModel:
    """Adapter for a `flax.linen.Module`."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.takes_train = _accepts(type(module).__call__, "train")
        self.takes_mask = _accepts(type(module).__call__, "mask")

    def _kwargs(self, train: bool, mask: Any) -> dict:
        kwargs = {}
        if self.takes_train:
            kwargs["train"] = train
        if self.takes_mask and mask is not None:
            kwargs["mask"] = mask
        return kwargs

    def init(self, rng: jax.Array, x: Any, mask: Any) -> tuple[Any, Any]:
        variables = self.module.init({"params": rng, "dropout": rng}, x, **self._kwargs(False, mask))
        variables = dict(variables)
        params = variables.pop("params", {})
        return params, variables

    def apply(self, params: Any, model_state: Any, x: Any, *, train: bool, mask: Any, rng: Any) -> tuple[Any, Any]:
        variables = {"params": params, **(model_state or {})}
        kwargs = self._kwargs(train, mask)
        if train and model_state:
            out, updates = self.module.apply(variables, x, mutable=list(model_state), rngs={"dropout": rng}, **kwargs)
            return out, {**model_state, **updates}
        rngs = {"dropout": rng} if train else None
        return self.module.apply(variables, x, rngs=rngs, **kwargs), model_state


class FunctionModel:
    """Adapter for `apply_fn(params, x)` (also a `TrainState`'s `apply_fn`, e.g. from NNX)."""

    def __init__(self, apply_fn: Callable):
        self.apply_fn = apply_fn

    def init(self, rng: jax.Array, x: Any, mask: Any) -> tuple[Any, Any]:
        raise ValueError("A model given as a function needs its parameters: Trainer(apply_fn, params=...).")

    def apply(self, params: Any, model_state: Any, x: Any, *, train: bool, mask: Any, rng: Any) -> tuple[Any, Any]:
        return self.apply_fn(params, x), model_state
