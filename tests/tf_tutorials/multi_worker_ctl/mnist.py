# TensorFlow's "Custom training loop with Keras and MultiWorkerMirroredStrategy" tutorial (tensorflow/docs,
# site/en/tutorials/distribute/multi_worker_with_ctl.ipynb): its mnist.py, Copyright The TensorFlow Authors,
# Apache License 2.0. Changed: the import (marked) and the MNIST download, replaced by scikit-learn's bundled
# digits as 28x28 uint8 arrays repeated to MNIST's 60,000 training examples (3 lines marked `was:`; the
# tutorial runs 70 steps per epoch without repeating its data; TensorFlow got the same arrays).

import os
import jdist.tf_compat as tf  # was: import tensorflow as tf
import numpy as np

def mnist_dataset(batch_size):
  # was: (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
  from jdist.datasets import load_digits
  x_train, y_train = load_digits("train"); x_train = (x_train[..., 0] * 255).round().astype(np.uint8)
  x_train, y_train = np.resize(x_train, (60000, 28, 28)), np.resize(y_train, 60000)
  # The `x` arrays are in uint8 and have values in the range [0, 255].
  # You need to convert them to float32 with values in the range [0, 1]
  x_train = x_train / np.float32(255)
  y_train = y_train.astype(np.int64)
  train_dataset = tf.data.Dataset.from_tensor_slices(
      (x_train, y_train)).shuffle(60000)
  return train_dataset

def dataset_fn(global_batch_size, input_context):
  batch_size = input_context.get_per_replica_batch_size(global_batch_size)
  dataset = mnist_dataset(batch_size)
  dataset = dataset.shard(input_context.num_input_pipelines,
                          input_context.input_pipeline_id)
  dataset = dataset.batch(batch_size)
  return dataset

def build_cnn_model():
  regularizer = tf.keras.regularizers.L2(1e-5)
  return tf.keras.Sequential([
      tf.keras.Input(shape=(28, 28)),
      tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
      tf.keras.layers.Conv2D(32, 3,
                             activation='relu',
                             kernel_regularizer=regularizer),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(128,
                            activation='relu',
                            kernel_regularizer=regularizer),
      tf.keras.layers.Dense(10, kernel_regularizer=regularizer)
  ])
