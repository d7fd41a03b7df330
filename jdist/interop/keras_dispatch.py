"""Keras's compiled steps count against jdist's bound on programs in flight (`jdist.strategy.dispatch`).

Keras's JAX trainer dispatches one compiled step per batch and reads nothing back between them, so `fit` on a
`tf.data` dataset of small batches under a strategy with 8 CPU devices queued steps until XLA:CPU aborted the
process ("Termination timeout for all reduce RendezvousKey ... cross_module"; Keras's own guide "Multi-GPU
distributed training", its MNIST model on batches of 32, stopped so in its first epoch on a 2-core host). Each
step's outputs are registered as jdist's own programs' are: the host waits for the oldest step only when more
than a few are pending, so the steps still pipeline. Nothing changes on GPUs and TPUs or with one device
(`dispatch` bounds only multi-device CPU programs).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from jdist.strategy import dispatch


def install() -> None:
    """Wraps the step function Keras's JAX trainer builds each train / test / predict function from, once."""
    from keras.src.backend.jax.trainer import JAXTrainer

    if getattr(JAXTrainer._make_function, "_jdist", False):
        return
    make_function = JAXTrainer._make_function

    @functools.wraps(make_function)
    def bounded_make_function(self: Any, step_function: Callable, *args: Any, **kwargs: Any) -> Any:
        return make_function(self, _bounded(step_function), *args, **kwargs)

    bounded_make_function._jdist = True  # pyright: ignore[reportAttributeAccessIssue]
    JAXTrainer._make_function = bounded_make_function  # pyright: ignore[reportAttributeAccessIssue]


def _bounded(step_function: Callable) -> Callable:
    @functools.wraps(step_function)
    def step(state: Any, data: Any) -> Any:
        return dispatch.dispatched(step_function(state, data))

    return step
