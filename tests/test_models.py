"""Tests for jdist.models: shapes, pooling equivalence, causality, sharding rules."""
import dataclasses
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import traverse_util

from jdist.models import (
    CNN,
    MEGATRON_RULES,
    MLP,
    TransformerConfig,
    TransformerLM,
    classification_loss,
    lm_loss,
    max_pool_2x2,
)

SMALL_LM = TransformerConfig(vocab_size=64, d_model=32, num_heads=4, num_layers=2,
                             d_ff=64, max_len=16)


def flat_shapes(params) -> dict[str, tuple[int, ...]]:
    return {k: v.shape for k, v in traverse_util.flatten_dict(params, sep="/").items()}


def test_cnn_output_and_keras_param_shapes():
    model = CNN()
    x = jnp.zeros((2, 28, 28, 1), jnp.float32)
    params = model.init(jax.random.key(0), x)
    assert model.apply(params, x).shape == (2, 10)
    assert flat_shapes(params) == {
        "params/conv1/kernel": (3, 3, 1, 32),
        "params/conv1/bias": (32,),
        "params/conv2/kernel": (3, 3, 32, 64),
        "params/conv2/bias": (64,),
        "params/dense1/kernel": (7744, 64),  # 28 -> 26 -> 13 -> 11; 11*11*64.
        "params/dense1/bias": (64,),
        "params/dense2/kernel": (64, 10),
        "params/dense2/bias": (10,),
    }


def test_mlp_shapes_and_names():
    model = MLP()
    x = jnp.zeros((3, 28, 28, 1))
    params = model.init(jax.random.key(0), x)
    assert model.apply(params, x).shape == (3, 10)
    shapes = flat_shapes(params)
    assert shapes["params/dense_0/kernel"] == (784, 1024)
    assert shapes["params/dense_1/kernel"] == (1024, 1024)
    assert shapes["params/head/kernel"] == (1024, 10)
    assert MLP(features=(8,), num_classes=3).init(
        jax.random.key(0), jnp.zeros((1, 5)))["params"].keys() == {"dense_0", "head"}


@pytest.mark.parametrize("shape", [(2, 8, 8, 3), (1, 7, 9, 2)])
def test_max_pool_2x2_matches_flax(shape):
    x = jax.random.normal(jax.random.key(1), shape)  # random floats: no ties.
    reference = lambda x: nn.max_pool(x, (2, 2), strides=(2, 2), padding="VALID")  # noqa: E731
    np.testing.assert_array_equal(max_pool_2x2(x), reference(x))
    weights = jax.random.normal(jax.random.key(2), reference(x).shape)
    grad = lambda f: jax.grad(lambda x: jnp.sum(f(x) * weights))(x)  # noqa: E731
    np.testing.assert_array_equal(grad(max_pool_2x2), grad(reference))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_transformer_output_shape(dtype):
    cfg = dataclasses.replace(SMALL_LM, dtype=dtype)
    model = TransformerLM(cfg)
    tokens = jnp.zeros((2, 10), jnp.int32)
    params = model.init(jax.random.key(0), tokens)
    logits = model.apply(params, tokens)
    assert logits.shape == (2, 10, cfg.vocab_size)
    assert logits.dtype == dtype
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(params))


def test_transformer_is_causal():
    model = TransformerLM(SMALL_LM)
    tokens = jax.random.randint(jax.random.key(0), (1, 12), 0, SMALL_LM.vocab_size)
    params = model.init(jax.random.key(1), tokens)
    changed = tokens.at[0, 7].set((tokens[0, 7] + 1) % SMALL_LM.vocab_size)
    before, after = model.apply(params, tokens), model.apply(params, changed)
    np.testing.assert_allclose(before[:, :7], after[:, :7], rtol=1e-6, atol=1e-6)
    assert not np.allclose(before[:, 7:], after[:, 7:])


def test_attention_implementation_rule(monkeypatch):
    """auto: cuDNN's fused attention only on GPUs, in 16-bit compute, with a head size it supports."""
    from jdist.models import attention_implementation

    bf16 = dataclasses.replace(SMALL_LM, dtype=jnp.bfloat16)
    assert attention_implementation(bf16) == "xla"  # CPU
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert attention_implementation(bf16) == "cudnn"
    assert attention_implementation(dataclasses.replace(bf16, attention="xla")) == "xla"
    assert attention_implementation(SMALL_LM) == "xla"  # float32
    wide_heads = dataclasses.replace(bf16, d_model=320, num_heads=2)  # head size 160 > 128
    assert attention_implementation(wide_heads) == "xla"
    with pytest.raises(ValueError, match="attention='flash'"):
        dataclasses.replace(SMALL_LM, attention="flash")


def test_transformer_rejects_too_long_sequence():
    tokens = jnp.zeros((1, SMALL_LM.max_len + 1), jnp.int32)
    with pytest.raises(ValueError, match="max_len"):
        TransformerLM(SMALL_LM).init(jax.random.key(0), tokens)


def test_megatron_rules_cover_default_transformer():
    cfg = TransformerConfig()
    params = jax.eval_shape(TransformerLM(cfg).init, jax.random.key(0),
                            jnp.zeros((1, cfg.max_len), jnp.int32))
    shapes = flat_shapes(params)
    model_axis = 4
    for pattern, spec in MEGATRON_RULES:
        matched = [path for path in shapes if re.fullmatch(pattern, path)]
        assert matched, f"rule {pattern!r} matches no parameter"
        for path in matched:
            shape = shapes[path]
            assert len(spec) == len(shape), (path, spec, shape)
            for dim, axis in zip(shape, spec):
                if axis == "model":
                    assert dim % model_axis == 0, (path, shape, spec)
    # The main weights of every block are sharded.
    sharded = {p for p in shapes if any(re.fullmatch(r, p) for r, _ in MEGATRON_RULES)}
    assert "params/block_1/attn/out/kernel" in sharded
    assert "params/block_1/mlp/wo/kernel" in sharded
    assert "params/block_0/ln1/scale" not in sharded


def test_lm_loss_shape_and_mask():
    logits = jax.random.normal(jax.random.key(0), (3, 5, 7))
    targets = jax.random.randint(jax.random.key(1), (3, 5), 0, 7)
    per_token = -jnp.take_along_axis(
        jax.nn.log_softmax(logits), targets[..., None], axis=-1)[..., 0]
    loss = lm_loss(logits, targets)
    assert loss.shape == (3,)
    np.testing.assert_allclose(loss, per_token.mean(-1), rtol=1e-6)

    mask = jnp.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    masked = lm_loss(logits, targets, mask)
    np.testing.assert_allclose(masked[0], per_token[0, :2].mean(), rtol=1e-6)
    np.testing.assert_allclose(masked[1], per_token[1].mean(), rtol=1e-6)
    assert masked[2] == 0.0
    # Masked-out positions do not affect the loss at all.
    scrambled = targets.at[0, 2:].set(0)
    np.testing.assert_allclose(lm_loss(logits, scrambled, mask)[0], masked[0])


def test_classification_loss():
    logits = jnp.array([[0.0, 0.0], [10.0, -10.0]])
    loss = classification_loss(logits, jnp.array([1, 0]))
    assert loss.shape == (2,)
    np.testing.assert_allclose(loss, [np.log(2.0), 0.0], atol=1e-6)
