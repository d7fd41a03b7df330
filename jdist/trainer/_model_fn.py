"""How the Trainer calls a model: one `TrainerModel` protocol, adapted once from what `Trainer(model)` was given
(a flax linen module, an `apply_fn(params, x)` function, a `TrainState`, or a Keras 3 model's adapter).

A linen module's non-parameter collections (e.g. `batch_stats`) are kept in
`TrainerState.model_state` and updated in training steps. If the module's
`__call__` takes `train`, the Trainer passes `train=True` in `fit` and `False`
elsewhere; if it takes `mask`, it passes the real-example mask of the padded
batch (so `jdist.SyncBatchNorm` can leave padding out of its statistics).
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any, Callable, Protocol

import flax.linen as nn
import jax

from jdist.training.train_state import TrainState


class TrainerModel(Protocol):
    """What the Trainer needs of a model: its variables made from one example, and a forward pass that
    returns the output and the model's updated non-parameter collections."""

    def init(self, rng: jax.Array, x: Any, mask: Any) -> tuple[Any, Any]: ...

    def apply(self, params: Any, model_state: Any, x: Any, *, train: bool, mask: Any,
              rng: Any) -> tuple[Any, Any]: ...

    @property
    def apply_fn(self) -> Callable: ...  # what the train state records as its `apply_fn`


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

    @property
    def apply_fn(self) -> Callable:
        return self.module.apply

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


@dataclasses.dataclass
class AdaptedModel:
    """`Trainer(model, ...)`'s model as a `TrainerModel`, with where its first state comes from: a state
    handle kept by a strategy elsewhere, a given `TrainState`, given parameters, or (all None) the first batch."""

    model: TrainerModel
    handle: Any = None
    train_state: TrainState | None = None
    params: Any = None
    model_state: Any = None


def is_state_handle(model: Any) -> bool:
    """A train state made in the scope of a strategy that keeps it outside this process (on
    parameter servers): an `apply_fn` and an optimizer, but no arrays here."""
    return (not isinstance(model, TrainState) and hasattr(model, "apply_gradients") and hasattr(model, "apply_fn")
            and hasattr(model, "tx") and not jax.tree.leaves(model))


def adapt_model(model: Any, optimizer: Any, params: Any) -> AdaptedModel:
    """The one place that tells the kinds of model apart (a Keras model arrives as its adapter, already a
    `TrainerModel`)."""
    if is_state_handle(model) or isinstance(model, TrainState):
        if optimizer is not None:
            raise ValueError("A TrainState already holds its optimizer (state.tx); leave `optimizer` out.")
        adapter = FunctionModel(model.apply_fn)
        if isinstance(model, TrainState):
            return AdaptedModel(adapter, train_state=model)
        return AdaptedModel(adapter, handle=model)
    if optimizer is None:
        raise ValueError('Trainer needs an optimizer: a name ("adam") or an optax one, e.g. optax.adam(1e-3).')
    if isinstance(model, nn.Module):
        adapter: TrainerModel = LinenModel(model)
    elif all(hasattr(model, name) for name in ("init", "apply", "apply_fn")) and not callable(model):
        adapter = model  # already a TrainerModel (a Keras model's adapter)
    elif callable(model):
        adapter = FunctionModel(model)
    else:
        raise TypeError(f"model must be a flax linen Module, a Keras 3 model, a TrainState or a function, "
                        f"got {model!r}.")
    if params is None:
        if isinstance(adapter, FunctionModel):
            raise ValueError("A model given as a function needs its parameters: Trainer(apply_fn, params=...).")
        return AdaptedModel(adapter)
    model_state = None
    if isinstance(adapter, LinenModel) and isinstance(params, Mapping) and "params" in params:
        variables = dict(params)  # model.init's whole output: params plus e.g. batch_stats
        params = variables.pop("params")
        model_state = variables or None
    return AdaptedModel(adapter, params=params, model_state=model_state)
