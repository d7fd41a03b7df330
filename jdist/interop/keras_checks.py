"""Keras `fit`, `evaluate` and `predict` raise a failed `tf.debugging` check of a step as TF 2.21 does.

Why. A check (`tf.debugging.check_numerics`, an assert) in a layer's `call` or a custom step runs inside
Keras's jitted step. Raised there, it stopped that replica's program while the others waited at the gradient
all-reduce, and XLA:CPU aborted the process after 40 s. TF 2.21 (Keras 3.15) raises
`tf.errors.InvalidArgumentError` ("bad input : Tensor had NaN values") from `fit`/`evaluate`/`predict` at that
step, with or without a strategy, and that step's updates are not applied (observed).

How. The step functions Keras's JAX trainer makes (`make_train_function`, ...) are wrapped as
`jdist.strategy.host_checks` boundaries: the failing check records its error and returns, every replica runs
the step to its end, and the wrapper raises the error after the step. Keras donates the state it hands to a
jitted step, so while the step may hold a check (its first call, and every call once one was traced) the
wrapper keeps a copy of that state and, when the step fails, puts it back in the model's variables: the model
is left as after the last step that passed (Keras's own loop would otherwise leave them purged or deleted).
Steps without checks are neither waited for nor copied after their first call.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax

from jdist.strategy import host_checks

MAKERS = {"train_step": "make_train_function", "test_step": "make_test_function",
           "predict_step": "make_predict_function"}
SLOTS = {"train_step": "train_function", "test_step": "test_function", "predict_step": "predict_function"}
# Which variables each step's Keras state holds, in Keras's JAX trainer's order.
STATE = {
    "train_step": ("trainable_variables", "non_trainable_variables", "optimizer_variables", "metrics_variables"),
    "test_step": ("trainable_variables", "non_trainable_variables", "metrics_variables"),
    "predict_step": ("trainable_variables", "non_trainable_variables"),
}


def wrap_makers(marker: str, making: Callable[[str, Callable], Callable]) -> None:
    """Replaces each of Keras's JAX trainer's `make_*_function`s by `making(step, original)`, once: a wrapper
    carries the attribute `marker`, and one already wrapped so is left."""
    from keras.src.backend.jax.trainer import JAXTrainer

    for step, maker in MAKERS.items():
        original = getattr(JAXTrainer, maker)
        if getattr(original, marker, False):
            continue
        setattr(JAXTrainer, maker, making(step, original))


def install() -> None:
    """Wraps Keras's JAX trainer's `make_*_function`s, once (after `keras_tf_steps.install`)."""
    wrap_makers("_jdist_checks", _making)


def _making(step: str, original: Callable) -> Callable:
    @functools.wraps(original)
    def make(self: Any, force: bool = False) -> Any:
        made = original(self, force)
        function = getattr(self, SLOTS[step])
        if function is not None and not isinstance(function, _CheckedStep):
            setattr(self, SLOTS[step], _CheckedStep(self, step, function))
        return None if made is None else getattr(self, SLOTS[step])

    make._jdist_checks = True  # pyright: ignore[reportAttributeAccessIssue]
    return make


def _copy(state: Any) -> Any:
    return jax.tree.map(lambda a: a.copy() if isinstance(a, jax.Array) else a, state)


def _variables(model: Any, step: str) -> list[list]:
    parts = []
    for name in STATE[step]:
        if name == "optimizer_variables":
            parts.append(list(model.optimizer.variables) if getattr(model, "optimizer", None) is not None else [])
        else:
            parts.append(list(getattr(model, name)))
    return parts


class _CheckedStep:
    """Keras's `(state, iterator) -> (logs, state)` step function as a check boundary (module docstring)."""

    def __init__(self, model: Any, step: str, function: Callable):
        self.model, self.step = model, step
        self.boundary = host_checks.lazily_checked(function)

    def __call__(self, state: Any, iterator: Any) -> Any:
        kept = _copy(state) if self.boundary.may_check and isinstance(state, (tuple, list)) else None
        try:
            return self.boundary(state, iterator)
        except Exception:
            if kept is not None and self.boundary.has_checks:
                self._restore(kept)
            raise

    def _restore(self, kept: Any) -> None:
        """The model's variables as `kept` (the state before the failed step), as Keras's sync would set them."""
        for variables, values in zip(_variables(self.model, self.step), kept):
            if values is None:
                continue
            for variable, value in zip(variables, values):
                variable.assign(value)
        self.model._jax_state_synced = True  # Keras's `finally` sync must not bring back the donated state
