# TensorFlow's guide "Migrate from TPUEstimator to TPUStrategy" (tensorflow/docs,
# site/en/guide/migrate/tpu_estimator.ipynb), its TF2 code cells in order, Copyright The TensorFlow Authors,
# Apache License 2.0. Changed: the two imports (marked), and the evaluation's result, which the notebook displays,
# printed (marked `was:`). Left out: the TF1 cells (`tf1.estimator.tpu`: jdist's `tf1.estimator` raises an error
# naming Keras `fit` and jdist.Trainer). Run with KERAS_BACKEND=jax. On a machine without TPUs it stops at the
# resolver, as TF 2.21 does; tests/test_tf_tutorials.py checks that, and runs the cells after it on CPU devices.
import jdist.tf_compat as tf  # was: import tensorflow as tf
import jdist.tf_compat.compat.v1 as tf1  # was: import tensorflow.compat.v1 as tf1

features = [[1., 1.5]]
labels = [[0.3]]
eval_features = [[4., 4.5]]
eval_labels = [[0.8]]

cluster_resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')
tf.config.experimental_connect_to_cluster(cluster_resolver)
tf.tpu.experimental.initialize_tpu_system(cluster_resolver)
print("All devices: ", tf.config.list_logical_devices('TPU'))

dataset = tf.data.Dataset.from_tensor_slices(
    (features, labels)).shuffle(10).repeat().batch(
        8, drop_remainder=True).prefetch(2)
eval_dataset = tf.data.Dataset.from_tensor_slices(
    (eval_features, eval_labels)).batch(1, drop_remainder=True)

strategy = tf.distribute.TPUStrategy(cluster_resolver)
with strategy.scope():
  model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
  optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
  model.compile(optimizer, "mse", steps_per_execution=10)

model.fit(dataset, epochs=5, steps_per_epoch=10)

print(model.evaluate(eval_dataset, return_dict=True))  # was: model.evaluate(eval_dataset, return_dict=True)
