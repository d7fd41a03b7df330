"""`tf.clip_by_norm` and `tf.clip_by_global_norm`, with TF's formulas (numpy on the host, jax.numpy in compiled code).

Custom training loops clip gradients as `grads, norm = tf.clip_by_global_norm(grads, 5.0)`: None entries (a
variable the loss does not reach) stay None and do not count; an infinite or NaN norm makes every clipped
tensor NaN (TF 2.21, observed), so a diverged step is visible rather than silently scaled to zero.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jdist.tf_compat.ops import convert_to_tensor, xp


def _floating(t: Any, what: str) -> Any:
    t = convert_to_tensor(t)
    if np.dtype(t.dtype).kind not in "fc" and str(t.dtype) != "bfloat16":
        raise TypeError(f"{what} needs floating-point tensors, got {t.dtype}: cast first, e.g. "
                        "tf.cast(t, tf.float32) (TF 2.21 raises InvalidArgumentError here).")
    return t


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Any:
    """`tf.clip_by_norm`: `t * clip_norm / max(l2norm(t, axes), clip_norm)`; a zero tensor stays zero."""
    t = _floating(t, "tf.clip_by_norm")
    m = xp(t, clip_norm)
    clip = m.asarray(clip_norm, dtype=t.dtype)
    if axes is not None:
        axes = tuple(int(a) for a in np.asarray(axes).reshape(-1))
    l2sum = m.sum(t * t, axis=axes, keepdims=True)
    positive = l2sum > 0
    l2norm = m.where(positive, m.sqrt(m.where(positive, l2sum, m.ones_like(l2sum))), l2sum)
    return (t * clip / m.maximum(l2norm, clip)).astype(t.dtype)


def _global_norm(tensors: Sequence[Any]) -> Any:
    """sqrt of the sum of squares of every non-None tensor, in their dtype (0.0 float32 when all are None)."""
    present = [t for t in tensors if t is not None]
    if not present:
        return np.float32(0.0)
    dtypes = {np.dtype(t.dtype) for t in present}
    if len(dtypes) > 1:
        raise ValueError(f"tf.clip_by_global_norm: the tensors have different dtypes {sorted(map(str, dtypes))}; "
                         "cast them to one dtype first (TF 2.21 raises InvalidArgumentError here).")
    m = xp(*present)
    return m.sqrt(sum(m.sum(t * t) for t in present)).astype(present[0].dtype)


def clip_by_global_norm(t_list: Sequence[Any], clip_norm: Any, use_norm: Any = None,
                        name: str | None = None) -> tuple[list[Any], Any]:
    """`tf.clip_by_global_norm`: (each tensor * clip_norm / max(global_norm, clip_norm), global_norm)."""
    if not isinstance(t_list, (list, tuple)):
        raise TypeError(f"`t_list` should be a sequence of tensors. Received {type(t_list)}.")
    tensors = [None if t is None else _floating(t, "tf.clip_by_global_norm") for t in t_list]
    norm = _global_norm(tensors) if use_norm is None else convert_to_tensor(use_norm)
    m = xp(norm, clip_norm, *[t for t in tensors if t is not None])
    norm = m.asarray(norm)
    clip = m.asarray(clip_norm, dtype=norm.dtype)
    # TF's formula: finite norms scale by min(1/norm, 1/clip) * clip; (norm - norm) turns an inf or NaN norm to NaN.
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero or inf norm on the host, as TF computes it
        scale = clip * m.minimum(1.0 / norm, 1.0 / clip) + (norm - norm)
    clipped = [None if t is None else (t * scale.astype(t.dtype)).astype(t.dtype) for t in tensors]
    return clipped, norm
