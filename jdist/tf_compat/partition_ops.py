"""`tf.dynamic_partition` and `tf.ensure_shape`.

TF 2.21's rules (observed): `dynamic_partition(data, partitions, n)` returns n tensors, the slices of `data`
whose partition index is i in their original order (an empty one keeps the trailing shape); an index outside
[0, n) or a `partitions` shape that `data`'s does not start with is an error. `ensure_shape` returns its input
when the shape fits (None matches any size, a None shape anything) and raises InvalidArgumentError otherwise.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor
from jdist.tfdata import shape_inference
from jdist.typing import Tensor, TensorLike


def dynamic_partition(data: TensorLike, partitions: TensorLike, num_partitions: int,
                      name: str | None = None) -> list[Tensor]:
    """The slices of `data` for each partition index 0 .. num_partitions - 1 (on the host: the sizes depend on
    the values)."""
    data, partitions = convert_to_tensor(data), convert_to_tensor(partitions)
    if any(isinstance(v, jax.core.Tracer) for v in (data, partitions)):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError("tf.dynamic_partition inside compiled code would give outputs of data-dependent shapes, "
                         "which XLA cannot compile; compute one mask per partition (partitions == i) and use "
                         "tf.where, or tf.math.unsorted_segment_sum with the partitions as segment ids")
    data, partitions = np.asarray(data), np.asarray(partitions)
    if data.shape[:partitions.ndim] != partitions.shape:
        raise InvalidArgumentError(None, None, f"data.shape must start with partitions.shape, got data.shape = "
                                               f"{list(data.shape)}, partitions.shape = {list(partitions.shape)}")
    flat_parts = partitions.reshape(-1)
    flat_data = data.reshape((-1,) + data.shape[partitions.ndim:])
    bad = np.flatnonzero((flat_parts < 0) | (flat_parts >= num_partitions))
    if bad.size:
        raise InvalidArgumentError(None, None, f"partitions[{int(bad[0])}] = {int(flat_parts[bad[0]])} is not in "
                                               f"[0, {num_partitions})")
    return [flat_data[flat_parts == i] for i in range(int(num_partitions))]


def _dims(shape: Any) -> list[int | None] | None:
    if shape is None:
        return None
    dims = shape.as_list() if hasattr(shape, "as_list") else list(np.asarray(shape, dtype=object).reshape(-1))
    return [None if d is None or int(d) < 0 else int(d) for d in dims]


def ensure_shape(x: TensorLike, shape: Any, name: str | None = None) -> Tensor:
    """`x` unchanged when its shape fits `shape` (None dimensions match any size); else InvalidArgumentError."""
    x = x if isinstance(x, (np.ndarray, jax.Array)) else convert_to_tensor(x)  # a tensor is returned as given
    expected = _dims(shape)
    actual = tuple(x.shape)
    if expected is None:
        return x
    if len(expected) != len(actual) or any(e is not None and e != a for e, a in zip(expected, actual)):
        shown = ",".join("?" if e is None else str(e) for e in expected)
        raise InvalidArgumentError(None, None, f"Shape of tensor input [{','.join(map(str, actual))}] is not "
                                               f"compatible with expected shape [{shown}].")
    if isinstance(x, Tracer):  # a new value in the trace, of the shape asked for, even where `x` came from
        return shape_inference.ensured(jnp.array(x, copy=True), expected)  # tf.py_function; XLA drops the copy
    return x


NAMES = dict(dynamic_partition=dynamic_partition, ensure_shape=ensure_shape)
