"""`tf.keras.mixed_precision.LossScaleOptimizer.apply` as TF runs it, on Keras's JAX backend.

Keras 3's stateful `apply` assigns the loss scale, its counter and the inner optimizer's variables inside
`ops.cond` branches; on JAX those branches are traced functions, so the assignments leak tracers (an eager
call and a compiled step both failed). TF 2.21 skips the step, halves the scale and resets the counter where a
gradient is not finite, and otherwise unscales, applies and grows the scale every `dynamic_growth_steps` steps
(observed). The same update is computed here from Keras's stateless steps: both outcomes, outside any branch
(so that the inner optimizer's cross-replica sum runs on every replica), and the finite check picks one. This
module imports Keras; it is loaded only with `tf.keras`.
"""
from __future__ import annotations

from typing import Any

import jax
import keras


def install() -> None:
    """Makes `LossScaleOptimizer.apply` compute its update from the stateless steps (once)."""
    optimizer_class = keras.optimizers.LossScaleOptimizer
    if not getattr(optimizer_class.apply, "_jdist", False):
        apply._jdist = True  # pyright: ignore[reportFunctionMemberAccess]
        optimizer_class.apply = apply


def apply(self: Any, grads: Any, trainable_variables: Any = None) -> None:
    """Unscales and applies `grads` where all are finite, else skips the step; updates the dynamic scale."""
    if not self.built:
        with keras.name_scope(self.name, caller=self):
            self.build(trainable_variables)
        self.built = True
    built = self._trainable_variables
    given = built if trainable_variables is None else list(trainable_variables)
    by_index = {self._get_variable_index(v): g for g, v in zip(grads, given)}
    grads = [by_index.get(i) for i in range(len(built))]
    own, values = [v.value for v in self.variables], [v.value for v in built]
    finite = self.check_finite(grads)
    applied = self._stateless_handle_finite_grads(own, grads, values)
    skipped = self._stateless_handle_non_finite_grads(own, values)
    for variable, new, old in zip([*built, *self.variables], [*applied[0], *applied[1]],
                                  [*skipped[0], *skipped[1]]):
        variable.assign(jax.numpy.where(finite, new, old))
