"""TF's scans and statistics: `tf.math.cumsum`/`cumprod`, `reduce_std`, `count_nonzero`, `bincount`, ...

On numpy or JAX as `ops`. TF's rules, observed in TF 2.21: `cumsum` and `cumprod` run over axis 0 by default;
`exclusive` starts from the identity (0 or 1) and `reverse` scans from the end (both: `cumsum([1, 2, 3],
exclusive=True, reverse=True)` is [5, 3, 0]); `reduce_std` / `reduce_variance` are the population statistics
of floats (ints are a TypeError); `count_nonzero` is int64; `bincount` is int32 of length `max(arr) + 1`.
"""
from __future__ import annotations

import numpy as np
from jax.core import Tracer
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.math_ops import require_float
from jdist.tf_compat.ops import _index_dtype, convert_to_tensor, is_jax, xp
from jdist.typing import ArrayLike, Axis, Tensor, TensorLike


def _scan(kind: str, value: TensorLike, axis: int, exclusive: bool, reverse: bool) -> Tensor:
    x = convert_to_tensor(value)
    module = xp(x)
    axis = int(axis)
    if reverse:
        x = module.flip(x, axis)
    out = getattr(module, kind)(x, axis=axis, dtype=x.dtype)
    if exclusive:
        identity = module.full_like(module.take(x, module.arange(1), axis=axis), 0 if kind == "cumsum" else 1)
        out = module.concatenate([identity, module.take(out, module.arange(x.shape[axis] - 1), axis=axis)], axis)
    return module.flip(out, axis) if reverse else out


def cumsum(x: TensorLike, axis: int = 0, exclusive: bool = False, reverse: bool = False,
           name: str | None = None) -> Tensor:
    """`tf.cumsum` / `tf.math.cumsum`: the running sum along `axis`, in the input's dtype."""
    return _scan("cumsum", x, axis, exclusive, reverse)


def cumprod(x: TensorLike, axis: int = 0, exclusive: bool = False, reverse: bool = False,
            name: str | None = None) -> Tensor:
    return _scan("cumprod", x, axis, exclusive, reverse)


def _axis(axis: Axis) -> int | tuple[int, ...] | None:
    return axis if axis is None or isinstance(axis, int) else tuple(int(a) for a in axis)


def reduce_variance(input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False,
                    name: str | None = None) -> Tensor:
    """The population variance (divides by N), of floats only as TF's."""
    x = convert_to_tensor(input_tensor)
    require_float("tf.math.reduce_variance", x)
    return xp(x).var(x, axis=_axis(axis), keepdims=keepdims)


def reduce_std(input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False,
               name: str | None = None) -> Tensor:
    x = convert_to_tensor(input_tensor)
    require_float("tf.math.reduce_std", x)
    return xp(x).std(x, axis=_axis(axis), keepdims=keepdims)


def reduce_euclidean_norm(input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False,
                          name: str | None = None) -> Tensor:
    """`sqrt(sum(x**2))` along `axis`; of ints an int (TF 2.21: [[3, 4], [6, 8]] gives [5, 10] int32)."""
    x = convert_to_tensor(input_tensor)
    module = xp(x)
    if x.dtype.kind in "iu":
        squares = module.sum(x.astype(np.float64) ** 2, axis=_axis(axis), keepdims=keepdims)
        return module.sqrt(squares).astype(x.dtype)
    return module.sqrt(module.sum(x * x, axis=_axis(axis), keepdims=keepdims))


def count_nonzero(input: TensorLike, axis: Axis = None, keepdims: bool | None = None,  # noqa: A002
                  dtype: DTypeLike = "int64", name: str | None = None) -> Tensor:
    x = convert_to_tensor(input)
    module = xp(x)
    if x.dtype.kind in "OSU":  # TF counts non-empty strings
        nonzero = np.asarray(np.frompyfunc(len, 1, 1)(np.asarray(x)), np.int64) > 0
    else:
        nonzero = x != 0
    counts = module.sum(nonzero, axis=_axis(axis), keepdims=bool(keepdims))
    return module.asarray(counts).astype(_index_dtype(x, dtype))


def bincount(arr: TensorLike, weights: TensorLike | None = None, minlength: int | None = None,
             maxlength: int | None = None, dtype: DTypeLike = "int32", name: str | None = None,
             axis: int | None = None, binary_output: bool = False) -> Tensor:
    """How often each value 0, 1, ... occurs in `arr` (summed `weights` if given), over all of `arr`
    (`axis=None`) or per row of a 2-D `arr` (`axis=-1`). Values from `maxlength` on are not counted.

    The length, `max(arr) + 1` (at least `minlength`, at most `maxlength`), depends on the values: inside
    compiled code give `minlength` and `maxlength` equal, which fixes it.
    """
    arr = convert_to_tensor(arr)
    module = xp(arr, weights)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"tf.math.bincount counts integers; got {arr.dtype}")
    if axis not in (None, 0, -1):
        raise ValueError(f"tf.math.bincount: `axis` must be None, 0 or -1 (TF's), got {axis!r}")
    if axis == -1 and arr.ndim != 2:
        raise ValueError(f"tf.math.bincount with axis=-1 counts each row of a 2-D `arr`; got shape {arr.shape}")
    if is_jax(arr):
        if minlength is None or minlength != maxlength:
            raise ValueError("tf.math.bincount inside compiled code (strategy.run, jax.jit): the output length "
                             "depends on the values; pass minlength=n and maxlength=n (the same n)")
        length = int(minlength)
    else:
        if arr.size and int(arr.min()) < 0:
            raise ValueError("tf.math.bincount: `arr` must be non-negative (TF: 'Input arr must be non-negative!')")
        length = max(int(arr.max()) + 1 if arr.size else 0, minlength or 0)
        length = length if maxlength is None else min(length, int(maxlength))
    if weights is not None:
        values = convert_to_tensor(weights)
        target = values.dtype
    else:
        target = numpy_dtype(dtype)
        values = module.ones(arr.shape, dtype=target)
    if binary_output:
        values = module.ones(arr.shape, dtype=target)
    rows = arr.reshape(1, -1) if axis is None or arr.ndim == 1 else arr
    values = values.reshape(rows.shape)
    row_ids = module.broadcast_to(module.arange(rows.shape[0])[:, None], rows.shape)
    keep = rows < length
    out = _scatter_add(module, (rows.shape[0], length), target, (row_ids, module.where(keep, rows, 0)),
                       module.where(keep, values, 0))
    if binary_output:
        out = (out > 0).astype(target)
    return out[0] if axis is None or arr.ndim == 1 else out


def _scatter_add(module, shape: tuple[int, ...], dtype: np.dtype, index: tuple, values: ArrayLike) -> ArrayLike:
    """`zeros(shape)` with `values` added at `index` (repeats add up)."""
    if module is np:
        out = np.zeros(shape, dtype=dtype)
        np.add.at(out, index, np.asarray(values, dtype=dtype))
        return out
    return module.zeros(shape, dtype=dtype).at[index].add(values.astype(dtype), mode="drop")


def confusion_matrix(labels: TensorLike, predictions: TensorLike, num_classes: int | None = None,
                     weights: TensorLike | None = None, dtype: DTypeLike = "int32", name: str | None = None) -> Tensor:
    """Counts (or summed `weights`) of each (label, prediction) pair: rows are labels, columns predictions."""
    labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
    if not any(isinstance(v, Tracer) for v in (labels, predictions)):
        # Eager JAX arrays (a `tf.cast` result) have known values: TF infers `num_classes` from them (observed,
        # TF 2.21), so they are counted like host tensors; only traced ones need `num_classes` for the shape.
        labels, predictions = np.asarray(labels), np.asarray(predictions)
    module = xp(labels, predictions, weights)
    if num_classes is None:
        if is_jax(labels, predictions):
            raise ValueError("tf.math.confusion_matrix inside compiled code needs `num_classes` (the output shape)")
        num_classes = int(max(np.max(labels, initial=-1), np.max(predictions, initial=-1))) + 1
    if not is_jax(labels, predictions):
        for what, value in (("labels", labels), ("predictions", predictions)):
            if value.size and (value.min() < 0 or value.max() >= num_classes):
                raise ValueError(f"tf.math.confusion_matrix: `{what}` must lie in [0, {num_classes}) "
                                 f"(num_classes={num_classes}); got {value.tolist()}")
    target = numpy_dtype(dtype)
    values = module.ones(labels.shape, target) if weights is None else convert_to_tensor(weights)
    return _scatter_add(module, (num_classes, num_classes), target, (labels, predictions), values)


def l2_normalize(x: TensorLike, axis: Axis = None, epsilon: float = 1e-12, name: str | None = None,
                 dim: Axis = None) -> Tensor:
    """`x / sqrt(max(sum(x**2, axis), epsilon))`: zero vectors stay zero."""
    x = convert_to_tensor(x)
    require_float("tf.math.l2_normalize", x)
    module = xp(x)
    axis = dim if axis is None else axis
    squares = module.sum(x * x, axis=_axis(axis), keepdims=True)
    return (x / module.sqrt(module.maximum(squares, epsilon))).astype(x.dtype)


SCANS = dict(
    cumsum=cumsum, cumprod=cumprod, reduce_std=reduce_std, reduce_variance=reduce_variance,
    reduce_euclidean_norm=reduce_euclidean_norm, count_nonzero=count_nonzero, bincount=bincount,
    confusion_matrix=confusion_matrix, l2_normalize=l2_normalize,
)
