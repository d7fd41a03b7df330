"""Small convolutional MNIST classifier, layer for layer the Keras tutorial one."""
from typing import Tuple

import flax.linen as nn
import jax

from .pooling import max_pool_2x2


class CNN(nn.Module):
    """Conv(32) -> pool -> Conv(64) -> Dense(64) -> Dense(num_classes).

    Takes NHWC images, ``(batch, 28, 28, 1)``, and returns logits. The
    submodules are named so parameter paths read ``params/conv1/kernel``,
    ``params/dense1/bias`` and so on, matching the Keras layer order.
    """

    num_classes: int = 10
    # conv1 filters, conv2 filters, dense1 units: the seed's (32, 64, 64); wider for cost studies.
    features: Tuple[int, int, int] = (32, 64, 64)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Conv(self.features[0], (3, 3), padding="VALID", name="conv1")(x))
        x = max_pool_2x2(x)
        x = nn.relu(nn.Conv(self.features[1], (3, 3), padding="VALID", name="conv2")(x))
        x = x.reshape(x.shape[0], -1)  # NHWC flatten, same order as Keras.
        x = nn.relu(nn.Dense(self.features[2], name="dense1")(x))
        return nn.Dense(self.num_classes, name="dense2")(x)
