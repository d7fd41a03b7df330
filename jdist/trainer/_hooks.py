"""What `fit` does around its steps: Keras's inputs rules (`validation_split`, `class_weight`), its validation
schedule, and how the Trainer calls batch hooks, as Keras 3's `fit`, `evaluate` and `predict` do (observed with
Keras 3.15, JAX backend, `tests/test_callbacks_order.py`): `on_*_batch_begin(first step, {})` before and
`on_*_batch_end(first step + steps_per_execution - 1, logs)` after each execution of k steps (Keras
numbers the end so even for a last, shorter execution)."""
from __future__ import annotations

from typing import Any, Sequence

import jax
import numpy as np

from jdist.callbacks import CallbackList
from jdist.strategy.process_local import to_host
from jdist.trainer import _batching as batching
from jdist.trainer._input import is_arrays


def begin_hook(end_hook: str) -> str:
    """`on_train_batch_end` -> `on_train_batch_begin`."""
    return end_hook[: -len("_end")] + "_begin"


def batch_hooks(callbacks: CallbackList | None, end_hook: str, steps_per_call: int) -> tuple:
    """(callbacks for the end hook, for the begin hook, k): None where no callback overrides a hook,
    so the loop neither builds logs nor calls anything for it."""
    if callbacks is None:
        return None, None, steps_per_call
    ends = callbacks if callbacks.wants(end_hook) else None
    begins = callbacks if callbacks.wants(begin_hook(end_hook)) else None
    return ends, begins, steps_per_call


def real_outputs(out: Any, masks: list, stacked: bool) -> list:
    """A predict execution's outputs, one entry per batch, padding rows removed. Padding rows sit at
    the end (host batches, the same global mask on every process), or at the end of each replica's rows
    (a distributed dataset's global device mask)."""
    host = to_host(out)
    outputs = []
    for i, mask in enumerate(masks):
        real = np.asarray(to_host(mask)) > 0
        outputs.append(jax.tree.map(lambda a, i=i, r=real: a[i][r] if stacked else a[r], host))
    return outputs


# ------------------------------------------------------------- fit's inputs and schedule
def fit_data(x: Any, y: Any, sample_weight: Any, class_weight: Any, validation_data: Any,
             validation_split: float) -> tuple:
    """Keras's `validation_split` and (for arrays) `class_weight`, applied to fit's inputs."""
    if class_weight is not None and sample_weight is not None:
        raise ValueError("You cannot `class_weight` and `sample_weight` at the same time.")
    if validation_split:
        if not is_arrays(x):
            raise ValueError("`validation_split` is only supported for arrays; with an iterable or a "
                             "dataset, pass validation_data= instead.")
        if validation_data is None:  # validation_data takes precedence, as in Keras
            (x, y, sample_weight), validation_data = batching.train_validation_split(
                (x, y, sample_weight), validation_split)
    if class_weight is not None and is_arrays(x):
        if y is None:
            raise ValueError("class_weight needs targets: pass y=.")
        sample_weight = batching.class_weights_for(y, class_weight)
    return x, y, sample_weight, validation_data


def check_validation_freq(freq: Any) -> None:
    if isinstance(freq, bool) or not (isinstance(freq, int) and freq >= 1
                                      or isinstance(freq, (list, tuple, range))):
        raise ValueError(f"Expected `validation_freq` to be a positive int or a list of epochs. "
                         f"Received: validation_freq={freq!r}.")


def validates_after(epoch: int, freq: int | Sequence[int]) -> bool:
    """Keras's rule: after epoch `epoch + 1` (1-based) if it is a multiple of `freq` or listed in it."""
    return (epoch + 1) % freq == 0 if isinstance(freq, int) else (epoch + 1) in freq
