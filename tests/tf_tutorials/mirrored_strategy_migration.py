# TensorFlow's guide "Migrate single-worker multiple-GPU training" (tensorflow/docs,
# site/en/guide/migrate/mirrored_strategy.ipynb), its TF2 code cells in order, Copyright The TensorFlow Authors,
# Apache License 2.0. Changed: the two imports (marked), and the evaluation's result, which the notebook displays,
# printed (marked `was:`). Left out: the TF1 cell (`tf1.estimator.Estimator` with `tf1.layers`,
# `tf1.train.AdagradOptimizer`: jdist's `tf1.estimator` raises an error naming Keras `fit` and jdist.Trainer).
# Run with KERAS_BACKEND=jax; tests/test_tf_tutorials.py runs it on 8 simulated devices
# (XLA_FLAGS=--xla_force_host_platform_device_count=8).
import jdist.tf_compat as tf  # was: import tensorflow as tf
import jdist.tf_compat.compat.v1 as tf1  # was: import tensorflow.compat.v1 as tf1

features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]
eval_features = [[4., 4.5], [5., 5.5], [6., 6.5]]
eval_labels = [[0.8], [0.9], [1.]]

dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
eval_dataset = tf.data.Dataset.from_tensor_slices(
      (eval_features, eval_labels)).batch(1)

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
  model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
  optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)

model.compile(optimizer=optimizer, loss='mse')
model.fit(dataset)
print(model.evaluate(eval_dataset, return_dict=True))  # was: model.evaluate(eval_dataset, return_dict=True)
