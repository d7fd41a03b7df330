"""TF2's `tf.*_initializer` classes: `tf.zeros_initializer()(shape, dtype)` gives that tensor.

`constant_initializer`, `zeros_initializer`, `ones_initializer`, `random_normal_initializer` and
`random_uniform_initializer`, with TF 2.21's defaults, dtype rules and errors (observed): float32 by default
(`constant_initializer` takes its value's dtype: `constant_initializer(3)` gives int32); `get_config` /
`from_config`; Keras layers take them as `kernel_initializer=`. The values are numpy arrays drawn on the host;
a seeded random initializer gives the same values on every call, as TF's (its numbers are not TF's).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jdist.tf_compat import nn_ops
from jdist.tf_compat.dtype_table import DType, as_dtype
from jdist.tf_compat.ops import convert_to_tensor
from jdist.typing import ShapeLike

_PARTITION_KEYS = ["partition_shape", "partition_offset"]


def _size(shape: ShapeLike) -> tuple[int, ...]:
    return tuple(int(s) for s in np.asarray(shape).reshape(-1))


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    for key in kwargs:
        if key not in _PARTITION_KEYS:
            raise TypeError(f"Keyword argument should be one of {_PARTITION_KEYS}. Received: {key}")


def _dtype(dtype: Any) -> DType:
    return as_dtype("float32" if dtype is None else dtype)


def _numeric_or_bool(dtype: DType) -> DType:
    if dtype.dtype.kind not in "biufc" and dtype.name != "bfloat16":
        raise ValueError(f"Argument `dtype` expected to be numeric or boolean. Received {dtype}.")
    return dtype


class Initializer:
    """TF2's initializer base: `__call__(shape, dtype=None, **kwargs)`, `get_config`, `from_config`."""

    def __call__(self, shape: ShapeLike, dtype: Any = None, **kwargs: Any) -> np.ndarray:
        raise NotImplementedError("Initializer subclasses define __call__.")

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        return cls(**config)


class constant_initializer(Initializer):  # noqa: N801 (TF's name)
    """`tf.constant_initializer(value=0)`: `value` filling the shape, or a list of exactly the shape's size."""

    def __init__(self, value: Any = 0, support_partition: bool = False):
        self.value = value
        self.support_partition = support_partition

    def __call__(self, shape: ShapeLike, dtype: Any = None, **kwargs: Any) -> np.ndarray:
        _check_kwargs(kwargs)
        size = _size(shape)
        values = np.asarray(convert_to_tensor(self.value, None if dtype is None else as_dtype(dtype)))
        if values.size == 1:
            return np.full(size, values.reshape(()), values.dtype)
        if values.size != int(np.prod(size)):
            raise TypeError(f"Eager execution of tf.constant with unsupported shape. Tensor {values} (converted "
                            f"from {self.value}) has {values.size} elements, but got `shape` {size} with "
                            f"{int(np.prod(size))} elements).")
        return values.reshape(size)

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value}


class zeros_initializer(Initializer):  # noqa: N801 (TF's name)
    """`tf.zeros_initializer()`: zeros of `dtype` (float32; numeric or bool)."""

    def __call__(self, shape: ShapeLike, dtype: Any = "float32", **kwargs: Any) -> np.ndarray:
        _check_kwargs(kwargs)
        return np.zeros(_size(shape), _numeric_or_bool(_dtype(dtype)).dtype)


class ones_initializer(Initializer):  # noqa: N801 (TF's name)
    """`tf.ones_initializer()`: ones of `dtype` (float32; numeric or bool)."""

    def __call__(self, shape: ShapeLike, dtype: Any = "float32", **kwargs: Any) -> np.ndarray:
        _check_kwargs(kwargs)
        return np.ones(_size(shape), _numeric_or_bool(_dtype(dtype)).dtype)


class random_normal_initializer(Initializer):  # noqa: N801 (TF's name)
    """`tf.random_normal_initializer(mean=0.0, stddev=0.05, seed=None)`: floats only."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape: ShapeLike, dtype: Any = "float32", **kwargs: Any) -> np.ndarray:
        _check_kwargs(kwargs)
        target = _dtype(dtype)
        if not target.is_floating:
            raise ValueError(f"Argument `dtype` is expected to be floating point. Received: {target}.")
        if self.seed is None:
            return np.asarray(nn_ops.normal(_size(shape), self.mean, self.stddev, target.dtype))
        rng = np.random.default_rng(int(self.seed))
        return rng.normal(self.mean, self.stddev, _size(shape)).astype(target.dtype)

    def get_config(self) -> dict[str, Any]:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class random_uniform_initializer(Initializer):  # noqa: N801 (TF's name)
    """`tf.random_uniform_initializer(minval=-0.05, maxval=0.05, seed=None)`: floats in [minval, maxval), or
    integers for an integer dtype (not bool)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None):
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape: ShapeLike, dtype: Any = "float32", **kwargs: Any) -> np.ndarray:
        _check_kwargs(kwargs)
        target = _dtype(dtype)
        if target.is_bool:
            raise ValueError(f"Argument `dtype` expected to be numeric or boolean. Received {target}.")
        if self.seed is None:
            return np.asarray(nn_ops.uniform(_size(shape), self.minval, self.maxval, target.dtype))
        rng = np.random.default_rng(int(self.seed))
        if target.is_integer:
            return rng.integers(int(self.minval), int(self.maxval), _size(shape)).astype(target.dtype)
        return rng.uniform(self.minval, self.maxval, _size(shape)).astype(target.dtype)

    def get_config(self) -> dict[str, Any]:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}


INITIALIZERS = dict(constant_initializer=constant_initializer, zeros_initializer=zeros_initializer,
                    ones_initializer=ones_initializer, random_normal_initializer=random_normal_initializer,
                    random_uniform_initializer=random_uniform_initializer)
