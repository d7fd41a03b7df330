"""A Keras optimizer made in a strategy's scope makes its slot variables in that scope, or fails as TF's does.

TF's Keras 3 optimizer remembers the strategy current when it was made, and makes each slot variable
(`add_variable_from_reference`: RMSprop's velocities, Adam's moments, SGD's momentum) colocated with its weight by
that strategy, which needs the strategy's scope (or a replica function of it): observed, TF 2.21 with Keras 3.15,
`RMSprop` made in a 2-replica MirroredStrategy's scope, then `build`, `apply_gradients` or a `tf.function` of it
called outside the scope raise `RuntimeError: Need to be inside "with strategy.scope()" for <MirroredStrategy ...>`
(as the mixed precision guide's custom loop does run outside `strategy.run`), where `SGD()` (no slots) and
`LossScaleOptimizer(SGD())` apply. jdist made such slots on one device, and a step later mixed them with the
mirrored weights ("Received incompatible devices for jitted computation"). Here, the same check as TF's, with
its error. Strategies that keep Keras variables in other processes (parameter servers) are left alone.
"""
from __future__ import annotations

import functools
from typing import Any


def install() -> None:
    """Wraps Keras's optimizer `__init__` (remembers the current jdist strategy) and `add_variable_from_reference`
    (checks it is current), once."""
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    if getattr(BaseOptimizer.add_variable_from_reference, "_jdist_scope", False):
        return
    init, add = BaseOptimizer.__init__, BaseOptimizer.add_variable_from_reference

    @functools.wraps(init)
    def remembering_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._jdist_strategy = _current()

    @functools.wraps(add)
    def add_in_scope(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            check_scope(self)
        except RuntimeError:
            self.built = False  # Keras's `build` marks it built before it makes the slots: built again in scope
            raise
        return add(self, *args, **kwargs)

    add_in_scope._jdist_scope = True  # pyright: ignore[reportAttributeAccessIssue]
    BaseOptimizer.__init__ = remembering_init
    BaseOptimizer.add_variable_from_reference = add_in_scope


def check_scope(optimizer: Any) -> None:
    """Raises TF's RuntimeError where `optimizer` was made in a strategy's scope and that strategy is not current."""
    from keras.src.distribution import distribution_lib

    made_in = getattr(optimizer, "_jdist_strategy", None)
    if made_in is None or _current() is made_in:
        return
    current = distribution_lib.distribution()  # `fit` and its kin run under the model's strategy (`keras_variables`)
    if current is not None and current is getattr(made_in, "_keras_distribution", None):
        return
    store = getattr(made_in, "keras_variable_store", None)
    if callable(store) and store() is not None:
        return
    raise RuntimeError(
        f'Need to be inside "with strategy.scope()" for {made_in!r}: the optimizer was made in that strategy\'s '
        "scope and makes its slot variables there. Build it or apply its first gradients inside "
        "`with strategy.scope():` (e.g. `optimizer.build(model.trainable_variables)`), or inside `strategy.run`.")


def _current() -> Any:
    """The current jdist strategy, or None where only the default strategy is."""
    from jdist.strategy import context

    return context.get_strategy() if context.has_strategy() else None
