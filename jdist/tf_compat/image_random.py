"""`tf.image`'s random augmentations: `random_*` on the host, `stateless_random_*` anywhere.

`random_flip_left_right`, `random_crop`, `random_brightness`, ... draw with `tf.random`'s host generators (an op
`seed` starts a sequence that repeats from run to run, as TF's; see `nn_ops`), which is what a `tf.data` map
function wants. Inside compiled code a host draw would be frozen into the program, so there they raise and name
the `stateless_random_*` op, whose numbers are a function of a `seed` of shape [2] that may be a traced value
(TF's recommended form: `seed = rng.make_seeds(2)[:, 0]` per element). A batch draws once per image for the
flips (TF 2.21: each image of a batch flipped or not on its own) and once for the whole batch otherwise.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jdist.strategy import context
from jdist.tf_compat.image_ops import (
    adjust_brightness,
    adjust_contrast,
    at_least_3d,
    flip_left_right,
    flip_up_down,
)
from jdist.tf_compat.nn_ops import _host_only
from jdist.tf_compat.ops import convert_to_tensor, is_jax
from jdist.tf_compat.random_ops import stateless_uniform
from jdist.typing import ArrayLike, Tensor, TensorLike


def _host_draw(op: str, image: ArrayLike, seed: int | None) -> np.random.Generator:
    """The host generator for `op`, refused inside compiled code."""
    if context.in_replica_context() or isinstance(image, jax.core.Tracer):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError(f"tf.image.{op} draws on the host, so inside compiled code its numbers would be frozen "
                         f"into the program; use tf.image.stateless_{op}(..., seed=seed) with a seed of shape [2] "
                         "passed into the step (a new one each step)")
    return _host_only(f"image.{op}", seed)


def _check_range(op: str, lower: float, upper: float) -> None:
    if upper <= lower:
        raise ValueError(f"tf.image.{op}: upper must be > lower; got lower={lower}, upper={upper}")
    if lower < 0:
        raise ValueError(f"tf.image.{op}: lower must be non-negative; got lower={lower}")


def _flips(image: Any, draws: Any) -> Any:
    """TF 2.21's rule (image_ops_impl._random_flip): one image flips where its draw is under 0.5, a batch's images
    where round(draw) is 1 (over 0.5)."""
    return draws > 0.5 if image.ndim == 4 else draws < 0.5


def _flip_where(image: Any, flip: Any, axis: int) -> Tensor:
    flipped: Any = flip_left_right(image) if axis == -2 else flip_up_down(image)
    mask = flip.reshape((-1, 1, 1, 1)) if image.ndim == 4 else flip.reshape(())
    return (jnp if is_jax(image, flip) else np).where(mask, flipped, image)


def _random_flip(op: str, image: TensorLike, seed: int | None, axis: int) -> Tensor:
    image = at_least_3d(op, image)
    rng = _host_draw(op, image, seed)
    draws = rng.random(image.shape[0] if image.ndim == 4 else ())
    return _flip_where(image, np.asarray(_flips(image, draws)), axis)


def random_flip_left_right(image: TensorLike, seed: int | None = None) -> Tensor:
    """Each image mirrored left to right with probability 1/2."""
    return _random_flip("random_flip_left_right", image, seed, -2)


def random_flip_up_down(image: TensorLike, seed: int | None = None) -> Tensor:
    """Each image mirrored top to bottom with probability 1/2."""
    return _random_flip("random_flip_up_down", image, seed, -3)


def _crop_size(value: ArrayLike, size: Sequence[int] | TensorLike) -> tuple[int, ...]:
    if is_jax(size):
        raise ValueError("tf.image.random_crop: `size` must be known when compiling (Python ints): it is the "
                         "output shape")
    wanted = tuple(int(s) for s in np.asarray(size).reshape(-1))
    if len(wanted) != value.ndim:
        raise ValueError(f"tf.image.random_crop: `size` {list(wanted)} must give one size per dimension of the "
                         f"value, shape {list(value.shape)}")
    if any(w > s or w < 0 for w, s in zip(wanted, value.shape)):
        raise ValueError(f"Need value.shape >= size, got {list(value.shape)} and {list(wanted)}")
    return wanted


def random_crop(value: TensorLike, size: Sequence[int] | TensorLike, seed: int | None = None,
                name: str | None = None) -> Tensor:
    """A slice of shape `size` at a uniformly random offset (any rank, as TF's)."""
    value = convert_to_tensor(value)
    wanted = _crop_size(value, size)
    rng = _host_draw("random_crop", value, seed)
    start = [int(rng.integers(0, s - w + 1)) for s, w in zip(value.shape, wanted)]
    return value[tuple(slice(b, b + w) for b, w in zip(start, wanted))]


def random_brightness(image: TensorLike, max_delta: float, seed: int | None = None) -> Tensor:
    """`adjust_brightness` by a delta uniform in [-max_delta, max_delta)."""
    if max_delta < 0:
        raise ValueError(f"max_delta must be non-negative, got {max_delta}")
    image = convert_to_tensor(image)
    delta = _host_draw("random_brightness", image, seed).uniform(-max_delta, max_delta)
    return adjust_brightness(image, np.float32(delta))


def random_contrast(image: TensorLike, lower: float, upper: float, seed: int | None = None) -> Tensor:
    """`adjust_contrast` by a factor uniform in [lower, upper)."""
    _check_range("random_contrast", lower, upper)
    image = convert_to_tensor(image)
    factor = _host_draw("random_contrast", image, seed).uniform(lower, upper)
    return adjust_contrast(image, np.float32(factor))


# -------------------------------------------------------------------------------------------- stateless
def _stateless_flip(op: str, image: TensorLike, seed: TensorLike, axis: int) -> Tensor:
    image = at_least_3d(op, image)
    draws: Any = stateless_uniform([image.shape[0]] if image.ndim == 4 else [], seed)
    return _flip_where(image, _flips(image, draws), axis)


def stateless_random_flip_left_right(image: TensorLike, seed: TensorLike) -> Tensor:
    """Each image mirrored left to right with probability 1/2; the same `seed`, the same flips."""
    return _stateless_flip("stateless_random_flip_left_right", image, seed, -2)


def stateless_random_flip_up_down(image: TensorLike, seed: TensorLike) -> Tensor:
    """Each image mirrored top to bottom with probability 1/2; the same `seed`, the same flips."""
    return _stateless_flip("stateless_random_flip_up_down", image, seed, -3)


def stateless_random_crop(value: TensorLike, size: Sequence[int] | TensorLike, seed: TensorLike,
                          name: str | None = None) -> Tensor:
    """A slice of shape `size` at an offset drawn from `seed` (traced seeds slice dynamically)."""
    value = convert_to_tensor(value)
    wanted = _crop_size(value, size)
    limits = np.asarray([s - w + 1 for s, w in zip(value.shape, wanted)], np.int32)
    draws = stateless_uniform([len(wanted)], seed, 0, np.iinfo(np.int32).max, dtype=np.int32)
    if is_jax(value, draws):
        return jax.lax.dynamic_slice(jnp.asarray(value), list(jnp.asarray(draws) % limits), wanted)
    start = (np.asarray(draws) % limits).tolist()
    return value[tuple(slice(b, b + w) for b, w in zip(start, wanted))]


def stateless_random_brightness(image: TensorLike, max_delta: float, seed: TensorLike) -> Tensor:
    """`adjust_brightness` by a delta uniform in [-max_delta, max_delta), drawn from `seed`."""
    if max_delta < 0:
        raise ValueError(f"max_delta must be non-negative, got {max_delta}")
    return adjust_brightness(image, stateless_uniform([], seed, -max_delta, max_delta))


def stateless_random_contrast(image: TensorLike, lower: float, upper: float, seed: TensorLike) -> Tensor:
    """`adjust_contrast` by a factor uniform in [lower, upper), drawn from `seed`."""
    _check_range("stateless_random_contrast", lower, upper)
    return adjust_contrast(image, stateless_uniform([], seed, lower, upper))


NAMES = dict(
    random_flip_left_right=random_flip_left_right, random_flip_up_down=random_flip_up_down, random_crop=random_crop,
    random_brightness=random_brightness, random_contrast=random_contrast,
    stateless_random_flip_left_right=stateless_random_flip_left_right,
    stateless_random_flip_up_down=stateless_random_flip_up_down, stateless_random_crop=stateless_random_crop,
    stateless_random_brightness=stateless_random_brightness, stateless_random_contrast=stateless_random_contrast,
)
