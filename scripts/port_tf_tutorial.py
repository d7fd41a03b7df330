"""TensorFlow's "Custom training with tf.distribute.Strategy" tutorial, ported to jdist.

The same Keras model (Keras 3 on the JAX backend), loss, metrics, optimizer and loop as the
tutorial; docs/porting.md shows it next to the TensorFlow code and explains each changed
line. The data are scikit-learn's bundled digits upsampled to 28x28 (nothing is
downloaded) instead of Fashion-MNIST.

    python scripts/port_tf_tutorial.py            # 8 simulated CPU devices
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import jax
import keras
import numpy as np

import jdist
from jdist.datasets import load_digits


def create_model():
    regularizer = keras.regularizers.L2(1e-5)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation='relu', kernel_regularizer=regularizer),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation='relu', kernel_regularizer=regularizer),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation='relu', kernel_regularizer=regularizer),
        keras.layers.Dense(10, kernel_regularizer=regularizer)
    ])
    return model


def main(epochs: int = 10, shuffle: bool = True, initial_weights=None, max_steps: int | None = None) -> dict:
    """Trains as the tutorial does; returns the per-step losses and per-epoch results."""
    (train_images, train_labels), (test_images, test_labels) = load_digits("train"), load_digits("test")

    strategy = jdist.MirroredStrategy()
    print('Number of devices: {}'.format(strategy.num_replicas_in_sync))
    BATCH_SIZE_PER_REPLICA = 64
    GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
    EPOCHS = epochs

    train_dataset = jdist.ArrayDataset((train_images, train_labels), GLOBAL_BATCH_SIZE, shuffle=shuffle)
    test_dataset = jdist.ArrayDataset((test_images, test_labels), GLOBAL_BATCH_SIZE)
    train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)
    test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset)

    with strategy.scope():
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

        def compute_loss(labels, predictions, model_losses):
            per_example_loss = loss_object(labels, predictions)
            loss = jdist.compute_average_loss(per_example_loss)
            if model_losses:
                loss += jdist.scale_regularization_loss(sum(model_losses))
            return loss

        test_loss = jdist.metrics.Mean(name='test_loss')
        train_accuracy = jdist.metrics.SparseCategoricalAccuracy(name='train_accuracy')
        test_accuracy = jdist.metrics.SparseCategoricalAccuracy(name='test_accuracy')
        model = create_model()
        if initial_weights is not None:
            model.set_weights(initial_weights)
        optimizer = keras.optimizers.Adam(learning_rate=0.001)
        optimizer.build(model.trainable_variables)
        # JAX values are immutable: the step takes and returns the model, optimizer and metric state.
        state = {"trainable": [v.value for v in model.trainable_variables],
                 "non_trainable": [v.value for v in model.non_trainable_variables],
                 "optimizer": [v.value for v in optimizer.variables]}

    def train_step(state, acc, inputs):
        images, labels = inputs

        def loss_fn(trainable):
            predictions, _, losses = model.stateless_call(trainable, state["non_trainable"], images,
                                                          training=True, return_losses=True)
            return compute_loss(labels, predictions, losses), predictions

        (loss, predictions), gradients = jax.value_and_grad(loss_fn, has_aux=True)(state["trainable"])
        gradients = jdist.get_replica_context().all_reduce("sum", gradients)
        trainable, opt_vars = optimizer.stateless_apply(state["optimizer"], gradients, state["trainable"])
        acc = train_accuracy.update(acc, labels, predictions)
        return {**state, "trainable": trainable, "optimizer": opt_vars}, acc, loss

    def test_step(state, metrics, inputs):
        images, labels = inputs
        predictions, _ = model.stateless_call(state["trainable"], state["non_trainable"], images, training=False)
        t_loss = loss_object(labels, predictions)
        return (test_loss.update(metrics[0], t_loss), test_accuracy.update(metrics[1], labels, predictions))

    def distributed_train_step(state, acc, dataset_inputs):
        state, acc, per_replica_losses = strategy.run(train_step, args=(state, acc, dataset_inputs))
        return state, acc, strategy.reduce(jdist.ReduceOp.SUM, per_replica_losses, axis=None)

    def distributed_test_step(state, metrics, dataset_inputs):
        return strategy.run(test_step, args=(state, metrics, dataset_inputs))

    step_losses, results = [], []
    for epoch in range(EPOCHS):
        total_loss = 0.0
        num_batches = 0
        acc = train_accuracy.init()
        for x in train_dist_dataset:
            state, acc, loss = distributed_train_step(state, acc, x)
            step_losses.append(float(loss))
            total_loss += loss
            num_batches += 1
            if max_steps is not None and len(step_losses) >= max_steps:
                return {"step_losses": step_losses, "epochs": results}
        train_loss = total_loss / num_batches
        metrics = (test_loss.init(), test_accuracy.init())
        for x in test_dist_dataset:
            metrics = distributed_test_step(state, metrics, x)
        results.append([float(train_loss), float(train_accuracy.result(acc)), float(test_loss.result(metrics[0])),
                        float(test_accuracy.result(metrics[1]))])
        print("Epoch {}, Loss: {}, Accuracy: {}, Test Loss: {}, Test Accuracy: {}".format(epoch + 1, *results[-1]))
    return {"step_losses": step_losses, "epochs": results}


if __name__ == "__main__":
    main()
    sys.exit(0)
