"""Small decoder-only causal language model with Megatron-style sharding rules.

The attention and MLP weights keep heads and hidden units on their own axes,
so a tensor-parallel layout is a matter of naming which axis goes on the
"model" mesh axis (see ``MEGATRON_RULES``): column-parallel layers split their
output dimension, the row-parallel layer after each splits its input
dimension, and the activations between them never need gathering.
"""
import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .losses import lm_loss

__all__ = ["TransformerConfig", "TransformerLM", "StackedTransformerLM", "MEGATRON_RULES", "attention_implementation",
           "lm_loss", "stack_params", "unstack_params"]


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters; ``dtype`` is the compute dtype (parameters stay float32)."""

    vocab_size: int = 256
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 512
    max_len: int = 128
    dtype: Any = jnp.float32
    # "xla": attention as einsums and a float32 softmax (any backend). "cudnn": cuDNN's fused (flash)
    # attention, NVIDIA GPUs with bf16/f16 compute only. "auto": cuDNN where it applies (JAX's default
    # backend a GPU), else XLA.
    attention: str = "auto"

    def __post_init__(self):
        if self.attention not in ("auto", "xla", "cudnn"):
            raise ValueError(f"attention={self.attention!r}: expected 'auto', 'xla' or 'cudnn'")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by "
                f"num_heads={self.num_heads}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


def attention_implementation(cfg: TransformerConfig) -> str:
    """cuDNN's fused attention needs an NVIDIA GPU, 16-bit compute and a head size it supports."""
    if cfg.attention != "auto":
        return cfg.attention
    half = jnp.dtype(cfg.dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
    gpu = jax.default_backend() == "gpu"
    return "cudnn" if gpu and half and cfg.head_dim % 8 == 0 and cfg.head_dim <= 128 else "xla"


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention; each position sees itself and earlier ones.

    Kernels: query/key/value ``(d_model, num_heads, head_dim)``, out
    ``(num_heads, head_dim, d_model)``.
    """

    config: TransformerConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        proj = lambda name: nn.DenseGeneral(  # noqa: E731
            (cfg.num_heads, cfg.head_dim), dtype=cfg.dtype, name=name)
        q, k, v = proj("query")(x), proj("key")(x), proj("value")(x)
        if attention_implementation(cfg) == "cudnn":  # no (seq, seq) scores in memory
            out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
            return nn.DenseGeneral(cfg.d_model, axis=(-2, -1), dtype=cfg.dtype, name="out")(out)
        q = q * cfg.head_dim**-0.5
        # Softmax in float32 whatever the compute dtype.
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32)
        seq = x.shape[-2]
        causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
        weights = jax.nn.softmax(scores, axis=-1).astype(cfg.dtype)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, v)
        return nn.DenseGeneral(
            cfg.d_model, axis=(-2, -1), dtype=cfg.dtype, name="out")(out)


class MlpBlock(nn.Module):
    """Feed-forward: ``wi`` (column-parallel), gelu, ``wo`` (row-parallel)."""

    config: TransformerConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        h = nn.gelu(nn.Dense(cfg.d_ff, dtype=cfg.dtype, name="wi")(x))
        return nn.Dense(cfg.d_model, dtype=cfg.dtype, name="wo")(h)


class DecoderBlock(nn.Module):
    """Pre-LayerNorm residual block: attention, then MLP."""

    config: TransformerConfig

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.config
        h = nn.LayerNorm(dtype=cfg.dtype, name="ln1")(x)
        x = x + CausalSelfAttention(cfg, name="attn")(h)
        h = nn.LayerNorm(dtype=cfg.dtype, name="ln2")(x)
        return x + MlpBlock(cfg, name="mlp")(h)


def _embed(cfg: TransformerConfig, tokens: jax.Array) -> jax.Array:
    """Token plus position embeddings; called inside a model's compact `__call__`, so the
    `embed`/`pos_embed` parameters belong to that model (`TransformerLM` and `StackedTransformerLM` alike)."""
    seq = tokens.shape[-1]
    if seq > cfg.max_len:
        raise ValueError(f"sequence length {seq} exceeds max_len={cfg.max_len}")
    embed = nn.Embed(cfg.vocab_size, cfg.d_model, dtype=cfg.dtype, name="embed")
    pos_embed = nn.Embed(cfg.max_len, cfg.d_model, dtype=cfg.dtype, name="pos_embed")
    return embed(tokens) + pos_embed(jnp.arange(seq))


def _head(cfg: TransformerConfig, x: jax.Array) -> jax.Array:
    """Final LayerNorm and the vocabulary projection, untied from `embed` so the two can be
    sharded independently."""
    x = nn.LayerNorm(dtype=cfg.dtype, name="ln_final")(x)
    return nn.Dense(cfg.vocab_size, dtype=cfg.dtype, name="lm_head")(x)


class TransformerLM(nn.Module):
    """Maps int tokens ``(batch, seq)`` to next-token logits ``(batch, seq, vocab)``.

    ``seq`` may be anything up to ``config.max_len``.
    """

    config: TransformerConfig

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        cfg = self.config
        x = _embed(cfg, tokens)
        for i in range(cfg.num_layers):
            x = DecoderBlock(cfg, name=f"block_{i}")(x)
        return _head(cfg, x)


# Tensor-parallel layout over a mesh axis named "model", as (regex, spec)
# pairs. Each regex must match a whole '/'-joined parameter path such as
# "params/block_0/attn/query/kernel". Parameters no rule matches (LayerNorm
# scales and biases, the out/wo biases that are added after the reduction)
# are meant to be replicated.
MEGATRON_RULES: list[tuple[str, P]] = [
    # Embedding tables (rows, d_model) split on the feature dimension: the
    # lookup is then a purely local gather and the residual stream comes out
    # sharded on features, while any vocabulary size works (splitting rows
    # would need vocab_size divisible by the mesh axis and a masked lookup
    # plus all-reduce).
    (r"(?:.*/)?(?:embed|pos_embed)/embedding", P(None, "model")),
    # Column-parallel: each device holds whole heads.
    (r".*/attn/(?:query|key|value)/kernel", P(None, "model", None)),
    (r".*/attn/(?:query|key|value)/bias", P("model", None)),
    # Row-parallel: consumes local heads, partial sums are all-reduced.
    (r".*/attn/out/kernel", P("model", None, None)),
    (r".*/mlp/wi/kernel", P(None, "model")),
    (r".*/mlp/wi/bias", P("model")),
    (r".*/mlp/wo/kernel", P("model", None)),
    # Output projection split over the vocabulary (logits sharded on vocab).
    (r"(?:.*/)?lm_head/kernel", P(None, "model")),
    (r"(?:.*/)?lm_head/bias", P("model")),
]


# ------------------------------------------------------------ stacked blocks
def _init_stack(config: TransformerConfig) -> Any:
    """Initialiser of `num_layers` DecoderBlocks' parameters stacked on a leading layer axis."""

    def init(rng: jax.Array, x: jax.Array) -> Any:
        keys = jax.random.split(rng, config.num_layers)
        # One compiled program, not one dispatch per operation when called eagerly.
        return jax.jit(jax.vmap(lambda k, x: DecoderBlock(config).init(k, x)["params"], in_axes=(0, None)))(keys, x)

    return init


class StackedTransformerLM(nn.Module):
    """`TransformerLM` with its decoder blocks as one stack of identical layers.

    The blocks' parameters are one tree `blocks` whose leaves have a leading
    `num_layers` dimension, applied by `jdist.pipeline.apply_blocks`: a scan over the
    layers, or pipelined over a strategy's `stage` axis. Same computation as
    `TransformerLM`; `stack_params`/`unstack_params` convert between the two.
    """

    config: TransformerConfig

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        from jdist.pipeline import apply_blocks, sequential

        cfg = self.config
        x = _embed(cfg, tokens)
        blocks = self.param("blocks", _init_stack(cfg), x)
        block = lambda p, h: DecoderBlock(cfg).apply({"params": p}, h)  # noqa: E731
        x = (sequential if self.is_initializing() else apply_blocks)(block, blocks, x)
        return _head(cfg, x)


def stack_params(params: Any, num_layers: int) -> Any:
    """`TransformerLM` parameters (`block_0` ... `block_{L-1}`) as `StackedTransformerLM`'s (`blocks`)."""
    inner = params["params"] if "params" in params else params
    rest = {k: v for k, v in inner.items() if not k.startswith("block_")}
    blocks = jax.tree.map(lambda *xs: jnp.stack(xs), *[inner[f"block_{i}"] for i in range(num_layers)])
    out = {**rest, "blocks": blocks}
    return {"params": out} if "params" in params else out


def unstack_params(params: Any) -> Any:
    """`StackedTransformerLM` parameters as `TransformerLM`'s."""
    inner = params["params"] if "params" in params else params
    num_layers = jax.tree.leaves(inner["blocks"])[0].shape[0]
    out = {k: v for k, v in inner.items() if k != "blocks"}
    for i in range(num_layers):
        out[f"block_{i}"] = jax.tree.map(lambda x, i=i: x[i], inner["blocks"])
    return {"params": out} if "params" in params else out
