"""`tf.nn` and `tf.random`: activations and losses on numpy or JAX (see `jdist.tf_compat.ops`), host-side RNG."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jdist.losses import compute_average_loss, scale_regularization_loss
from jdist.strategy import context
from jdist.tf_compat.dtypes import numpy_dtype
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp


def _log_softmax(x: Any, axis: int) -> Any:
    module = xp(x)
    shifted = x - module.max(x, axis=axis, keepdims=True)
    return shifted - module.log(module.sum(module.exp(shifted), axis=axis, keepdims=True))


def log_softmax(logits: Any, axis: int = -1, name: str | None = None) -> Any:
    return _log_softmax(convert_to_tensor(logits), axis)


def softmax(logits: Any, axis: int = -1, name: str | None = None) -> Any:
    logits = convert_to_tensor(logits)
    return xp(logits).exp(_log_softmax(logits, axis))


def relu(features: Any, name: str | None = None) -> Any:
    x = convert_to_tensor(features)
    return xp(x).maximum(x, 0).astype(x.dtype)


def relu6(features: Any, name: str | None = None) -> Any:
    x = convert_to_tensor(features)
    return xp(x).clip(x, 0, 6).astype(x.dtype)


def sigmoid(x: Any, name: str | None = None) -> Any:
    x = convert_to_tensor(x)
    return (1 / (1 + xp(x).exp(-x))).astype(x.dtype)


def tanh(x: Any, name: str | None = None) -> Any:
    x = convert_to_tensor(x)
    return xp(x).tanh(x)


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: Any, name: str | None = None) -> Any:
    """Per example `-log softmax(logits)[label]` (TF's keyword-only use: `labels=`, `logits=`)."""
    labels, logits = convert_to_tensor(labels), convert_to_tensor(logits)
    module = xp(labels, logits)
    picked = module.take_along_axis(_log_softmax(logits, -1), module.expand_dims(labels, -1).astype(np.int32),
                                    axis=-1)
    return -module.squeeze(picked, -1)


def softmax_cross_entropy_with_logits(labels: Any, logits: Any, axis: int = -1, name: str | None = None) -> Any:
    labels, logits = convert_to_tensor(labels), convert_to_tensor(logits)
    return -xp(labels, logits).sum(labels * _log_softmax(logits, axis), axis=axis)


def sigmoid_cross_entropy_with_logits(labels: Any = None, logits: Any = None, name: str | None = None) -> Any:
    """TF's stable form: `max(x, 0) - x * z + log(1 + exp(-|x|))`."""
    z, x = convert_to_tensor(labels), convert_to_tensor(logits)
    module = xp(z, x)
    return module.maximum(x, 0) - x * z + module.log1p(module.exp(-module.abs(x)))


def l2_loss(t: Any, name: str | None = None) -> Any:
    t = convert_to_tensor(t)
    return xp(t).sum(t * t) / 2


def moments(x: Any, axes: Sequence[int], shift: Any = None, keepdims: bool = False, name: str | None = None) -> tuple:
    x = convert_to_tensor(x)
    module = xp(x)
    mean = module.mean(x, axis=tuple(axes), keepdims=True)
    variance = module.mean(module.square(x - mean), axis=tuple(axes), keepdims=keepdims)
    return (mean if keepdims else module.squeeze(mean, axis=tuple(axes))), variance


def bias_add(value: Any, bias: Any, data_format: str | None = None, name: str | None = None) -> Any:
    return convert_to_tensor(value) + convert_to_tensor(bias)


def embedding_lookup(params: Any, ids: Any, max_norm: Any = None, name: str | None = None) -> Any:
    params, ids = convert_to_tensor(params), convert_to_tensor(ids)
    return xp(params, ids).take(params, ids, axis=0)


NN = dict(
    compute_average_loss=compute_average_loss, scale_regularization_loss=scale_regularization_loss,
    softmax=softmax, log_softmax=log_softmax, relu=relu, relu6=relu6, sigmoid=sigmoid, tanh=tanh,
    sparse_softmax_cross_entropy_with_logits=sparse_softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits=softmax_cross_entropy_with_logits,
    sigmoid_cross_entropy_with_logits=sigmoid_cross_entropy_with_logits, l2_loss=l2_loss, moments=moments,
    bias_add=bias_add, embedding_lookup=embedding_lookup,
)

# ------------------------------------------------------------------ tf.random: host-side, numpy's generator
_GENERATOR = [np.random.default_rng()]


def _host_only(name: str, seed: Any) -> np.random.Generator:
    if is_jax(seed):
        raise ValueError(f"tf.random.{name}: `seed` must be a Python int (it draws on the host), got a JAX array")
    return _GENERATOR[0] if seed is None else np.random.default_rng(seed)


def _check_not_tracing(name: str) -> None:
    if context.in_replica_context():
        raise RuntimeError(
            f"tf.random.{name} draws on the host and cannot run inside strategy.run: its numbers would be "
            "frozen into the compiled step. Inside a step use jax.random with a key passed in as an argument, "
            "or keras.random with a keras.random.SeedGenerator.")


def set_seed(seed: int) -> None:
    """`tf.random.set_seed`: seeds the generator behind `tf.random.uniform` / `normal` / `shuffle`."""
    _GENERATOR[0] = np.random.default_rng(seed)


def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = "float32", seed: Any = None,
            name: str | None = None) -> np.ndarray:
    """`tf.random.uniform`: floats in [minval, maxval) (maxval 1 by default); ints need `maxval`, as in TF."""
    _check_not_tracing("uniform")
    target = numpy_dtype(dtype)
    rng = _host_only("uniform", seed)
    shape = tuple(np.asarray(shape).reshape(-1).tolist())
    if target is not None and target.kind in "iu":
        if maxval is None:
            raise ValueError("tf.random.uniform with an integer dtype needs `maxval` (as in TF)")
        return rng.integers(minval, maxval, size=shape).astype(target)
    return rng.uniform(minval, 1.0 if maxval is None else maxval, size=shape).astype(target)


def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = "float32", seed: Any = None,
           name: str | None = None) -> np.ndarray:
    _check_not_tracing("normal")
    rng = _host_only("normal", seed)
    return rng.normal(mean, stddev, size=tuple(np.asarray(shape).reshape(-1).tolist())).astype(numpy_dtype(dtype))


def shuffle(value: Any, seed: Any = None, name: str | None = None) -> np.ndarray:
    _check_not_tracing("shuffle")
    return _host_only("shuffle", seed).permutation(np.asarray(value))


RANDOM = dict(set_seed=set_seed, uniform=uniform, normal=normal, shuffle=shuffle)
