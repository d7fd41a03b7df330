# TensorFlow's guide "Migrate evaluation" (tensorflow/docs, site/en/guide/migrate/evaluator.ipynb), its TF2 code
# cells in order, Copyright The TensorFlow Authors, Apache License 2.0. Changed: the two imports (marked) and the
# MNIST download, replaced by scikit-learn's bundled digits (marked `was:`; TensorFlow got the same arrays).
# Left out: the TF1 cell (`tf1.estimator.DNNClassifier`, `tf1.feature_column`: jdist's `tf1.estimator` raises an
# error naming Keras `fit` and jdist.Trainer). Added: the last line prints the checkpoint directory's files.
# Run with KERAS_BACKEND=jax; tests/test_tf_tutorials.py runs it and compares with TF 2.21 (tf_keras).
import jdist.tf_compat.compat.v1 as tf1  # was: import tensorflow.compat.v1 as tf1
import jdist.tf_compat as tf  # was: import tensorflow as tf
import numpy as np
import tempfile
import time
import os

# was: mnist = tf.keras.datasets.mnist
# was: (x_train, y_train),(x_test, y_test) = mnist.load_data()
from jdist.datasets import load_digits  # scikit-learn's digits at 28x28, as uint8 (N, 28, 28) like load_data()
(x_train, y_train), (x_test, y_test) = [
    ((x[..., 0] * 255).round().astype("uint8"), y.astype("uint8")) for x, y in (load_digits("train"), load_digits("test"))]
x_train, x_test = x_train / 255.0, x_test / 255.0

def create_model():
  return tf.keras.models.Sequential([
    tf.keras.layers.Flatten(input_shape=(28, 28)),
    tf.keras.layers.Dense(512, activation='relu'),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(10)
  ])

loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

model = create_model()
model.compile(optimizer='adam',
              loss=loss,
              metrics=['accuracy'],
              steps_per_execution=10,
              run_eagerly=True)

log_dir = tempfile.mkdtemp()
model_checkpoint = tf.keras.callbacks.ModelCheckpoint(
    filepath=os.path.join(log_dir, 'ckpt-{epoch}'),
    save_weights_only=True)

model.fit(x=x_train,
          y=y_train,
          epochs=1,
          callbacks=[model_checkpoint])

data = tf.data.Dataset.from_tensor_slices((x_test, y_test))
data = data.batch(64)

tf.keras.utils.SidecarEvaluator(
    model=model,
    data=data,
    checkpoint_dir=log_dir,
    max_evaluations=1
).start()
print(sorted(os.listdir(log_dir)))  # added: the checkpoints written
