"""Keras 3 and TensorFlow idioms on jdist strategies.

`keras_distribution` (Keras's own `fit` in `strategy.scope()`), `keras_model` (Keras models in `jdist.Trainer`),
`keras_run` (Keras objects used statefully inside `strategy.run`), `gradient_tape` (`tf.GradientTape`),
`tf_function` (`@tf.function`). `jdist.tf_compat` gathers them under TensorFlow's names.
"""
