"""Flax models used by the examples, tests and benchmarks.

Each is a ``flax.linen`` module, so ``params = model.init(key, x)`` and
``logits = model.apply(params, x)`` are pure functions.
"""
from .cnn import CNN
from .losses import classification_loss, lm_loss
from .mlp import MLP
from .pooling import max_pool_2x2
from .transformer import (
    MEGATRON_RULES,
    StackedTransformerLM,
    TransformerConfig,
    TransformerLM,
    attention_implementation,
)

__all__ = [
    "CNN",
    "MLP",
    "MEGATRON_RULES",
    "StackedTransformerLM",
    "TransformerConfig",
    "TransformerLM",
    "attention_implementation",
    "classification_loss",
    "lm_loss",
    "max_pool_2x2",
]
