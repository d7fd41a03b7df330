"""`tf.keras`'s binary crossentropy of a sigmoid's output computes from the sigmoid's logits, as TF's Keras does.

TF's Keras (tf_keras, and Keras 3 on TF: `keras/src/backend/tensorflow/nn.py`) tags a
sigmoid's output with its input (`_keras_logits`, or the graph's `Sigmoid` op) and
`binary_crossentropy(y, p)` then computes from those logits. Keras 3 on JAX cannot
tag a traced array (a tracer takes no attributes), so it clips `p` to
`[1e-7, 1 - 1e-7]`: once a prediction saturates (|logit| above about 17 in float32)
its gradient is zero and it never recovers. Observed, TF 2.21 with tf_keras, the
parameter-server tutorial's custom loop in one process (seeded data): accuracies
0.82, 1.0, 1.0, 1.0 and final loss 0.12; the same with `tf.identity(pred)` (which
drops the logits) 0.52, 0.43, 0.42, 0.43 and final loss 7.98; jdist before this
module 0.68, 0.49, 0.36, 0.43 and final loss 4.1.

Here Keras's sigmoid activation notes each output it returns, by identity, with its
logits (the newest few hundred); Keras's JAX `binary_crossentropy` given one of those
outputs, unchanged, computes from the logits. Any other probability is clipped as before.
"""
from __future__ import annotations

import collections
import functools
from typing import Any, Callable

_KEPT = 256  # sigmoid outputs remembered: the loss follows its model's output within one step
_recent: collections.OrderedDict[int, tuple[Any, Any]] = collections.OrderedDict()


def install() -> None:
    """Patches Keras's sigmoid (as its activations call it) and its JAX binary crossentropy, once per process."""
    from keras.src import ops
    from keras.src.backend.jax import nn

    if getattr(nn.binary_crossentropy, "_jdist_logits", False):
        return
    ops.sigmoid = _noting(ops.sigmoid)  # `keras.activations.sigmoid` calls `ops.sigmoid(x)`
    nn.binary_crossentropy = _from_noted_logits(nn.binary_crossentropy)


def _noting(sigmoid: Callable) -> Callable:
    @functools.wraps(sigmoid)
    def noted(x: Any) -> Any:
        output = sigmoid(x)
        _recent[id(output)] = (output, x)
        while len(_recent) > _KEPT:
            _recent.popitem(last=False)
        return output

    return noted


def logits_of(output: object) -> object | None:
    """The logits `output` was computed from by Keras's sigmoid, or None."""
    entry = _recent.get(id(output))
    return entry[1] if entry is not None and entry[0] is output else None


def _from_noted_logits(binary_crossentropy: Callable) -> Callable:
    @functools.wraps(binary_crossentropy)
    def crossentropy(target: Any, output: Any, from_logits: bool = False) -> Any:
        logits = None if from_logits else logits_of(output)
        if logits is not None:
            return binary_crossentropy(target, logits, from_logits=True)
        return binary_crossentropy(target, output, from_logits=from_logits)

    crossentropy._jdist_logits = True  # pyright: ignore[reportFunctionMemberAccess, reportAttributeAccessIssue]
    return crossentropy
