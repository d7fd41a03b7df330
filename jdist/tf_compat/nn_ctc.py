"""`tf.nn.ctc_loss` (optax's CTC) and `tf.nn.ctc_greedy_decoder`.

`ctc_loss` runs on numpy (computed with JAX, numpy back) or inside compiled code; its labels are dense
[batch, max_label_length] with `label_length`, or a `SparseTensor` (lengths from its rows). TF 2.21's rules
(observed): the loss is each sequence's negative log-likelihood, float32; the blank is class 0 unless
`blank_index` says otherwise (negative counts from the end), and must be given for sparse labels; logits are
[time, batch, classes] unless `logits_time_major=False`. A label sequence too long for its logits has no
alignment: TF then gives a large finite loss (711 in one observed case), optax about 1e5.
`ctc_greedy_decoder` is host only (its output's length depends on the values): the best class per step,
repeats merged, blanks (class `num_classes - 1` by default) dropped; it returns the decoded `SparseTensor`
(int64) in a list and minus the sum of each step's best logit, [batch, 1].
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jdist.tf_compat.ops import convert_to_tensor, is_jax, require_float
from jdist.tf_compat.sparse import SparseTensor
from jdist.typing import Tensor, TensorLike


def _dense_labels(labels: Any) -> tuple[Any, Any]:
    """A SparseTensor's rows as dense labels and their lengths."""
    rows, columns = labels.indices[:, 0], labels.indices[:, 1]
    batch, width = labels.shape
    module = jnp if is_jax(labels.indices, labels.values) else np
    dense: Any = module.zeros((batch, width), np.int32)
    if module is np:
        dense[np.asarray(rows), np.asarray(columns)] = np.asarray(labels.values)
        lengths = np.zeros((batch,), np.int32)
        np.maximum.at(lengths, np.asarray(rows), np.asarray(columns) + 1)
        return dense, lengths
    dense = dense.at[rows, columns].set(labels.values.astype(jnp.int32))
    lengths = jnp.zeros((batch,), jnp.int32).at[rows].max((columns + 1).astype(jnp.int32))
    return dense, lengths


def ctc_loss(labels: TensorLike | SparseTensor, logits: TensorLike, label_length: TensorLike | None,
             logit_length: TensorLike, logits_time_major: bool = True, unique: Any = None,
             blank_index: int | None = None, name: str | None = None) -> Tensor:
    """The CTC loss (negative log-likelihood) of each label sequence under its logits, [batch]."""
    scores = convert_to_tensor(logits)
    require_float("tf.nn.ctc_loss", scores, complex_ok=False)
    if isinstance(labels, SparseTensor):
        if blank_index is None:
            raise ValueError("Argument `blank_index` must be provided when `labels` is a `SparseTensor`.")
        dense, lengths = _dense_labels(labels)
    else:
        if label_length is None:
            raise ValueError("tf.nn.ctc_loss: dense `labels` need `label_length`")
        dense, lengths = convert_to_tensor(labels), convert_to_tensor(label_length)
    on_device = is_jax(scores, dense, lengths, logit_length)
    classes = scores.shape[-1]
    blank = 0 if blank_index is None else int(blank_index) % classes
    batch_major = jnp.asarray(scores, jnp.float32)
    if logits_time_major:
        batch_major = jnp.swapaxes(batch_major, 0, 1)
    steps, width = batch_major.shape[1], dense.shape[1]
    logit_pad = (jnp.arange(steps)[None, :] >= jnp.asarray(logit_length)[:, None]).astype(jnp.float32)
    label_pad = (jnp.arange(width)[None, :] >= jnp.asarray(lengths)[:, None]).astype(jnp.float32)
    out = optax.ctc_loss(batch_major, logit_pad, jnp.asarray(dense, jnp.int32), label_pad, blank_id=blank)
    return out if on_device else np.asarray(out, np.float32)


def ctc_greedy_decoder(inputs: TensorLike, sequence_length: TensorLike, merge_repeated: bool = True,
                       blank_index: int | None = None) -> tuple[list[SparseTensor], Tensor]:
    """Best-path decoding of [time, batch, classes] logits: ([decoded SparseTensor], -sum of best logits)."""
    if any(isinstance(v, jax.core.Tracer) for v in (inputs, sequence_length)):  # pyright: ignore[reportAttributeAccessIssue]
        raise ValueError("tf.nn.ctc_greedy_decoder runs on the host: its output's length depends on the values")
    scores = np.asarray(convert_to_tensor(inputs))
    lengths = np.asarray(sequence_length).reshape(-1)
    classes = scores.shape[-1]
    blank = classes - 1 if blank_index is None else int(blank_index) % classes
    best = np.argmax(scores, axis=-1)  # [time, batch]
    indices, values, longest = [], [], 0
    neg_sum = np.zeros((scores.shape[1], 1), np.float32)
    for b in range(scores.shape[1]):
        steps = int(lengths[b])
        neg_sum[b, 0] = -np.sum(np.max(scores[:steps, b], axis=-1), dtype=np.float32)
        previous, out = None, []
        for t in range(steps):
            label = int(best[t, b])
            if label != blank and not (merge_repeated and label == previous):
                out.append(label)
            previous = label
        indices += [[b, i] for i in range(len(out))]
        values += out
        longest = max(longest, len(out))
    decoded = SparseTensor(np.asarray(indices, np.int64).reshape(-1, 2), np.asarray(values, np.int64),
                           [scores.shape[1], longest])
    return [decoded], neg_sum


NN: dict[str, Any] = dict(ctc_loss=ctc_loss, ctc_greedy_decoder=ctc_greedy_decoder)
