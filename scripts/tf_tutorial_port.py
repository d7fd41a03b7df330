"""TensorFlow's "Custom training with tf.distribute.Strategy" tutorial, ported line by line.

    python scripts/tf_tutorial_port.py                      # 10 epochs, MirroredStrategy on 8 CPU devices
    python scripts/tf_tutorial_port.py --epochs 2 --train-examples 256 --test-examples 96

Written as TF users write the loop: `strategy.run(train_step)` reduced with SUM and summed into
`total_loss` that is read only when the epoch ends, metrics updated inside `run` and in a second
compiled step for the test set, nothing read inside the epoch. The data are scikit-learn's bundled
digits at 28x28 (the tutorial loads Fashion-MNIST, which would need a download); the model is the
tutorial's (two convolutions with pooling, L2-regularized). jdist bounds the programs it has in
flight (`jdist.dispatch`), which is what lets this loop run on a few-core CPU host.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--devices", type=int, default=8, help="simulated CPU devices (ignored on GPU/TPU)")
    parser.add_argument("--batch-size-per-replica", type=int, default=8)
    parser.add_argument("--train-examples", type=int, default=None, help="use only the first N training examples")
    parser.add_argument("--test-examples", type=int, default=None, help="use only the first N test examples")
    parser.add_argument("--strategy", default="mirrored", choices=["mirrored", "one_device"])
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def configure_devices(count: int) -> None:
    """Simulated CPU devices must be requested before JAX initialises its backends."""
    flag = f"--xla_force_host_platform_device_count={count}"
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()


def create_model():
    """The tutorial's `create_model()`: Conv(32)-pool-Conv(64)-pool-Dense(64)-Dense(10), L2 1e-5."""
    import flax.linen as nn

    class TutorialCNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(32, (3, 3), padding="VALID")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = nn.relu(nn.Conv(64, (3, 3), padding="VALID")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = x.reshape(x.shape[0], -1)
            x = nn.relu(nn.Dense(64)(x))
            return nn.Dense(10)(x)

    return TutorialCNN()


def model_losses(params):
    """Keras's `model.losses` for `kernel_regularizer=L2(1e-5)` on every layer."""
    import jax
    import jax.numpy as jnp

    kernels = [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(params)
               if getattr(path[-1], "key", None) == "kernel"]
    return [1e-5 * jnp.sum(jnp.square(k)) for k in kernels]


def tutorial(strategy, train, test, *, epochs: int, batch_size_per_replica: int, seed: int = 0,
             log=print) -> dict:
    """The tutorial's training loop on `strategy`; returns the per-epoch values it prints."""
    import jax
    import jax.numpy as jnp
    import optax

    import jdist

    (train_images, train_labels), (test_images, test_labels) = train, test

    BATCH_SIZE_PER_REPLICA = batch_size_per_replica
    GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
    EPOCHS = epochs

    train_dataset = jdist.ArrayDataset((train_images, train_labels), GLOBAL_BATCH_SIZE, shuffle=True, seed=seed)
    test_dataset = jdist.ArrayDataset((test_images, test_labels), GLOBAL_BATCH_SIZE)
    train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)
    test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset)

    with strategy.scope():
        loss_object = jdist.losses.sparse_categorical_crossentropy  # from_logits, reduction NONE

        def compute_loss(labels, predictions, model_losses):
            per_example_loss = loss_object(labels, predictions)
            loss = jdist.compute_average_loss(per_example_loss)
            if model_losses:
                loss += jdist.scale_regularization_loss(sum(model_losses))
            return loss

        test_loss = jdist.metrics.Mean(name="test_loss")
        train_accuracy = jdist.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        test_accuracy = jdist.metrics.SparseCategoricalAccuracy(name="test_accuracy")

        model = create_model()
        params = model.init(jax.random.key(seed), jnp.zeros((1,) + train_images.shape[1:], jnp.float32))
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(learning_rate=0.001))

    def train_step(state, train_accuracy_state, inputs):
        images, labels = inputs

        def loss_fn(params):
            predictions = state.apply_fn(params, images)
            return compute_loss(labels, predictions, model_losses(params)), predictions

        (loss, predictions), gradients = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=gradients)  # sums over the replicas first, as TF's optimizer
        train_accuracy_state = train_accuracy.update(train_accuracy_state, labels, predictions)
        return state, train_accuracy_state, loss

    def test_step(params, test_states, inputs):
        images, labels = inputs
        predictions = model.apply(params, images)
        t_loss = loss_object(labels, predictions)
        loss_state, accuracy_state = test_states
        return test_loss.update(loss_state, t_loss), test_accuracy.update(accuracy_state, labels, predictions)

    def distributed_train_step(state, train_accuracy_state, dataset_inputs):
        state, train_accuracy_state, per_replica_losses = strategy.run(
            train_step, args=(state, train_accuracy_state, dataset_inputs))
        return state, train_accuracy_state, strategy.reduce("sum", per_replica_losses, axis=None)

    def distributed_test_step(params, test_states, dataset_inputs):
        return strategy.run(test_step, args=(params, test_states, dataset_inputs))

    history: dict = {"loss": [], "accuracy": [], "test_loss": [], "test_accuracy": []}
    for epoch in range(EPOCHS):
        # TRAIN LOOP
        total_loss = 0.0
        num_batches = 0
        train_accuracy_state = train_accuracy.init()
        for x in train_dist_dataset:
            state, train_accuracy_state, loss = distributed_train_step(state, train_accuracy_state, x)
            total_loss += loss
            num_batches += 1
        train_loss = total_loss / num_batches

        # TEST LOOP
        test_states = (test_loss.init(), test_accuracy.init())
        for x in test_dist_dataset:
            test_states = distributed_test_step(state.params, test_states, x)

        values = (float(train_loss), float(train_accuracy.result(train_accuracy_state)) * 100,
                  float(test_loss.result(test_states[0])), float(test_accuracy.result(test_states[1])) * 100)
        for key, value in zip(history, values):
            history[key].append(value)
        log("Epoch {}, Loss: {:.4f}, Accuracy: {:.2f}, Test Loss: {:.4f}, Test Accuracy: {:.2f}".format(
            epoch + 1, *values))
    history["state"] = state
    return history


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_devices(args.devices)
    import jax

    import jdist
    from jdist import datasets

    train = datasets.load_digits("train", seed=args.seed)
    test = datasets.load_digits("test", seed=args.seed)
    train = tuple(a[: args.train_examples] for a in train)
    test = tuple(a[: args.test_examples] for a in test)
    strategy = (jdist.MirroredStrategy() if args.strategy == "mirrored"
                else jdist.OneDeviceStrategy(jax.devices()[0]))
    print(f"{strategy}: {len(train[0])} training and {len(test[0])} test examples, "
          f"global batch {args.batch_size_per_replica * strategy.num_replicas_in_sync}", flush=True)
    start = time.perf_counter()
    tutorial(strategy, train, test, epochs=args.epochs, batch_size_per_replica=args.batch_size_per_replica,
             seed=args.seed, log=lambda line: print(line, flush=True))
    print(f"done: {args.epochs} epochs in {time.perf_counter() - start:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
