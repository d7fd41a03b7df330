"""tf_keras's legacy optimizers whose update rule differs from Keras 3's optimizer of the same name.

`tf.keras.optimizers.legacy.X` (TF 2.21, TF_USE_LEGACY_KERAS=1) is served by Keras 3's `X`
where both compute the same update (observed: SGD, Adam, Adagrad, Adadelta, Adamax, Ftrl
and RMSprop with momentum agree to float32 rounding after two steps). Nadam does not: tf_keras's
momentum schedule is `beta_1 * (1 - 0.5 * 0.96 ** (schedule_decay * step))` with `schedule_decay`
0.004, where Keras 3 uses `0.96 ** step`; they differ in the third digit from the second step.
tf_keras's RMSprop without momentum does not: it divides by
`sqrt(rms) + epsilon`, where Keras 3 (and TF's `ResourceApplyRMSProp`, which tf_keras uses
only with momentum) divides by `sqrt(rms + epsilon)`. With the default epsilon 1e-7 the two
differ wherever gradients are near 1e-3 or smaller: there Keras 3's step shrinks and
tf_keras's stays near `lr / sqrt(1 - rho)`.

tf_keras's RMSprop without momentum also updates in three steps, not one op: it reads the
variable and its `rms` slot, computes, and assigns both. Under `ParameterServerStrategy` the
reads and assignments travel between worker and server, and an update another worker
assigns in between is overwritten (TF 2.21: 30 scheduled updates on 3 workers moved a
variable as far as 20 in a row; with momentum, one fused op on the server, all 30 counted).
`applied_from_step_reads` tells jdist's servers to do the same: compute the update from the
values the worker loaded and write the result over theirs. This module imports Keras; it is
loaded only with `tf.keras`.
"""
from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="jdist.legacy")
class RMSprop(keras.optimizers.RMSprop):
    """tf_keras's `optimizers.legacy.RMSprop`: without momentum the step is `lr * g / (sqrt(rms) + epsilon)`
    (`sqrt(rms - mg**2) + epsilon` when centered); with momentum Keras 3's rule, which is TF's there."""

    @property
    def applied_from_step_reads(self) -> bool:
        """Whether TF computes the update from the values its step read and assigns the result (no momentum)
        rather than in one op on the server (momentum: `ResourceApplyRMSProp`)."""
        return not self.momentum > 0

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        if self.momentum > 0:  # tf_keras: ResourceApplyRMSProp, epsilon under the root as in Keras 3
            super().update_step(gradient, variable, learning_rate)
            return
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        index = self._get_variable_index(variable)
        velocity = self._velocities[index]
        self.assign(velocity, ops.add(ops.multiply(self.rho, velocity),
                                      ops.multiply(1 - self.rho, ops.square(gradient))))
        denominator = velocity
        if self.centered:
            average_grad = self._average_gradients[index]
            self.assign(average_grad, ops.add(ops.multiply(self.rho, average_grad),
                                              ops.multiply(1 - self.rho, gradient)))
            denominator = ops.subtract(velocity, ops.square(average_grad))
        self.assign_sub(variable, ops.divide(ops.multiply(lr, gradient),
                                             ops.add(ops.sqrt(denominator), self.epsilon)))


@keras.saving.register_keras_serializable(package="jdist.legacy")
class Nadam(keras.optimizers.Nadam):
    """tf_keras's `optimizers.legacy.Nadam`: Keras 3's update with tf_keras's momentum schedule,
    `beta_1 * (1 - 0.5 * 0.96 ** (schedule_decay * step))` (schedule_decay 0.004, its `decay` in get_config)."""

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, name: str = "Nadam", schedule_decay: float = 0.004, **kwargs: Any):
        if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):  # TF 2.21's refusal
            raise ValueError("The Nadam optimizer does not support tf.keras.optimizers.LearningRateSchedules as "
                             "the learning rate.")
        super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, name=name,
                         **kwargs)
        self.schedule_decay = schedule_decay

    def _momentum(self, step: Any, dtype: Any) -> Any:
        schedule: Any = ops.power(ops.cast(0.96, dtype), self.schedule_decay * step)
        return self.beta_1 * (1.0 - 0.5 * schedule)

    def _step(self, ahead: int, dtype: Any) -> Any:
        """The step number `ahead` steps after the iterations done (1: the step being taken)."""
        iterations: Any = self.iterations
        return ops.cast(iterations + ahead, dtype)

    def _backend_update_step(self, grads: Any, trainable_variables: Any, learning_rate: Any) -> None:
        dtype = self._u_product.dtype
        self.assign(self._u_product,
                    self._u_product * self._momentum(self._step(1, dtype), dtype))
        super(keras.optimizers.Nadam, self)._backend_update_step(grads, trainable_variables, learning_rate)

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        u_t = self._momentum(self._step(1, dtype), dtype)
        u_t_1 = self._momentum(self._step(2, dtype), dtype)
        u_product_t: Any = ops.cast(self._u_product, dtype)
        u_product_t_1 = u_product_t * u_t_1
        beta_2_power: Any = ops.power(ops.cast(self.beta_2, dtype), self._step(1, dtype))
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        m_hat = ops.add(ops.divide(ops.multiply(u_t_1, m), 1 - u_product_t_1),
                        ops.divide(ops.multiply(1 - u_t, gradient), 1 - u_product_t))
        v_hat = ops.divide(v, 1 - beta_2_power)
        self.assign_sub(variable, ops.divide(ops.multiply(m_hat, lr), ops.add(ops.sqrt(v_hat), self.epsilon)))

    def get_config(self) -> dict:
        return {**super().get_config(), "schedule_decay": self.schedule_decay}
