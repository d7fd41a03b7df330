"""`tf.nn` and `tf.random`: activations and losses on numpy or JAX (see `jdist.tf_compat.ops`), host-side RNG."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jax.typing import DTypeLike

from jdist.strategy import context, function_trace
from jdist.tf_compat import kink_gradients, traced_random
from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.ops import convert_to_tensor, is_jax, xp
from jdist.tf_compat.replica_losses import compute_average_loss, scale_regularization_loss
from jdist.tfdata import seeding
from jdist.typing import ArrayLike, ShapeLike, Tensor, TensorLike


def _log_softmax(x: ArrayLike, axis: int) -> Tensor:
    module = xp(x)
    shifted = x - module.max(x, axis=axis, keepdims=True)
    return shifted - module.log(module.sum(module.exp(shifted), axis=axis, keepdims=True))


def log_softmax(logits: TensorLike, axis: int = -1, name: str | None = None) -> Tensor:
    return _log_softmax(convert_to_tensor(logits), axis)


def softmax(logits: TensorLike, axis: int = -1, name: str | None = None) -> Tensor:
    """`exp(x - max) * (1 / sum(exp(x - max)))`, in TF's kernel's order (TF 2.21: softmax([1., 2.]) is
    [0.26894143, 0.7310586]; the exponential of the log-softmax is a unit in the last place lower, 0.73105854)."""
    logits = convert_to_tensor(logits)
    module = xp(logits)
    shifted = logits - module.max(logits, axis=axis, keepdims=True)
    if is_jax(logits):
        powers = module.exp(shifted)
        return powers / module.sum(powers, axis=axis, keepdims=True)
    # numpy's float32 exp is a unit in the last place off (exp(-1)), TF's correctly rounded; TF's kernel
    # multiplies by the sum's reciprocal (softmax([1., 3.]) is 0.11920291, not the quotient's 0.11920292)
    powers = np.exp(shifted.astype(np.float64)).astype(shifted.dtype)
    return powers * (np.asarray(1, powers.dtype) / powers.sum(axis=axis, keepdims=True))


def relu(features: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(features)
    if is_jax(x):
        return kink_gradients.relu(x)  # slope 0 at 0, as TF's
    return xp(x).maximum(x, 0).astype(x.dtype)


def relu6(features: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(features)
    if is_jax(x):
        return kink_gradients.relu6(x)  # slope 0 at 0 and 6, as TF's
    return xp(x).clip(x, 0, 6).astype(x.dtype)


def sigmoid(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    return (1 / (1 + xp(x).exp(-x))).astype(x.dtype)


def tanh(x: TensorLike, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    return xp(x).tanh(x)


def sparse_softmax_cross_entropy_with_logits(labels: TensorLike, logits: TensorLike, name: str | None = None) -> Tensor:
    """Per example `-log softmax(logits)[label]` (TF's keyword-only use: `labels=`, `logits=`)."""
    labels, logits = convert_to_tensor(labels), convert_to_tensor(logits)
    module = xp(labels, logits)
    picked = module.take_along_axis(_log_softmax(logits, -1), module.expand_dims(labels, -1).astype(np.int32),
                                    axis=-1)
    return -module.squeeze(picked, -1)


def softmax_cross_entropy_with_logits(labels: TensorLike, logits: TensorLike, axis: int = -1,
                                      name: str | None = None) -> Tensor:
    labels, logits = convert_to_tensor(labels), convert_to_tensor(logits)
    module = xp(labels, logits)
    return -module.sum(module.multiply(labels, _log_softmax(logits, axis)), axis=axis)


def sigmoid_cross_entropy_with_logits(labels: TensorLike | None = None, logits: TensorLike | None = None,
                                      name: str | None = None) -> Tensor:
    """TF's stable form: `max(x, 0) - x * z + log(1 + exp(-|x|))`."""
    if labels is None or logits is None:  # TF's defaults are None so that both are passed by keyword
        raise ValueError("tf.nn.sigmoid_cross_entropy_with_logits needs both `labels` and `logits` (as in TF); "
                         f"got labels={labels!r}, logits={logits!r}")
    z, x = convert_to_tensor(labels), convert_to_tensor(logits)
    module = xp(z, x)
    return module.maximum(x, 0) - x * z + module.log1p(module.exp(-module.abs(x)))


def l2_loss(t: TensorLike, name: str | None = None) -> Tensor:
    t = convert_to_tensor(t)
    return xp(t).sum(t * t) / 2


def moments(x: TensorLike, axes: Sequence[int], shift: object = None, keepdims: bool = False,
            name: str | None = None) -> tuple[Tensor, Tensor]:
    """`tf.nn.moments`: mean and variance over `axes` (`shift` is unused, as in TF)."""
    x = convert_to_tensor(x)
    module = xp(x)
    mean = module.mean(x, axis=tuple(axes), keepdims=True)
    variance = module.mean(module.square(x - mean), axis=tuple(axes), keepdims=keepdims)
    return (mean if keepdims else module.squeeze(mean, axis=tuple(axes))), variance


def bias_add(value: TensorLike, bias: TensorLike, data_format: str | None = None, name: str | None = None) -> Tensor:
    """`value + bias` on the channel axis: the last (`N...C`, the default) or axis 1 (`NC...`), as TF's."""
    value, bias = convert_to_tensor(value), convert_to_tensor(bias)
    form = data_format or "N...C"
    if not (form.startswith("NC") or (form.startswith("N") and form.endswith("C"))):
        raise ValueError(f"`data_format` must be of the form `N...C` or `NC...`. Received: data_format={data_format}")
    axis = 1 if form.startswith("NC") else -1
    if np.ndim(bias) != 1 or np.ndim(value) < 2 or np.shape(value)[axis] != np.shape(bias)[0]:
        raise ValueError(f"bias_add: bias of shape {np.shape(bias)} must be 1-D and as long as the channel axis "
                         f"({'1' if axis == 1 else 'last'}, data_format={form}) of value, shape {np.shape(value)}.")
    if axis == 1:
        bias = bias.reshape((-1,) + (1,) * (np.ndim(value) - 2))
    return value + bias


def embedding_lookup(params: TensorLike, ids: TensorLike, max_norm: float | None = None,
                     name: str | None = None) -> Tensor:
    """Rows of `params` at `ids`; with `max_norm`, each looked-up embedding (all its dimensions) scaled down to
    that L2 norm where larger, as TF's."""
    params, ids = convert_to_tensor(params), convert_to_tensor(ids)
    m = xp(params, ids)
    rows = m.take(params, ids, axis=0)
    if max_norm is None:
        return rows
    axes = tuple(range(np.ndim(ids), np.ndim(rows)))
    norm = m.sqrt(m.sum(rows * rows, axis=axes, keepdims=True))
    return rows * m.minimum(1.0, max_norm / m.maximum(norm, np.finfo(np.float32).tiny))


NN = dict(
    compute_average_loss=compute_average_loss, scale_regularization_loss=scale_regularization_loss,
    softmax=softmax, log_softmax=log_softmax, relu=relu, relu6=relu6, sigmoid=sigmoid, tanh=tanh,
    sparse_softmax_cross_entropy_with_logits=sparse_softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits=softmax_cross_entropy_with_logits,
    sigmoid_cross_entropy_with_logits=sigmoid_cross_entropy_with_logits, l2_loss=l2_loss, moments=moments,
    bias_add=bias_add, embedding_lookup=embedding_lookup,
)

# ------------------------------------------------------------------ tf.random: host-side, numpy's generator
# TF 2.21 (observed, eager): two calls with the same op seed draw different numbers, the same sequence in every
# run; `set_seed` restarts every op seed's sequence. So each op seed has a generator that advances, made from the
# global seed and the op seed, and `set_seed` drops them. (The numbers are numpy's, not TF's.)
_GENERATOR = [np.random.default_rng()]
_GLOBAL_SEED: list[int | None] = [None]
_OP_GENERATORS: dict[int, np.random.Generator] = {}


def _host_only(name: str, seed: int | None) -> np.random.Generator:
    if is_jax(seed):
        raise ValueError(f"tf.random.{name}: `seed` must be a Python int (it draws on the host), got a JAX array")
    compiled = traced_random.generator(seed)  # a draw inside compiled code, run on the host (traced_random)
    if compiled is not None:
        return compiled
    in_dataset = seeding.op_generator(seed)  # inside a tf.data function: TF's per-pass sequence (seeding)
    if in_dataset is not None:
        return in_dataset
    if seed is None:
        return _GENERATOR[0]
    generator = _OP_GENERATORS.get(int(seed))
    if generator is None:
        entropy = int(seed) if _GLOBAL_SEED[0] is None else [int(_GLOBAL_SEED[0]), int(seed)]
        generator = _OP_GENERATORS[int(seed)] = np.random.default_rng(entropy)
    return generator


def _check_not_tracing(name: str) -> None:
    if traced_random.on_host():
        return
    function_trace.refuse(f"tf.random.{name}")  # a tf.function drawing on the host runs as Python: fresh draws
    if context.in_replica_context():
        raise RuntimeError(
            f"tf.random.{name} draws on the host and cannot run inside strategy.run: its numbers would be "
            "frozen into the compiled step. Inside a step use jax.random with a key passed in as an argument, "
            "or keras.random with a keras.random.SeedGenerator.")


def set_seed(seed: int) -> None:
    """`tf.random.set_seed`: seeds the generator behind `tf.random.uniform` / `normal` / `shuffle`, and restarts
    the sequence of every op seed."""
    _GENERATOR[0] = np.random.default_rng(seed)
    _GLOBAL_SEED[0] = seed
    _OP_GENERATORS.clear()
    seeding.set_global_seed(seed)  # tf.data's seedless shuffles too
    traced_random.reset(seed)  # and the draws inside compiled code


@traced_random.per_call
def uniform(shape: ShapeLike, minval: float = 0, maxval: float | None = None, dtype: DTypeLike = "float32",
            seed: int | None = None, name: str | None = None) -> np.ndarray:
    """`tf.random.uniform`: floats in [minval, maxval) (maxval 1 by default); ints need `maxval`, as in TF."""
    _check_not_tracing("uniform")
    target = numpy_dtype(dtype)
    rng = _host_only("uniform", seed)
    size = tuple(np.asarray(shape).reshape(-1).tolist())
    if target is not None and target.kind in "iu":
        if maxval is None:
            raise ValueError("tf.random.uniform with an integer dtype needs `maxval` (as in TF)")
        low, high = np.asarray(minval), np.asarray(maxval)
        if low.dtype.kind not in "iu" or high.dtype.kind not in "iu":  # numpy would truncate 0.5 to 0 and go on
            raise TypeError(f"tf.random.uniform with dtype {target}: `minval` and `maxval` must be ints (TF refuses "
                            f"floats: 'Cannot convert 0.5 to EagerTensor of dtype int32'); got {minval!r}, {maxval!r}")
        return rng.integers(low, high, size=size).astype(target)
    return rng.uniform(minval, 1.0 if maxval is None else maxval, size=size).astype(target)


@traced_random.per_call
def normal(shape: ShapeLike, mean: float = 0.0, stddev: float = 1.0, dtype: DTypeLike = "float32",
           seed: int | None = None, name: str | None = None) -> np.ndarray:
    _check_not_tracing("normal")
    rng = _host_only("normal", seed)
    return rng.normal(mean, stddev, size=tuple(np.asarray(shape).reshape(-1).tolist())).astype(numpy_dtype(dtype))


@traced_random.per_call
def shuffle(value: TensorLike, seed: int | None = None, name: str | None = None) -> np.ndarray:
    _check_not_tracing("shuffle")
    return _host_only("shuffle", seed).permutation(np.asarray(value))


RANDOM = dict(set_seed=set_seed, uniform=uniform, normal=normal, shuffle=shuffle)
