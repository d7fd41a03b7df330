"""The one wrapper of Keras's JAX `JAXTrainer.compute_loss_and_updates`, which TF's per-replica rules register into.

Several rules change how Keras's train and test steps compute their loss under a strategy, each as TF computes it
per replica: the gradient's weighting of an uneven batch (`keras_replica_means`), BatchNormalization's
per-replica moments (`keras_replica_batch_norm`), the forward pass's own losses per replica
(`keras_replica_losses`). Each registers a wrapper factory here, with its place in the chain; Keras's method is
replaced once, by a function that calls the chain built from the registered factories around Keras's own method,
so the order does not depend on which module installs first and no rule wraps another's wrapper.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

Factory = Callable[[Callable[..., Any]], Callable[..., Any]]  # wraps the next method of the chain

_FACTORIES: dict[str, tuple[int, Factory]] = {}
_CHAIN: list[Callable[..., Any]] = []  # the composed method, once installed
_KERAS: list[Callable[..., Any]] = []  # Keras's own method


def register(name: str, place: int, factory: Factory) -> None:
    """Adds (once per `name`) `factory` to the chain: a higher `place` wraps the lower ones, Keras's own method
    innermost."""
    if name in _FACTORIES:
        return
    _FACTORIES[name] = (place, factory)
    _install()
    method = _KERAS[0]
    for _, made in sorted(_FACTORIES.values(), key=lambda item: item[0]):
        method = made(method)
    _CHAIN[:] = [method]


def _install() -> None:
    from keras.src.backend.jax.trainer import JAXTrainer

    if _KERAS:
        return
    original = JAXTrainer.compute_loss_and_updates
    _KERAS.append(original)
    _CHAIN.append(original)

    @functools.wraps(original)
    def compute_loss_and_updates(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _CHAIN[0](self, *args, **kwargs)

    compute_loss_and_updates._jdist_loss_chain = True  # pyright: ignore[reportAttributeAccessIssue]
    JAXTrainer.compute_loss_and_updates = compute_loss_and_updates
