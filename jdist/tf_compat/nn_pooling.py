"""`tf.nn`'s N-d pooling: `max_pool`, `avg_pool` (1-, 2- and 3-d), `pool` and `max_pool_with_argmax`.

Pooling is XLA's `reduce_window` wherever it runs, numpy back for numpy input (as `nn_extra`'s `max_pool2d`).
TF 2.21's rules (observed): `ksize` and `strides` are an int, N values or N + 2 (batch and channel 1);
the rank of the input picks the dimension (3, 4 or 5); SAME pads as `conv2d` does, the odd pixel at the end,
and `avg_pool` then averages the entries inside the input only; `avg_pool` refuses integers, `max_pool` keeps
their dtype; `avg_pool` takes SAME or VALID only, `max_pool` also explicit pairs; `max_pool_with_argmax`'s
index is `(y * width + x) * channels + c` (plus `b * height * width * channels` with
`include_batch_in_index`), int64 unless `output_dtype`, the first of tied maxima in row-major order; `pool`
dilates its window only with VALID padding and stride 1.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from jdist.tf_compat.dtype_table import numpy_dtype
from jdist.tf_compat.error_types import InvalidArgumentError
from jdist.tf_compat.ops import convert_to_tensor, is_jax, require_float
from jdist.typing import Tensor, TensorLike

Padding = str | Sequence[Sequence[int]]


def spatial(value: int | Sequence[int] | None, n: int, what: str, channels_last: bool, default: int = 1
            ) -> tuple[int, ...]:
    """TF's int, N-long or (N + 2)-long `ksize` / `strides` / `dilations`, as the N spatial values."""
    if value is None:
        return (default,) * n
    values = [int(v) for v in np.asarray(value).reshape(-1)]
    if len(values) == 1:
        return tuple(values) * n
    if len(values) == n:
        return tuple(values)
    if len(values) == n + 2:
        outer = (values[0], values[-1]) if channels_last else (values[0], values[1])
        inner = values[1:-1] if channels_last else values[2:]
        if outer != (1, 1):
            raise ValueError(f"`{what}` {values}: its batch and channel entries must be 1 (pooling or striding "
                             "across them is not provided)")
        return tuple(inner)
    raise ValueError(f"`{what}` should be of length 1, {n} or {n + 2}. Received: {what}={value!r} of length "
                     f"{len(values)}")


def channels_last_of(data_format: str | None, n: int) -> bool:
    """Whether `data_format` (None: channels last) puts channels last; NC... puts them on axis 1."""
    if data_format is None:
        return True
    form = str(data_format).upper()
    if len(form) != n + 2 or not form.startswith("N") or not (form.endswith("C") or form.startswith("NC")):
        raise ValueError(f"`data_format` must be N...C or NC... with {n} spatial letters for {n}-d input, "
                         f"got {data_format!r}")
    return not form.startswith("NC")


def window_padding(padding: Padding, n: int, channels_last: bool, explicit_ok: bool = True
                   ) -> str | list[tuple[int, int]]:
    """SAME / VALID, or TF's explicit (N + 2) pairs as the full-rank pairs XLA takes."""
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise InvalidArgumentError(None, None, f"Value for attr 'padding' of \"{padding}\" is not in the list "
                                                   "of allowed values: \"SAME\", \"VALID\", \"EXPLICIT\"")
        return padding.upper()
    if not explicit_ok:
        raise TypeError(f"Expected string for argument 'padding' not {padding!r}.")
    pairs = [(int(a), int(b)) for a, b in padding]
    if len(pairs) != n + 2:
        raise ValueError(f"explicit `padding` needs {n + 2} [before, after] pairs, got {padding!r}")
    outer = [pairs[0], pairs[-1]] if channels_last else pairs[:2]
    if any(pair != (0, 0) for pair in outer):
        raise ValueError(f"explicit `padding` of the batch and channel dimensions must be 0, got {padding!r}")
    return pairs


def full_rank(values: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    return (1, *values, 1) if channels_last else (1, 1, *values)


def _rank_n(op: str, value: Any, rank: int | None) -> int:
    if rank is not None and value.ndim != rank:
        raise ValueError(f"tf.nn.{op}: `input` must have rank {rank}, got shape {tuple(value.shape)}")
    if value.ndim not in (3, 4, 5):
        raise ValueError(f"`input.shape.rank` must be 3, 4 or 5. Received: input.shape={tuple(value.shape)} of "
                         f"rank {value.ndim}.")
    return value.ndim - 2


def _reduce(kind: str, op: str, input: TensorLike, ksize: Any, strides: Any, padding: Padding,  # noqa: A002
            data_format: str | None, rank: int | None, dilations: Any = None) -> Tensor:
    value = convert_to_tensor(input)
    n = _rank_n(op, value, rank)
    channels_last = channels_last_of(data_format, n)
    if kind == "avg":
        require_float(f"tf.nn.{op}", value, complex_ok=False)
    pads = window_padding(padding, n, channels_last, explicit_ok=kind == "max")
    dims = full_rank(spatial(ksize, n, "ksize", channels_last), channels_last)
    steps = full_rank(spatial(strides, n, "strides", channels_last), channels_last)
    rates = full_rank(spatial(dilations, n, "dilations", channels_last), channels_last)
    data = jnp.asarray(value)
    if kind == "max":
        low = -jnp.inf if data.dtype.kind == "f" or data.dtype == jnp.bfloat16 else jnp.iinfo(data.dtype).min
        out = jax.lax.reduce_window(data, jnp.asarray(low, data.dtype), jax.lax.max, dims, steps, pads,
                                    window_dilation=rates)
    else:
        total = jax.lax.reduce_window(data, jnp.zeros((), data.dtype), jax.lax.add, dims, steps, pads,
                                      window_dilation=rates)
        count = jax.lax.reduce_window(jnp.ones(data.shape, data.dtype), jnp.zeros((), data.dtype), jax.lax.add, dims,
                                      steps, pads, window_dilation=rates)
        out = total / count
    return out if is_jax(value) else np.asarray(out)


def max_pool(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
             padding: Padding, data_format: str | None = None, name: str | None = None) -> Tensor:
    """The maximum of each window, over 1, 2 or 3 spatial dimensions (from the input's rank)."""
    return _reduce("max", "max_pool", input, ksize, strides, padding, data_format, None)


def avg_pool(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
             padding: str, data_format: str | None = None, name: str | None = None) -> Tensor:
    """The mean of each window (SAME: over the entries inside the input), over 1, 2 or 3 spatial dimensions."""
    return _reduce("avg", "avg_pool", input, ksize, strides, padding, data_format, None)


def max_pool1d(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
               padding: Padding, data_format: str = "NWC", name: str | None = None) -> Tensor:
    return _reduce("max", "max_pool1d", input, ksize, strides, padding, data_format, 3)


def avg_pool1d(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
               padding: str, data_format: str = "NWC", name: str | None = None) -> Tensor:
    return _reduce("avg", "avg_pool1d", input, ksize, strides, padding, data_format, 3)


def max_pool3d(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
               padding: Padding, data_format: str = "NDHWC", name: str | None = None) -> Tensor:
    return _reduce("max", "max_pool3d", input, ksize, strides, padding, data_format, 5)


def avg_pool3d(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
               padding: str, data_format: str = "NDHWC", name: str | None = None) -> Tensor:
    return _reduce("avg", "avg_pool3d", input, ksize, strides, padding, data_format, 5)


def pool(input: TensorLike, window_shape: Sequence[int], pooling_type: str,  # noqa: A002
         strides: Sequence[int] | None = None, padding: str = "VALID", data_format: str | None = None,
         dilations: Sequence[int] | None = None, name: str | None = None) -> Tensor:
    """`"MAX"` or `"AVG"` pooling of N-d windows; a dilated window needs VALID padding and stride 1, as TF's."""
    value = convert_to_tensor(input)
    n = len(list(window_shape))
    if value.ndim != n + 2:
        raise ValueError(f"tf.nn.pool: `input` must have rank {n + 2} for a {n}-d window, got shape "
                         f"{tuple(value.shape)}")
    kind = str(pooling_type).upper()
    if kind not in ("MAX", "AVG"):
        raise ValueError(f"{n}-D {pooling_type} pooling is not supported.")
    steps = spatial(strides, n, "strides", True)
    rates = spatial(dilations, n, "dilations", True)
    if any(r > 1 for r in rates):
        if str(padding).upper() == "SAME":
            raise ValueError(f"pooling with 'SAME' padding is not implemented for `dilation_rate` > 1. Received: "
                             f"padding={padding} and dilation_rate={list(rates)}")
        if any(s > 1 for s in steps):
            raise ValueError(f"`strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
                             f"strides={list(steps)} and dilation_rate={list(rates)}")
    return _reduce(kind.lower(), "pool", value, tuple(window_shape), steps, padding, data_format, None, rates)


def max_pool_with_argmax(input: TensorLike, ksize: int | Sequence[int], strides: int | Sequence[int],  # noqa: A002
                         padding: str, data_format: str = "NHWC", output_dtype: DTypeLike = "int64",
                         include_batch_in_index: bool = False, name: str | None = None) -> tuple[Tensor, Tensor]:
    """`max_pool2d` and, for each maximum, its flattened index `(y * width + x) * channels + c` in its image
    (in the whole batch with `include_batch_in_index`); ties go to the first in row-major order."""
    value = convert_to_tensor(input)
    if value.ndim != 4:
        raise ValueError(f"tf.nn.max_pool_with_argmax: `input` must be 4-D NHWC, got shape {tuple(value.shape)}")
    if data_format != "NHWC":
        raise ValueError(f"Data formats other than 'NHWC' are not yet supported, got {data_format!r}")
    index_dtype = numpy_dtype(output_dtype)
    if index_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"tf.nn.max_pool_with_argmax: output_dtype must be int32 or int64, got {output_dtype!r}")
    pads = window_padding(padding, 2, True, explicit_ok=False)
    dims = full_rank(spatial(ksize, 2, "ksize", True), True)
    steps = full_rank(spatial(strides, 2, "strides", True), True)
    data = jnp.asarray(value)
    batch, height, width, channels = data.shape
    per_image = height * width * channels
    flat = jnp.arange(batch * per_image, dtype=jnp.int32 if batch * per_image < 2**31 else jnp.int64)
    flat = flat.reshape(data.shape)
    if not include_batch_in_index:
        flat = flat % per_image
    low = -jnp.inf if data.dtype.kind == "f" or data.dtype == jnp.bfloat16 else jnp.iinfo(data.dtype).min

    def pick(a: tuple[jax.Array, jax.Array], b: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        first = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return jnp.where(first, a[0], b[0]), jnp.where(first, a[1], b[1])

    init = (jnp.asarray(low, data.dtype), jnp.asarray(jnp.iinfo(flat.dtype).max, flat.dtype))
    out, where = jax.lax.reduce_window((data, flat), init, pick, dims, steps, pads)
    if is_jax(value):
        return out, where.astype(index_dtype)
    return np.asarray(out), np.asarray(where).astype(index_dtype)


NN: dict[str, Any] = dict(
    max_pool=max_pool, avg_pool=avg_pool, max_pool1d=max_pool1d, avg_pool1d=avg_pool1d, max_pool3d=max_pool3d,
    avg_pool3d=avg_pool3d, pool=pool, max_pool_with_argmax=max_pool_with_argmax,
)
