"""A Keras layer's scalar `dtype="int"` weight (e.g. `Normalization`'s `count`) as TF's Keras 3 shows it: int64.

Observed in TF 2.21 with Keras 3.15: after `tf.keras.layers.Normalization(axis=None).adapt(...)`, the layer's
weights are `normalization/mean` float32, `normalization/variance` float32 and `normalization/count` int64, and
`model.summary()` counts the int64 weights (this count and the optimizer's `iteration`) at 8 bytes each: a
Normalization of 3 features plus a Dense(1) prints "Non-trainable params: 7 (32.00 B)" and, after `fit` with
Adam, "Optimizer params: 10 (44.00 B)". Keras on JAX makes these weights int32 (JAX holds 64-bit integers only
with `jax_enable_x64`), so a script read 'int32' and summary printed 28 B / 40 B. The rule: a scalar weight a
layer asks for as `dtype="int"` or `"int64"` that Keras on JAX makes int32 reads as TF's int64 counter (as
`optimizer.iterations` does, `jdist.tf_compat.keras_iterations`), and `summary` sizes any such counter at 8
bytes. The stored value stays 32-bit, so compiled steps are unchanged.
"""
from __future__ import annotations

import functools
from typing import Any

from jdist.tf_compat.keras_iterations import as_int64_counter, is_int64_counter

_INSTALLED: list[bool] = []
_INT64_NAMES = ("int", "int64")


def _memory_size(original: Any) -> Any:
    """`summary_utils.weight_memory_size` that sizes TF's int64 counters at 8 bytes, as TF's Keras does."""

    @functools.wraps(original)
    def weight_memory_size(weights: Any) -> float:
        weights = list(weights)
        extra = sum(4 * int(max(1, _size(w))) for w in {id(w): w for w in weights}.values() if is_int64_counter(w))
        return original(weights) + extra

    return weight_memory_size


def _size(weight: Any) -> int:
    count = 1
    for dim in weight.shape:
        count *= int(dim)
    return count


def install() -> None:
    """Every layer weight made from now on as `dtype="int"` reads as int64; `summary` sizes it so."""
    if _INSTALLED:
        return
    from keras.src.layers.layer import Layer
    from keras.src.utils import summary_utils

    original = Layer.add_weight

    @functools.wraps(original)
    def add_weight(self: Any, *args: Any, **kwargs: Any) -> Any:
        variable = original(self, *args, **kwargs)
        dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)  # add_weight(shape, initializer, dtype)
        if str(dtype) in _INT64_NAMES:
            as_int64_counter(variable)
        return variable

    Layer.add_weight = add_weight  # type: ignore[method-assign]
    summary_utils.weight_memory_size = _memory_size(summary_utils.weight_memory_size)
    _INSTALLED.append(True)
