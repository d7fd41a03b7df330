"""A Keras stateless scope opened inside the current one, reading variables its own way and passing the rest on.

A tape's pause (`tape_pause`) and a custom gradient's variable reads (`tf_compat.custom_gradients`) each need a
scope whose reads differ from the current one's while the assignments and losses it collects still reach that
scope, so that a step's updates and `add_loss` terms are not dropped inside it.
"""
from __future__ import annotations

from typing import Any, Callable


def inner_scope(read: Callable[[Any, Any], Any]) -> Any:
    """A new stateless scope over the current one (the outer scope, or None): `read(variable, outer)` gives a
    variable's value there (None: the variable's own); updates and losses go to the outer scope."""
    import keras
    from keras.src.backend import get_stateless_scope

    outer = get_stateless_scope()

    class Inner(keras.StatelessScope):
        def __init__(self) -> None:
            super().__init__(collect_losses=getattr(outer, "collect_losses", False), initialize_variables=False)

        def get_current_value(self, variable: Any) -> Any:
            return read(variable, outer)

        def add_update(self, update: tuple) -> None:
            if outer is not None:
                outer.add_update(update)

        def add_loss(self, loss: Any) -> None:
            if outer is not None:
                outer.add_loss(loss)

    return Inner()
